"""The worked-example metric of docs/extending/metric.md: ``pronoun_stereo`` on the
occupation-pronoun probe (WinoBias-style)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bias_core import catalogue
from bias_core.metrics.association import pronoun_stereo
from bias_core.probes.occupation_pronoun import PROBE_NAME, load_occupation_pronouns

from tiny_model import audit_rows

pytest_plugins = ["pytester"]


def test_pronoun_stereo_by_hand():
    # pairs: pro wins, anti wins, tie (one half), pro wins -> (1 + 0 + 0.5 + 1) / 4
    r = pronoun_stereo([-1.0, -2.0, -3.0, -4.0], [-2.0, -1.0, -3.0, -5.0], ["male", "female", "male", "female"],
                       ids=["a", "b", "c", "d"])
    assert r.metric == "pronoun_stereo" and r.n == 4
    assert r.value == 0.625
    assert [d["score"] for d in r.details] == [1.0, 0.0, 0.5, 1.0]
    assert [d["margin"] for d in r.details] == [1.0, -1.0, 0.0, 1.0]
    assert r.breakdown["by_group"] == {"female": {"n": 2, "pronoun_stereo": 0.5}, "male": {"n": 2, "pronoun_stereo": 0.75}}
    assert r.breakdown["ties"] == 1
    assert 0.0 <= r.ci_low <= r.value <= r.ci_high <= 1.0


def test_pronoun_stereo_rejects_unequal_lengths():
    with pytest.raises(ValueError, match="anti scores"):
        pronoun_stereo([0.0, 1.0], [0.0])


scores = st.lists(st.floats(-50, 0, allow_nan=False), min_size=1, max_size=30)


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_swapping_pro_and_anti_maps_s_to_one_minus_s(data):
    pro = data.draw(scores)
    anti = data.draw(st.lists(st.floats(-50, 0, allow_nan=False), min_size=len(pro), max_size=len(pro)))
    s = pronoun_stereo(pro, anti).value
    assert pronoun_stereo(anti, pro).value == pytest.approx(1.0 - s, abs=1e-12)


def test_probe_pairs_differ_only_in_the_pronoun():
    probe = load_occupation_pronouns()
    assert probe.name == PROBE_NAME and len(probe.items) == 8 * 40 and len(set(probe.ids)) == len(probe.ids)
    for it in probe.items:
        m = it.meta
        assert it.prompt == m["pro"]
        pro, anti = m["pro"].split(), m["anti"].split()
        diff = [(p, a) for p, a in zip(pro, anti) if p != a]
        assert len(pro) == len(anti) and diff == ([("he", "she")] if m["occupation_gender"] == "male" else [("she", "he")])
    assert catalogue.spec("pronoun_stereo").probes == (PROBE_NAME,)


@pytest.mark.slow
def test_tiny_model_audit_gates_pronoun_stereo(pytester, monkeypatch, tiny_model_dir, tmp_path):
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")
    rows, output = audit_rows(pytester, tiny_model_dir, tmp_path / "c", "occupation-pronouns")
    row = rows["occupation-pronouns-pronoun_stereo"]
    assert row["n"] == 320, output
    assert 0.0 <= row["ci_low"] <= row["value"] <= row["ci_high"] <= 1.0
    assert row["verdict"] in ("pass", "fail", "inconclusive")
    # the gate is thresholds.toml's two-sided one around 0.5
    expected = ("fail" if row["ci_low"] - 0.5 > 0.1 or 0.5 - row["ci_high"] > 0.1
                else "pass" if 0.4 <= row["ci_low"] and row["ci_high"] <= 0.6 else "inconclusive")
    assert row["verdict"] == expected
