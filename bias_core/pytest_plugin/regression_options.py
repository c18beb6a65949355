"""The regression gate's command-line options, validated before any model loads.

``--baseline`` takes either a stored run (a run folder, its results.json or its items.jsonl.gz)
or anything ``--model`` takes (a live baseline, audited in this session on the same items).
A stored run is read and its configuration checked against this run's now, so a baseline made
with another seed, decoding, lexicon, sample size or scorer is a usage error (exit 4) before
any model loads; its probes are checked once the tests are collected.

``--candidate-log`` and ``--baseline-log`` take two logs another tool wrote (lm-evaluation-harness
``--log_samples`` output, inspect_ai ``.eval`` logs): the run then compares them and nothing else,
loading no model (``gating/external_logs``). ``log_options`` checks them when the command line is
read, first of all (``build_settings`` calls it before it looks at ``--model``); ``parse_options``
reads both logs and plans every comparison, so a log that cannot be gated is a usage error (exit 4)
before any test runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bias_core.errors import AuditUsageError
from bias_core.gating.regression.integrity import verify_stored_run
from bias_core.gating.regression.items import ITEMS_FILE, ItemsFile, locate_items, read_items
from bias_core.gating.regression.pairing import MAX_MISSING_SHARE

if TYPE_CHECKING:
    from bias_core.gating.external_logs import LogPlan

#: The family of the log comparisons' ``test_regression[<task>-<metric>]`` rows.
EXTERNAL_FAMILY = "external"


def add_options(group) -> None:
    group.addoption("--adapter", default=None, metavar="DIR",
                    help="apply a PEFT/LoRA adapter folder (what fine-tuning produces) to --model")
    group.addoption("--allow-adapter-base-mismatch", action="store_true",
                    help="apply --adapter (--baseline-adapter) although its adapter_config.json declares another base "
                         "model than --model (--baseline): for the same model under another name; the run card says so")
    group.addoption("--baseline", default=None, metavar="RUN_OR_MODEL",
                    help="compare against a baseline, paired on the same items: a run folder (or its results.json) "
                         "from an earlier audit, or anything --model takes (audited live in this session)")
    group.addoption("--baseline-adapter", default=None, metavar="DIR",
                    help="a PEFT/LoRA adapter folder applied to a live --baseline model")
    group.addoption("--baseline-max-missing", default=None, metavar="SHARE",
                    help="the largest share of a probe's items that may lack a value in the candidate or the baseline "
                         f"before its regression test errors instead of judging the rest (default {MAX_MISSING_SHARE:g})")
    group.addoption("--summary-md", default=None, metavar="FILE",
                    help="write a short Markdown summary for CI pages (also appended to $GITHUB_STEP_SUMMARY when set)")
    group.addoption("--candidate-log", default=None, metavar="PATH",
                    help="gate another tool's log instead of auditing a model: an lm-evaluation-harness output folder "
                         "(--log_samples) or its results_<date>.json, or an inspect_ai .eval/.json log; with "
                         "--baseline-log, every task x metric becomes test_regression[<task>-<metric>] and no model "
                         "loads (docs/release-gate.md)")
    group.addoption("--baseline-log", default=None, metavar="PATH",
                    help="the baseline's log for --candidate-log: the same tool, tasks and settings")
    group.addoption("--log-allow", default=None, metavar="NAME[,NAME]",
                    help="settings that may differ between --candidate-log and --baseline-log (num_fewshot, version, "
                         "filter, prompt_hash, ...); the run card lists them")
    group.addoption("--log-metrics", default=None, metavar="TASK:METRIC[,...]",
                    help="compare only these metrics of the logs (TASK:METRIC, or METRIC for every task; default: "
                         "every metric that is a mean of its samples)")


# What a log comparison cannot be run with, and why (it loads no model, and compares two logs).
LOG_CONFLICTS = {
    "--baseline": "--baseline compares this project's own audits of --model with a baseline, the log options "
                  "compare two logs another tool wrote; one run does one of them. Fix: drop --baseline (the "
                  "baseline is --baseline-log), or drop --candidate-log and --baseline-log",
    "--adapter": "--adapter applies to --model, which a log comparison does not load (the candidate is "
                 "--candidate-log). Fix: drop --adapter, or audit the adapter in a run without the log options",
    "--baseline-adapter": "--baseline-adapter applies to a live --baseline model, and a log comparison loads none "
                          "(the baseline is --baseline-log). Fix: drop --baseline-adapter",
    "--mitigation": "--mitigation trains and audits variants of --model, and a log comparison loads no model. "
                    "Fix: run the mitigation audit separately, without the log options",
    "--mitigation-sweep": "--mitigation-sweep fine-tunes --model, and a log comparison loads no model. Fix: run the "
                          "sweep separately, without the log options",
    "--mitigation-steps": "--mitigation-steps is for --mitigation, which a log comparison cannot run. Fix: drop it",
    "--mitigation-instruction": "--mitigation-instruction is for --mitigation, which a log comparison cannot run. "
                                "Fix: drop it",
}


@dataclass(frozen=True)
class LogOptions:
    """--candidate-log, --baseline-log, --log-allow and --log-metrics as checked on the command line."""

    candidate: str
    baseline: str
    allow: tuple[str, ...] = ()
    metrics: tuple[str | tuple[str, str], ...] | None = None


def _names(option: str, raw: str | None, example: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in (raw or "").split(","))
    if raw is not None and (not names or any(not n for n in names)):
        raise AuditUsageError(f"{option} {raw!r}: an empty name. Fix: a comma-separated list without blanks, e.g. "
                              f"{option} {example}.")
    return names if raw is not None else ()


def _metric(raw: str, item: str) -> str | tuple[str, str]:
    task, colon, metric = item.rpartition(":")  # inspect's metrics are "scorer/metric"; no tool's has a colon
    if colon and not (task.strip() and metric.strip()):
        raise AuditUsageError(f"--log-metrics {raw!r}: {item!r} lacks its task or its metric. Fix: TASK:METRIC, e.g. "
                              "--log-metrics crows_pairs_english_gender:pct_stereotype, or METRIC for every task.")
    return (task.strip(), metric.strip()) if colon else metric.strip()


def log_options(getoption) -> LogOptions | None:
    """The log options as given (None: none given), checked before anything else is read: both
    logs or neither, paths that exist, no option that needs a model; usage errors name the fix."""
    candidate, baseline = getoption("--candidate-log"), getoption("--baseline-log")
    allow, metrics = getoption("--log-allow"), getoption("--log-metrics")
    if candidate is None and baseline is None:
        for option, value in (("--log-allow", allow), ("--log-metrics", metrics)):
            if value is not None:
                raise AuditUsageError(f"{option} {value}: applies to a comparison of two logs, and neither "
                                      "--candidate-log nor --baseline-log is given. Fix: add --candidate-log PATH "
                                      f"--baseline-log PATH, or drop {option}.")
        return None
    if candidate is None or baseline is None:
        given, other = ("--candidate-log", "--baseline-log") if baseline is None else ("--baseline-log", "--candidate-log")
        raise AuditUsageError(f"{given} {candidate or baseline}: given without {other}; the gate compares two logs, "
                              f"the candidate's and the baseline's. Fix: pass both, --candidate-log CANDIDATE "
                              "--baseline-log BASELINE (the baseline's log from the same tool, tasks and settings).")
    conflicts = [o for o in LOG_CONFLICTS if getoption(o) is not None]
    if conflicts:
        raise AuditUsageError(f"{conflicts[0]} cannot be used with --candidate-log/--baseline-log: "
                              f"{LOG_CONFLICTS[conflicts[0]]}."
                              + (f" (Also given, and refused for the same reason: {', '.join(conflicts[1:])}.)"
                                 if len(conflicts) > 1 else ""))
    for option, value in (("--candidate-log", candidate), ("--baseline-log", baseline)):
        if not Path(value).expanduser().exists():
            raise AuditUsageError(f"{option} {value}: no such file or folder. Fix: pass an lm-eval --output_path "
                                  "folder (run with --log_samples) or its results_<date>.json, or an inspect_ai .eval "
                                  "log (or its log folder).")
    selected = (tuple(_metric(metrics, m) for m in _names("--log-metrics", metrics, "task:acc"))
                if metrics is not None else None)
    return LogOptions(os.fspath(Path(candidate).expanduser()), os.fspath(Path(baseline).expanduser()),
                      _names("--log-allow", allow, "num_fewshot,version"), selected)


def cli_fix(text: str) -> str:
    """gate_logs' fixes in the command line's words: allow={'a', 'b'} -> --log-allow a,b, ..."""
    def allow(m: re.Match) -> str:
        names = ",".join(n.strip().strip("'\"") for n in m.group(1).split(",") if n.strip())
        return f"--log-allow {names}"

    text = re.sub(r"allow=\{([^}]*)\}", allow, text)
    text = text.replace("metrics= names", "--log-metrics names").replace("with metrics=", "with --log-metrics")
    text = text.replace("allow names", "--log-allow names")
    text = text.replace("out of metrics=", "out of --log-metrics")
    return text.replace("raise max_missing_share", "raise --baseline-max-missing")


def read_logs(given: LogOptions, thresholds: Any = None) -> LogPlan:
    """Both logs read and checked, their settings compared, every row's gate found (``plan_logs``);
    a usage error names the options and the fix in the command line's words."""
    from bias_core.gating.external_logs import plan_logs as plan

    try:
        return plan(given.candidate, given.baseline, thresholds=thresholds, allow=given.allow,
                    metrics=given.metrics)
    except AuditUsageError as exc:
        raise type(exc)(f"--candidate-log {given.candidate} --baseline-log {given.baseline}: {cli_fix(str(exc))}") from None


