"""The endpoint engine: any OpenAI-compatible server that returns prompt log-probabilities.

    pytest audits --engine openai --engine-url http://127.0.0.1:8000 --model smollm2-135m

``--model`` names the local copy of the served model (a registry alias or a folder): its
tokenizer tokenizes every request, which is sent as token ids, and its files are what the
result cache is keyed by, together with a probe of the server's own numbers. Scoring uses
``/v1/completions`` with ``echo`` and ``logprobs`` (the prompt's per-token log-probabilities),
``max_tokens`` 0 where the server allows it, else 1 (the extra token is ignored); generation is
greedy (``temperature`` 0) unless the decoding config samples (then one seed per prompt).

Checked when the model loads, before any test runs (usage errors, exit status 4):
- the server answers and serves the model (``/v1/models``; ``--served-model`` picks one of several);
- it returns prompt log-probabilities: a llama.cpp server returns only the generated tokens'
  (llama.cpp #27174) and chat-only endpoints have none;
- its tokenizer is the local one: vLLM's ``/tokenize`` on known strings, else the number of
  prompt tokens it reports for the same strings sent as text.

The API key is read from the environment variable named by ``--api-key-env``; it is sent only
to ``--engine-url`` and written nowhere (http_client.py). Embeddings, mask filling, training and
adapters are not offered: those probes are skipped, saying why.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.decoding import DecodingConfig
from bias_core.models.engines import EngineEntry, http_client
from bias_core.models.engines.http_client import EndpointAuthError, EndpointClient, EndpointError, check_url
from bias_core.models.engines.prompt_logprobs import PromptLogprobEngine, row_seed
from bias_core.models.protocol import EngineInfo
from bias_core.storage.redaction import register_secret

DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT = 120.0
# Strings whose tokenization must agree with the server's (spaces, case, digits, punctuation,
# accents and a word SentencePiece and BPE split differently).
TOKENIZER_PROBES = ("The nurse said that she was tired.", "  He paid 1,234 dollars; naïve café!", "unbelievably")
CANARY = "My friend is a nurse, and she said that her job is hard."
NO_PROMPT_LOGPROBS = (
    "Fix: serve the model with a server that echoes prompt log-probabilities for /v1/completions, e.g. vLLM "
    "(python -m vllm.entrypoints.openai.api_server --model DIR), or audit with --engine transformers or vllm. "
    "A llama.cpp server returns only the generated tokens' log-probabilities (llama.cpp #27174), and chat-only "
    "endpoints have none.")


def _api_key(opts: Any) -> str | None:
    key = os.environ.get(opts.api_key_env) if opts.api_key_env else None
    register_secret(key)  # in every process that reads it: nothing written from here on holds it
    return key


def check(opts: Any) -> None:
    """Usage errors before anything loads: the URL, the key's variable, options the server owns."""
    if not opts.engine_url:
        raise AuditUsageError("--engine openai needs --engine-url, the server's base URL. Fix: e.g. "
                              "--engine-url http://127.0.0.1:8000.")
    check_url(opts.engine_url)
    if opts.api_key_env is not None and not os.environ.get(opts.api_key_env):
        raise AuditUsageError(f"--api-key-env {opts.api_key_env}: that environment variable is not set (or empty). "
                              "Fix: export it with the key, or drop --api-key-env for a server without one.")
    _api_key(opts)
    for flag, value, example in (("--request-timeout", opts.request_timeout, "60"),
                                 ("--max-response-mb", opts.max_response_mb, "16")):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise AuditUsageError(f"{flag} {value}: must be a positive, finite number. Fix: e.g. {flag} {example}.")
    for flag, given in (("--load-in-4bit", opts.load_in_4bit), ("--device-map", opts.device_map),
                        ("--adapter", opts.adapter), ("--dtype " + str(opts.dtype), opts.dtype != "auto"),
                        ("--precision " + str(opts.precision), opts.precision in ("exact", "half"))):
        if given:
            raise AuditUsageError(f"{flag} with --engine openai: the server decides how the model runs. Fix: drop "
                                  f"{flag.split()[0]}, or serve the model that way (e.g. vLLM's --dtype, --enable-lora).")


