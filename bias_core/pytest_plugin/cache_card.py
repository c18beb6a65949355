"""The result cache's counts for the run card: lookups (hits, misses) and the entries rejected
because they did not prove their key and value (storage/result_cache.py), over the session.

Counts are this process's change since the session started (every cache it opened: the audited
model, a live baseline, calibrations). An xdist worker sends its counts with a test's report
where they changed, as rows travel (hooks.py): its lookups so far and the entries it rejected since its last
report. The controller keeps each worker's latest lookups and the union of rejected entries, so
an entry that two workers both found edited counts once.
"""

from __future__ import annotations

from typing import Any

from bias_core.pytest_plugin.session_state import find_run, run_state
from bias_core.storage.result_cache import last_rejected, rejections, totals

LOOKUPS = ("hits", "misses")


def start(config) -> None:
    """Mark the session's start (pytest_sessionstart, in the controller and in each worker)."""
    now, cache = totals(), run_state(config).cache
    cache.start, cache.sent = now, now["rejections"]


def _lookups(config) -> dict[str, int]:
    before, now = run_state(config).cache.start or {}, totals()
    return {k: int(now[k]) - int(before.get(k, 0)) for k in LOOKUPS}


def for_report(config) -> dict[str, Any] | None:
    """In an xdist worker: its lookups so far and the entries rejected since its last report, for a
    test report; None in the controller, and where nothing changed since the last report."""
    worker = getattr(config, "workerinput", None)
    run = find_run(config)
    if worker is None or run is None or run.cache.start is None:
        return None
    cache = run.cache
    new, lookups = rejections(cache.sent), _lookups(config)
    if not new and lookups == cache.lookups_sent:
        return None
    cache.sent += len(new)
    cache.lookups_sent = lookups
    return {"worker": str(worker.get("workerid", "")), **lookups, "rejected": [list(r) for r in new],
            "last_rejected": last_rejected() if new else ""}


def record(config, counts: Any) -> None:
    """In the controller: take in a worker's counts (from ``for_report``)."""
    if not isinstance(counts, dict) or not all(isinstance(counts.get(k), int) for k in LOOKUPS):
        return
    cache = run_state(config).cache
    cache.workers[str(counts.get("worker", ""))] = {k: counts[k] for k in LOOKUPS}
    for entry in counts.get("rejected") or ():
        if isinstance(entry, (list, tuple)) and len(entry) == 2:
            cache.rejected[str(entry[0])] = bool(entry[1])
    if counts.get("last_rejected"):
        cache.last_rejected = str(counts["last_rejected"])


def card(config) -> dict[str, Any] | None:
    """The run card's ``cache``: lookups over this process and every worker heard from, the entries
    rejected (each once; ``rejected_old_format`` of them without a checksum), whether the cache was
    on and the last rejected entry ("path: why"); None where no cache was consulted."""
    run = run_state(config)
    cache = run.cache
    parts = [_lookups(config), *cache.workers.values()]
    out: dict[str, Any] = {k: sum(int(p[k]) for p in parts) for k in LOOKUPS}
    lm = run.model
    if lm is None and not out["hits"] + out["misses"]:
        return None
    own = rejections(int((cache.start or {}).get("rejections", 0)))
    rejected = {**cache.rejected, **dict(own)}
    out["rejected"] = len(rejected)
    out["rejected_old_format"] = sum(rejected.values())
    out["enabled"] = bool(lm.cache_stats()["enabled"]) if lm is not None else bool(run.settings.load.use_cache)
    out["last_rejected"] = (last_rejected() if own else "") or cache.last_rejected
    return out