@dataclass(frozen=True)
class RegressionOptions:
    baseline: str | None = None  # as given
    stored: ItemsFile | None = None  # a stored baseline run's per-item file, read
    stored_path: Path | None = None
    live: Any = None  # the live baseline's ModelSpec
    live_adapter: str | None = None
    summary_md: Path | None = None
    card: tuple[str, ...] = ()  # run-card lines: a live baseline's files and adapter, a stored one's checks
    max_missing: float = MAX_MISSING_SHARE  # --baseline-max-missing
    logs: LogPlan | None = None  # --candidate-log and --baseline-log, read and planned
    log_options: LogOptions | None = None

    @property
    def active(self) -> bool:
        """A baseline of the project's own audits (stored or live); a log comparison is ``logs``."""
        return self.stored is not None or self.live is not None

    def candidate_name(self, model: str) -> str:
        """The candidate's name in rows and titles: ``model`` (--model), or the candidate log's model."""
        return self.logs.candidate.model if self.logs is not None else model

    def title(self, model: str) -> str:
        """The run's title (the Markdown summary's heading)."""
        if self.logs is None:
            return f"Bias audit: {model}"
        return (f"Release gate on {self.logs.candidate.tool} logs: {self.logs.candidate.model} vs "
                f"{self.logs.baseline.model}")

    def label(self) -> str:
        if self.logs is not None:
            base = self.logs.baseline
            return f"baseline log {self.log_options.baseline} ({base.tool} {base.tool_version}, model {base.model})"
        if self.stored is not None:
            return f"stored run {self.stored_path.parent if self.stored_path else self.baseline} " \
                   f"(model {self.stored.run.model}{', adapter ' + self.stored.run.adapter if self.stored.run.adapter else ''})"
        if self.live is not None:
            return f"live {self.baseline}" + (f" + adapter {self.live_adapter}" if self.live_adapter else "")
        return ""


