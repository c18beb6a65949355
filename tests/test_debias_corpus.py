"""The CDS/ER/SentenceDebias corpus: GAP files in their published format, the BOLD stand-in,
and a clear skip when neither is there."""

from __future__ import annotations

import pytest

from bias_core.errors import DataSourceMissing
from bias_core.mitigation.training import corpus as corpus_mod
from bias_core.mitigation.training.corpus import load_debias_corpus, read_gap_tsv, split_sentences

GAP_HEADER = "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL"


def gap_file(rows: list[tuple[str, str]]) -> str:
    lines = [GAP_HEADER]
    for gid, text in rows:
        lines.append(f"{gid}\t{text}\ther\t10\tMary\t0\tTRUE\tAnn\t20\tFALSE\thttp://en.wikipedia.org/wiki/X")
    return "\n".join(lines) + "\n"


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")


def test_split_sentences():
    text = 'Mr. J. K. Smith was born in St. Louis. He moved to the U.S. in 1990. "She left." Then he died! Ok.'
    assert split_sentences(text) == [
        "Mr. J. K. Smith was born in St. Louis.",
        "He moved to the U.S. in 1990.",
        '"She left."',
        "Then he died!",
        "Ok.",
    ]


def test_read_gap_tsv_splits_the_text_column():
    text = gap_file([("development-1", "Mary Smith is a singer. Her first album sold well."),
                     ("development-2", "Ann said \"yes\" to him.")])
    assert read_gap_tsv(text) == ["Mary Smith is a singer.", "Her first album sold well.", 'Ann said "yes" to him.']


def test_read_gap_tsv_refuses_another_file():
    with pytest.raises(ValueError, match="not a GAP file"):
        read_gap_tsv("a\tb\n1\t2\n")


@pytest.mark.parametrize("folder", ["", "gap-coreference", "gap"])
def test_gap_from_data_dir(tmp_path, offline, folder):
    where = tmp_path / folder
    where.mkdir(exist_ok=True)
    for i, name in enumerate(corpus_mod.GAP_FILES):
        (where / name).write_text(gap_file([(f"{name}-1", f"He wrote book {i}. She read it.")]), encoding="utf-8")
    found = load_debias_corpus(tmp_path)
    assert found.name == "GAP" and not found.stand_in
    assert found.sentences == ("He wrote book 0.", "She read it.", "He wrote book 1.", "He wrote book 2.")
    assert found.provenance()["sentences"] == 4 and len(found.sha256) == 64


def test_gap_wins_over_the_stand_in(tmp_path, offline):
    _bold(tmp_path)
    for name in corpus_mod.GAP_FILES:
        (tmp_path / name).write_text(gap_file([("x", "He sang.")]), encoding="utf-8")
    assert load_debias_corpus(tmp_path).name == "GAP"


def test_gap_online(monkeypatch):
    monkeypatch.delenv("BIAS_CORE_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr("bias_core.probes.sources.reachable", lambda url: None)
    fetched = []
    monkeypatch.setattr("bias_core.probes.sources.fetch_text",
                        lambda url: fetched.append(url) or gap_file([("x", f"She won {len(fetched)}.")]))
    found = load_debias_corpus(None)
    assert found.name == "GAP" and found.sentences == ("She won 1.", "She won 2.", "She won 3.")
    assert [u.rsplit("/", 1)[1] for u in fetched] == list(corpus_mod.GAP_FILES)


def _bold(root):
    folder = root / "GenderCARE-ccs24"
    folder.mkdir()
    (folder / "bold_gender_actors_prompts.csv").write_text(
        "Type,Name,Prompt\nAmerican_actors,Jo_X,\"Please complete the following sentence: Jo X is an actor, star \"\n",
        encoding="utf-8")
    (folder / "bold_gender_actresses_prompts.csv").write_text(
        "Type,Name,Prompt\nAmerican_actresses,Ann_Y,Please complete the following sentence: Ann Y is an actress and\n",
        encoding="utf-8")


def test_stand_in_is_named_as_such(tmp_path, offline):
    from bias_core.probes.heldout import load_heldout_text

    _bold(tmp_path)
    found = load_debias_corpus(tmp_path)
    from bias_core.mitigation.methods.variants import corpus_label

    assert found.stand_in and found.provenance()["stand_in"] is True
    label = corpus_label(found)  # what every report prints: flagged once, not twice
    assert label.startswith("STAND-IN for the paper's GAP corpus") and label.lower().count("stand-in") == 1
    assert found.sentences[:2] == ("Jo X is an actor, star", "Ann Y is an actress and")
    assert any(s.startswith("My friend ") for s in found.sentences)
    # the perplexity guard's held-out text stays held out
    assert not set(load_heldout_text().prompts) & set(found.sentences)


def test_nothing_there_is_a_skip_with_the_reason(tmp_path, offline):
    with pytest.raises(DataSourceMissing, match="gap-development.tsv.*bold_gender") as info:
        load_debias_corpus(tmp_path)
    assert "--data-dir" in str(info.value)
    with pytest.raises(DataSourceMissing, match="no --data-dir given"):
        load_debias_corpus(None)
