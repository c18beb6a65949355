"""The second worked-example metric of docs/extending/metric.md: ``gender_lean``, GLD with its
sign (Dong et al. 2024's next-word probabilities of the gender words)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core import catalogue
from bias_core.metrics.disclosure import gender_lean, gld

from tiny_model import audit_rows

pytest_plugins = ["pytester"]


def test_gender_lean_by_hand():
    # two word pairs per prompt: (0.3 + 0.1 - 0.1) / 0.5 = 0.6 towards female; (0.05 - 0.15) / 0.2
    # = -0.5 towards male; no gender mass at all: 0, flagged. Mean (0.6 - 0.5 + 0) / 3.
    pf = [[0.3, 0.1], [0.0, 0.05], [0.0, 0.0]]
    pm = [[0.1, 0.0], [0.15, 0.0], [0.0, 0.0]]
    r = gender_lean(pf, pm, ids=["a", "b", "c"])
    assert r.metric == "gender_lean" and r.n == 3
    assert r.value == pytest.approx(0.1 / 3)
    assert [d["score"] for d in r.details] == pytest.approx([0.6, -0.5, 0.0])
    assert [d["no_gender_mass"] for d in r.details] == [False, False, True]
    # the mean leans female, so the prompts pulling it that way rank first, by mass difference
    assert [d["rank"] for d in r.details] == pytest.approx([0.3, -0.1, 0.0])
    assert -1.0 <= r.ci_low <= r.value <= r.ci_high <= 1.0
    # GLD on the same numbers cannot tell the leans apart: (0.6 + 0.5 + 0) / 3
    assert gld(pf, pm).value == pytest.approx(1.1 / 3)


def test_gender_lean_rejects_what_gld_rejects():
    with pytest.raises(ValueError, match="gender_lean: p_female has values outside"):
        gender_lean([[1.5]], [[0.1]])
    with pytest.raises(ValueError, match="gender_lean: p_female has shape"):
        gender_lean([[0.1, 0.2]], [[0.1]])


probabilities = st.integers(1, 12).flatmap(lambda n: st.integers(1, 4).flatmap(lambda k: st.tuples(
    *(st.lists(st.lists(st.floats(0.0, 0.25, allow_nan=False), min_size=k, max_size=k), min_size=n, max_size=n)
      for _ in range(2)))))


@settings(max_examples=60, deadline=None)
@given(probabilities)
def test_swapping_the_genders_negates_the_lean_and_mirrors_its_interval(pair):
    pf, pm = pair
    here, swapped = gender_lean(pf, pm, seed=3), gender_lean(pm, pf, seed=3)
    assert [d["score"] for d in swapped.details] == pytest.approx([-d["score"] for d in here.details])
    assert swapped.value == pytest.approx(-here.value, abs=1e-12)
    assert (swapped.ci_low, swapped.ci_high) == pytest.approx((-here.ci_high, -here.ci_low), abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(probabilities, st.floats(0.01, 1.0))
def test_the_lean_is_gld_with_its_sign_and_ignores_how_much_mass_there_is(pair, c):
    pf, pm = pair
    lean, difference = gender_lean(pf, pm), gld(pf, pm)
    items = np.array([d["score"] for d in lean.details])
    assert np.all(np.abs(items) <= 1.0)
    assert np.abs(items) == pytest.approx([d["score"] for d in difference.details])  # per prompt, |lean| is GLD
    assert abs(lean.value) <= difference.value + 1e-12  # |mean| <= mean of |.|
    scaled = gender_lean(np.asarray(pf) * c, np.asarray(pm) * c)
    assert [d["score"] for d in scaled.details] == pytest.approx(list(items), abs=1e-9)


def test_the_catalogue_gates_it_two_sided_from_the_pass_gld_and_add_use():
    spec, gld_spec = catalogue.spec("gender_lean"), catalogue.spec("GLD")
    assert spec.gate_direction == "max" and spec.ideal == 0.0
    assert spec.runner == gld_spec.runner and spec.probes == gld_spec.probes


def test_tiny_model_audit_gates_gender_lean(pytester, monkeypatch, tiny_model_dir, tmp_path):
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")
    rows, output = audit_rows(pytester, tiny_model_dir, tmp_path / "c", "template-hobby and (GLD or gender_lean)")
    lean, gld_row = rows["template-hobby-gender_lean"], rows["template-hobby-GLD"]
    assert lean["n"] == gld_row["n"] == 40, output
    assert abs(lean["value"]) <= gld_row["value"] + 1e-12
    # the gate is thresholds.toml's two-sided one around 0
    expected = ("fail" if lean["ci_low"] > 0.3 or lean["ci_high"] < -0.3
                else "pass" if -0.3 <= lean["ci_low"] and lean["ci_high"] <= 0.3 else "inconclusive")
    assert lean["verdict"] == expected
