"""Errors users see. Each names the problem and the fix."""


class AuditUsageError(Exception):
    """Bad input from the user (options, thresholds file, data dir). Raised before models load."""


class ThresholdsError(AuditUsageError):
    """thresholds.toml is malformed, names an unknown metric/probe, or has a wrong type."""


class DataSourceMissing(Exception):
    """A probe's data cannot be found offline; audits turn this into a skip with the reason."""


class ProbeNotApplicable(Exception):
    """A probe that does not apply to this run (e.g. superseded by data given with --data-dir)."""


class BaselineMismatch(AuditUsageError):
    """A stored baseline cannot be paired with this run: other items, probe versions or decoding."""
