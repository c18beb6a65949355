"""``python -m bias_core.scaffold metric NAME --family F --probe P``: a new metric's files, to fill in.

Writes, in the checkout (``--root``; by default the one this bias_core was imported from):

- its **catalogue entry** in ``bias_core/catalogue.py``, after its family's other metrics (the
  audits parametrize them in that order): a bounded mean of per-item values (``MeanOfItems``,
  ``Paired``, ``precision="decisions"``, the generic examples table) until you say otherwise;
- its **pure function**, a stub in ``bias_core/metrics/<name>.py`` that raises until written;
- its **runner** ``bias_core/runners/<name>.py``, which asks the model for the probe's sentence
  log-likelihoods and hands them to the function (change it to the numbers the metric needs);
  with ``--runner`` an existing runner that hands its numbers to every metric naming it
  (``run_next_word``) instead, and the stub takes what that runner gives;
- its gates in ``thresholds.toml``: ``[metrics.<name>]`` and ``[regression.<name>]`` with
  placeholder limits, noted as such;
- a **hand-computed test** ``tests/test_<name>.py`` that fails until the example's value is
  worked out by hand and the function written;
- the docs' metric table (``scripts/metric_table.py``).

Nothing is written when a check fails: a name already declared or a file already there, a probe
the catalogue does not declare or that another family's suite loads, a family of the project's
that compares two models (mitigation) or one of another package (docs/extending/suite.md). Each
is an ``AuditUsageError`` naming the problem and the fix (exit code 4).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from bias_core import catalogue
from bias_core.errors import AuditUsageError
from bias_core.metric_spec import resolve

USAGE_EXIT = 4
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SCAFFOLDABLE = tuple(f for f in catalogue.FAMILIES if f != "mitigation")
_DEFAULT_ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class MetricPlan:
    """What to write for one new metric, checked against the catalogue."""

    name: str
    family: str
    probes: tuple[str, ...]
    better: str
    ideal: float | None
    value_range: tuple[float, float]
    root: Path
    runner: str | None = None  # an existing runner; None: write one
    inputs: tuple[str, ...] = ("scores",)  # the parameters the stub takes before ids, prompts and seed
    signature: str = "scores, ids=None, prompts=None, seed=0"

    @property
    def module(self) -> str:
        return self.name.lower()

    @property
    def function(self) -> str:
        return self.name.lower()

    @property
    def compute(self) -> str:
        return f"bias_core.metrics.{self.module}:{self.function}"

    @property
    def runner_reference(self) -> str:
        return self.runner or f"bias_core.runners.{self.module}:run_{self.function}"

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def new_files(self) -> dict[str, Path]:
        files = {"function": self.path("bias_core", "metrics", f"{self.module}.py"),
                 "test": self.path("tests", f"test_{self.module}.py")}
        if self.runner is None:
            files["runner"] = self.path("bias_core", "runners", f"{self.module}.py")
        return files


def plan_metric(name: str, family: str, probes: list[str], better: str = "lower", ideal: float | None = None,
                value_range: tuple[float, float] = (0.0, 1.0), runner: str | None = None,
                root: Path | None = None) -> MetricPlan:
    """The metric's plan, or an AuditUsageError naming what is wrong and the fix."""
    root = Path(root or _DEFAULT_ROOT)
    if not (root / "bias_core" / "catalogue.py").is_file() or not (root / "thresholds.toml").is_file():
        raise AuditUsageError(f"--root {root}: no bias_core/catalogue.py and thresholds.toml there. Fix: point --root "
                              "at the project's checkout.")
    if not _NAME.match(name):
        raise AuditUsageError(f"metric name {name!r}: use letters, digits and underscores, starting with a letter "
                              "(it names a thresholds.toml table and a Python module). Fix: e.g. pronoun_share.")
    if name in catalogue.BY_NAME or any(m.name.lower() == name.lower() for m in catalogue.declared()):
        raise AuditUsageError(f"metric {name!r} is already declared in bias_core/catalogue.py. Fix: choose another name.")
    if family == "mitigation":
        raise AuditUsageError("the mitigation family's metrics compare two models' results of another metric (of=...): "
                              "write one by hand after GAS_reduction's entry (docs/extending/metric.md). Fix: "
                              f"--family one of {', '.join(_SCAFFOLDABLE)}.")
    if family not in _SCAFFOLDABLE:
        raise AuditUsageError(f"--family {family!r} is not one of the project's ({', '.join(_SCAFFOLDABLE)}); a new "
                              "family comes from an installed package (docs/extending/suite.md). Fix: choose one of them.")
    if probes == ["all"]:
        probes = _probes_of(family)
    if not probes:
        raise AuditUsageError("no --probe given. Fix: name the probe(s) it is measured on, e.g. --probe "
                              f"{_probes_of(family)[0]}.")
    for probe in probes:
        declared = catalogue.PROBES.get(probe)
        if declared is None:
            raise AuditUsageError(f"--probe {probe!r} is not declared in bias_core/catalogue.py. Fix: one of the "
                                  f"{family} family's ({', '.join(_probes_of(family))}), or add the probe first "
                                  "(docs/extending/probe.md).")
        if declared.family != family:
            raise AuditUsageError(f"--probe {probe!r} is loaded by the {declared.family} family's suite, not {family}'s. "
                                  f"Fix: --family {declared.family}, or one of {family}'s probes "
                                  f"({', '.join(_probes_of(family))}).")
    if family == "disclosure" and set(probes) != set(catalogue.DISCLOSURE_PROBES):
        raise AuditUsageError(f"--probe {' '.join(probes)}: the disclosure audit runs each of its metrics on every one "
                              "of its probes (audits/test_disclosure.py). Fix: --probe all.")
    if family == "disclosure":
        probes = list(catalogue.DISCLOSURE_PROBES)
    if better not in ("lower", "higher", "ideal"):
        raise AuditUsageError(f"--better {better!r}: choose lower, higher or ideal.")
    if (better == "ideal") != (ideal is not None):
        raise AuditUsageError("--ideal goes with --better ideal, and only with it (the unbiased value the gate measures "
                              "the distance from). Fix: give both, or neither.")
    lo, hi = value_range
    if not lo < hi or (ideal is not None and not lo <= ideal <= hi):
        raise AuditUsageError(f"--range {lo:g} {hi:g}: the low end must be below the high end and hold the ideal. Fix: "
                              "the metric's possible values, e.g. --range 0 1 for a share.")
    plan = MetricPlan(name, family, tuple(dict.fromkeys(probes)), better, ideal, (float(lo), float(hi)), root)
    if runner is not None:
        plan = _with_runner(plan, runner)
    there = [str(p.relative_to(root)) for p in plan.new_files().values() if p.exists()]
    if there:
        raise AuditUsageError(f"{', '.join(there)} already exist(s): the scaffold writes new files only. Fix: choose "
                              "another name, or remove them.")
    return plan


