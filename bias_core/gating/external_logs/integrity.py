"""Another tool's log proves what it says before it is gated.

The logs come from outside the run, as the project's own stored baselines do: an aggregate edited
after the run, a samples file cut short or from another run, or a sample listed twice would
otherwise move the release gate's verdict without a word. The readers call these checks:

- ``check_mean``: a metric that is the mean of its per-sample values is recomputed from them and
  must equal the log's aggregate within ``VALUE_RTOL`` (summation order only);
- ``broken_line`` / ``damaged``: a line that is not JSON, is cut short or lacks a field is an error
  naming the file and the line;
- ``check_unique``: a sample id listed twice is an error naming both places.

Every error is a usage error (exit 4) naming the file, the task and the metric, and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from bias_core.errors import AuditUsageError, DataFileError
from bias_core.gating.regression.items import values_agree

COPY_AGAIN = ("Fix: copy the tool's output folder again, whole, from the job that wrote it (the aggregate file "
              "and its per-sample files belong together), or re-run the evaluation with per-sample logging.")


def broken_line(path: Path, line: int, what: str) -> DataFileError:
    return DataFileError(f"{path}: line {line}: {what}; the per-sample log is truncated or garbled. {COPY_AGAIN}")


def damaged(path: Path, what: str) -> DataFileError:
    return DataFileError(f"{path}: {what}. {COPY_AGAIN}")


def mean(values: Sequence[float]) -> float | None:
    """The mean as lm-eval and inspect compute it (``sum / len``, in order); None for no values."""
    return sum(values) / len(values) if values else None


def finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def check_mean(where: str, task: str, metric: str, reported: object, values: Sequence[float]) -> float:
    """The log's aggregate, once it equals the mean of ``values``; else a usage error."""
    recomputed = mean(values)
    if not finite_number(reported) or isinstance(reported, bool):
        raise AuditUsageError(f"{where}: {task} {metric}: the aggregate is {reported!r}, not a finite number, while "
                              f"its {len(values)} per-sample values average {recomputed!r}. {COPY_AGAIN}")
    if recomputed is None or not values_agree(recomputed, float(reported)):
        raise AuditUsageError(
            f"{where}: {task} {metric}: the log states {float(reported)!r}, but the mean of its {len(values)} "
            f"per-sample values is {recomputed!r}: the aggregate was edited, or the per-sample file is not the one "
            f"it was computed from (cut short, edited, or from another run), so neither can be trusted. {COPY_AGAIN}")
    return float(reported)


def check_unique(path: Path, task: str, places: Iterable[tuple[str, str]]) -> None:
    """``places``: (sample key, where it was read). A key seen twice is an error naming both."""
    seen: dict[str, str] = {}
    for key, where in places:
        if key in seen:
            raise DataFileError(f"{path}: {task}: sample {key} is listed twice ({seen[key]} and {where}); a log lists "
                                f"each sample once, so this one was edited or two runs were joined. {COPY_AGAIN}")
        seen[key] = where
