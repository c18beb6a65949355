"""The result cache's counts for the run card: hits, misses and the entries rejected because they
did not prove their key and value (storage/result_cache.py), over the session.

Counts are this process's change since the session started (every cache it opened: the audited
model, a live baseline, calibrations). An xdist worker sends its counts so far with each audit
test's report, as rows travel (hooks.py); the controller keeps each worker's latest and adds them
to its own.
"""

from __future__ import annotations

from typing import Any

from bias_core.pytest_plugin.session_state import MODEL, RUN, SETTINGS
from bias_core.storage.result_cache import totals

COUNTS = ("hits", "misses", "rejected", "rejected_old_format")


def start(config) -> None:
    """Mark the session's start (pytest_configure, in the controller and in each worker)."""
    config.stash[RUN]["cache_start"] = totals()


def _since_start(config) -> dict[str, Any]:
    before, now = config.stash[RUN].get("cache_start") or {}, totals()
    out: dict[str, Any] = {k: int(now[k]) - int(before.get(k, 0)) for k in COUNTS}
    out["last_rejected"] = now["last_rejected"] if out["rejected"] else ""
    return out


def for_report(config) -> dict[str, Any] | None:
    """In an xdist worker: its counts so far, for a test report; None in the controller."""
    worker = getattr(config, "workerinput", None)
    if worker is None:
        return None
    return {"worker": str(worker.get("workerid", "")), **_since_start(config)}


def record(config, counts: Any) -> None:
    """In the controller: keep a worker's latest counts (from ``for_report``)."""
    if isinstance(counts, dict) and all(isinstance(counts.get(k), int) for k in COUNTS):
        config.stash[RUN].setdefault("cache_workers", {})[str(counts.get("worker", ""))] = counts


def card(config) -> dict[str, Any] | None:
    """The run card's ``cache``: counts over this process and every worker heard from, whether the
    cache was on, and the last rejected entry ("path: why"); None where no cache was consulted."""
    parts = [_since_start(config), *config.stash[RUN].get("cache_workers", {}).values()]
    out: dict[str, Any] = {k: sum(int(p[k]) for p in parts) for k in COUNTS}
    lm = config.stash.get(MODEL, None)
    if lm is None and not out["hits"] + out["misses"]:
        return None
    out["enabled"] = bool(lm.cache_stats()["enabled"]) if lm is not None else bool(config.stash[SETTINGS].load.use_cache)
    out["last_rejected"] = next((p["last_rejected"] for p in parts if p.get("last_rejected")), "")
    return out

