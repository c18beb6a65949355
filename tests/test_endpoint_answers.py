"""The endpoint engine (--engine openai) validates every answer of its server before using it, and
keys its cache by the server's answers to a canary of each request kind. Against the stub server
(tests/openai_stub_server.py) serving the tiny test model, whose answers a test rewrites: each
impossible answer is an error naming the server, the request kind and the item, never a number."""

from __future__ import annotations

import json
import math
import os
import re

import numpy as np
import pytest

from bias_core.errors import AuditUsageError
from bias_core.models import DecodingConfig, LoadOptions, load_model, resolve_model

from harness import assert_usage_error, load_tiny, only_run, run_folders
from openai_stub_server import StubServer
from paths import REPO

pytest_plugins = ["pytester"]

PROMPT = "My colleague is a pilot, and"  # not the engine's canary (those are left alone below)
BIG = 99_999_999


@pytest.fixture
def reference(tiny_model_dir, tmp_path, torch_single_thread):
    return load_tiny(tiny_model_dir, "cpu", cache_dir=tmp_path / "ref-cache")


def stub(reference, **faults) -> StubServer:
    return StubServer(reference.engine.model, reference.engine.tokenizer, **faults)


def endpoint(folder, url, tmp_path, **options):
    options.setdefault("cache_dir", tmp_path / "cache")
    options.setdefault("use_cache", False)
    own = {"engine_url": url, "max_concurrency": options.pop("max_concurrency", 1)}
    return load_model(resolve_model(str(folder)), LoadOptions(engine="openai", engine_options=own, progress=False,
                                                              **options))


def kind_of(body: dict) -> str:
    if body.get("echo"):
        return "scoring"
    return "next words" if body.get("max_tokens") == 1 and (body.get("logprobs") or 0) > 1 else "generation"


def only(kind: str, edit):
    """A tamper for the stub: ``edit`` the logprobs object (or the choice, when it takes two
    arguments) of each answer to a ``kind`` request, the others as computed."""
    def tamper(body, answer):
        if kind_of(body) == kind:
            choice = answer["choices"][0]
            if edit.__code__.co_argcount == 2:
                edit(choice, body)
            else:
                edit(choice["logprobs"])
        return answer
    return tamper


def set_first_top(key, value=None):
    def edit(lp):
        top = lp["top_logprobs"][0]
        first = next(iter(top))
        top[key] = top.pop(first) if value is None else value
    return edit


def duplicate_first_top(lp):
    top = lp["top_logprobs"][0]
    first = next(iter(top))  # token_id:N and token_id:0N name the same token
    top["token_id:0" + first.removeprefix("token_id:")] = top[first]


def as_text(text):
    def edit(choice, body):
        choice["logprobs"]["tokens"] = ["tok"] * len(choice["logprobs"]["tokens"])  # no token ids: the text is read
        choice["text"] = text
    return edit


