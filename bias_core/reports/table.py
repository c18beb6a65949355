"""Machine-readable results of an audit run: ``results.json`` and ``results.csv``.

One row per audit test (probe x metric). The pytest plugin feeds rows to a :class:`ResultsTable`
in the controller process and calls :meth:`ResultsTable.write` after every test, so an
interrupted run still leaves complete, readable files: every file is written to a temporary
file in the same folder and moved into place with ``os.replace`` (atomic on POSIX and Windows).

``load_results`` reads a run back (JSON, CSV or the run folder) and ``compare_result_tables`` lines two runs up
by their model-independent ``test_id`` to show value deltas and verdict changes.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bias_core.reports.json_safe import jsonable
from bias_core.storage.files import atomic_write_text
from bias_core.storage.visible import visible

if TYPE_CHECKING:  # pandas is imported on use: importing the plugin must stay cheap
    import pandas as pd

# mkstemp creates files 0600; give written files the usual umask-based mode instead.

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"

#: Column order of ``results.csv`` and of frames returned by :func:`load_results`.
#: Keys a row has beyond these follow in sorted order; ``examples`` is never a CSV column.
COLUMNS: tuple[str, ...] = (
    "run_id",
    "test_id",
    "family",
    "probe",
    "metric",
    "model",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "limit",
    "direction",
    "ideal",
    "gate_source",
    "verdict",
    "mark",
    "scale",
    "p_value",
    "duration_s",
    "nodeid",
)
NUMERIC_COLUMNS = ("value", "ci_low", "ci_high", "n", "limit", "ideal", "p_value", "duration_s")
INTEGER_COLUMNS = ("n",)  # nullable Int64 in frames, written without ".0" in the CSV
TEXT_COLUMNS = tuple(c for c in COLUMNS if c not in NUMERIC_COLUMNS)
EXCLUDED_FROM_CSV = ("examples", "breakdown", "moved")

#: What a report says until the run records how it ended (a killed run keeps saying it).
NOT_FINISHED = "the run did not finish: still running, or killed before it could record why"

#: Verdicts ordered from good to bad; used by :func:`compare_result_tables` to call a change a regression.
VERDICT_RANK = {"pass": 0, "inconclusive": 1, "fail": 2}


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _ordered_columns(keys: Iterable[str]) -> list[str]:
    extra = sorted(set(keys) - set(COLUMNS) - set(EXCLUDED_FROM_CSV))
    return list(COLUMNS) + extra


def rows_to_frame(rows: Iterable[Mapping[str, Any]], *, keep_examples: bool = False) -> pd.DataFrame:
    """A DataFrame with the stable column order (all of :data:`COLUMNS`, then extras sorted)."""
    import pandas as pd

    rows = [dict(r) for r in rows]
    keys: set[str] = set()
    for r in rows:
        keys.update(r)
    columns = _ordered_columns(keys)
    if keep_examples and "examples" in keys:
        columns.append("examples")
    df = pd.DataFrame(rows, columns=columns)
    return _normalise_dtypes(df)


def _normalise_dtypes(df: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    for col in COLUMNS:
        if col not in df.columns:
            df[col] = None
    for col in NUMERIC_COLUMNS:
        num = pd.to_numeric(df[col], errors="coerce").astype("float64")
        if col in INTEGER_COLUMNS and (num.dropna() % 1 == 0).all():
            df[col] = num.astype("Int64")
        else:
            df[col] = num
    for col in TEXT_COLUMNS:
        df[col] = df[col].map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
        df[col] = df[col].astype(object)
    front = list(COLUMNS)
    rest = [c for c in df.columns if c not in front]
    return df[front + rest]


def _csv_cell(v: Any) -> Any:
    """A CSV cell: containers as JSON; text with its controls written as escapes (a spreadsheet or
    a terminal shows the CSV as text; results.json keeps the exact text)."""
    if isinstance(v, (dict, list, tuple)):
        return visible(json.dumps(jsonable(v), sort_keys=True, ensure_ascii=False))
    return visible(v) if isinstance(v, str) else v


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------
class ResultsTable:
    """Collects result rows of one run and writes ``results.json`` / ``results.csv`` atomically.

    >>> table = ResultsTable("reports/2024-05-01T12-00-00")   # doctest: +SKIP
    >>> table.set_run_info({"model": "smollm2-135m", "seed": 0})
    >>> table.add(row); table.write()                          # after every test
    >>> table.write(complete=True)                             # at session end

    A row added again with the same ``nodeid`` (for example a rerun) replaces the earlier one,
    so the files keep one line per test. Rows are stored JSON-safe (NaN -> null).
    """

    def __init__(self, run_dir: str | os.PathLike[str], run_info: Mapping[str, Any] | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.json_path = self.run_dir / RESULTS_JSON
        self.csv_path = self.run_dir / RESULTS_CSV
        self._rows: list[dict[str, Any]] = []
        self._index: dict[str, int] = {}
        self._run_info: dict[str, Any] = {}
        self._status: dict[str, Any] = {"complete": False, "partial_reason": NOT_FINISHED}
        self._lock = threading.RLock()
        if run_info:
            self.set_run_info(run_info)

    # -- input --------------------------------------------------------------------------------
    def set_run_info(self, info: Mapping[str, Any]) -> None:
        """Merge run metadata (model, run_id, seed, started, argv, versions, ...) into the header."""
        with self._lock:
            self._run_info.update(jsonable(dict(info)))

    @property
    def run_info(self) -> dict[str, Any]:
        with self._lock:
            return json.loads(json.dumps(self._run_info))

    @property
    def header(self) -> dict[str, Any]:
        """The run info with the status of the last write (what results.json says, or would say
        where it could not be written)."""
        with self._lock:
            return {**json.loads(json.dumps(self._run_info)), **self._status}

    def add(self, row: Mapping[str, Any]) -> None:
        """Add one result row (a plain dict, as sent by the plugin / xdist workers)."""
        clean = jsonable(dict(row))
        key = clean.get("nodeid") or clean.get("test_id")
        with self._lock:
            if key and key in self._index:
                self._rows[self._index[key]] = clean
            else:
                if key:
                    self._index[key] = len(self._rows)
                self._rows.append(clean)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """A copy of the rows added so far, in arrival order."""
        with self._lock:
            return json.loads(json.dumps(self._rows))

    def __len__(self) -> int:
        return len(self._rows)

    # -- output -------------------------------------------------------------------------------
    def to_frame(self, *, keep_examples: bool = False) -> pd.DataFrame:
        return rows_to_frame(self.rows, keep_examples=keep_examples)

    def write(self, *, complete: bool = False, partial_reason: str | None = None) -> tuple[Path, Path]:
        """Write ``results.json`` and ``results.csv`` atomically; returns their paths.

        ``complete=True`` marks the run as finished normally (``run["complete"]`` in the JSON);
        files written before that say ``complete: false`` with ``partial_reason``, so a run that
        is interrupted or killed never reads as complete. The CSV repeats both on every row
        (``run_complete``, ``partial_reason``), and the HTML report shows them.
        """
        with self._lock:
            self._status = {"complete": bool(complete),
                            "partial_reason": "" if complete else (partial_reason or NOT_FINISHED)}
            run = dict(self._run_info)
            run.update(self._status)
            run["n_results"] = len(self._rows)
            doc = {"run": run, "results": self._rows}
            text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
            import pandas as pd

            df = rows_to_frame(self._rows)
            df["run_complete"] = bool(complete)
            df["partial_reason"] = self._status["partial_reason"]
            for col in df.columns:  # object columns, and text ones (pandas 3 infers "str" for them)
                if df[col].dtype == object or pd.api.types.is_string_dtype(df[col]):
                    df[col] = df[col].map(_csv_cell)
            csv_text = df.to_csv(index=False, lineterminator="\n")
            atomic_write_text(self.json_path, text, durable=True)
            atomic_write_text(self.csv_path, csv_text, durable=True)
        return self.json_path, self.csv_path

    def write_html(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> Path:
        """Write the self-contained HTML report (default ``run_dir/report.html``)."""
        from bias_core.reports.html import write_html

        path = Path(path) if path is not None else self.run_dir / "report.html"
        return write_html(self.rows, {**self.run_info, **self._status}, path, **kwargs)


# --------------------------------------------------------------------------------------------
# reading runs back
# --------------------------------------------------------------------------------------------
def _resolve(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    if p.is_dir():
        for name in (RESULTS_JSON, RESULTS_CSV):
            if (p / name).is_file():
                return p / name
        raise FileNotFoundError(f"no {RESULTS_JSON} or {RESULTS_CSV} in run folder {p}")
    if not p.is_file():
        raise FileNotFoundError(f"no results file at {p} (give a results.json, results.csv or a run folder)")
    return p


def load_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read the results of an earlier run into a DataFrame (one row per test).

    ``path`` may be a ``results.json``, a ``results.csv`` or a run folder (JSON preferred).
    Columns: :data:`COLUMNS` in that order, then any extra keys; from JSON also ``examples``.
    Numeric columns are float (missing -> NaN; ``n`` is nullable ``Int64``), text columns str
    (missing -> "").
    The run header of a JSON file is in ``df.attrs["run"]``.
    """
    import pandas as pd

    p = _resolve(path)
    if p.suffix.lower() == ".csv":
        df = pd.read_csv(p, dtype={c: object for c in TEXT_COLUMNS}, keep_default_na=False,
                         na_values={c: ["", "nan", "NaN"] for c in NUMERIC_COLUMNS})
        df = _normalise_dtypes(df)
        df.attrs["run"] = {}
        return df
    with open(p, encoding="utf-8") as fh:
        doc = json.load(fh)
    if isinstance(doc, list):  # a bare list of rows
        doc = {"run": {}, "results": doc}
    if not isinstance(doc, dict) or "results" not in doc:
        raise ValueError(f"{p} is not a results file (expected {{'run': ..., 'results': [...]}})")
    df = rows_to_frame(doc["results"], keep_examples=True)
    run = doc.get("run") or {}
    if "complete" in run:  # the columns a CSV carries, so both formats read alike
        df["run_complete"] = bool(run["complete"])
        df["partial_reason"] = str(run.get("partial_reason") or "")
    df.attrs["run"] = run
    return df


