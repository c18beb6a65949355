"""The regression gate's command-line options, validated before any model loads.

``--baseline`` takes either a stored run (a run folder, its results.json or its items.jsonl.gz)
or anything ``--model`` takes (a live baseline, audited in this session on the same items).
A stored run is read and its configuration checked against this run's now, so a baseline made
with another seed, decoding, lexicon, sample size or scorer is a usage error (exit 4) before
any model loads; its probes are checked once the tests are collected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.gating.regression.integrity import verify_stored_run
from bias_core.gating.regression.items import ITEMS_FILE, ItemsFile, locate_items, read_items
from bias_core.gating.regression.pairing import MAX_MISSING_SHARE


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

    @property
    def active(self) -> bool:
        return self.stored is not None or self.live is not None

    def label(self) -> str:
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


def parse_options(getoption, cache_dir: Path | None = None) -> RegressionOptions:
    """The regression options from pytest's ``config.getoption``; usage errors name the fix.
    ``cache_dir``: where converted models live (a live GGUF baseline converted before is not re-read)."""
    value = getoption("--baseline")
    adapter = getoption("--baseline-adapter")
    summary = getoption("--summary-md")
    summary_md = Path(summary).expanduser() if summary else None
    max_missing = _share(getoption("--baseline-max-missing"))
    if summary_md is not None and summary_md.is_dir():
        raise AuditUsageError(f"--summary-md {summary}: is a folder. Fix: name a file, e.g. --summary-md summary.md.")
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
                              f"e.g. --baseline-max-missing 0.1 for a tenth of a probe's items (default "
                              f"{MAX_MISSING_SHARE:g}).")
    return share
