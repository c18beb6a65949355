"""``gate_logs``: a release gated on other tools' per-sample logs, candidate against baseline.

Both logs are read and checked (``integrity``), their settings compared (``configs``), and each
task x metric x filter whose value is a mean of per-sample values is paired sample by sample
(``pairing``) and judged by the project's own regression gate: ``compare_to_baseline`` (paired
bootstrap CI, exact McNemar for 0/1 samples, sign-flip or swap permutation otherwise), ``judge``
against the row's margin (``thresholds``: thresholds.toml's ``[regression.external]`` or a
default), and Holm's adjustment of the p-values across the rows (``adjust``), as the project's
release gate does. Verdicts are non-inferiority verdicts on the CI of the worsening: pass when all
of it is within the margin, fail when all of it is beyond, inconclusive otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError, BaselineMismatch
from bias_core.gating.external_logs.card import RunCard, SideCard
from bias_core.gating.external_logs.configs import compare_runs
from bias_core.gating.external_logs.pairing import Unpaired, pair_metric
from bias_core.gating.external_logs.reading import read_log
from bias_core.gating.external_logs.records import ExternalRun, MetricLog
from bias_core.gating.external_logs.thresholds import ExternalGate, load_external, toml_fix
from bias_core.gating.regression.gate import judge
from bias_core.gating.regression.pairing import MAX_MISSING_SHARE, PairedItems
from bias_core.gating.verdicts import FAIL, INCONCLUSIVE, PASS
from bias_core.stats.paired import N_BOOTSTRAP, N_PERMUTATIONS, PairedComparison, adjust, compare_to_baseline

IDENTITY_ALLOWS = ("prompt_hash", "target_hash")
# what an allow that is not a setting (configs.PAIRING_ALLOWS) changes, for the run card
PAIRING_NOTES = {
    "filter": "filter: a candidate filter the baseline lacks is paired with the baseline's one other filter, allowed",
    "prompt_hash": "prompt_hash: samples pair although their prompts' hashes differ (the same documents, formatted "
                   "otherwise), allowed",
    "target_hash": "target_hash: samples pair although their targets' hashes differ, allowed",
}


@dataclass(frozen=True)
class GateRow:
    """One task x metric x filter. Values are on the paired samples; ``logged_*`` are the logs' own
    aggregates over all their samples (equal when every sample paired)."""

    task: str
    metric: str
    filter: str
    n_pairs: int
    unpaired: Unpaired
    baseline_value: float
    candidate_value: float
    difference: float  # candidate - baseline
    difference_ci: tuple[float, float]
    harm: float  # how much worse the candidate is (> 0: worse), in the metric's units
    harm_ci: tuple[float, float]
    p_value: float  # one-sided, H0 "no worse"
    p_holm: float
    verdict: str
    margin: float
    margin_rule: str
    direction: str
    ideal: float | None
    test: str
    gate_source: str
    logged_baseline: float
    logged_candidate: float
    comparison: PairedComparison = field(repr=False, compare=False)

    def line(self) -> str:
        lo, hi = self.difference_ci
        best = f"nearer {self.ideal:g}" if self.direction == "ideal" else self.direction
        rule = "" if self.margin_rule == f"{self.margin:g}" else f" ({self.margin_rule})"
        return (f"{self.task} {self.metric} [{self.filter}]: {self.n_pairs} pairs"
                + (f" ({self.unpaired.total} left out: {self.unpaired.describe()})" if self.unpaired.total else "")
                + f"; baseline {self.baseline_value:.6g}, candidate {self.candidate_value:.6g}, difference "
                f"{self.difference:+.6g} [95% CI {lo:+.6g}, {hi:+.6g}] ({best} is better); worsening CI "
                f"[{self.harm_ci[0]:+.6g}, {self.harm_ci[1]:+.6g}] against margin {self.margin:.6g}{rule}; "
                f"p {self.p_value:.4g}, Holm {self.p_holm:.4g} -> {self.verdict}")

    def to_json(self) -> dict[str, Any]:
        keys = ("task", "metric", "filter", "n_pairs", "baseline_value", "candidate_value", "difference", "harm",
                "p_value", "p_holm", "verdict", "margin", "margin_rule", "direction", "ideal", "test", "gate_source",
                "logged_baseline", "logged_candidate")
        out = {k: getattr(self, k) for k in keys}
        out.update(difference_ci=list(self.difference_ci), harm_ci=list(self.harm_ci),
                   unpaired={"only_candidate": self.unpaired.only_candidate, "only_baseline": self.unpaired.only_baseline,
                             "identity_differs": self.unpaired.identity_differs,
                             "no_value_candidate": self.unpaired.no_value_candidate,
                             "no_value_baseline": self.unpaired.no_value_baseline})
        return out


@dataclass(frozen=True)
class NotGated:
    task: str
    metric: str
    filter: str
    why: str


@dataclass(frozen=True)
class GateResult:
    rows: tuple[GateRow, ...]
    not_gated: tuple[NotGated, ...]
    card: RunCard

    @property
    def verdict(self) -> str:
        """fail if any row fails, else inconclusive if any is, else pass."""
        verdicts = {r.verdict for r in self.rows}
        return FAIL if FAIL in verdicts else INCONCLUSIVE if INCONCLUSIVE in verdicts else PASS

    def row(self, task: str, metric: str, filter_key: str | None = None) -> GateRow:
        found = [r for r in self.rows if r.task == task and r.metric == metric and filter_key in (None, r.filter)]
        if len(found) != 1:
            raise KeyError(f"{task} {metric} {filter_key or ''}: {len(found)} rows")
        return found[0]

    def text(self) -> str:
        lines = [f"release gate on {self.card.candidate.tool} logs: {self.verdict.upper()} ({len(self.rows)} rows)"]
        lines += [f"  {r.line()}" for r in self.rows]
        lines += [f"  not gated: {n.task} {n.metric} [{n.filter}]: {n.why}" for n in self.not_gated]
        lines += [f"  {ln}" for ln in self.card.lines()]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "rows": [r.to_json() for r in self.rows],
                "not_gated": [vars(n) for n in self.not_gated], "card": self.card.to_json()}


def _selection(metrics: Iterable[str | tuple[str, str]] | None) -> set[tuple[str | None, str]] | None:
    if metrics is None:
        return None
    return {(None, m) if isinstance(m, str) else (m[0], m[1]) for m in metrics}


def _selected(selection, task: str, metric: str) -> bool:
    return selection is None or (None, metric) in selection or (task, metric) in selection


def _plan(candidate: ExternalRun, baseline: ExternalRun, allow: Collection[str], selection
          ) -> tuple[list[tuple[MetricLog, MetricLog, str]], list[NotGated]]:
    """(candidate block, baseline block, row filter) to compare, and what is not gated and why."""
    planned, skipped = [], []
    for task, log in candidate.tasks.items():
        base = baseline.tasks[task]
        by_metric: dict[str, list[str]] = {}
        for metric, f in log.metrics:
            by_metric.setdefault(metric, []).append(f)
        for metric, filters in by_metric.items():
            if not _selected(selection, task, metric):
                continue
            base_filters = [f for m, f in base.metrics if m == metric]
            if not base_filters:
                raise BaselineMismatch(f"{task} {metric}: the baseline ({baseline.source}) has no values of it, the "
                                       f"candidate ({candidate.source}) has. Fix: run both with the same task config.")
            pairs = [(f, f, f) for f in filters if f in base_filters]
            lone_c = [f for f in filters if f not in base_filters]
            lone_b = [f for f in base_filters if f not in filters]
            if lone_c and "filter" not in allow:
                raise BaselineMismatch(f"{task} {metric}: filter(s) {', '.join(lone_c)} of the candidate "
                                       f"({candidate.source}) are not in the baseline ({baseline.source}, which has "
                                       f"{', '.join(base_filters)}). Fix: run both with the same filters, or allow={{'filter'}} "
                                       "to compare across them.")
            if len(lone_c) == 1 and len(lone_b) == 1 and not pairs:
                pairs.append((lone_c[0], lone_b[0], f"{lone_c[0]} (baseline {lone_b[0]})"))
            else:
                skipped += [NotGated(task, metric, f, "filter only in the candidate (allowed); nothing to pair it with")
                            for f in lone_c]
            for fc, fb, shown in pairs:
                c, b = log.metrics[(metric, fc)], base.metrics[(metric, fb)]
                why = c.not_gatable or b.not_gatable
                if why and selection is not None:
                    raise AuditUsageError(f"{task} {metric} was asked for, but cannot be gated: {why}. Fix: leave it "
                                          "out of metrics=.")
                if why:
                    skipped.append(NotGated(task, metric, shown, why))
                else:
                    planned.append((c, b, shown))
    return planned, skipped


DEFAULT_FILTER = "none"  # lm-eval's filter of a task without filters; inspect's score without a reducer


@dataclass(frozen=True)
class PlannedRow:
    """One task x metric x filter to compare: both sides' blocks, the filter as shown, its gate."""

    candidate: MetricLog
    baseline: MetricLog
    filter: str  # as shown: "none", "strict-match", or "strict (baseline flexible)" when allowed to differ
    gate: ExternalGate

    @property
    def task(self) -> str:
        return self.candidate.task

    @property
    def metric(self) -> str:
        return self.candidate.metric

    @property
    def label(self) -> str:
        """The metric as a test id names it: the metric, and the candidate's filter unless it is the
        default ("exact_match[strict-match]"), so that every row of a task has its own id."""
        f = self.candidate.filter
        return self.metric if f == DEFAULT_FILTER else f"{self.metric}[{f}]"