def _as_frame(obj: Any) -> pd.DataFrame:
    import pandas as pd

    if isinstance(obj, pd.DataFrame):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        return load_results(obj)
    return rows_to_frame(obj)


def _classify(prev: str, cur: str, in_prev: bool, in_cur: bool) -> str:
    if not in_prev:
        return "new"
    if not in_cur:
        return "removed"
    if prev == cur:
        return "unchanged"
    if prev in VERDICT_RANK and cur in VERDICT_RANK:
        return "regressed" if VERDICT_RANK[cur] > VERDICT_RANK[prev] else "improved"
    return "changed"


COMPARE_COLUMNS = (
    "test_id", "family", "probe", "metric", "model_prev", "model_cur",
    "value_prev", "value_cur", "delta", "ci_low_prev", "ci_high_prev", "ci_low_cur", "ci_high_cur",
    "limit", "direction", "worsened", "verdict_prev", "verdict_cur", "verdict_changed", "change",
)


def compare_result_tables(previous: Any, current: Any) -> pd.DataFrame:
    """Line two runs up on the model-independent ``test_id`` (probe x metric).

    ``previous`` / ``current`` are frames from :func:`load_results` (a path or a list of row
    dicts also works). Returns one row per test id present in either run, sorted by test id,
    with columns :data:`COMPARE_COLUMNS`:

    - ``delta = value_cur - value_prev`` (NaN when either is missing);
    - ``worsened``: the value moved towards failing its gate (up for ``direction == "max"``,
      down for ``"min"``); ``None`` when unknown;
    - ``change``: ``new`` / ``removed`` / ``unchanged`` / ``improved`` / ``regressed``
      (along pass < inconclusive < fail) / ``changed`` (to or from error/skipped);
    - ``verdict_changed``: the test ran in both runs and its verdict differs.
    """
    import pandas as pd

    prev = _as_frame(previous)
    cur = _as_frame(current)
    keep = ["test_id", "family", "probe", "metric", "model", "value", "ci_low", "ci_high",
            "limit", "direction", "verdict"]
    prev = _normalise_dtypes(prev.copy())[keep].drop_duplicates("test_id", keep="last")
    cur = _normalise_dtypes(cur.copy())[keep].drop_duplicates("test_id", keep="last")
    prev["_in"] = True
    cur["_in"] = True
    m = prev.merge(cur, on="test_id", how="outer", suffixes=("_prev", "_cur"), sort=True)

    in_prev = m["_in_prev"].eq(True)
    in_cur = m["_in_cur"].eq(True)

    def pick(col: str) -> pd.Series:
        return m[f"{col}_cur"].where(in_cur, m[f"{col}_prev"]).fillna("").astype(object)

    out = pd.DataFrame({"test_id": m["test_id"].astype(object)})
    for col in ("family", "probe", "metric"):
        out[col] = pick(col)
    out["model_prev"] = m["model_prev"].fillna("").astype(object)
    out["model_cur"] = m["model_cur"].fillna("").astype(object)
    out["value_prev"] = m["value_prev"].astype("float64")
    out["value_cur"] = m["value_cur"].astype("float64")
    out["delta"] = out["value_cur"] - out["value_prev"]
    for col in ("ci_low", "ci_high"):
        out[f"{col}_prev"] = m[f"{col}_prev"].astype("float64")
        out[f"{col}_cur"] = m[f"{col}_cur"].astype("float64")
    out["limit"] = m["limit_cur"].where(in_cur, m["limit_prev"]).astype("float64")
    out["direction"] = pick("direction")

    def worsened(r: pd.Series) -> Any:
        d = r["delta"]
        if d is None or (isinstance(d, float) and math.isnan(d)):
            return None
        if r["direction"] == "max":
            return bool(d > 0)
        if r["direction"] == "min":
            return bool(d < 0)
        return None

    out["worsened"] = out.apply(worsened, axis=1).astype(object) if len(out) else pd.Series(dtype=object)
    out["verdict_prev"] = m["verdict_prev"].fillna("").astype(object)
    out["verdict_cur"] = m["verdict_cur"].fillna("").astype(object)
    out["change"] = [
        _classify(p, c, ip, ic)
        for p, c, ip, ic in zip(out["verdict_prev"], out["verdict_cur"], in_prev, in_cur)
    ]
    out["verdict_changed"] = out["change"].isin(["regressed", "improved", "changed"])
    return out[list(COMPARE_COLUMNS)].reset_index(drop=True)
