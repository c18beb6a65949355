"""Tests for bias_core.gating.thresholds: loading thresholds.toml, precedence, verdicts, error messages."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bias_core.errors import AuditUsageError, ThresholdsError
from bias_core.gating.thresholds import FAIL, INCONCLUSIVE, PASS, Gate, Thresholds, load_thresholds, verdict

from paths import REPO

DISCLOSURE_METRICS = {"GAS", "GLD", "ADD"}
DISCLOSURE_PROBES = {
    "template-occupation",
    "template-personality",
    "template-hobby",
    "template-color",
    "natural-stsb",
    "natural-snli",
    "natural-default",
    "llm-generated-1",
    "llm-generated-2",
}

# A valid base: every metric has a default. Error tests append to it.
BASE = """
[metrics.GAS]
max = 0.35
[metrics.GLD]
max = 0.30
note = "default GLD"
[metrics.ADD]
max = 0.10
"""


def write(tmp_path: Path, text: str, name: str = "thresholds.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(path: Path) -> Thresholds:
    return load_thresholds(path, DISCLOSURE_METRICS, DISCLOSURE_PROBES)


def load_error(tmp_path: Path, text: str) -> tuple[Path, str]:
    path = write(tmp_path, text)
    with pytest.raises(ThresholdsError) as info:
        load(path)
    return path, str(info.value)


# --------------------------------------------------------------------------------------------
# Precedence
# --------------------------------------------------------------------------------------------

ALL_LEVELS = (
    BASE
    + """
