"""The endpoint engine: any OpenAI-compatible server that returns prompt log-probabilities.

    pytest audits --engine openai --engine-url http://127.0.0.1:8000 --model smollm2-135m

``--model`` names the local copy of the served model (a registry alias or a folder): its
tokenizer tokenizes every request, which is sent as token ids, and its files are what the
result cache is keyed by, together with the server's answers to a canary request of each kind
(scoring, next words, generation). Scoring uses
``/v1/completions`` with ``echo`` and ``logprobs`` (the prompt's per-token log-probabilities),
``max_tokens`` 0 where the server allows it, else 1 (the extra token is ignored); generation is
greedy (``temperature`` 0) unless the decoding config samples (then one seed per prompt).

Checked when the model loads, before any test runs (usage errors, exit status 4):
- the server answers and serves the model (``/v1/models``; ``--served-model`` picks one of several);
- it returns prompt log-probabilities: a llama.cpp server returns only the generated tokens'
  (llama.cpp #27174) and chat-only endpoints have none;
- its tokenizer is the local one: vLLM's ``/tokenize`` on known strings, else the number of
  prompt tokens it reports for the same strings sent as text;
- its answers to the canaries (the cache key): where they differ from those the last run against
  the same URL, served model and local model recorded in the cache folder, the run card says so.

Every answer is validated before it is used (engines/answers.py): one that cannot be a language
model's is ``BadAnswer``, naming the server, the request kind and the item (a usage error at
load, a test error mid-run), never a traceback and never a number.

The API key is read from the environment variable named by ``--api-key-env``; it is sent only
to ``--engine-url`` and written nowhere (http_client.py). Embeddings, mask filling, training and
adapters are not offered: those probes are skipped, saying why.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.decoding import DecodingConfig
from bias_core.models.engines import EngineEntry, EngineOption, answers, at_least_one, http_client, positive_finite
from bias_core.models.engines.http_client import EndpointAuthError, EndpointClient, EndpointError, check_url
from bias_core.models.engines.prompt_logprobs import PromptLogprobEngine, row_seed
from bias_core.models.protocol import EngineInfo
from bias_core.storage.files import atomic_write_text
from bias_core.storage.redaction import register_secret

DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT = 120.0
# Strings whose tokenization must agree with the server's (spaces, case, digits, punctuation,
# accents and a word SentencePiece and BPE split differently).
TOKENIZER_PROBES = ("The nurse said that she was tired.", "  He paid 1,234 dollars; naïve café!", "unbelievably")
CANARY = "My friend is a nurse, and she said that her job is hard."
CANARY_PREFIX = "My friend is a nurse, and"  # its next tokens and greedy continuation are canaries too
CANARY_TOP, CANARY_NEW_TOKENS = 5, 8
URL = EngineOption("--engine-url",
                   "the server's base URL, e.g. http://127.0.0.1:8000 (requests go there only)", what="a URL")
API_KEY_ENV = EngineOption("--api-key-env", "the environment variable holding the API key (never the key itself)",
                           what="an environment variable's name")
SERVED_MODEL = EngineOption("--served-model", "the model name the server serves (default: its only model)",
                            what="a model name")
MAX_CONCURRENCY = EngineOption("--max-concurrency", "requests in flight at once (default: 8)", int, DEFAULT_CONCURRENCY,
                               what="a positive integer", example="2", check=at_least_one)
REQUEST_TIMEOUT = EngineOption("--request-timeout",
                               "seconds one try of a request may take, connection to last byte (default: 120)", float,
                               DEFAULT_TIMEOUT, what="a positive number of seconds", example="60", check=positive_finite)
MAX_RESPONSE_MB = EngineOption("--max-response-mb", "the largest answer read from the server, in MiB (default: 16)",
                               float, http_client.DEFAULT_MAX_RESPONSE_MB, what="a positive number of MiB", example="16",
                               check=positive_finite)
NO_PROMPT_LOGPROBS = (
    "Fix: serve the model with a server that echoes prompt log-probabilities for /v1/completions, e.g. vLLM "
    "(python -m vllm.entrypoints.openai.api_server --model DIR), or audit with --engine transformers or vllm. "
    "A llama.cpp server returns only the generated tokens' log-probabilities (llama.cpp #27174), and chat-only "
    "endpoints have none.")


def _api_key(opts: Any) -> str | None:
    name = API_KEY_ENV.of(opts)
    key = os.environ.get(name) if name else None
    register_secret(key)  # in every process that reads it: nothing written from here on holds it
    return key


def check(opts: Any) -> None:
    """Usage errors before anything loads: the URL, the key's variable, options the server owns."""
    if not URL.of(opts):
        raise AuditUsageError("--engine openai needs --engine-url, the server's base URL. Fix: e.g. "
                              "--engine-url http://127.0.0.1:8000.")
    check_url(URL.of(opts))
    key_env = API_KEY_ENV.of(opts)
    if key_env is not None and not os.environ.get(key_env):
        raise AuditUsageError(f"--api-key-env {key_env}: that environment variable is not set (or empty). "
                              "Fix: export it with the key, or drop --api-key-env for a server without one.")
    _api_key(opts)
    for flag, given in (("--adapter", opts.adapter), ("--dtype " + str(opts.dtype), opts.dtype != "auto"),
                        ("--precision " + str(opts.precision), opts.precision in ("exact", "half"))):
        if given:
            raise AuditUsageError(f"{flag} with --engine openai: the server decides how the model runs. Fix: drop "
                                  f"{flag.split()[0]}, or serve the model that way (e.g. vLLM's --dtype, --enable-lora).")