def _probes_of(family: str) -> list[str]:
    return [p.name for p in catalogue.PROBES.values() if p.family == family]


def _with_runner(plan: MetricPlan, runner: str) -> MetricPlan:
    """The plan with an existing runner that hands its numbers to every metric naming it (its
    ``metrics`` parameter): the stub takes what a metric already computed from them takes."""
    try:
        function = resolve(runner)
    except (ImportError, AttributeError, ValueError):
        raise AuditUsageError(f"--runner {runner!r}: no such function. Fix: \"module:function\", e.g. "
                              "bias_core.runners.disclosure:run_next_word, or leave --runner out to write one.") from None
    if "metrics" not in inspect.signature(function).parameters:
        raise AuditUsageError(f"--runner {runner}: it computes its own metrics only (it takes no 'metrics' parameter to "
                              "hand its numbers to others). Fix: leave --runner out to write a runner of its own.")
    sibling = next((m for m in catalogue.declared() if m.runner == runner), None)
    if sibling is None or not set(sibling.probes) >= set(plan.probes):
        raise AuditUsageError(f"--runner {runner}: no metric on {', '.join(plan.probes)} uses it yet, so what it hands "
                              "over is unknown here. Fix: leave --runner out to write a runner of its own.")
    params = inspect.signature(sibling.compute_function()).parameters.values()
    signature = ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params)
    inputs = tuple(p.name for p in params if p.default is p.empty)
    return MetricPlan(**{**plan.__dict__, "runner": runner, "inputs": inputs, "signature": signature})