class OpenAIEngine(PromptLogprobEngine):
    """A causal LM behind an OpenAI-compatible HTTP server (module doc)."""

    capabilities = frozenset({"generation", "scoring", "next_word", "topk"})

    def __init__(self, client: EndpointClient, served: str, tokenizer: Any, name: str, fingerprint: str,
                 tokenizer_fingerprint: str, max_length: int = 4096):
        self.client, self.served, self.tokenizer = client, served, tokenizer
        self.name, self.fingerprint, self.tokenizer_fingerprint = name, fingerprint, tokenizer_fingerprint
        self.max_length = max_length
        self.batch_size = client.max_concurrency
        self.cache_chunk = client.max_concurrency  # independent requests: stored as each chunk is done
        self.stats = {"new_tokens": 0}
        self.echo_tokens = 0  # max_tokens sent with echo: 0 where the server allows it
        self.server_probe = ""

    # ----- the engine card and the cache key -----------------------------------------------------------
    def cache_identity(self) -> dict[str, str]:
        return {"engine": "openai", "model": self.fingerprint, "tokenizer": self.tokenizer_fingerprint,
                "served": self.served, "server_probe": self.server_probe}

    def info(self) -> EngineInfo:
        return EngineInfo(engine="openai", version="v1", dtype="as served", device="remote",
                          endpoint=self.client.base_url)

    # ----- requests ------------------------------------------------------------------------------------
    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.client.post("/v1/completions", {"model": self.served, **body})
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not choices:
            raise EndpointError(f"the server at {self.client.base_url} answered /v1/completions without choices: "
                                f"{json.dumps(answer)[:200]}.")
        return choices[0]

    def _echo(self, ids: list[int]) -> list[float | None]:
        body = {"prompt": ids, "max_tokens": self.echo_tokens, "echo": True, "logprobs": 1, "temperature": 0.0}
        logprobs = (self._completion(body).get("logprobs") or {}).get("token_logprobs")
        if not isinstance(logprobs, list) or len(logprobs) < len(ids):
            raise AuditUsageError(f"the server at {self.client.base_url} returned no log-probability for each prompt "
                                  f"token ({len(logprobs) if isinstance(logprobs, list) else 'none'} for "
                                  f"{len(ids)} tokens). {NO_PROMPT_LOGPROBS}")
        return logprobs[: len(ids)]

    def _prompt_logprobs(self, seqs: list[list[int]], desc: str) -> list[list[float | None]]:
        return self.client.map(self._echo, seqs, desc)

    def _top(self, ids: list[int], n: int) -> list[tuple[int, float]]:
        body = {"prompt": ids, "max_tokens": 1, "logprobs": n, "temperature": 0.0, "return_tokens_as_token_ids": True}
        top = ((self._completion(body).get("logprobs") or {}).get("top_logprobs") or [None])[0]
        if not isinstance(top, dict):
            raise AuditUsageError(f"the server at {self.client.base_url} returned no next-token log-probabilities. "
                                  f"{NO_PROMPT_LOGPROBS}")
        return [(_token_id(token, self), float(lp)) for token, lp in top.items()]

    def _next_top(self, seqs: list[list[int]], n: int, desc: str) -> list[list[tuple[int, float]]]:
        return self.client.map(lambda ids: self._top(ids, n), seqs, desc)

    def _generate_ids(self, seqs: list[list[int]], config: DecodingConfig, seed: int, prompts: list[str],
                      desc: str) -> list[list[int]]:
        def one(i: int) -> list[int]:
            body: dict[str, Any] = {"prompt": seqs[i], "max_tokens": config.max_new_tokens, "logprobs": 0,
                                    "return_tokens_as_token_ids": True}
            if config.do_sample:
                body.update(temperature=config.temperature, top_p=config.top_p, seed=row_seed(seed, prompts[i]))
                if config.top_k:
                    body["top_k"] = config.top_k
            else:
                body["temperature"] = 0.0
            choice = self._completion(body)
            tokens = (choice.get("logprobs") or {}).get("tokens")
            if isinstance(tokens, list) and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
                return [_token_id(t, self) for t in tokens]
            # A server without token ids: its text, re-tokenized locally (decoding it gives it back).
            return list(self.tokenizer(str(choice.get("text", "")), add_special_tokens=False)["input_ids"])

        return self.client.map(one, list(range(len(seqs))), desc)

    # ----- checks at load --------------------------------------------------------------------------------
    def check_server(self) -> None:
        """Prompt log-probabilities and the tokenizer, before any test runs (usage errors)."""
        ids = self.encode(CANARY)
        try:
            logprobs = self._echo(ids)
        except EndpointError:  # a server that refuses max_tokens 0 takes 1 (the extra token is ignored)
            self.echo_tokens = 1
            try:
                logprobs = self._echo(ids)
            except EndpointError as exc:
                raise AuditUsageError(f"the server at {self.client.base_url} refused a /v1/completions request with "
                                      f"echo and logprobs ({exc}). {NO_PROMPT_LOGPROBS}") from None
        if any(v is None for v in logprobs[1:]):
            raise AuditUsageError(f"the server at {self.client.base_url} echoed the prompt without its tokens' "
                                  f"log-probabilities. {NO_PROMPT_LOGPROBS}")
        self._check_tokenizer()
        # What the server computes, rounded so run-to-run noise does not change it: a change of
        # served weights or dtype changes the result cache's key.
        self.server_probe = hashlib.sha256(json.dumps([round(float(v), 3) for v in logprobs[1:]]).encode()).hexdigest()

    def _check_tokenizer(self) -> None:
        for text in TOKENIZER_PROBES:
            local = self.encode(text)
            try:
                answer = self.client.post("/tokenize", {"model": self.served, "prompt": text, "add_special_tokens": True})
                server = answer.get("tokens") if isinstance(answer, dict) else None
            except EndpointError:  # no /tokenize (not vLLM): count the prompt tokens it scores
                server = None
            if server is None:
                body = {"prompt": text, "max_tokens": self.echo_tokens, "echo": True, "logprobs": 1, "temperature": 0.0}
                server_n = len((self._completion(body).get("logprobs") or {}).get("token_logprobs") or [])
                server_n -= self.echo_tokens
                same, what = server_n == len(local), f"into {server_n} tokens"
            else:
                same, what = list(server) == local, f"as {list(server)[:12]}"
            if not same:
                raise AuditUsageError(
                    f"the server at {self.client.base_url} tokenizes {text!r} {what}, the local tokenizer of "
                    f"--model {self.name} into {len(local)} tokens ({local[:12]}): they are not the same tokenizer, "
                    "so token-level scores would not line up. Fix: pass --model the local copy of the served model "
                    "(a registry alias or its folder).")