# (kind, edit of the answer, what the message says)
IMPOSSIBLE = {
    # scoring: echo + logprobs, one per prompt token
    "positive-logprobs": ("scoring", lambda lp: lp.update(token_logprobs=[None] + [0.7] * (len(lp["token_logprobs"]) - 1)),
                          r"prompt token 1 is \+0\.7, above 0"),
    "one-logprob-short": ("scoring", lambda lp: lp["token_logprobs"].pop(), r"log-probabilities for the \d+ prompt tokens"),
    "one-logprob-extra": ("scoring", lambda lp: (lp["token_logprobs"].append(-1.0), lp["tokens"].append("token_id:5")),
                          r"and at most 0 generated \(one per token expected\)"),
    "tokens-and-logprobs-differ": ("scoring", lambda lp: lp["tokens"].pop(), "tokens but .* log-probabilities"),
    "logprob-not-a-number": ("scoring", lambda lp: lp["token_logprobs"].__setitem__(2, "-1.5"), "'-1.5', not a number"),
    "logprob-nan": ("scoring", lambda lp: lp["token_logprobs"].__setitem__(2, math.nan), "nan, not a finite number"),
    "logprob-missing": ("scoring", lambda lp: lp["token_logprobs"].__setitem__(2, None),
                        "no log-probability for prompt token 2.*llama.cpp"),
    "echo-other-ids": ("scoring", lambda lp: lp["tokens"].__setitem__(1, "token_id:5"),
                       "echoed prompt token 1 as id 5, where .* was sent"),
    "logprobs-not-an-object": ("scoring", lambda choice, body: choice.update(logprobs=[1, 2]), "not an object"),
    # next words: top_logprobs with token_id:N keys
    "top-out-of-vocabulary": ("next words", set_first_top(f"token_id:{BIG}"), f"is id {BIG}, outside the vocabulary"),
    "top-minus-one": ("next words", set_first_top("token_id:-1"), "is id -1, outside the vocabulary"),
    "top-not-an-int": ("next words", set_first_top("token_id:abc"), "is 'token_id:abc', not a token id"),
    "top-not-decimal": ("next words", set_first_top("token_id:1.5"), "is 'token_id:1.5', not a token id"),
    "top-duplicated": ("next words", duplicate_first_top, "is twice in the next-token list"),
    "top-positive": ("next words", set_first_top("token_id:3", 0.7), r"next token 'token_id:3' is \+0\.7, above 0"),
    "top-sums-above-one": ("next words", lambda lp: lp["top_logprobs"][0].update(
        {k: math.log(0.5) for k in lp["top_logprobs"][0]}), "probabilities sum to .*, above 1"),
    "top-too-many": ("next words", lambda lp: lp["top_logprobs"][0].update(
        {f"token_id:{100 + i}": -30.0 for i in range(30)}), "next tokens where 20 were asked"),
    "top-not-an-object": ("next words", lambda lp: lp.update(top_logprobs=[[["token_id:1", -1.0]]]), "not an object"),
    # generation: token_id:N tokens, or the text where there are none
    "generated-out-of-vocabulary": ("generation", lambda lp: lp["tokens"].__setitem__(0, f"token_id:{BIG}"),
                                    f"generated token 0 is id {BIG}, outside the vocabulary"),
    "generated-minus-one": ("generation", lambda lp: lp["tokens"].__setitem__(0, "token_id:-1"), "is id -1, outside"),
    "generated-not-an-int": ("generation", lambda lp: lp["tokens"].__setitem__(0, "token_id:x"), "is 'token_id:x', not a token id"),
    "generated-too-many": ("generation", lambda lp: lp["tokens"].extend(["token_id:5"] * 10),
                           "generated tokens where at most 4 were asked"),
    "generated-lone-surrogate": ("generation", as_text("she \ud800 said"), "a lone surrogate"),
    "generated-text-not-a-string": ("generation", as_text(None), "its generated text is None, not a string"),
}


def ask(lm, kind: str):
    """One request of ``kind`` about PROMPT through the whole model handle (cache wrapper included)."""
    if kind == "scoring":
        return lm.loglikelihood([(PROMPT, " she")])
    if kind == "next words":
        return lm.topk_fills([PROMPT + " [MASK]"], 1)
    return lm.generate([PROMPT], DecodingConfig(max_new_tokens=4))


@pytest.mark.parametrize("case", list(IMPOSSIBLE))
def test_an_impossible_answer_is_an_error_naming_server_kind_and_item(reference, tiny_model_dir, tmp_path, case):
    kind, edit, message = IMPOSSIBLE[case]
    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path)
        server.tamper = only(kind, edit)
        with pytest.raises(AuditUsageError) as failure:
            ask(lm, kind)
    text = str(failure.value)
    assert f"the server at {server.url}" in text and f"a {kind} request (/v1/completions)" in text, text
    assert repr(PROMPT) in text or repr(PROMPT + " she") in text, text
    assert re.search(message, text), text


@pytest.mark.parametrize("kind", ["scoring", "next words", "generation"])
def test_an_impossible_answer_at_load_is_a_usage_error(reference, tiny_model_dir, tmp_path, kind):
    """Each kind of request is asked once at load (the canaries): its answer is checked there."""
    edit = {"scoring": IMPOSSIBLE["positive-logprobs"][1], "next words": IMPOSSIBLE["top-minus-one"][1],
            "generation": IMPOSSIBLE["generated-lone-surrogate"][1]}[kind]
    with stub(reference, tamper=only(kind, edit)) as server:
        with pytest.raises(AuditUsageError, match=f"the server at {server.url} gave an impossible answer to a {kind} "
                                                  "request .* 'My friend is a nurse, and"):
            endpoint(tiny_model_dir, server.url, tmp_path)