class OpenAIEngine(PromptLogprobEngine):
    """A causal LM behind an OpenAI-compatible HTTP server (module doc)."""

    capabilities = frozenset({"generation", "scoring", "next_word", "topk"})

    def __init__(self, client: EndpointClient, served: str, tokenizer: Any, name: str, fingerprint: str,
                 tokenizer_fingerprint: str, max_length: int = 4096, vocab_size: int | None = None):
        self.client, self.served, self.tokenizer = client, served, tokenizer
        self.name, self.fingerprint, self.tokenizer_fingerprint = name, fingerprint, tokenizer_fingerprint
        self.max_length = max_length
        # Token ids an answer may name: the model's embedding rows, at least the tokenizer's ids.
        self.vocab_size = max(int(vocab_size or 0), len(tokenizer))
        self.batch_size = client.max_concurrency
        self.cache_chunk = client.max_concurrency  # independent requests: stored as each chunk is done
        self.stats = {"new_tokens": 0}
        self.echo_tokens = 0  # max_tokens sent with echo: 0 where the server allows it
        self.server_probe = ""
        self.canaries: dict[str, str] = {}
        self.load_notes: tuple[str, ...] = ()  # the run card's line when the server's answers changed

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
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise EndpointError(f"the server at {self.client.base_url} answered /v1/completions without choices: "
                                f"{json.dumps(answer)[:200]}.")
        return choices[0]

    def _bad(self, kind: str, ids: list[int], exc: answers.Impossible) -> answers.BadAnswer:
        """The error for an answer that cannot be the model's: the server, the request, the item."""
        item = self.tokenizer.decode(ids, skip_special_tokens=True)
        if exc.missing:
            what, fix = "lacked log-probabilities in its answer to", NO_PROMPT_LOGPROBS
        else:
            what, fix = "gave an impossible answer to", ("Fix: check the server and the model it serves: no language "
                                                          "model gives this answer, so nothing was computed from it.")
        return answers.BadAnswer(f"the server at {self.client.base_url} {what} a {kind} request (/v1/completions) for "
                                 f"{item[:160]!r}: {exc.problem}. {fix}")

    def _echo(self, ids: list[int]) -> list[float | None]:
        body = {"prompt": ids, "max_tokens": self.echo_tokens, "echo": True, "logprobs": 1, "temperature": 0.0,
                "return_tokens_as_token_ids": True}
        choice = self._completion(body)
        try:
            return answers.echoed(choice, ids, self.echo_tokens, self.vocab_size)
        except answers.Impossible as exc:
            raise self._bad("scoring", ids, exc) from None

    def _prompt_logprobs(self, seqs: list[list[int]], desc: str) -> list[list[float | None]]:
        return self.client.map(self._echo, seqs, desc)

    def _top(self, ids: list[int], n: int) -> list[tuple[int, float]]:
        body = {"prompt": ids, "max_tokens": 1, "logprobs": n, "temperature": 0.0, "return_tokens_as_token_ids": True}
        choice = self._completion(body)
        try:
            return answers.top(choice, n, self._token_id)
        except answers.Impossible as exc:
            raise self._bad("next words", ids, exc) from None

    def _next_top(self, seqs: list[list[int]], n: int, desc: str) -> list[list[tuple[int, float]]]:
        return self.client.map(lambda ids: self._top(ids, n), seqs, desc)

    def _generate_one(self, ids: list[int], config: DecodingConfig, seed: int | None) -> list[int]:
        body: dict[str, Any] = {"prompt": ids, "max_tokens": config.max_new_tokens, "logprobs": 0,
                                "return_tokens_as_token_ids": True}
        if config.do_sample:
            body.update(temperature=config.temperature, top_p=config.top_p, seed=seed)
            if config.top_k:
                body["top_k"] = config.top_k
        else:
            body["temperature"] = 0.0
        choice = self._completion(body)
        try:
            got = answers.generated(choice, config.max_new_tokens, self.vocab_size)
        except answers.Impossible as exc:
            raise self._bad("generation", ids, exc) from None
        if isinstance(got, list):
            return got
        # A server without token ids: its text, re-tokenized locally (decoding it gives it back).
        return list(self.tokenizer(got, add_special_tokens=False)["input_ids"])

    def _generate_ids(self, seqs: list[list[int]], config: DecodingConfig, seeds: list[int], prompts: list[str],
                      desc: str) -> list[list[int]]:
        return self.client.map(lambda i: self._generate_one(seqs[i], config, row_seed(seeds[i], prompts[i])),
                               list(range(len(seqs))), desc)

    def _token_id(self, token: Any) -> int:
        """A next-token list's key as a token id: ``token_id:N``, or a server without token ids names
        the token by its string, which the local tokenizer must have."""
        if isinstance(token, str) and not token.startswith("token_id:"):
            tid = self.tokenizer.convert_tokens_to_ids(token)
            if not isinstance(tid, int) or tid == self.tokenizer.unk_token_id:
                raise answers.Impossible(f"next token {answers.show(token)} is not a token of the local tokenizer "
                                         "(serve the model with vLLM: it returns token ids)")
            token = tid
        return answers.token_id(token, self.vocab_size, "next token")

    # ----- checks at load --------------------------------------------------------------------------------
    def check_server(self, record_dir: Path | None = None) -> None:
        """Prompt log-probabilities and the tokenizer, before any test runs (usage errors); then the
        canaries that make the cache key (``canary_probe``), compared with the last run's
        (``record_dir``, the cache folder: see ``compare_with_last_run``)."""
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
        self._check_tokenizer()
        self.canaries = self.canary_probe(logprobs)
        self.server_probe = hashlib.sha256(json.dumps(self.canaries, sort_keys=True).encode()).hexdigest()
        if record_dir is not None:
            self.load_notes = compare_with_last_run(self, Path(record_dir))

    def canary_probe(self, echoed: list[float | None]) -> dict[str, str]:
        """A hash of the server's answer to one request of each kind the run sends (the canary's
        scoring, its prefix's next tokens, its prefix's greedy continuation). Log-probabilities
        are rounded to 3 decimals so run-to-run noise does not change them; greedy decoding is
        deterministic. A change of served weights, dtype or decoding changes one of them, and so
        the result cache's key."""
        prefix = self.encode(CANARY_PREFIX)
        top = sorted((tid, round(lp, 3)) for tid, lp in self._top(prefix, CANARY_TOP))
        generation = self._generate_one(prefix, DecodingConfig(max_new_tokens=CANARY_NEW_TOKENS), None)

        def digest(value: Any) -> str:
            return hashlib.sha256(json.dumps(value).encode()).hexdigest()[:16]

        return {"scoring": digest([round(float(v), 3) for v in echoed[1:] if v is not None]),
                "next words": digest(top), "generation": digest(generation)}

    def _check_tokenizer(self) -> None:
        for text in TOKENIZER_PROBES:
            local = self.encode(text)
            try:
                answer = self.client.post("/tokenize", {"model": self.served, "prompt": text, "add_special_tokens": True})
                server = answer.get("tokens") if isinstance(answer, dict) else None
            except EndpointError:  # no /tokenize (not vLLM): count the prompt tokens it scores
                server = None
            if server is None or not isinstance(server, list):
                body = {"prompt": text, "max_tokens": self.echo_tokens, "echo": True, "logprobs": 1, "temperature": 0.0}
                try:
                    scored = answers.logprobs_field(self._completion(body)).get("token_logprobs")
                except answers.Impossible as exc:
                    raise self._bad("scoring", local, exc) from None
                server_n = (len(scored) if isinstance(scored, list) else 0) - self.echo_tokens
                same, what = server_n == len(local), f"into {server_n} tokens"
            else:
                same, what = server == local, f"as {answers.show(server[:12], 120)}"
            if not same:
                raise AuditUsageError(
                    f"the server at {self.client.base_url} tokenizes {text!r} {what}, the local tokenizer of "
                    f"--model {self.name} into {len(local)} tokens ({local[:12]}): they are not the same tokenizer, "
                    "so token-level scores would not line up. Fix: pass --model the local copy of the served model "
                    "(a registry alias or its folder).")