@dataclass(frozen=True)
class LogPlan:
    """Two logs read and checked, and what a gate on them compares: ``plan_logs`` raises every
    usage error (settings, unknown metrics, missing margins) before anything is computed."""

    candidate: ExternalRun
    baseline: ExternalRun
    rows: tuple[PlannedRow, ...]
    not_gated: tuple[NotGated, ...]
    card: RunCard
    allow: frozenset[str] = frozenset()

    def pair(self, row: PlannedRow, max_missing_share: float = MAX_MISSING_SHARE) -> tuple[PairedItems, Unpaired]:
        """The row's pairs (``BaselineMismatch`` when too many samples are left out), named by its
        task and ``label``."""
        ignore = [a for a in self.allow if a in IDENTITY_ALLOWS]
        paired, unpaired = pair_metric(row.candidate, row.baseline, ignore, max_missing_share)
        return dataclasses.replace(paired, metric=row.label), unpaired

    @staticmethod
    def compare(row: PlannedRow, paired: PairedItems, seed: int = 0, n_bootstrap: int = N_BOOTSTRAP,
                n_resamples: int = N_PERMUTATIONS) -> PairedComparison:
        """The row judged against its margin, before the adjustment across rows (``adjust``)."""
        comparison = compare_to_baseline(paired, row.gate.spec, seed=seed, n_bootstrap=n_bootstrap,
                                         n_resamples=n_resamples)
        return judge(comparison, row.gate.margin)