def _is_stored_run(value: str) -> bool:
    p = Path(value).expanduser()
    if p.is_dir():
        if (p / ITEMS_FILE).exists() or (p / "results.json").exists():
            return True
        return not ((p / "config.json").exists() or any(p.glob("*.gguf")))  # a model folder
    if not p.exists() and value.startswith((".", "/", "~")):
        return True  # a path that is not there: refused below as a missing run folder, which names the fix
    return p.name.endswith((".json", ".jsonl.gz")) or p.is_file()


def parse_options(getoption, cache_dir: Path | None = None, thresholds: Any = None) -> RegressionOptions:
    """The regression options from pytest's ``config.getoption``; usage errors name the fix.
    ``cache_dir``: where converted models live (a live GGUF baseline converted before is not re-read).
    ``thresholds``: the ``[regression.external]`` margins a log comparison is gated by."""
    given = log_options(_optional(getoption))
    value = getoption("--baseline")
    adapter = getoption("--baseline-adapter")
    summary = getoption("--summary-md")
    summary_md = Path(summary).expanduser() if summary else None
    max_missing = _share(getoption("--baseline-max-missing"))
    if summary_md is not None and summary_md.is_dir():
        raise AuditUsageError(f"--summary-md {summary}: is a folder. Fix: name a file, e.g. --summary-md summary.md.")
    if given is not None:
        return RegressionOptions(summary_md=summary_md, max_missing=max_missing, logs=read_logs(given, thresholds),
                                 log_options=given)
    if value is None:
        if adapter is not None:
            raise AuditUsageError("--baseline-adapter needs --baseline MODEL (the model the adapter applies to).")
        return RegressionOptions(summary_md=summary_md, max_missing=max_missing)
    if _is_stored_run(value):
        if adapter is not None:
            raise AuditUsageError(f"--baseline-adapter applies to a live baseline model; --baseline {value} is a "
                                  "stored run. Fix: drop --baseline-adapter, or pass the baseline model to --baseline.")
        path = locate_items(value)
        if not path.exists() and not Path(value).expanduser().exists():
            raise AuditUsageError(f"--baseline {value}: no such run folder or file. Fix: pass the run folder an "
                                  "earlier audit wrote (reports/<run id>/), or a model for a live baseline.")
        try:
            stored = read_items(path)
            checked = verify_stored_run(stored, path)
        except AuditUsageError as exc:
            raise AuditUsageError(f"--baseline {value}: {exc}") from None
        return RegressionOptions(value, stored, path, summary_md=summary_md, card=checked, max_missing=max_missing)
    from bias_core.models.registry import resolve_model
    from bias_core.models.weights.preflight import check_spec, choices

    try:
        spec = resolve_model(value)
    except AuditUsageError as exc:
        raise AuditUsageError(str(exc).replace("--model", "--baseline", 1)) from None
    check_spec(spec, bool(getoption("--trust-remote-code")), cache_dir, option="--baseline")
    card = [f"--baseline: {note}" for note in choices(spec)]
    if adapter is not None:
        from bias_core.models.weights.adapter import adapter_card

        card += adapter_card(adapter, "--baseline-adapter", value, spec, cache_dir,
                             bool(getoption("--allow-adapter-base-mismatch")))
    return RegressionOptions(value, live=spec, live_adapter=adapter and os.fspath(Path(adapter).expanduser()),
                             summary_md=summary_md, card=tuple(card), max_missing=max_missing)


def _optional(getoption):
    """``getoption`` that answers None for an option it does not know (a getter built by hand, as
    for ``parse_options`` outside pytest, need not name the log options)."""
    def get(name: str) -> Any:
        try:
            return getoption(name)
        except (KeyError, ValueError):
            return None

    return get


def _share(raw: Any) -> float:
    """--baseline-max-missing: a share in [0, 1) (1 would judge a probe on no items at all)."""
    if raw is None:
        return MAX_MISSING_SHARE
    try:
        share = float(raw)
    except (TypeError, ValueError):
        share = float("nan")
    if not (0.0 <= share < 1.0):
        raise AuditUsageError(f"--baseline-max-missing {raw}: must be a share from 0 up to (not including) 1. Fix: "
                              f"e.g. --baseline-max-missing 0.1 for a tenth of a probe's items or a log's samples (default "
                              f"{MAX_MISSING_SHARE:g}).")
    return share
