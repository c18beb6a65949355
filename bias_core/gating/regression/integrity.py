"""A stored baseline proves what it says: its items against their own header and against the
results.json of the same run, before any model loads.

A baseline run folder comes from outside the run (a CI artifact, a copy someone kept): an items
file edited after the run, a header edited to match it, or the items of one run beside the
results of another would otherwise move the release gate's verdict without a word.
``verify_stored_run`` checks

- every block: the metric's value recomputed from its items by the metric's own aggregation
  (``spec.PAIRED``, the computation ``items_from_result`` checked when the run wrote them) equals
  the value on its header line, within ``VALUE_RTOL`` (1e-9 relative: summation order only);
- every block has its row in results.json (test id ``<probe>-<metric>``) with the same value, and,
  where the row records them (runs from this version on), the same SHA-256 of the block's lines
  (``block_sha256``: every item's id, value, prompt and output, the probe's content hash, n);
- the items header and results.json name the same model, seed, engine, lexicon and model
  fingerprint.

Any disagreement is an ``AuditUsageError`` (exit 4) naming the file, the test and both numbers.
``verify_stored_run`` returns lines for the run card: what was checked, and what an older
results.json (without item digests) could not show.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.gating.regression.items import ItemsFile, block_sha256, lexicon_sha256, recomputed_value, values_agree
from bias_core.gating.regression.spec import PAIRED

RESULTS_FILE = "results.json"
_FIX = ("Fix: copy the baseline run folder again, whole, from the job that wrote it (its items.jsonl.gz and "
        "results.json belong together), or re-run the baseline audit.")


def _num(x: Any) -> str:
    return f"{x:.6g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else json.dumps(x)[:40]


def read_results(path: Path) -> dict[str, Any]:
    """results.json of a stored run; a usage error when it is missing or not one."""
    if not path.is_file():
        raise AuditUsageError(f"{path}: missing. A stored baseline is checked against the results.json of the run "
                              f"that wrote its items, so an items file alone is not a baseline. {_FIX}")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AuditUsageError(f"{path}: not readable as JSON ({exc}). {_FIX}") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("run"), dict) and isinstance(doc.get("results"), list)):
        raise AuditUsageError(f"{path}: not an audit's results.json (no run and results). {_FIX}")
    return doc


def _engine(value: Any) -> str:
    """The engine's name from results.json's "engine" ("openai v1", "vllm 0.11.0", "transformers")."""
    return str(value).split()[0] if value and str(value).strip() else "transformers"


def _run_problems(items: ItemsFile, run: Mapping[str, Any]) -> list[str]:
    head, problems = items.run, []
    for key, stored in (("model", head.model), ("seed", head.seed)):
        if run.get(key) != stored:
            problems.append(f"{key}: {json.dumps(stored)} in the items header, {json.dumps(run.get(key))} in results.json")
    if "engine" in run and _engine(run["engine"]) != (head.engine or "transformers"):
        problems.append(f"engine: {head.engine or 'transformers'} in the items header, {run['engine']} in results.json")
    pairs = (run.get("lexicon") or {}).get("pairs") if isinstance(run.get("lexicon"), dict) else None
    if pairs is not None and head.lexicon_sha256 and lexicon_sha256(pairs) != head.lexicon_sha256:
        problems.append("lexicon: the gender word pairs in results.json are not the ones the items header was made with")
    found = run.get("model_fingerprint")
    if found and head.model_fingerprint and found != head.model_fingerprint:
        problems.append(f"model fingerprint: {head.model_fingerprint[:24]} in the items header, {str(found)[:24]} "
                        "in results.json")
    return problems


def verify_stored_run(items: ItemsFile, items_path: Path, results_path: Path | None = None) -> tuple[str, ...]:
    """Check a stored run's items against their header and its results.json (module doc); raises
    ``AuditUsageError`` naming the file and the test, returns the run card's lines."""
    results_path = results_path or items_path.with_name(RESULTS_FILE)
    doc = read_results(results_path)
    problems = _run_problems(items, doc["run"])
    if problems:
        raise AuditUsageError(f"{items_path} and {results_path} do not describe the same run: " + "; ".join(problems)
                              + f". {_FIX}")
    rows = {r["test_id"]: r for r in doc["results"]
            if isinstance(r, dict) and isinstance(r.get("test_id"), str) and not r.get("variant")
            and r.get("kind") != "regression"}
    digests = 0
    for (probe, metric), block in items.blocks.items():
        test = f"{probe}-{metric}"
        spec = PAIRED.get(metric)
        if spec is None:
            raise AuditUsageError(f"{items_path}: {test}: {metric} is not a metric this bias-core pairs item by item; "
                                  f"the file was edited or written by another version. {_FIX}")
        recomputed = recomputed_value(block.items, spec)
        if recomputed is None or not values_agree(recomputed, block.value):
            shown = "no item has a value" if recomputed is None else f"the items give {_num(recomputed)}"
            raise AuditUsageError(
                f"{items_path}: {test}: {shown} ({spec.aggregation} of {sum(i.value is not None for i in block.items)} "
                f"item values), but its header line says {_num(block.value)}: the items were edited after the run. "
                f"{_FIX}")
        row = rows.get(test)
        if row is None:
            raise AuditUsageError(f"{items_path}: {test} has items but {results_path} has no result for it: the two "
                                  f"files are not from one run. {_FIX}")
        value = row.get("value")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not values_agree(float(value), block.value):
            raise AuditUsageError(f"{items_path}: {test}: the items header says {_num(block.value)}, {results_path} "
                                  f"says {_num(value)}: one of them was edited after the run. {_FIX}")
        fingerprint = row.get("model_fingerprint")
        if fingerprint and items.run.model_fingerprint and fingerprint != items.run.model_fingerprint:
            raise AuditUsageError(f"{items_path}: {test}: computed with model fingerprint {str(fingerprint)[:24]} "
                                  f"(results.json), the items header says {items.run.model_fingerprint[:24]}. {_FIX}")
        recorded = row.get("probe_sha256")
        if recorded is not None and recorded != block.probe_sha256:
            raise AuditUsageError(f"{items_path}: {test}: probe content {block.probe_sha256[:12]} in the items, "
                                  f"{str(recorded)[:12]} in {results_path}. {_FIX}")
        recorded = row.get("items_sha256")
        if recorded is not None:
            if recorded != block_sha256(block):
                raise AuditUsageError(f"{items_path}: {test}: its items are not the ones {results_path} recorded (their "
                                      f"SHA-256 differs): an item's value, prompt or output was edited. {_FIX}")
            digests += 1
    n = len(items.blocks)
    line = (f"--baseline: {n} stored probe x metric(s) checked: each value recomputed from its items equals its "
            f"header and {results_path.name}")
    if digests == n:
        return (line + ", and every block's SHA-256 matches results.json",)
    return (line + f"; {n - digests} block(s) without an item digest in {results_path.name} (written by an older "
                   "bias-core): an edit that keeps every value cannot be seen there",)