def compare_with_last_run(engine: OpenAIEngine, folder: Path) -> tuple[str, ...]:
    """The run-card line when the server's canary answers differ from those recorded by the last
    run against the same URL, served model and local model (a JSON file under
    ``folder/endpoints``, rewritten when they change); none the first time or when they agree.
    A record that cannot be read counts as none; one that cannot be written is skipped (the
    result cache says itself when it cannot store)."""
    who = [engine.client.base_url, engine.served, engine.fingerprint]
    path = folder / "endpoints" / f"{hashlib.sha256(json.dumps(who).encode()).hexdigest()[:32]}.json"
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
        before = previous["canaries"] if previous.get("who") == who else None
        before = before if isinstance(before, dict) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        before = None
    if before == engine.canaries:
        return ()
    with contextlib.suppress(OSError):
        atomic_write_text(path, json.dumps({"who": who, "canaries": engine.canaries}, indent=1, sort_keys=True))
    if before is None:
        return ()
    changed = [kind for kind, value in engine.canaries.items() if before.get(kind) != value]
    return (f"the server's answers differ from the last run against {engine.client.base_url} (model "
            f"{engine.served}; changed: {', '.join(changed)}): new cache key, so no result cached before is used",)


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
    client = EndpointClient(URL.of(opts), _api_key(opts), timeout=REQUEST_TIMEOUT.of(opts),
                            max_concurrency=MAX_CONCURRENCY.of(opts), progress=opts.progress,
                            max_response_mb=MAX_RESPONSE_MB.of(opts), api_key_env=API_KEY_ENV.of(opts))
    try:
        served = _served_model(client, SERVED_MODEL.of(opts))
        engine = OpenAIEngine(client, served, tokenizer, spec.name, fingerprint, tokenizer_fp,
                              max_length=_max_length(source), vocab_size=_config_int(source, "vocab_size"))
        engine.check_server(opts.cache_dir if opts.use_cache else None)
    except EndpointAuthError as exc:  # at load, before any test: the key, not the server, is wrong
        raise AuditUsageError(str(exc)) from None
    except EngineUnavailable as exc:  # at load, before any test: the URL is wrong or the server is down
        raise AuditUsageError(f"--engine-url: {exc}") from None
    return engine


def _max_length(source: Path) -> int:
    return _config_int(source, "max_position_embeddings") or 4096


def _config_int(source: Path, key: str) -> int | None:
    """A positive integer of the local model's config.json, or None."""
    try:
        config = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = config.get(key) if isinstance(config, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def describe(opts: Any) -> dict[str, str]:
    return {"engine": "openai v1", "device": f"remote ({check_url(URL.of(opts))})", "dtype": "as served"}


ENGINE = EngineEntry(name="openai", load=load, check=check, describe=describe,
                     options=(URL, API_KEY_ENV, SERVED_MODEL, MAX_CONCURRENCY, REQUEST_TIMEOUT, MAX_RESPONSE_MB),
                     summary="any OpenAI-compatible server with prompt log-probabilities (/v1/completions, echo)")