def test_log_probabilities_within_the_tolerance_above_zero_count_as_zero(reference, tiny_model_dir, tmp_path):
    """5e-5 above 0 is rounding (tolerance 1e-4): P = 1, so the sum is exactly 0; 2e-4 is refused."""
    def at(value):
        return only("scoring", lambda lp: lp.update(token_logprobs=[None] + [value] * (len(lp["token_logprobs"]) - 1)))

    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path)
        server.tamper = at(5e-5)
        assert lm.loglikelihood([(PROMPT, " she")]) == [0.0]
        assert lm.word_probs([PROMPT], ["she"])[0, 0] == 1.0  # a probability, never above 1
        server.tamper = at(2e-4)
        with pytest.raises(AuditUsageError, match=r"\+0\.0002, above 0"):
            lm.loglikelihood([(PROMPT, " he")])


def test_every_engines_log_probabilities_above_zero_are_refused(reference, tiny_model_dir, tmp_path, monkeypatch):
    """The shared scoring code checks what any engine (vLLM's too) hands it, not only a server's."""
    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path)
        monkeypatch.setattr(lm.engine, "_prompt_logprobs", lambda seqs, desc: [[None] + [0.5] * (len(s) - 1) for s in seqs])
        with pytest.raises(AuditUsageError, match=r"log-probability of \+0\.5 \(above 0: a probability above 1\)"):
            lm.loglikelihood([(PROMPT, " she")])
        monkeypatch.setattr(lm.engine, "_next_top", lambda seqs, n, desc: [[(3, 0.5)] for _ in seqs])
        with pytest.raises(AuditUsageError, match=r"\+0\.5 \(above 0"):
            lm.topk_fills([PROMPT + " [MASK]"], 1)


def test_answers_as_computed_pass_the_checks(reference, tiny_model_dir, tmp_path):
    """The checks refuse nothing a model gives: the stub's own answers go through, numbers unchanged."""
    with stub(reference) as server:
        lm = endpoint(tiny_model_dir, server.url, tmp_path)
        np.testing.assert_allclose(lm.loglikelihood([(PROMPT, " she")]), reference.loglikelihood([(PROMPT, " she")]),
                                   atol=1e-4)
        config = DecodingConfig(max_new_tokens=4)
        assert lm.generate([PROMPT], config) == reference.generate([PROMPT], config)
        server.tamper = only("generation", as_text("she said so"))  # a server without token ids: its text is used
        assert lm.generate(["Another prompt,"], config) == ["she said so"]


# ----- the cache identity -------------------------------------------------------------------------------
def test_the_same_server_keeps_its_cache_identity(reference, tiny_model_dir, tmp_path):
    with stub(reference) as server:
        first = endpoint(tiny_model_dir, server.url, tmp_path, use_cache=True)
        again = endpoint(tiny_model_dir, server.url, tmp_path, use_cache=True)
    assert first.cache_identity() == again.cache_identity()
    assert first.load_notes == () and again.load_notes == ()
    asked = {kind_of(r["body"]) for r in server.requests if r["path"] == "/v1/completions"}
    assert asked == {"scoring", "next words", "generation"}  # a canary of each kind


def test_changed_generations_start_a_new_cache_key_and_say_so(reference, tiny_model_dir, tmp_path):
    """The server's generations change behind the same URL and name, its log-probabilities do not:
    the next run gets a new key (the old generations are not served from the cache) and a line."""
    config = DecodingConfig(max_new_tokens=6)
    with stub(reference) as server:
        before = endpoint(tiny_model_dir, server.url, tmp_path, use_cache=True)
        old = before.generate([PROMPT], config)
        server.greedy_rank = 1  # redeployed: greedy decoding now takes the second most probable token
        after = endpoint(tiny_model_dir, server.url, tmp_path, use_cache=True)
        new = after.generate([PROMPT], config)
        uncached = endpoint(tiny_model_dir, server.url, tmp_path, use_cache=False).generate([PROMPT], config)
        third = endpoint(tiny_model_dir, server.url, tmp_path, use_cache=True)
    assert new == uncached and new != old
    assert after.cache_identity()["server_probe"] != before.cache_identity()["server_probe"]
    [note] = after.load_notes
    assert note.startswith(f"the server's answers differ from the last run against {server.url}") and "new cache key" in note
    assert "changed: generation)" in note  # only generation changed: scoring and next words did not
    assert third.load_notes == () and third.cache_identity() == after.cache_identity()