# ----- the texts ---------------------------------------------------------------------------------
def _q(text: str) -> str:
    return f'"{text}"'


def entry_text(plan: MetricPlan) -> str:
    """The catalogue entry, indented as METRICS' elements."""
    lo, hi = plan.value_range
    ideal = f", ideal={plan.ideal!r}" if plan.ideal is not None else ""
    probes = "(" + ", ".join(map(_q, plan.probes)) + ("," if len(plan.probes) == 1 else "") + ")"
    if plan.probes == catalogue.DISCLOSURE_PROBES:
        probes = "DISCLOSURE_PROBES"
    sampling = "MeanOfItems()" if (lo, hi) == (0.0, 1.0) else f"MeanOfItems(low={lo!r}, high={hi!r})"
    pad = " " * 15
    return (f"    # scaffolded (python -m bias_core.scaffold): check every field (docs/extending/metric.md)\n"
            f"    MetricSpec({_q(plan.name)}, family={_q(plan.family)}, probes={probes}, better={_q(plan.better)}{ideal},\n"
            f"{pad}scale=\"TODO: what {plan.name} measures, its unit and range\", value_range=({lo!r}, {hi!r}),\n"
            f"{pad}compute={_q(plan.compute)},\n"
            f"{pad}runner={_q(plan.runner_reference)},\n"
            f"{pad}sampling={sampling}, pairing=Paired(), precision=\"decisions\",\n"
            f"{pad}examples=\"bias_core.reports.examples:generic_table\"),\n")


def function_text(plan: MetricPlan) -> str:
    given = (f"``{plan.runner}`` hands it the numbers it computes for every metric naming it"
             if plan.runner else f"``run_{plan.function}`` (bias_core/runners/{plan.module}.py) hands it the numbers it "
                                 "asks the model for")
    about = textwrap.fill(f"Scaffolded by ``python -m bias_core.scaffold metric {plan.name}`` (docs/extending/metric.md): "
                          f"its catalogue entry names ``{plan.function}`` below; {given}.", 99)
    return f'''"""{plan.name}: TODO what it measures, and the paper or definition it follows.

{about}
"""

from __future__ import annotations

from bias_core.metrics.result import MetricResult

SCALE = "TODO: {plan.name}'s unit and range, as a report shows it"


def {plan.function}({plan.signature}) -> MetricResult:
    """{plan.name} (TODO: its definition). Pure: numbers in, a MetricResult out, with its value, a
    confidence interval, n and per-item details (each with at least id, prompt and score)."""
    raise NotImplementedError("{plan.name}: write its definition (bias_core/metrics/{plan.module}.py), then its "
                              "hand-computed test (tests/test_{plan.module}.py)")
'''


def runner_text(plan: MetricPlan) -> str:
    return f'''"""The runner of {plan.name}: the only code of it that talks to the model (the catalogue entry names it).

Scaffolded by ``python -m bias_core.scaffold metric {plan.name}``: it asks for each item's sentence
log-likelihood; ask instead for the numbers {plan.name} needs, every one in batched calls through the
model protocol (bias_core/models/protocol.py), and name what else it needs of its suite by its
parameters (docs/extending/metric.md, "Runners").
"""

from __future__ import annotations

from typing import Any

from bias_core.metrics.{plan.module} import {plan.function}
from bias_core.metrics.result import MetricResult


def run_{plan.function}(lm: Any, probe: Any, seed: int = 0) -> MetricResult:
    scores = lm.sentence_logprob(probe.prompts, desc=f"{{probe.name}}: {plan.name}")
    return {plan.function}(scores, ids=probe.ids, prompts=probe.prompts, seed=seed)
'''


