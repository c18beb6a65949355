"""The endpoint engine (--engine openai) against a stub OpenAI-compatible server on 127.0.0.1
that serves the tiny test model (tests/openai_stub_server.py): its numbers equal the
transformers engine's, and every failure case is a clear error at a known point."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bias_core.errors import AuditUsageError, EngineUnavailable
from bias_core.models import DecodingConfig, LoadOptions, check_options, load_model, resolve_model
from bias_core.models.engines.http_client import EndpointClient, check_url

from harness import load_tiny, only_run
from openai_stub_server import StubServer

pytest_plugins = ["pytester"]

PROMPTS = ["My friend is a nurse, and", "The person said that", "Our colleague is a pilot, and"]
WORDS = ["she", "he", "her", "his"]
SECRET = "sk-test-7f3a9c-never-written-anywhere"


@pytest.fixture
def reference(tiny_model_dir, tmp_path, torch_single_thread):
    return load_tiny(tiny_model_dir, "cpu", cache_dir=tmp_path / "ref-cache")


def stub(reference, **faults) -> StubServer:
    return StubServer(reference.engine.model, reference.engine.tokenizer, **faults)


ENDPOINT = {"max_concurrency", "api_key_env"}  # the endpoint engine's own options these tests pass


def endpoint(folder, url, tmp_path, **options):
    options.setdefault("cache_dir", tmp_path / "cache")
    options.setdefault("use_cache", False)
    own = {"engine_url": url, "max_concurrency": 2, **{k: options.pop(k) for k in list(options) if k in ENDPOINT}}
    return load_model(resolve_model(str(folder)), LoadOptions(engine="openai", engine_options=own, progress=False,
                                                              **options))


# ----- options: usage errors before anything loads ---------------------------------------------------
@pytest.mark.parametrize("options, message", [
    ({"engine": "openai"}, "needs --engine-url"),
    ({"engine": "openai", "engine_options": {"engine_url": "127.0.0.1:8000"}}, "not an http"),
    ({"engine": "openai", "engine_options": {"engine_url": "http://user:pw@host:8000"}}, "credentials"),
    ({"engine": "openai", "engine_options": {"engine_url": "http://h:1", "api_key_env": "BIAS_CORE_TEST_UNSET_KEY"}},
     "not set"),
    ({"engine": "openai", "engine_options": {"engine_url": "http://h:1"}, "precision": "exact"}, "the server decides"),
    ({"engine": "openai", "engine_options": {"engine_url": "http://h:1"}, "adapter": "x"}, "the server decides"),
    ({"engine": "openai", "engine_options": {"engine_url": "http://h:1", "tensor_parallel_size": 2}},
     "not an option of --engine openai"),
    ({"engine_options": {"engine_url": "http://h:1"}}, "not an option of --engine transformers"),
    ({"engine": "ollama"}, "unknown engine.*transformers, vllm, openai"),
    ({"engine": "openai", "engine_options": {"engine_url": "http://h:1", "max_concurrency": 0}}, "positive integer"),
])
def test_engine_options_are_checked_before_any_model_loads(options, message, monkeypatch):
    monkeypatch.delenv("BIAS_CORE_TEST_UNSET_KEY", raising=False)
    with pytest.raises(AuditUsageError, match=message):
        check_options(LoadOptions(**options))


def test_the_url_is_normalised_to_the_servers_base():
    assert check_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    assert check_url("https://models.example.org/serve") == "https://models.example.org/serve"


# ----- agreement with the transformers engine ----------------------------------------------------------
def test_endpoint_numbers_equal_the_transformers_engines(reference, tiny_model_dir, tmp_path):
    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path)
        assert lm.info().engine == "openai" and lm.info().endpoint == server.url
        pairs = [(p, " " + w) for p in PROMPTS for w in WORDS]
        np.testing.assert_allclose(lm.loglikelihood(pairs), reference.loglikelihood(pairs), rtol=0, atol=1e-4)
        sentences = [p + " she said so." for p in PROMPTS]
        np.testing.assert_allclose(lm.sentence_logprob(sentences), reference.sentence_logprob(sentences), atol=1e-4)
        np.testing.assert_allclose(lm.word_probs(PROMPTS, WORDS), reference.word_probs(PROMPTS, WORDS), rtol=1e-3,
                                   atol=1e-7)
        texts = [p + " [MASK]" for p in PROMPTS]
        lm.engine.top_depth = 400  # the random tiny model's whole words lie deep: read its whole vocabulary
        ours, theirs = lm.topk_fills(texts, 3), reference.topk_fills(texts, 3)
        assert [[w for w, _ in row] for row in ours] == [[w for w, _ in row] for row in theirs]
        np.testing.assert_allclose([p for row in ours for _, p in row], [p for row in theirs for _, p in row], rtol=1e-3)
        config = DecodingConfig(max_new_tokens=8)
        assert lm.generate(PROMPTS, config) == reference.generate(PROMPTS, config)
        # requests are token ids, never text for the server to re-tokenize (no second BOS)
        scored = [r["body"] for r in server.requests if r["path"] == "/v1/completions"]
        assert all(isinstance(b["prompt"], list) for b in scored[1:]) and all(b.get("temperature") == 0.0 for b in scored)


def test_a_sampled_row_asks_the_server_with_its_own_seed(reference, tiny_model_dir, tmp_path):
    """One seed per row (a prompt's repetitions in one call): each request carries the seed of
    its (row seed, prompt), the one a call of its own would send."""
    from bias_core.models.engines.prompt_logprobs import row_seed

    sampled = DecodingConfig(max_new_tokens=3, do_sample=True)
    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path)
        lm.generate([PROMPTS[0], PROMPTS[0], PROMPTS[1]], sampled, seed=[7, 8, 7])
        sent = sorted(r["body"]["seed"] for r in server.requests if r.get("body", {}).get("temperature") == 1.0)
    assert sent == sorted([row_seed(7, PROMPTS[0]), row_seed(8, PROMPTS[0]), row_seed(7, PROMPTS[1])])


def test_what_an_endpoint_cannot_do_is_a_skip_with_the_reason(reference, tiny_model_dir, tmp_path):
    from bias_core.models.protocol import EngineCannot

    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path)
        with pytest.raises(EngineCannot, match="openai engine cannot give sentence encodings.*--engine transformers"):
            lm.embed(["My friend is a nurse."])
        with pytest.raises(EngineCannot, match="fine-tune"):
            lm.training()


# ----- the server's own failures --------------------------------------------------------------------------
@pytest.mark.parametrize("faults, message", [
    ({"prompt_logprobs": False}, "llama.cpp"),
    ({"chat_only": True}, "echoes prompt log-probabilities"),
])
def test_a_server_without_prompt_logprobs_is_a_usage_error_at_load(reference, tiny_model_dir, tmp_path, faults, message):
    with stub(reference, **faults) as server:
        with pytest.raises(AuditUsageError, match=message):
            endpoint(tiny_model_dir, server.url, tmp_path)


@pytest.mark.parametrize("tokenize", [True, False], ids=["tokenize-endpoint", "token-counts"])
def test_a_tokenizer_mismatch_is_a_usage_error_at_load(reference, tiny_model_dir, tmp_path, tokenize):
    from tiny_model import build_wordpiece_tokenizer

    with stub(reference, other_tokenizer=build_wordpiece_tokenizer(), tokenize=tokenize) as server:
        with pytest.raises(AuditUsageError, match="not the same tokenizer"):
            endpoint(tiny_model_dir, server.url, tmp_path)


def test_429_and_503_are_retried_then_answered(reference, tiny_model_dir, tmp_path):
    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path, max_concurrency=1)
        expected = reference.loglikelihood([(PROMPTS[0], " she")])
        server.statuses[:] = [429, 503]
        before = len(server.requests)
        got = lm.loglikelihood([(PROMPTS[0], " she")])
        np.testing.assert_allclose(got, expected, atol=1e-4)
        assert len(server.requests) - before == 3  # the 429, the 503, the answer


def test_a_server_that_keeps_refusing_is_engine_unavailable(reference, tiny_model_dir, tmp_path):
    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path, max_concurrency=1)
        server.statuses[:] = [503] * 10
        with pytest.raises(EngineUnavailable, match="did not answer POST /v1/completions in 5 tries.*503"):
            lm.loglikelihood([(PROMPTS[0], " she")])
        assert server.statuses == [503] * 5  # 1 try + 4 retries: bounded


def test_a_server_going_down_mid_call_keeps_what_was_answered(reference, tiny_model_dir, tmp_path):
    sentences = [f"{p} and then {w}." for p in PROMPTS for w in WORDS]  # 12 one-request items
    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path, max_concurrency=1, use_cache=True)
        server.die_after = server.answered + 5
        with pytest.raises(EngineUnavailable, match="did not answer.*5 tries.*connection refused"):
            lm.sentence_logprob(sentences)
        assert lm.cache_stats()["misses"] == 12
    with stub(reference) as again:  # a new server, same model: only the 7 unanswered are asked
        lm2 = endpoint(tiny_model_dir, again.url, tmp_path, max_concurrency=1, use_cache=True)
        asked = len(again.requests)
        got = lm2.sentence_logprob(sentences)
        assert len([r for r in again.requests[asked:] if r["path"] == "/v1/completions"]) == 7
        np.testing.assert_allclose(got, reference.sentence_logprob(sentences), atol=1e-4)


def test_the_stub_answers_nothing_after_it_went_down(reference, monkeypatch):
    """The race the test above once lost: the client's next request reached the stub after its
    last answer but before its listening socket closed, and was answered. Here the socket never
    closes (the worst case): the request after the last answer is still not answered."""
    import requests

    with stub(reference, die_after=1) as server:
        monkeypatch.setattr(server, "stop", lambda: None)
        body = {"model": "stub-model", "prompt": [1, 2, 3], "max_tokens": 0, "echo": True, "logprobs": 1}
        assert requests.post(f"{server.url}/v1/completions", json=body, timeout=60).status_code == 200
        with pytest.raises(requests.ConnectionError):
            requests.post(f"{server.url}/v1/completions", json=body, timeout=60)
        assert server.answered == 1
        monkeypatch.undo()


def test_the_api_key_goes_to_the_url_only_and_nowhere_else(reference, tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("BIAS_CORE_TEST_KEY", SECRET)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # an environment proxy is ignored, not used
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path, api_key_env="BIAS_CORE_TEST_KEY")
        lm.loglikelihood([(PROMPTS[0], " she")])
        assert server.requests and all(r["headers"].get("Authorization") == f"Bearer {SECRET}" for r in server.requests)
        server.statuses[:] = [503] * 10
        with pytest.raises(EngineUnavailable) as failure:
            lm.loglikelihood([(PROMPTS[1], " he")])
        assert SECRET not in str(failure.value) and SECRET not in json.dumps(lm.info().as_dict())


def test_the_client_bounds_requests_in_flight():
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    inside, most, gate = [0], [0], threading.Lock()

    class Slow(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            with gate:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)  # long enough for requests to overlap; the bound, not the time, is asserted
            with gate:
                inside[0] -= 1
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        client = EndpointClient(f"http://127.0.0.1:{httpd.server_address[1]}", max_concurrency=3, progress=False)
        assert client.map(lambda i: client.post("/x", {"i": i}), list(range(12))) == [{}] * 12
        assert 1 <= most[0] <= 3
    finally:
        httpd.shutdown()
        httpd.server_close()


# ----- through the plugin: the report of a run whose server goes away ---------------------------------------
def test_an_audit_whose_server_goes_down_is_marked_partial_and_keeps_its_cache(audit_project, reference, tiny_model_dir,
                                                                                 tmp_path, monkeypatch):
    monkeypatch.setenv("BIAS_CORE_TEST_KEY", SECRET)
    cache = tmp_path / "audit-cache"
    with stub(reference) as server:
        args = ["audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--engine", "openai",
                "--engine-url", server.url, "--api-key-env", "BIAS_CORE_TEST_KEY", "--max-concurrency", "1",
                "--cache-dir", str(cache), "-k", "natural-default or occupation-pronouns", "--sample", "fixed"]
        server.die_after = 60  # after the load checks and a few dozen scoring requests
        result = audit_project.runpytest_subprocess(*args)
    assert result.ret == 2, result.stdout.str()  # interrupted: the server went away
    result.stdout.fnmatch_lines(["*engine error*did not answer*"])
    run = only_run(audit_project.path / "reports")
    doc = json.loads((run / "results.json").read_text())
    assert doc["run"]["complete"] is False and "did not answer" in doc["run"]["partial_reason"]
    stored = list((cache / "entries").rglob("*.json"))
    assert stored, "answers received before the server went away are in the cache"
    everything = result.stdout.str() + result.stderr.str() + "".join(
        p.read_text(errors="ignore") for p in run.rglob("*") if p.is_file() and p.suffix in (".json", ".xml", ".html", ".csv"))
    assert SECRET not in everything
