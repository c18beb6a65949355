"""Which tool wrote a log, and its reader: ``read_log`` takes a file or folder of either tool."""

from __future__ import annotations

import json
from pathlib import Path

from bias_core.errors import AuditUsageError
from bias_core.gating.external_logs.inspect_log import read_inspect
from bias_core.gating.external_logs.lm_eval_log import read_lm_eval
from bias_core.gating.external_logs.records import INSPECT, LM_EVAL, ExternalRun


def detect_tool(path: str | Path) -> str:
    """``LM_EVAL`` or ``INSPECT``, from the file's name or a folder's content (a JSON file is read:
    lm-eval's results hold "configs", inspect's JSON logs "eval")."""
    p = Path(path)
    if p.is_dir():
        return INSPECT if any(p.glob("*.eval")) else LM_EVAL
    if p.suffix == ".eval":
        return INSPECT
    if p.suffix == ".json" and p.is_file():
        try:
            head = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return LM_EVAL  # its reader names what is wrong with the file
        if isinstance(head, dict) and "eval" in head and "configs" not in head:
            return INSPECT
        return LM_EVAL
    if not p.exists():
        raise AuditUsageError(f"{p}: no such file or folder. Fix: pass an lm-eval --output_path folder, its "
                              "results_<date>.json, or an inspect_ai .eval log or log folder.")
    raise AuditUsageError(f"{p}: neither an lm-eval results json nor an inspect_ai log. Fix: pass an lm-eval "
                          "--output_path folder, its results_<date>.json, or an inspect_ai .eval log or log folder.")


def read_log(path: str | Path) -> ExternalRun:
    """The run of another tool at ``path``, read by that tool's reader."""
    return read_inspect(path) if detect_tool(path) == INSPECT else read_lm_eval(path)