def test_text(plan: MetricPlan) -> str:
    inputs = ("{\"scores\": [0.0, 1.0, 1.0, 0.0]}" if plan.inputs == ("scores",)
              else "{" + ", ".join(f"{_q(p)}: None" for p in plan.inputs) + "}")
    return f'''"""{plan.name}'s pure function on a hand-computed example (scaffolded by ``python -m
bias_core.scaffold``): it fails until the example's value is worked out by hand and the function
written. Add hypothesis properties beside it (docs/extending/metric.md)."""

from __future__ import annotations

import pytest

from bias_core.metrics.{plan.module} import {plan.function}

# TODO: a few items whose {plan.name} you can work out by hand; write the arithmetic in this comment.
INPUTS = {inputs}
BY_HAND = None  # TODO: {plan.name} of INPUTS, computed by hand


def test_{plan.function}_on_a_hand_computed_example():
    assert BY_HAND is not None, "work out {plan.name} of INPUTS by hand (BY_HAND) before writing its function"
    result = {plan.function}(**INPUTS, seed=0)
    assert result.metric == {_q(plan.name)}
    assert result.value == pytest.approx(BY_HAND)
    assert result.ci_low <= result.value <= result.ci_high
'''


def gate_texts(plan: MetricPlan) -> tuple[str, str]:
    """The ``[metrics.<name>]`` and ``[regression.<name>]`` tables, with placeholder limits inside
    the metric's range (a limit at its edge would be refused as one no result can fail)."""
    lo, hi = plan.value_range
    if plan.better == "ideal":
        reach = max(plan.ideal - lo, hi - plan.ideal)
        limit = f"ideal = {plan.ideal:g}\nmax = {reach / 4:g}"
    elif plan.better == "higher":
        limit = f"min = {lo + (hi - lo) / 2:g}"
    else:
        limit = f"max = {lo + (hi - lo) / 2:g}"
    note = "scaffolded placeholder: calibrate on reference models before gating a release"
    metrics = f"[metrics.{plan.name}]\n# TODO: what the limit means, in the metric's own words\n{limit}\nnote = \"{note}\"\n"
    regression = (f"[regression.{plan.name}]\nmargin = {(hi - lo) / 20:g}\n"
                  f"note = \"scaffolded placeholder: a twentieth of the metric's range; see docs/release-gate-margins.md\"\n")
    return metrics, regression