def plan_logs(candidate: str | Path | ExternalRun, baseline: str | Path | ExternalRun, thresholds: Any = None,
              allow: Collection[str] = (), metrics: Iterable[str | tuple[str, str]] | None = None) -> LogPlan:
    """Read and check both logs, compare their settings, and find each row's gate (arguments as
    ``gate_logs``'). Usage errors (exit 4) name what is wrong and the fix."""
    cand = candidate if isinstance(candidate, ExternalRun) else read_log(candidate)
    base = baseline if isinstance(baseline, ExternalRun) else read_log(baseline)
    allowed, notes = compare_runs(cand, base, allow)
    table = load_external(thresholds)
    selection = _selection(metrics)
    if selection is not None:
        known = {(t, m) for t, log in cand.tasks.items() for m, _ in log.metrics}
        unknown = sorted(f"{t + ':' if t else ''}{m}" for t, m in selection
                         if not any(m == km and t in (None, kt) for kt, km in known))
        if unknown:
            raise AuditUsageError(f"metrics= names {', '.join(unknown)}, not in the candidate's log ({cand.source}). "
                                  f"Fix: use one of {', '.join(sorted(f'{t}:{m}' for t, m in known))}.")
    planned, skipped = _plan(cand, base, allow, selection)
    gates: list[ExternalGate] = []
    missing = []
    for c, _, _ in planned:
        gate = table.gate(cand.tool, c.task, c.metric)
        if gate is None:
            missing.append(toml_fix(c.task, c.metric, c.tool_direction))
        gates.append(gate)
    if missing:
        fixes = "\n\n".join(dict.fromkeys(missing))
        raise AuditUsageError(f"no direction or margin is known for {len(set(missing))} metric(s) of the candidate's log "
                              f"({cand.source}); a direction is never guessed. Fix: add to {table.path} (or leave them "
                              f"out with metrics=):\n\n{fixes}")
    if not planned:
        why = "; ".join(f"{n.task} {n.metric}: {n.why}" for n in skipped[:5]) or "the log holds no metric"
        raise AuditUsageError(f"nothing to gate in {cand.source}: {why}.")
    rows = tuple(PlannedRow(c, b, shown, gate) for (c, b, shown), gate in zip(planned, gates))
    pairing = [PAIRING_NOTES[a] for a in PAIRING_NOTES if a in allow]  # allowed, though not a setting
    card = RunCard(SideCard.of(cand), SideCard.of(base), (*(d.describe() for d in allowed), *pairing), tuple(notes))
    return LogPlan(cand, base, rows, tuple(skipped), card, frozenset(allow))


