"""The result cache proves what it serves: an entry is used only when its stored key is the key
looked up and its checksum matches its value. An edited value or key, an entry copied under
another key's name, an entry without a checksum (an older bias_core's) and a truncated one are
misses, recomputed to the numbers of an uncached run, stored again and counted in the run card."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import bias_core.storage.result_cache as cache_mod
from bias_core.storage.result_cache import ResultCache, canonical_key, rejected_note

from harness import last_run, load_tiny, results

pytest_plugins = ["pytester"]

PARTS = {"op": "word_probs", "model": "dir:abc", "prompt": "The nurse said that", "words": ["she", "he"]}
OTHER = {**PARTS, "prompt": "The doctor said that"}


def entry_path(root: Path, parts: dict) -> Path:
    key = canonical_key(parts)
    return root / "entries" / key[:2] / f"{key}.json"


def edit_one_character(text: str) -> str:
    """``text`` (JSON) with one digit changed, or else one letter: still JSON, another value."""
    before = json.loads(text)
    for i in [i for i, ch in enumerate(text) if ch.isdigit()] + [i for i, ch in enumerate(text) if ch.isalpha()]:
        ch = text[i]
        edited = text[:i] + (str((int(ch) + 8) % 10) if ch.isdigit() else ("b" if ch != "b" else "c")) + text[i + 1:]
        try:
            if json.loads(edited) != before:
                return edited
        except ValueError:
            continue  # inside an escape sequence
    raise AssertionError(f"no one-character edit of {text[:80]!r} keeps it JSON")


def _edit_value(path: Path, donor: Path) -> None:
    entry = json.loads(path.read_text())
    entry["value_json"] = edit_one_character(entry["value_json"])  # the checksum left as it was
    path.write_text(json.dumps(entry))


def _edit_key(path: Path, donor: Path) -> None:
    entry = json.loads(path.read_text())
    field = next(k for k in ("prompt", "sentence", "text", "context") if k in entry["key"])
    entry["key"][field] += " edited"
    path.write_text(json.dumps(entry))


def _copy_other(path: Path, donor: Path) -> None:
    shutil.copyfile(donor, path)  # a whole, valid entry of another key


def _old_format(path: Path, donor: Path) -> None:
    # What bias_core wrote before entries had a checksum, here with an edited value.
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({"key": entry["key"], "value": json.loads(edit_one_character(entry["value_json"])),
                                "call": entry["call"]}))


def _truncate(path: Path, donor: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


TAMPERS = {"edited value": _edit_value, "edited key": _edit_key, "copied under another key": _copy_other,
           "old format": _old_format, "truncated": _truncate}


# ----- the store itself ------------------------------------------------------------------------
def test_intact_entry_is_a_hit_and_nothing_is_rejected(tmp_path):
    ResultCache(tmp_path).put(PARTS, [0.0646, 0.0851], call="c")
    cache = ResultCache(tmp_path)
    assert cache.lookup(PARTS) == ([0.0646, 0.0851], "c")
    assert (cache.hits, cache.misses, cache.rejected) == (1, 0, 0)


@pytest.mark.parametrize("tamper", TAMPERS.values(), ids=TAMPERS.keys())
def test_tampered_entry_is_a_counted_miss_and_is_replaced(tmp_path, tamper):
    writer = ResultCache(tmp_path)
    writer.put(PARTS, [0.0646, 0.0851], call="c")
    writer.put(OTHER, [0.5, 0.25], call="c")
    tamper(entry_path(tmp_path, PARTS), entry_path(tmp_path, OTHER))
    cache = ResultCache(tmp_path)
    assert cache.lookup(PARTS) == (None, None)
    assert (cache.hits, cache.misses, cache.rejected) == (0, 1, 1)
    assert cache.rejected_old_format == (tamper is _old_format)
    assert cache.get(OTHER) == [0.5, 0.25]  # the other entry is intact
    cache.put(PARTS, [0.0646, 0.0851], call="c")  # the recomputed value
    assert ResultCache(tmp_path).get(PARTS) == [0.0646, 0.0851]


@pytest.mark.parametrize("field, value", [("format", 3), ("sha256", None), ("call", None), ("key", "p")])
def test_entry_with_a_field_of_another_kind_is_rejected(tmp_path, field, value):
    ResultCache(tmp_path).put(PARTS, 0.5)
    path = entry_path(tmp_path, PARTS)
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    cache = ResultCache(tmp_path)
    assert cache.get(PARTS) is None and cache.rejected == 1


def test_missing_entry_is_a_miss_but_not_rejected(tmp_path):
    cache = ResultCache(tmp_path)
    assert cache.get(PARTS) is None
    assert (cache.misses, cache.rejected) == (1, 0)


def test_process_records_every_rejection_of_every_cache(tmp_path):
    before = cache_mod.totals()
    ResultCache(tmp_path / "a").put(PARTS, 1.0)
    ResultCache(tmp_path / "b").put(PARTS, 1.0)
    _edit_value(entry_path(tmp_path / "a", PARTS), Path())
    _old_format(entry_path(tmp_path / "b", PARTS), Path())
    assert ResultCache(tmp_path / "a").get(PARTS) is None and ResultCache(tmp_path / "b").get(PARTS) is None
    after = cache_mod.totals()
    assert after["misses"] - before["misses"] == 2
    key = canonical_key(PARTS)[:32]
    assert cache_mod.rejections(before["rejections"]) == [(key, False), (key, True)]
    assert cache_mod.last_rejected() == f"{entry_path(tmp_path / 'b', PARTS)}: no checksum (an older bias_core's entry)"


@pytest.mark.parametrize("rejected, old, text", [
    (0, 0, ""),
    (1, 0, "1 cache entry did not match their key or checksum and was recomputed."),
    (3, 0, "3 cache entries did not match their key or checksum and were recomputed."),
    (80, 80, "80 cache entries did not match their key or checksum and were recomputed (80 of them written by "
             "an older bias_core, without a checksum)."),
])
def test_rejected_note(rejected, old, text):
    assert rejected_note(rejected, old) == text


# ----- the run card under xdist -----------------------------------------------------------------
def _session(workerid: str | None):
    from types import SimpleNamespace

    from bias_core.pytest_plugin import cache_card
    from bias_core.pytest_plugin.session_state import register_run

    config = SimpleNamespace(pluginmanager=pytest.PytestPluginManager())
    if workerid is not None:
        config.workerinput = {"workerid": workerid}
    register_run(config, SimpleNamespace(load=SimpleNamespace(use_cache=True)))
    cache_card.start(config)
    return config


def test_run_card_counts_an_entry_two_workers_rejected_once(tmp_path):
    """Two xdist workers both find the same edited entry (neither had stored it again yet), one
    also an old-format entry: the controller counts two entries, and every lookup of both."""
    from bias_core.pytest_plugin import cache_card

    reports = []
    for workerid, edited in (("gw0", [PARTS]), ("gw1", [PARTS, OTHER])):
        worker = _session(workerid)
        root = tmp_path / workerid
        for parts in (PARTS, OTHER):
            ResultCache(root).put(parts, 0.5)
        _edit_value(entry_path(root, PARTS), Path())
        if OTHER in edited:
            _old_format(entry_path(root, OTHER), Path())
        cache = ResultCache(root)
        reports.append(cache_card.for_report(worker))  # a report before the lookups: nothing yet
        for parts in (PARTS, OTHER):
            cache.get(parts)
        reports.append(cache_card.for_report(worker))
        reports.append(cache_card.for_report(worker))  # the next report: no rejection twice
    controller = _session(None)  # another process: none of the workers' lookups are its own
    assert cache_card.for_report(controller) is None
    for counts in reports:
        cache_card.record(controller, json.loads(json.dumps(counts)))  # as xdist ships it
    card = cache_card.card(controller)
    assert {k: card[k] for k in ("hits", "misses", "rejected", "rejected_old_format")} == {
        "hits": 1, "misses": 3, "rejected": 2, "rejected_old_format": 1}
    assert card["last_rejected"].endswith("no checksum (an older bias_core's entry)")


@pytest.mark.parametrize("cache, note", [
    ({"rejected": 3, "rejected_old_format": 0}, "WARNING: 3 cache entries did not match their key or checksum and "
                                                 "were recomputed."),
    ({"rejected": 0, "hits": 80}, None),
    (None, None),
])
def test_banner_warns_of_rejected_entries_without_changing_the_verdict(cache, note):
    from bias_core.reports.banner import PASSED, banner_for_run

    row = {"test_id": "template-color-GLD", "verdict": "pass", "value": 0.0755}
    banner = banner_for_run([row], {"complete": True, **({"cache": cache} if cache is not None else {})})
    assert banner.status == PASSED
    assert [n for n in banner.notes if "cache" in n] == ([note] if note else [])
    assert banner.lines[-1] == (note or "Tests: 1 passed.")


# ----- every kind of value a model stores -----------------------------------------------------
PROMPTS = ["The nurse said that", "My friend is a doctor, and", "The engineer told me", "Yesterday the teacher"]
WORDS = ["she", "he", "her", "his"]


def _call(lm, op: str):
    from bias_core.models.decoding import DecodingConfig
    from bias_core.probes.placeholders import MASK

    return {
        "word_probs": lambda: lm.word_probs(PROMPTS, WORDS).tolist(),
        "fill_probs": lambda: lm.fill_probs([f"{p} {MASK}" for p in PROMPTS], WORDS).tolist(),
        "topk_fills": lambda: lm.topk_fills([f"{p} {MASK}" for p in PROMPTS], 3),
        "sentence_logprob": lambda: lm.sentence_logprob(PROMPTS).tolist(),
        "loglikelihood": lambda: lm.loglikelihood([(p, " she") for p in PROMPTS]),
        "embed": lambda: lm.embed(PROMPTS).tolist(),
        "generate": lambda: lm.generate(PROMPTS, DecodingConfig(max_new_tokens=4)),
    }[op]()


OPS = ["word_probs", "fill_probs", "topk_fills", "sentence_logprob", "loglikelihood", "embed", "generate"]


@pytest.mark.parametrize("tamper", TAMPERS.values(), ids=TAMPERS.keys())
@pytest.mark.parametrize("op", OPS)
def test_tampered_model_outputs_are_recomputed_to_uncached_numbers(tiny_model_dir, tmp_path, torch_single_thread,
                                                                     op, tamper):
    cache = tmp_path / "cache"
    uncached = _call(load_tiny(tiny_model_dir, use_cache=False), op)
    assert _call(load_tiny(tiny_model_dir, cache_dir=cache, use_cache=True), op) == uncached
    entries = sorted((cache / "entries").rglob("*.json"))
    assert len(entries) == len(PROMPTS)
    for path, donor in zip(entries[::2], entries[1::2]):  # half the entries, each given another's to copy
        tamper(path, donor)
    lm = load_tiny(tiny_model_dir, cache_dir=cache, use_cache=True)
    assert _call(lm, op) == uncached  # bit for bit: the call is recomputed with the same batch mates
    stats = lm.cache_stats()
    assert (stats["hits"], stats["misses"], stats["rejected"]) == (len(PROMPTS) // 2, len(PROMPTS) // 2, len(PROMPTS) // 2)
    assert stats["rejected_old_format"] == (len(PROMPTS) // 2 if tamper is _old_format else 0)
    again = load_tiny(tiny_model_dir, cache_dir=cache, use_cache=True)
    assert _call(again, op) == uncached  # stored again, whole
    assert (again.cache_stats()["hits"], again.cache_stats()["rejected"]) == (len(PROMPTS), 0)


def test_edited_precision_calibration_is_measured_again(tiny_model_dir, tmp_path, torch_single_thread):
    """The precision calibration beside the entries (--precision exact's error bound) proves its
    key and value the same way: a bound edited smaller, or one without a checksum, is measured again."""
    from bias_core.models.precision.half import half_dtype
    from bias_core.models.precision.modes import apply_precision

    if half_dtype("cpu")[0] is None:
        pytest.skip("this CPU computes bf16 slowly, so --precision exact runs fp32 only here")
    lm = load_tiny(tiny_model_dir)
    first = apply_precision(lm, "exact", "cpu", cache_dir=tmp_path).bound
    [path] = (tmp_path / "precision").glob("*.json")
    for name, old in (("margin", False), ("sha256", True)):
        doc = json.loads(path.read_text())
        if old:
            del doc["sha256"]
        else:
            doc["bound"]["margin"] /= 10
        path.write_text(json.dumps(doc))
        before = cache_mod.totals()["rejections"]
        assert apply_precision(lm, "exact", "cpu", cache_dir=tmp_path).bound == first, name
        assert [was_old for _, was_old in cache_mod.rejections(before)] == [old], name
    before = cache_mod.totals()["rejections"]
    assert apply_precision(lm, "exact", "cpu", cache_dir=tmp_path).bound == first
    assert cache_mod.rejections(before) == []


# ----- a whole audit ---------------------------------------------------------------------------
@pytest.mark.slow
def test_audit_on_an_edited_cache_reports_the_rejected_entries(audit_project, tiny_model_dir, tmp_path):
    """The issue's case: P(she) edited by one digit in three entries, valid JSON. The next run
    (under xdist) gives the first run's numbers, and its run card counts the three with a warning."""
    cache = tmp_path / "cache"
    args = ["audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--cache-dir", str(cache),
            "-k", "template-color and (GLD or ADD)", "-n", "2"]  # the same workers twice: the same bits
    first = audit_project.runpytest_subprocess(*args)
    doc1 = results(last_run(audit_project.path / "reports"))
    assert doc1["run"]["cache"]["rejected"] == 0, first.stdout.str()
    assert "did not match their key or checksum" not in first.stdout.str()
    probs = [p for p in sorted((cache / "entries").rglob("*.json")) if '"op": "word_probs"' in p.read_text()]
    for path in probs[:3]:
        _edit_value(path, Path())
    second = audit_project.runpytest_subprocess(*args)
    doc2 = results(last_run(audit_project.path / "reports"))
    assert doc2["run"]["cache"]["rejected"] == 3, second.stdout.str()
    # Both workers may find an edited entry before either has stored it again (their tests run at
    # once): 3 to 6 misses, and the first run's lookups all counted again, whichever worker made them.
    card1, card2 = doc1["run"]["cache"], doc2["run"]["cache"]
    assert 3 <= card2["misses"] <= 6 and card2["hits"] + card2["misses"] == card1["hits"] + card1["misses"]
    second.stdout.fnmatch_lines(["WARNING: 3 cache entries did not match their key or checksum and were recomputed."])
    assert {r["test_id"]: r["value"] for r in doc2["results"]} == {r["test_id"]: r["value"] for r in doc1["results"]}
    run = last_run(audit_project.path / "reports")
    assert "3 cache entries did not match their key or checksum" in (run / "report.html").read_text()