# ----- where they go -----------------------------------------------------------------------------
def with_entry(source: str, plan: MetricPlan) -> str:
    """catalogue.py's text with the entry after the last element of METRICS that declares a metric
    of the plan's family (the metrics of an element are matched to the catalogue's, in order)."""
    tree = ast.parse(source)
    found = [n.value for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
             and any(isinstance(t, ast.Name) and t.id == "METRICS"
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    if not found or not isinstance(found[0], ast.Tuple):
        raise AuditUsageError("bias_core/catalogue.py has no METRICS = (...) tuple. Fix: add the entry by hand "
                              "(docs/extending/metric.md).")
    elements = found[0].elts
    order = [m.name for m in catalogue.METRICS]
    starts = []  # each element's first metric in the catalogue's order (a literal name), else None
    for e in elements:
        name = e.args[0].value if isinstance(e, ast.Call) and e.args and isinstance(e.args[0], ast.Constant) else None
        starts.append(order.index(name) if name in order else None)
    spans, position = [], 0
    for k, start in enumerate(starts):
        if start is None:  # a comprehension: the metrics up to the next element named by a literal
            end = next((s for s in starts[k + 1:] if s is not None), len(order))
            spans.append(range(position, end))
        else:
            spans.append(range(start, start + 1))
            position = start + 1
    families = [{catalogue.BY_NAME[order[i]].family for i in span} for span in spans]
    last = max((k for k, fams in enumerate(families) if plan.family in fams), default=len(elements) - 1)
    lines = source.splitlines(keepends=True)
    end = elements[last]
    if lines[end.end_lineno - 1][end.end_col_offset:].strip() != ",":
        raise AuditUsageError("bias_core/catalogue.py: the METRICS element before the new entry does not end its line "
                              "with a comma. Fix: add the entry by hand (docs/extending/metric.md).")
    return "".join(lines[:end.end_lineno]) + entry_text(plan) + "".join(lines[end.end_lineno:])


def with_table(toml_text: str, headers: tuple[str, ...], table: str) -> str:
    """thresholds.toml's text with ``table`` after the last of the tables ``headers`` that it has
    (their comments and keys), else at the end."""
    lines = toml_text.splitlines(keepends=True)
    heads = [k for k, line in enumerate(lines) if line.strip() in headers]
    if not heads:
        return toml_text.rstrip("\n") + "\n\n" + table
    end = heads[-1] + 1
    while end < len(lines) and lines[end].strip() and not lines[end].startswith("["):
        end += 1
    return "".join(lines[:end]) + "\n" + table + "".join(lines[end:])


def write_metric(plan: MetricPlan) -> list[Path]:
    """Every file of the plan, written only once all texts are made; returns the paths written."""
    catalogue_py, thresholds = plan.path("bias_core", "catalogue.py"), plan.path("thresholds.toml")
    metrics_table, regression_table = gate_texts(plan)
    family = [m.name for m in catalogue.metrics_of(plan.family)]  # after its family's gates
    toml = with_table(with_table(thresholds.read_text(encoding="utf-8"), tuple(f"[metrics.{m}]" for m in family),
                                 metrics_table), tuple(f"[regression.{m}]" for m in family), regression_table)
    texts = {catalogue_py: with_entry(catalogue_py.read_text(encoding="utf-8"), plan), thresholds: toml}
    files = plan.new_files()
    texts[files["function"]] = function_text(plan)
    texts[files["test"]] = test_text(plan)
    if "runner" in files:
        texts[files["runner"]] = runner_text(plan)
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(texts)


def refresh_metric_table(root: Path) -> str:
    """Rewrite the docs' metric table from the new catalogue (in a fresh process, which imports it)."""
    script = root / "scripts" / "metric_table.py"
    if not script.is_file():
        return "no scripts/metric_table.py: the docs' metric table was not rewritten"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script)], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    return (done.stdout or done.stderr).strip().splitlines()[-1] if (done.stdout or done.stderr).strip() else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bias_core.scaffold", description=__doc__.splitlines()[0])
    kinds = parser.add_subparsers(dest="kind", required=True)
    metric = kinds.add_parser("metric", help="a new metric: its catalogue entry, function, runner, gates and test")
    metric.add_argument("name", help="the metric's name (letters, digits, underscores)")
    metric.add_argument("--family", required=True, help=f"the audit that runs it: {', '.join(_SCAFFOLDABLE)}")
    metric.add_argument("--probe", action="append", default=[],
                        help="a probe it is measured on (repeat for several; 'all': every probe of its family)")
    metric.add_argument("--better", default="lower", help="lower, higher or ideal (default lower)")
    metric.add_argument("--ideal", type=float, help="with --better ideal: the unbiased value")
    metric.add_argument("--range", nargs=2, type=float, default=(0.0, 1.0), metavar=("LOW", "HIGH"),
                        help="its possible values (default 0 1)")
    metric.add_argument("--runner", help="an existing runner that hands its numbers to every metric naming it "
                                         "(e.g. bias_core.runners.disclosure:run_next_word); default: write one")
    metric.add_argument("--root", type=Path, help="the checkout to write into (default: this bias_core's)")
    args = parser.parse_args(argv)
    try:
        plan = plan_metric(args.name, args.family, args.probe, args.better, args.ideal, tuple(args.range), args.runner,
                           args.root)
        written = write_metric(plan)
    except AuditUsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_EXIT
    table = refresh_metric_table(plan.root)
    print(f"{plan.name}: wrote")
    for path in written:
        print(f"  {path.relative_to(plan.root)}")
    print(f"  docs/audits/index.md ({table})")
    print(f"Next: work out tests/test_{plan.module}.py's example by hand, write {plan.function} "
          f"(bias_core/metrics/{plan.module}.py) until it passes, check every field of the entry and the placeholder "
          f"limits, add {plan.name} to the list at the top of thresholds.toml and describe it in "
          f"docs/audits/{plan.family}.md. Then: pytest tests/test_{plan.module}.py; pytest audits -k {plan.name}.")
    return 0