def _token_id(token: str, engine: OpenAIEngine) -> int:
    if isinstance(token, str) and token.startswith("token_id:"):
        return int(token.removeprefix("token_id:"))
    ids = engine.tokenizer.convert_tokens_to_ids(token)  # a server without token ids: its token string
    if not isinstance(ids, int) or ids == engine.tokenizer.unk_token_id:
        raise AuditUsageError(f"the server at {engine.client.base_url} named a next token {token!r} that the local "
                              "tokenizer does not have. Fix: serve the model with vLLM (it returns token ids).")
    return ids


def _served_model(client: EndpointClient, wanted: str | None) -> str:
    try:
        listed = client.get("/v1/models")
    except EndpointError as exc:
        raise AuditUsageError(f"{exc} Fix: point --engine-url at an OpenAI-compatible server (it answers "
                              "/v1/models).") from None
    names = [m.get("id") for m in (listed.get("data") or []) if isinstance(m, dict)] if isinstance(listed, dict) else []
    if wanted is not None:
        if wanted not in names:
            raise AuditUsageError(f"--served-model {wanted}: the server at {client.base_url} serves {names or 'nothing'}. "
                                  "Fix: name one of those.")
        return wanted
    if len(names) != 1:
        raise AuditUsageError(f"the server at {client.base_url} serves {names or 'no model'}. Fix: choose with "
                              "--served-model NAME.")
    return names[0]


def load(spec: Any, opts: Any) -> OpenAIEngine:
    """The endpoint engine for ``--model`` (the local copy: tokenizer and fingerprint) at ``--engine-url``."""
    from bias_core.errors import EngineUnavailable
    from bias_core.models.loading import local_tokenizer

    tokenizer, source, fingerprint, tokenizer_fp = local_tokenizer(spec, opts)
    client = EndpointClient(opts.engine_url, _api_key(opts), timeout=opts.request_timeout or DEFAULT_TIMEOUT,
                            max_concurrency=opts.max_concurrency or DEFAULT_CONCURRENCY, progress=opts.progress,
                            max_response_mb=opts.max_response_mb or http_client.DEFAULT_MAX_RESPONSE_MB,
                            api_key_env=opts.api_key_env)
    try:
        served = _served_model(client, opts.served_model)
        engine = OpenAIEngine(client, served, tokenizer, spec.name, fingerprint, tokenizer_fp,
                              max_length=_max_length(source))
        engine.check_server()
    except EndpointAuthError as exc:  # at load, before any test: the key, not the server, is wrong
        raise AuditUsageError(str(exc)) from None
    except EngineUnavailable as exc:  # at load, before any test: the URL is wrong or the server is down
        raise AuditUsageError(f"--engine-url: {exc}") from None
    return engine


def _max_length(source: Path) -> int:
    try:
        config = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 4096
    return int(config.get("max_position_embeddings") or 4096)


def describe(opts: Any) -> dict[str, str]:
    return {"engine": "openai v1", "device": f"remote ({check_url(opts.engine_url)})", "dtype": "as served"}


ENGINE = EngineEntry(name="openai", load=load, check=check, describe=describe,
                     options=("engine_url", "api_key_env", "served_model", "max_concurrency", "request_timeout",
                              "max_response_mb"),
                     summary="any OpenAI-compatible server with prompt log-probabilities (/v1/completions, echo)")