def test_changed_log_probabilities_start_a_new_cache_key(reference, tiny_model_dir, tmp_path):
    with stub(reference) as server:
        before = endpoint(tiny_model_dir, server.url, tmp_path, use_cache=True)
        server.tamper = only("scoring", lambda lp: lp.update(token_logprobs=[None] + [v - 0.01 for v in lp["token_logprobs"][1:]]))
        after = endpoint(tiny_model_dir, server.url, tmp_path, use_cache=True)
    assert after.cache_identity() != before.cache_identity()
    assert "changed: scoring)" in after.load_notes[0]


def test_a_broken_record_of_the_last_run_counts_as_none(reference, tiny_model_dir, tmp_path):
    with stub(reference) as server:
        endpoint(tiny_model_dir, server.url, tmp_path, use_cache=True)
        [record] = (tmp_path / "cache" / "endpoints").glob("*.json")
        assert set(json.loads(record.read_text())) == {"who", "canaries"}  # JSON: URL, names and hashes only
        record.write_text('{"who": 3, "canaries": [')
        lm = endpoint(tiny_model_dir, server.url, tmp_path, use_cache=True)
        assert lm.load_notes == ()
        assert json.loads(record.read_text())["canaries"] == lm.engine.canaries  # written again, whole


# ----- through the plugin: exit codes and messages ------------------------------------------------------------
def this_checkout(monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))


def audit(pytester, tiny_model_dir, tmp_path, url, *extra):
    """An audit run in a subprocess, importing this checkout's bias_core (PYTHONPATH)."""
    return pytester.runpytest_subprocess(
        "audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--engine", "openai", "--engine-url", url,
        "--max-concurrency", "1", "--cache-dir", str(tmp_path / "audit-cache"), "--sample", "fixed", *extra)


def test_an_audit_given_impossible_scores_errors_and_never_passes(audit_project, reference, tiny_model_dir,
                                                                  tmp_path, monkeypatch):
    """+0.7 per token gave 'PASS occupation-pronouns 0.5' without a word; now the test is an error."""
    this_checkout(monkeypatch)
    tokenizer = reference.engine.tokenizer
    positive = IMPOSSIBLE["positive-logprobs"][1]

    def tamper(body, answer):
        if kind_of(body) == "scoring" and "nurse" not in tokenizer.decode(body["prompt"]):
            positive(answer["choices"][0]["logprobs"])
        return answer

    with stub(reference, tamper=tamper) as server:
        result = audit(audit_project, tiny_model_dir, tmp_path, server.url, "-k", "occupation-pronouns")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert "ERROR in occupation-pronouns" in out and f"the server at {server.url} gave an impossible answer" in out
    assert "PASS" not in out and "Traceback" not in out
    run = only_run(audit_project.path / "reports")
    rows = [r for r in json.loads((run / "results.json").read_text())["results"] if r["probe"] == "occupation-pronouns"]
    assert rows and all(r["verdict"] == "error" and r.get("value") is None for r in rows)


def test_an_audit_whose_server_answers_impossibly_at_load_stops_with_a_usage_error(audit_project, reference,
                                                                                  tiny_model_dir, tmp_path,
                                                                                  monkeypatch):
    this_checkout(monkeypatch)
    with stub(reference, tamper=only("next words", IMPOSSIBLE["top-out-of-vocabulary"][1])) as server:
        result = audit(audit_project, tiny_model_dir, tmp_path, server.url, "-k", "occupation-pronouns")
    out = assert_usage_error(result, [
        f"usage error: the server at {server.url} gave an impossible answer to a next words request",
        f"is id {BIG}, outside the vocabulary"])
    assert "Traceback" not in out


def test_an_audit_against_a_changed_server_says_so_in_the_run_card(audit_project, reference, tiny_model_dir,
                                                                   tmp_path, monkeypatch):
    this_checkout(monkeypatch)
    with stub(reference) as server:
        first = audit(audit_project, tiny_model_dir, tmp_path, server.url, "-k", "occupation-pronouns")
        assert "answers differ" not in first.stdout.str()
        server.greedy_rank = 1
        second = audit(audit_project, tiny_model_dir, tmp_path, server.url, "-k", "occupation-pronouns")
    assert first.ret == second.ret and second.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    line = f"bias-core: model card: the server's answers differ from the last run against {server.url}"
    assert line in second.stdout.str()
    [_, run] = run_folders(audit_project.path / "reports")
    card = json.loads((run / "results.json").read_text())["run"]["model_card"]
    assert any(c.startswith("the server's answers differ") and "generation" in c for c in card)
