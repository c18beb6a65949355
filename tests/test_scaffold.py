"""``python -m bias_core.scaffold metric NAME``: in a copy of the files it writes to, a new metric
is declared, gated and audited, and its hand-computed test fails until it is filled in; a bad
request is a usage error that writes nothing."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bias_core import catalogue
from bias_core.scaffold.metric import USAGE_EXIT, main, plan_metric, with_entry

from paths import REPO


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of what the scaffold reads and writes: the package, thresholds.toml, the metric table
    script and its page, and a tests folder."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "bias_core", root / "bias_core", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "thresholds.toml", root / "thresholds.toml")
    (root / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "metric_table.py", root / "scripts" / "metric_table.py")
    (root / "docs" / "audits").mkdir(parents=True)
    shutil.copy(REPO / "docs" / "audits" / "index.md", root / "docs" / "audits" / "index.md")
    (root / "tests").mkdir()
    return root


def _python(root: Path, *args: str) -> subprocess.CompletedProcess:
    """Python with the copy's bias_core first on the path (the checkout a developer works in)."""
    env = {**os.environ, "PYTHONPATH": str(root), "BIAS_CORE_OFFLINE": "1"}
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_scaffolded_metric_is_declared_gated_and_audited_and_its_test_fails_until_filled_in(checkout):
    done = _python(checkout, "-m", "bias_core.scaffold", "metric", "pronoun_share", "--family", "association",
                   "--probe", "occupation-pronouns", "--better", "ideal", "--ideal", "0.5", "--root", str(checkout))
    assert done.returncode == 0, done.stderr
    assert "tests/test_pronoun_share.py" in done.stdout and "metric table rewritten" in done.stdout
    check = textwrap.dedent("""
        from bias_core import catalogue
        from bias_core.gating.thresholds import load_thresholds
        from bias_core.suites import ASSOCIATION_CASES, known_metrics, known_probes

        m = catalogue.spec("pronoun_share")
        assert (m.family, m.probes, m.better, m.ideal, m.paired) == ("association", ("occupation-pronouns",), "ideal", 0.5, True)
        assert callable(m.compute_function()) and callable(m.runner_function())
        assert ASSOCIATION_CASES["occupation-pronouns"] == ("pronoun_stereo", "pronoun_share")  # audited after its family's
        t = load_thresholds("thresholds.toml", known_metrics(), known_probes())  # every known metric gated, margins too
        assert t.defaults["pronoun_share"].ideal == 0.5 and t.regression["pronoun_share"].margin == 0.05
        print("declared")
    """)
    declared = _python(checkout, "-c", check)
    assert declared.returncode == 0 and "declared" in declared.stdout, declared.stderr
    assert "| pronoun_share | association | `occupation-pronouns` | ideal 0.5 |" in (
        checkout / "docs" / "audits" / "index.md").read_text()

    test = ["-m", "pytest", "tests/test_pronoun_share.py", "-q", "-p", "no:cacheprovider", "-p", "no:bias_core.plugin"]
    first = _python(checkout, *test)
    assert first.returncode == 1 and "work out pronoun_share of INPUTS by hand" in first.stdout, first.stdout[-2000:]
    # filled in: the hand-computed value first, then the function
    written = checkout / "tests" / "test_pronoun_share.py"
    written.write_text(written.read_text().replace("BY_HAND = None", "BY_HAND = 0.5  # two of the four items"))
    half = _python(checkout, *test)
    assert half.returncode == 1 and "NotImplementedError" in half.stdout, half.stdout[-2000:]
    function = checkout / "bias_core" / "metrics" / "pronoun_share.py"
    function.write_text(function.read_text().split("    raise NotImplementedError")[0] + textwrap.indent(textwrap.dedent("""
        from bias_core.stats.resampling import bootstrap_ci

        low, high = bootstrap_ci(scores, seed=seed)
        return MetricResult("pronoun_share", sum(scores) / len(scores), low, high, len(scores))
    """), "    "))
    filled = _python(checkout, *test)
    assert filled.returncode == 0, filled.stdout[-2000:]