def gate_logs(candidate: str | Path | ExternalRun, baseline: str | Path | ExternalRun, thresholds: Any = None,
              allow: Collection[str] = (), seed: int = 0, metrics: Iterable[str | tuple[str, str]] | None = None,
              max_missing_share: float = MAX_MISSING_SHARE, n_bootstrap: int = N_BOOTSTRAP,
              n_resamples: int = N_PERMUTATIONS) -> GateResult:
    """Gate ``candidate`` against ``baseline`` (lm-eval output folders or results json, or inspect
    logs or log folders, or runs already read). ``thresholds``: a thresholds.toml path, a parsed
    table or None (defaults only); ``allow``: settings that may differ (``{"num_fewshot"}``), or
    ``"filter"``/``"prompt_hash"`` for pairing; ``metrics``: names or (task, name) to gate (default:
    every metric that is a mean of its samples). Usage errors (exit 4) name what is wrong.

    The pytest run (``pytest audits --candidate-log C --baseline-log B``) makes the same rows from
    the same ``plan_logs``, ``LogPlan.pair`` and ``LogPlan.compare``, as the project's own rows."""
    plan = plan_logs(candidate, baseline, thresholds, allow, metrics)
    compared, left_out = [], []
    for row in plan.rows:
        paired, unpaired = plan.pair(row, max_missing_share)
        compared.append(plan.compare(row, paired, seed=seed, n_bootstrap=n_bootstrap, n_resamples=n_resamples))
        left_out.append(unpaired)
    rows = tuple(
        GateRow(task=r.task, metric=r.metric, filter=r.filter, n_pairs=k.n, unpaired=u, baseline_value=k.baseline_value,
                candidate_value=k.candidate_value, difference=k.delta, difference_ci=k.delta_ci, harm=k.harm,
                harm_ci=k.harm_ci, p_value=k.p_value, p_holm=float(k.p_holm), verdict=str(k.verdict),
                margin=float(k.margin), margin_rule=str(k.margin_rule), direction=k.direction, ideal=k.ideal,
                test=k.test, gate_source=r.gate.source, logged_baseline=float(r.baseline.reported),
                logged_candidate=float(r.candidate.reported), comparison=k)
        for r, u, k in zip(plan.rows, left_out, adjust(compared)))
    return GateResult(rows, plan.not_gated, plan.card)
