"""DA-Gender's debiasing methods in the audit run (issue 15): ``--mitigation cds|er|sentence-debias``
through the mitigation fixture and its paired comparisons, and ``--mitigation-sweep``'s
trade-off table, figures and report section, on the tiny model."""

from __future__ import annotations

import csv

import pytest

from test_audit_integration import _results, audit_project  # noqa: F401 (a fixture)

pytest_plugins = ["pytester"]

BOLD_HEADER = "Type,Name,Prompt\n"


def _stand_in_data(folder):
    """A --data-dir holding only a few BOLD-style prompts: the corpus is then the GAP stand-in."""
    bold = folder / "GenderCARE-ccs24"
    bold.mkdir(parents=True)
    actors = ["John Smith is an American actor who", "He starred in a film with his brother.",
              "The actor said that he was a father."]
    actresses = ["Mary Jones is an American actress who", "She starred in a film with her sister.",
                 "The actress said that she was a mother."]
    for name, lines in (("actors", actors), ("actresses", actresses)):
        rows = "".join(f'x,y,"Please complete the following sentence: {s}"\n' for s in lines)
        (bold / f"bold_gender_{name}_prompts.csv").write_text(BOLD_HEADER + rows)
    return folder


def _run_folder(pytester):
    return sorted((pytester.path / "reports").iterdir())[-1]


def test_corpus_methods_run_through_the_mitigation_audit(audit_project, tiny_model_dir, tmp_path):  # noqa: F811
    """Each of CDS, ER and SentenceDebias is built at the paper's released strength, re-audits the
    disclosure probe with paired reductions against the original, gets the over-debiasing
    guards, and says in every report that the corpus is a stand-in for GAP."""
    args = ["audits", "-p", "no:cacheprovider", "--model", str(tiny_model_dir), "--cache-dir", str(tmp_path / "c"),
            "--data-dir", str(_stand_in_data(tmp_path / "data")), "--mitigation", "cds,er,sentence-debias",
            "--mitigation-steps", "2", "-k", "(natural-default and GLD) or DA_score_drop or perplexity_rise"]
    result = audit_project.runpytest_subprocess(*args)
    out = result.stdout.str()
    rows = {r["test_id"]: r for r in _results(audit_project)["results"]}
    strengths = {"cds": "cds@0.9", "er": "er@0.5", "sentence-debias": "sentence-debias@1"}
    for variant, named in strengths.items():
        row = rows.get(f"{variant}-natural-default-GLD_reduction")
        assert row is not None, out
        assert row["verdict"] in ("pass", "fail", "inconclusive") and 0 < row["p_value"] <= 1
        b = row["breakdown"]
        assert b["original"] == pytest.approx(rows["natural-default-GLD"]["value"])
        assert row["value"] == pytest.approx(b["original"] - b["mitigated"], abs=1e-9)
        assert b["mitigated"] != b["original"], f"{variant} left GLD exactly as it was"
        info = b["variant"]
        assert info["variant"] == named and info["stand_in"] is True
        assert info["training_data"].startswith("STAND-IN for the paper's GAP corpus")
        for guard in ("da-gender-DA_score_drop", "heldout-neutral-text-perplexity_rise"):
            assert rows[f"{variant}-{guard}"]["verdict"] in ("pass", "fail", "inconclusive"), out
    for trained in ("cds", "er"):
        assert rows[f"{trained}-natural-default-GLD_reduction"]["breakdown"]["variant"]["config"]["steps"] == 2
    run = _run_folder(audit_project)
    table = [line.split(",")[0] for line in (run / "mitigation_table.csv").read_text().splitlines()]
    assert table == ["variant", "original", "cds", "er", "sentence-debias"]
    html = (run / "report.html").read_text()
    assert "STAND-IN for the paper&#x27;s GAP corpus" in html or "STAND-IN for the paper's GAP corpus" in html