[probes."template-occupation".GLD]
max = 0.5
note = "probe level"
[probes."template-hobby".GLD]
max = 0.45
[models."llama2-7b".GLD]
max = 0.4
[models."llama2-7b".probes."template-occupation".GLD]
max = 0.6
"""
)


@pytest.mark.parametrize(
    ("probe", "model", "limit", "source"),
    [
        (
            "template-occupation",
            "llama2-7b",
            0.6,
            'models."llama2-7b".probes."template-occupation".GLD',
        ),
        # a probe override exists for template-hobby, but the model override wins over it
        ("template-hobby", "llama2-7b", 0.4, 'models."llama2-7b".GLD'),
        ("template-color", "llama2-7b", 0.4, 'models."llama2-7b".GLD'),
        (None, "llama2-7b", 0.4, 'models."llama2-7b".GLD'),
        ("template-occupation", "gpt2", 0.5, 'probes."template-occupation".GLD'),
        ("template-occupation", None, 0.5, 'probes."template-occupation".GLD'),
        ("template-hobby", "gpt2", 0.45, 'probes."template-hobby".GLD'),
        ("template-color", "gpt2", 0.30, "metrics.GLD"),
        (None, None, 0.30, "metrics.GLD"),
    ],
)
def test_precedence_model_probe_over_model_over_probe_over_default(
    tmp_path, probe, model, limit, source
):
    thresholds = load(write(tmp_path, ALL_LEVELS))
    gate = thresholds.lookup("GLD", probe, model)
    assert gate == Gate("GLD", limit, "max", source, gate.note)
    assert gate.limit == pytest.approx(limit)
    assert gate.source == source


def test_overrides_for_one_metric_leave_other_metrics_at_their_default(tmp_path):
    thresholds = load(write(tmp_path, ALL_LEVELS))
    gate = thresholds.lookup("GAS", "template-occupation", "llama2-7b")
    assert (gate.limit, gate.source) == (0.35, "metrics.GAS")


def test_note_is_kept_and_defaults_to_empty(tmp_path):
    thresholds = load(write(tmp_path, ALL_LEVELS))
    assert thresholds.lookup("GLD").note == "default GLD"
    assert thresholds.lookup("GLD", "template-occupation").note == "probe level"
    assert thresholds.lookup("GAS").note == ""


def test_min_gate_and_integer_limit(tmp_path):
    path = write(tmp_path, "[metrics.DA]\nmin = 1\n")
    thresholds = load_thresholds(path, {"DA"}, set())
    gate = thresholds.lookup("DA")
    assert gate.direction == "min"
    assert isinstance(gate.limit, float) and gate.limit == 1.0


def test_lookup_of_unknown_metric_names_the_file(tmp_path):
    path = write(tmp_path, BASE)
    with pytest.raises(ThresholdsError, match="no gate for metric 'GLDX'") as info:
        load(path).lookup("GLDX")
    assert str(path) in str(info.value)
    assert "did you mean 'GLD'" in str(info.value)


def test_gate_is_frozen(tmp_path):
    gate = load(write(tmp_path, BASE)).lookup("GLD")
    with pytest.raises(AttributeError):
        gate.limit = 1.0  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# Verdicts and describe()
# --------------------------------------------------------------------------------------------

MAX_GATE = Gate("GLD", 0.30, "max", "metrics.GLD")
MIN_GATE = Gate("DA", 0.70, "min", "metrics.DA")


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (0.10, 0.20, PASS),  # whole CI below
        (0.10, 0.30, PASS),  # CI touches the limit from below: still within
        (0.30, 0.30, PASS),  # degenerate CI exactly on the limit
        (0.30, 0.40, INCONCLUSIVE),  # CI starts on the limit and goes above
        (0.20, 0.40, INCONCLUSIVE),  # straddles
        (0.3000001, 0.40, FAIL),  # whole CI just above
        (0.50, 0.60, FAIL),
    ],
)
def test_verdict_max_gate(lo, hi, expected):
    assert verdict(lo, hi, MAX_GATE) == expected
    assert MAX_GATE.verdict(lo, hi) == expected


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (0.80, 0.90, PASS),  # whole CI above
        (0.70, 0.90, PASS),  # CI touches the limit from above: still within
        (0.70, 0.70, PASS),
        (0.60, 0.70, INCONCLUSIVE),  # CI ends on the limit, goes below
        (0.60, 0.80, INCONCLUSIVE),
        (0.60, 0.6999999, FAIL),  # whole CI just below
        (0.10, 0.20, FAIL),
    ],
)
def test_verdict_min_gate(lo, hi, expected):
    assert verdict(lo, hi, MIN_GATE) == expected


def test_verdict_nan_is_inconclusive_and_reversed_ci_is_a_bug():
    assert verdict(math.nan, 0.1, MAX_GATE) == INCONCLUSIVE
    assert verdict(0.1, math.nan, MIN_GATE) == INCONCLUSIVE
    with pytest.raises(ValueError, match="reversed"):
        verdict(0.5, 0.1, MAX_GATE)


def test_describe():
    assert MAX_GATE.describe() == "GLD <= 0.30 (metrics.GLD)"
    assert MIN_GATE.describe() == "DA >= 0.70 (metrics.DA)"
    assert Gate("ADD", 0.005, "max", "metrics.ADD").describe() == "ADD <= 0.005 (metrics.ADD)"
    assert Gate("GAS", 1, "max", "x").describe() == "GAS <= 1.00 (x)"


def test_gate_rejects_bad_direction_and_limit():
    with pytest.raises(ValueError):
        Gate("GLD", 0.3, "below", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Gate("GLD", math.inf, "max", "x")


# --------------------------------------------------------------------------------------------
# Error cases: each message names the file, the key path and a fix
# --------------------------------------------------------------------------------------------


def test_thresholds_error_is_a_usage_error():
    assert issubclass(ThresholdsError, AuditUsageError)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ThresholdsError) as info:
        load(path)
    msg = str(info.value)
    assert str(path) in msg
    assert "not found" in msg
    assert "--thresholds PATH" in msg


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ThresholdsError, match="directory") as info:
        load(tmp_path)
    assert "--thresholds PATH" in str(info.value)


def test_toml_syntax_error_reports_line_and_column(tmp_path):
    path, msg = load_error(tmp_path, BASE + "[probes.\nmax = \n")
    assert str(path) in msg
    assert "TOML syntax error" in msg
    assert "line 9, column 9" in msg


def test_non_utf8_file(tmp_path):
    path = tmp_path / "thresholds.toml"
    path.write_bytes(BASE.encode() + b'# caf\xe9\n')
    with pytest.raises(ThresholdsError, match="UTF-8") as info:
        load(path)
    assert str(path) in str(info.value)


# (extra TOML appended to BASE, key path expected in the message, fragments of the hint)
ERROR_CASES = {
    "unknown top-level table": (
        '[metric.GLD]\nmax = 0.3\n',
        "metric:",
        [
            "unknown top-level table 'metric'",
            "did you mean 'metrics'",
            "[metrics], [probes], [models] and [regression]",
        ],
    ),
    "unknown top-level key": (
        "GLD = 0.3\n",
        "GLD:",
        ["unknown top-level key 'GLD'", "[metrics], [probes], [models] and [regression]"],
    ),
    "unknown metric under probes": (
        '[probes."template-occupation".GLDX]\nmax = 0.5\n',
        'probes."template-occupation".GLDX',
        ["unknown metric 'GLDX'", "did you mean 'GLD'", "known metrics: ADD, GAS, GLD"],
    ),
    "unknown metric under metrics": (
        "[metrics.gld]\nmax = 0.5\n",
        "metrics.gld",
        ["unknown metric 'gld'", "did you mean 'GLD'", "known metrics: ADD, GAS, GLD"],
    ),
    "unknown metric under models": (
        '[models."llama2-7b".GSA]\nmax = 0.5\n',
        'models."llama2-7b".GSA',
        ["unknown metric 'GSA'", "did you mean 'GAS'", "known metrics: ADD, GAS, GLD"],
    ),
    "unknown metric under model+probe": (
        '[models."llama2-7b".probes."template-hobby".XYZ]\nmax = 0.5\n',
        'models."llama2-7b".probes."template-hobby".XYZ',
        ["unknown metric 'XYZ'", "known metrics: ADD, GAS, GLD"],
    ),
    "unknown probe": (
        '[probes."template-ocupation".GLD]\nmax = 0.5\n',
        'probes."template-ocupation"',
        [
            "unknown probe 'template-ocupation'",
            "did you mean 'template-occupation'",
            "known probes:",
            "natural-snli",
        ],
    ),
    "unknown probe under model": (
        '[models."llama2-7b".probes."natural-sts".GLD]\nmax = 0.5\n',
        'models."llama2-7b".probes."natural-sts"',
        ["unknown probe 'natural-sts'", "did you mean 'natural-stsb'", "known probes:"],
    ),
    "string limit": (
        '[probes."template-hobby".GLD]\nmax = "0.5"\n',
        'probes."template-hobby".GLD.max',
        ["must be a number, got string", "remove the quotes: max = 0.5"],
    ),
    "non-numeric string limit": (
        '[probes."template-hobby".GLD]\nmax = "high"\n',
        'probes."template-hobby".GLD.max',
        ["must be a number, got string", "write max = 0.3"],
    ),
    "bool limit": (
        '[probes."template-hobby".GLD]\nmax = true\n',
        'probes."template-hobby".GLD.max',
        ["must be a number, got boolean true", "write max = 0.3"],
    ),
    "array limit": (
        '[probes."template-hobby".GLD]\nmin = [0.1]\n',
        'probes."template-hobby".GLD.min',
        ["must be a number, got array", "write min = 0.3"],
    ),
    "gate not a table": (
        '[probes."template-hobby"]\nGLD = 0.5\n',
        'probes."template-hobby".GLD',
        [
            "a gate must be a table, got number",
            'write it as [probes."template-hobby".GLD] with max =',
        ],
    ),
    "probes not a table": (
        'probes = 3\n',
        "probes",
        ["must be a table, got number", "write it as a table"],
    ),
    "both max and min": (
        '[models."llama2-7b".GLD]\nmax = 0.5\nmin = 0.1\n',
        'models."llama2-7b".GLD',
        ["both max and min", "keep exactly one"],
    ),
    "neither max nor min": (
        '[models."llama2-7b".GLD]\nnote = "forgot the limit"\n',
        'models."llama2-7b".GLD',
        ["neither max nor min", "add one, e.g."],
    ),
    "nan limit": (
        '[probes."template-color".ADD]\nmax = nan\n',
        'probes."template-color".ADD.max',
        ["must be a finite number, got nan", "use a finite limit"],
    ),
    "inf limit": (
        '[probes."template-color".ADD]\nmin = -inf\n',
        'probes."template-color".ADD.min',
        ["must be a finite number, got -inf", "use a finite limit"],
    ),
    "unknown key in gate": (
        '[probes."template-color".ADD]\nmax = 0.2\nmaxx = 0.3\n',
        'probes."template-color".ADD.maxx',
        ["unknown key 'maxx'", "did you mean 'max'", "only the keys: max, min, ideal, note"],
    ),
    "note not a string": (
        '[probes."template-color".ADD]\nmax = 0.2\nnote = 3\n',
        'probes."template-color".ADD.note',
        ["note must be a string, got number 3", "quote it"],
    ),
    "override flips direction": (
        '[probes."template-color".ADD]\nmin = 0.2\n',
        'probes."template-color".ADD',
        ["contradicts the default gate metrics.ADD", "use max = ... here too"],
    ),
}


PREPEND = {"unknown top-level key", "probes not a table"}


@pytest.mark.parametrize("case", list(ERROR_CASES), ids=list(ERROR_CASES))
def test_error_message_names_file_key_and_fix(tmp_path, case):
    extra, key, fragments = ERROR_CASES[case]
    # top-level keys must come before the first table header, else they belong to that table
    text = extra + BASE if case in PREPEND else BASE + extra
    path, msg = load_error(tmp_path, text)
    assert str(path) in msg
    assert key in msg
    assert "Fix:" in msg
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"


def test_metric_without_default_is_an_error_naming_the_metric(tmp_path):
    text = "[metrics.GAS]\nmax = 0.35\n[metrics.GLD]\nmax = 0.3\n"
    text += '[probes."template-hobby".ADD]\nmax = 0.2\n'  # an override is not a default
    path, msg = load_error(tmp_path, text)
    assert str(path) in msg
    assert "metrics.ADD" in msg
    assert "metric 'ADD' has no default gate" in msg
    assert "add [metrics.ADD] with max = ..." in msg


def test_empty_file_lists_every_missing_default(tmp_path):
    path = write(tmp_path, "")
    with pytest.raises(ThresholdsError) as info:
        load(path)
    msg = str(info.value)
    assert "3 problems" in msg
    for metric in ("ADD", "GAS", "GLD"):
        assert f"metric '{metric}' has no default gate" in msg
    assert len(info.value.problems) == 3
    assert all(p.startswith(f"{path}: metrics.") for p in info.value.problems)


def test_all_problems_are_reported_together(tmp_path):
    text = BASE + '[probes."template-hobby".GLDX]\nmax = 0.5\n[metrics.GAS2]\nmax = true\n'
    path, msg = load_error(tmp_path, text)
    assert "2 problems" in msg
    assert 'probes."template-hobby".GLDX' in msg
    assert "metrics.GAS2" in msg
    assert msg.count(str(path)) == 3  # header + one per problem


def test_model_names_are_free_form(tmp_path):
    thresholds = load(write(tmp_path, BASE + '[models."my org/model v2".GAS]\nmax = 0.5\n'))
    gate = thresholds.lookup("GAS", model="my org/model v2")
    assert gate.source == 'models."my org/model v2".GAS'


# --------------------------------------------------------------------------------------------
# The repository's own thresholds.toml
# --------------------------------------------------------------------------------------------


def test_repo_thresholds_load_with_the_catalogue_names():
    from bias_core.suites import known_metrics, known_probes

    path = REPO / "thresholds.toml"
    thresholds = load_thresholds(path, known_metrics(), known_probes())
    assert set(thresholds.metrics) == known_metrics()
    for metric, ideal in {"stereo_score": 50, "lm_score": 100, "crows_stereo": 50, "GBM": 0}.items():
        assert thresholds.lookup(metric).ideal == ideal
    assert thresholds.lookup("DA_score").direction == "min"
    expected = {"GAS": 0.35, "GLD": 0.30, "ADD": 0.10}
    for metric, limit in expected.items():
        for probe in sorted(DISCLOSURE_PROBES):
            gate = thresholds.lookup(metric, probe, "smollm2-135m")
            assert gate.direction == "max"
            assert gate.source == f"metrics.{metric}"
            assert gate.limit == pytest.approx(limit)
            assert "calibrate" in gate.note
    assert thresholds.lookup("GLD").describe() == "GLD <= 0.30 (metrics.GLD)"


def test_repo_thresholds_commented_examples_are_valid(tmp_path):
    """Uncommenting the documented override examples must give a valid file."""
    text = (REPO / "thresholds.toml").read_text(encoding="utf-8")
    lines = []
    examples = False
    for line in text.splitlines():
        if line.startswith("# Overrides"):
            examples = True
        if examples and line.startswith(("# [", "# max", "# note")):
            line = line[2:]
        lines.append(line)
    from bias_core.suites import known_metrics, known_probes

    thresholds = load_thresholds(write(tmp_path, "\n".join(lines)), known_metrics(), known_probes())
    assert thresholds.probe_overrides, "expected an uncommented per-probe example"
    assert thresholds.model_overrides, "expected an uncommented per-model example"
    assert thresholds.model_probe_overrides, "expected an uncommented model+probe example"
    gate = thresholds.lookup("GLD", "template-occupation", "other-model")
    assert gate.source == 'probes."template-occupation".GLD'


# ----- two-sided gates (an ideal value, e.g. StereoSet's 50) ---------------------------------


def _ideal_file(tmp_path, extra=""):
    path = tmp_path / "thresholds.toml"
    path.write_text("[metrics.SS]\nideal = 50\nmax = 10\n" + extra)
    return path


def test_ideal_gate_is_a_band_around_the_ideal(tmp_path):
    g = load_thresholds(_ideal_file(tmp_path), {"SS"}, {"p"}).lookup("SS", "p")
    assert g.ideal == 50 and g.describe().startswith("|SS - 50.00| <= 10.00")
    assert g.verdict(45, 58) == "pass"      # all within [40, 60]
    assert g.verdict(61, 70) == "fail"      # all above 60
    assert g.verdict(20, 39.5) == "fail"    # all below 40
    assert g.verdict(35, 45) == "inconclusive"
    assert g.verdict(30, 70) == "inconclusive"  # straddles both edges
    assert g.verdict(40, 60) == "pass"      # touching the band counts as inside


def test_override_without_ideal_keeps_the_metrics_ideal(tmp_path):
    path = _ideal_file(tmp_path, '[probes."p".SS]\nmax = 2\n')
    g = load_thresholds(path, {"SS"}, {"p"}).lookup("SS", "p")
    assert (g.ideal, g.limit) == (50, 2)
    assert g.verdict(49, 53) == "inconclusive"


@pytest.mark.parametrize(("body", "needle"), [
    ("[metrics.SS]\nideal = 50\nmin = 10\n", "ideal needs max"),
    ('[metrics.SS]\nideal = "50"\nmax = 10\n', "SS.ideal: must be a finite number"),
])
def test_bad_ideal_is_named(tmp_path, body, needle):
    path = tmp_path / "t.toml"
    path.write_text(body)
    with pytest.raises(ThresholdsError, match=needle):
        load_thresholds(path, {"SS"}, {"p"})