def test_with_a_runner_that_hands_on_its_numbers_the_stub_takes_what_that_runner_gives(checkout):
    assert main(["metric", "gld_twin", "--family", "disclosure", "--probe", "all",
                 "--runner", "bias_core.runners.disclosure:run_next_word", "--root", str(checkout)]) == 0
    stub = (checkout / "bias_core" / "metrics" / "gld_twin.py").read_text()
    assert "def gld_twin(p_female, p_male, ids=None, prompts=None, seed=0, female_words=None, male_words=None)" in stub
    assert not (checkout / "bias_core" / "runners" / "gld_twin.py").exists()
    entry = (checkout / "bias_core" / "catalogue.py").read_text()
    assert ('MetricSpec("gld_twin", family="disclosure", probes=DISCLOSURE_PROBES, better="lower",' in entry
            and 'runner="bias_core.runners.disclosure:run_next_word",' in entry)
    assert 'INPUTS = {"p_female": None, "p_male": None}' in (checkout / "tests" / "test_gld_twin.py").read_text()


@pytest.mark.parametrize("family", ["disclosure", "association", "genderpair"])
def test_the_entry_follows_its_familys_last_metric(family):
    source = (REPO / "bias_core" / "catalogue.py").read_text()
    probes = ["all"] if family == "disclosure" else [catalogue.metrics_of(family)[0].probes[0]]
    tree = ast.parse(with_entry(source, plan_metric("new_metric", family, probes, root=REPO)))
    [metrics] = [n.value for n in tree.body if isinstance(n, ast.AnnAssign) and n.target.id == "METRICS"]
    names = [e.args[0].value if isinstance(e, ast.Call) and isinstance(e.args[0], ast.Constant) else None
             for e in metrics.elts]
    assert names[names.index("new_metric") - 1] == catalogue.metrics_of(family)[-1].name


@pytest.mark.parametrize(("args", "said"), [
    (["GLD", "--family", "disclosure", "--probe", "all"], "metric 'GLD' is already declared"),
    (["new_metric", "--family", "association", "--probe", "nope"], "--probe 'nope' is not declared"),
    (["new_metric", "--family", "association", "--probe", "genderpair-group1"],
     "loaded by the genderpair family's suite, not association's"),
    (["new_metric", "--family", "disclosure", "--probe", "natural-stsb"], "Fix: --probe all"),
    (["new_metric", "--family", "mitigation", "--probe", "da-gender"], "compare two models"),
    (["new_metric", "--family", "toy", "--probe", "da-gender"], "a new family comes from an installed package"),
    (["new_metric", "--family", "association", "--probe", "da-gender", "--ideal", "0.5"], "--ideal goes with --better ideal"),
    (["new-metric", "--family", "association", "--probe", "da-gender"], "use letters, digits and underscores"),
    (["new_metric", "--family", "association", "--probe", "da-gender", "--runner", "bias_core.runners.gbm:run_gbm"],
     "computes its own metrics only"),
])
def test_a_bad_request_names_the_fix_and_writes_nothing(checkout, capsys, args, said):
    before = _snapshot(checkout)
    assert main(["metric", *args, "--root", str(checkout)]) == USAGE_EXIT
    err = capsys.readouterr().err
    assert said in err and "Fix:" in err and "Traceback" not in err
    assert _snapshot(checkout) == before


def test_a_file_already_there_is_never_overwritten(checkout, capsys):
    (checkout / "tests" / "test_new_metric.py").write_text("# mine\n")
    before = _snapshot(checkout)
    assert main(["metric", "new_metric", "--family", "association", "--probe", "da-gender", "--root", str(checkout)]) == 4
    assert "tests/test_new_metric.py already exist" in capsys.readouterr().err and _snapshot(checkout) == before
