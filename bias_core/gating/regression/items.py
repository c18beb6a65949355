"""The per-item results file: each item's value of each probe x metric of a run, so a later run
can pair with it (``items.jsonl.gz``, next to results.json).

Layout: gzip-compressed JSON lines. The first line is the run's header (format, version and the
``RunConfig`` that pairing must check); then, per probe x metric, one ``metric`` line followed
by its ``n_items`` ``item`` lines::

    {"kind": "header", "format": "bias-core-items", "format_version": 1, "run": {...}}
    {"kind": "metric", "probe": "template-hobby", "metric": "GLD", "probe_version": "1",
     "probe_sha256": "...", "value": 0.41, "n_items": 120}
    {"kind": "item", "id": "hobby:chess", "value": 0.3958..., "prompt": "...", "output": null}

Floats are written by the standard library's ``json`` (the shortest text that reads back as the
same double), so values round-trip bit for bit; pandas' ``to_json`` rounds to 10-15 digits and
would not. Each block is its own gzip member, so blocks can be appended one test at a time and
a file cut short by an interrupted run still reads: the incomplete last block is dropped and
``ItemsFile.truncated`` says so. Same content, same bytes (the gzip header's time is 0).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import math
import os
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bias_core.errors import AuditUsageError
from bias_core.gating.regression.spec import PairedSpec
from bias_core.storage.files import append_whole
from bias_core.storage.redaction import redact

FORMAT = "bias-core-items"
FORMAT_VERSION = 1
ITEMS_FILE = "items.jsonl.gz"
# Tolerance between a metric's reported value and its value recomputed from the items (summation
# order only): anything larger means the spec does not describe the metric (when a run writes its
# items) or the items are not the ones the value came from (when a baseline is read).
VALUE_RTOL = 1e-9
VALUE_ATOL = 1e-12


class NoItemValues(ValueError):
    """A metric whose items all lack a value in this run: nothing to pair, said without a traceback."""


@dataclass(frozen=True)
class RunConfig:
    """What a run was made with. Pairing refuses a baseline that differs in ``MUST_MATCH``, or
    that was computed by another engine or in another dtype (their numbers differ by more than
    the models would); model and tokenizer may differ (that is the comparison) and are reported."""

    model: str
    model_fingerprint: str = ""
    tokenizer_fingerprint: str = ""
    dtype: str = ""
    adapter: str | None = None
    seed: int = 0
    decoding: dict[str, dict[str, Any]] = field(default_factory=dict)  # family or probe -> its decoding (regression_config.decodings)
    lexicon_sha256: str = ""
    sample_sizes: dict[str, Any] = field(default_factory=dict)  # e.g. {"genderpair": 216}
    scorers: dict[str, str] = field(default_factory=dict)  # classifier role -> its fingerprint
    extra: dict[str, Any] = field(default_factory=dict)  # informative only (versions, device)
    engine: str = ""  # the engine's name (models/engines/); "" in files from before engines: transformers
    # SHA-256 of the weight files this process read ("" where it read none: a served model, whose
    # weights it never sees, or a file from before weights were recorded): "same model weights"
    # is said only when both runs recorded one and they are equal.
    weights_sha256: str = ""
    # A served model (--engine openai): what is known of it, the endpoint, the served name and a
    # digest of its answers to the load-time canary requests; {} for an engine that reads weights.
    served: dict[str, str] = field(default_factory=dict)

    MUST_MATCH = ("seed", "decoding", "lexicon_sha256", "sample_sizes", "scorers")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunConfig":
        """``ValueError`` for unknown keys, a missing model or a value of the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError(f"run header is {type(data).__name__}, not an object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"run header has unknown keys {unknown}")
        wrong = [f"{k} is {json.dumps(v)[:40]}" for k, v in data.items() if not _of_type(k, v)]
        if "model" not in data or wrong:
            raise ValueError("; ".join(wrong) or "run header names no model")
        return cls(**data)


_TEXT = ("model", "model_fingerprint", "tokenizer_fingerprint", "dtype", "lexicon_sha256", "engine", "weights_sha256")


def _of_type(key: str, value: Any) -> bool:
    if key in _TEXT:
        return isinstance(value, str)
    if key == "adapter":
        return value is None or isinstance(value, str)
    if key == "seed":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, dict)


@dataclass(frozen=True)
class ItemValue:
    """One item's per-item quantity (None: the item has no value in this run, e.g. an undecided
    GenderPair response), the text that shows it, and its averaging group where there is one."""

    id: str
    value: float | None
    prompt: str = ""
    output: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class MetricItems:
    probe: str
    metric: str
    probe_version: str
    probe_sha256: str
    value: float  # the metric's value as the run reported it
    items: tuple[ItemValue, ...]

    @property
    def key(self) -> tuple[str, str]:
        return self.probe, self.metric


@dataclass(frozen=True)
class ItemsFile:
    run: RunConfig
    blocks: dict[tuple[str, str], MetricItems]
    truncated: bool = False


# ----- identity of probes and of the lexicon ------------------------------------------------------
def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _sha256_json(obj: Any) -> str:
    return hashlib.sha256(_json(obj).encode("utf-8")).hexdigest()


def probe_sha256(probe: Any) -> str:
    """Content hash of a probe: name, version and every item's id, prompt and metadata, in order
    (of its whole pool when its loader kept only part, probes/base.py ``Pool``).

    The SHA-256 of ``_sha256_json({"name", "version", "items": [[id, prompt, meta], ...]})``'s
    text, hashed item by item: the text of a pool of 100,000 prompts is never built whole."""
    pool = getattr(probe, "pool", None)
    items = pool.every_item() if pool is not None else probe.items
    h = hashlib.sha256()
    # The keys in sorted order, as json.dumps(sort_keys=True) writes them: items, name, version.
    h.update(b'{"items":[')
    for k, i in enumerate(items):
        h.update((b"," if k else b"") + _json([str(i.id), i.prompt, i.meta]).encode("utf-8"))
    h.update(f'],"name":{_json(probe.name)},"version":{_json(str(probe.version))}}}'.encode("utf-8"))
    return h.hexdigest()


def lexicon_sha256(pairs: Iterable[Sequence[str]] | None = None) -> str:
    """Hash of the gender word pairs the disclosure metrics count (another lexicon, other numbers);
    default: the extended lexicon's pairs."""
    if pairs is None:
        from bias_core.probes.lexicon import GENDER_PAIRS

        pairs = GENDER_PAIRS
    return _sha256_json([list(p) for p in pairs])


# ----- from a metric's result ----------------------------------------------------------------------
def aggregate(values: np.ndarray, groups: Sequence[str] | None, spec: PairedSpec) -> float:
    """The metric's value from its item values (``spec.aggregation``, times ``spec.item_scale``)."""
    if spec.aggregation == "mean":
        return spec.item_scale * float(np.mean(values))
    assert groups is not None
    by_group: dict[str, list[float]] = {}
    for v, g in zip(values, groups):
        by_group.setdefault(g, []).append(float(v))
    if spec.aggregation == "group_difference":
        assert spec.difference is not None
        other = sorted(set(by_group) - set(spec.difference))
        absent = [g for g in spec.difference if g not in by_group]
        if other or absent:
            raise ValueError(f"a {spec.group_field} difference of {spec.difference[0]!r} minus {spec.difference[1]!r} "
                             f"needs items of both and of no other: "
                             + "; ".join([f"none of {g!r}" for g in absent] + [f"items of {g!r}" for g in other]))
        first, second = (float(np.mean(by_group[g])) for g in spec.difference)
        return spec.item_scale * (first - second)
    return spec.item_scale * float(np.mean([np.mean(v) for v in by_group.values()]))


def recomputed_value(items: Sequence[ItemValue], spec: PairedSpec) -> float | None:
    """The metric's value from the items that have one, by the spec's aggregation (None: no item
    has a value). The same computation ``items_from_result`` checks a result against."""
    present = [it for it in items if it.value is not None]
    if not present:
        return None
    return aggregate(np.array([it.value for it in present], dtype=np.float64), [str(it.group) for it in present], spec)


def values_agree(a: float, b: float) -> bool:
    """Equal up to summation order: ``VALUE_RTOL`` relative, ``VALUE_ATOL`` absolute."""
    return math.isclose(a, b, rel_tol=VALUE_RTOL, abs_tol=VALUE_ATOL)


def items_from_result(probe: Any, result: Any, spec: PairedSpec, metric: str | None = None) -> MetricItems:
    """A ``MetricItems`` block from a probe and one of its ``MetricResult``s.

    The per-item value is each detail's ``score``; probe items without a detail (or with a None
    score) get value None, so both runs list the same items. Under ``--sample auto`` the probe is
    the whole pool (GenderPair's is ~100,000 prompts) and only a seeded prefix was computed: the
    block lists the computed items alone (such a run is never paired; a baseline must use a fixed
    sample), which keeps the file at the size of what was computed. Raises ``ValueError`` when the
    spec's aggregation of the item values does not give the result's value: the table in
    ``gating/regression/spec.py`` would then describe the metric wrongly, and pairing would test something else.
    """
    name = metric or result.metric
    details = {str(d["id"]): d for d in result.details}
    if len(details) != len(result.details):
        twice = sorted(i for i, k in Counter(str(d["id"]) for d in result.details).items() if k > 1)
        raise ValueError(f"{probe.name} {metric or result.metric}: the result lists {len(result.details)} items but "
                         f"{len(details)} distinct ids (twice: {twice[:3]}); every item must be scored once")
    prompts = {str(i.id): i.prompt for i in probe.items}
    foreign = [i for i in details if i not in prompts]
    if foreign:
        raise ValueError(f"{probe.name} {name}: {len(foreign)} result item(s) are not items of the probe "
                         f"(first: {foreign[:3]}); per-item values must be keyed by the probe's item ids")
    sampling = (getattr(result, "breakdown", None) or {}).get("sampling") or {}
    listed = [i for i in prompts if i in details] if sampling.get("mode") == "auto" else list(prompts)
    items = []
    for item_id in listed:
        d = details.get(item_id, {})
        score = d.get("score")
        value = None if score is None else float(score)
        if value is not None and not math.isfinite(value):
            raise ValueError(f"{probe.name} {name}: item {item_id!r} has a non-finite value {value!r}")
        output = d.get(spec.output_field) if spec.output_field else None
        group = d.get(spec.group_field) if spec.group_field else None
        if spec.group_field and value is not None and group is None:
            raise ValueError(f"{probe.name} {name}: item {item_id!r} has no {spec.group_field!r} to average by")
        items.append(ItemValue(item_id, value, str(d.get("prompt", prompts.get(item_id, ""))),
                               None if output is None else str(output), None if group is None else str(group)))
    recomputed = recomputed_value(items, spec)
    if recomputed is None:
        raise NoItemValues(f"{probe.name} {name}: no item has a value in this run: the metric counted none of the "
                           f"model's {len(items)} answers (e.g. BBQ's bias scores count only answers that name a "
                           "person, and this model named none), so there is nothing to pair with the baseline")
    if not values_agree(recomputed, float(result.value)):
        raise ValueError(f"{probe.name} {name}: the {spec.aggregation} of the item values x {spec.item_scale} is "
                         f"{recomputed!r}, not the metric's value {result.value!r}; its PairedSpec is wrong")
    return MetricItems(probe.name, name, str(probe.version), probe_sha256(probe), float(result.value), tuple(items))


# ----- writing ---------------------------------------------------------------------------------------
def _line(obj: Mapping[str, Any]) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (redact(text) + "\n").encode("utf-8")  # a secret (an API key) never reaches the file


def _member(lines: Iterable[bytes]) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=6) as gz:
        for line in lines:
            gz.write(line)
    return buf.getvalue()


def _header_lines(run: RunConfig) -> list[bytes]:
    return [_line({"kind": "header", "format": FORMAT, "format_version": FORMAT_VERSION, "run": run.to_json()})]


def _block_lines(block: MetricItems) -> list[bytes]:
    head = {"kind": "metric", "probe": block.probe, "metric": block.metric, "probe_version": block.probe_version,
            "probe_sha256": block.probe_sha256, "value": block.value, "n_items": len(block.items)}
    rows = [_line(head)]
    for it in block.items:
        row: dict[str, Any] = {"kind": "item", "id": it.id, "value": it.value, "prompt": it.prompt}
        if it.output is not None:
            row["output"] = it.output
        if it.group is not None:
            row["group"] = it.group
        rows.append(_line(row))
    return rows


def block_sha256(block: MetricItems) -> str:
    """SHA-256 of a block's lines as ``write_items`` writes them (head and items): what a run's
    results.json row records, so an items file edited after the run no longer matches it."""
    return hashlib.sha256(b"".join(_block_lines(block))).hexdigest()


def write_items(path: str | os.PathLike[str], run: RunConfig, blocks: Iterable[MetricItems]) -> Path:
    """Write the whole file atomically (a reader never sees half of it)."""
    path = Path(path)
    data = _member(_header_lines(run)) + b"".join(_member(_block_lines(b)) for b in blocks)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def start_items(path: str | os.PathLike[str], run: RunConfig) -> Path:
    """A new file holding only the header; blocks follow with ``append_block``."""
    return write_items(path, run, ())


def append_block(path: str | os.PathLike[str], block: MetricItems) -> None:
    """Add one probe x metric as its own gzip member (a run that stops mid-write loses only it;
    a write that fails, on a full disk, is cut off again, so the file ends with a whole block)."""
    append_whole(path, _member(_block_lines(block)))


# ----- reading ---------------------------------------------------------------------------------------
def _lines(path: Path) -> tuple[list[str], bool]:
    """Complete lines of the file, and whether it ended early (cut-off gzip member or line).

    Members are inflated one by one so that everything before a cut is kept (``gzip`` would
    raise on the cut and return nothing of the read in progress).
    """
    data = path.read_bytes()
    out = bytearray()
    truncated = False
    while data:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(data)
        except zlib.error:
            truncated = True
            break
        if not inflater.eof:
            truncated = True
            break
        data = inflater.unused_data
    lines = out.decode("utf-8", errors="replace").split("\n")
    if lines[-1] != "":
        truncated = True  # a last line without its newline was cut
    return [ln for ln in lines[:-1] if ln], truncated


_GZIP_MAGIC = b"\x1f\x8b"


def _refuse_plain(path: Path) -> None:
    """A file that is not gzip at all would otherwise read as empty ("no header"): say what it is."""
    with path.open("rb") as fh:
        head = fh.read(64)
    if head.startswith(_GZIP_MAGIC):
        return
    text = head.lstrip().startswith(b"{")
    what = ("plain JSON lines, not gzip-compressed (decompressed, e.g. by gunzip or a browser)" if text else
            f"not gzip-compressed (it starts with the bytes {head[:8].hex(' ')}; a gzip file starts with 1f 8b)" if head else
            "empty")
    fix = (f"compress it again: gzip -nc {path} > {ITEMS_FILE}.new, then move that over it" if text else
           "re-run the baseline audit, or copy the file again from the run folder that wrote it")
    raise AuditUsageError(f"{path}: {what}; {ITEMS_FILE} is gzip-compressed JSON lines. Fix: {fix}.")


def read_items(path: str | os.PathLike[str]) -> ItemsFile:
    """Read a per-item file; ``AuditUsageError`` naming the problem when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise AuditUsageError(f"{path}: no per-item results file. Fix: point at a run folder written by an audit "
                              f"that stores per-item results ({ITEMS_FILE} next to results.json).")
    _refuse_plain(path)
    lines, truncated = _lines(path)
    if not lines:
        raise AuditUsageError(f"{path}: the per-item file ends before its first line is complete (cut short, e.g. by a "
                              "full disk or a copy that stopped). Fix: re-run the baseline audit, or copy the file "
                              "again from where it was written.")
    try:
        rows = [json.loads(ln) for ln in lines]
    except json.JSONDecodeError as exc:
        raise AuditUsageError(f"{path}: not a per-item results file (line {exc.lineno}: {exc.msg}).") from exc
    if not rows or not isinstance(rows[0], dict) or rows[0].get("kind") != "header" or rows[0].get("format") != FORMAT:
        raise AuditUsageError(f"{path}: not a per-item results file (no {FORMAT} header). "
                              f"Fix: pass the {ITEMS_FILE} of an audit run, or its folder.")
    if rows[0].get("format_version") != FORMAT_VERSION:
        raise AuditUsageError(f"{path}: per-item format version {rows[0].get('format_version')!r}, this bias-core "
                              f"reads version {FORMAT_VERSION}. Fix: re-run the baseline audit with this version.")
    try:
        run = RunConfig.from_json(rows[0]["run"])
    except (TypeError, ValueError, KeyError) as exc:
        raise AuditUsageError(f"{path}: the run header is malformed ({exc}).") from exc
    blocks: dict[tuple[str, str], MetricItems] = {}
    head: dict[str, Any] | None = None
    items: list[ItemValue] = []

    def close() -> None:
        if head is not None and len(items) == head["n_items"]:
            key = (head["probe"], head["metric"])
            if key in blocks:
                raise AuditUsageError(f"{path}: {key[0]} {key[1]} appears twice; the file is not one run's items.")
            blocks[key] = MetricItems(head["probe"], head["metric"], head["probe_version"], head["probe_sha256"],
                                      float(head["value"]), tuple(items))

    for number, row in enumerate(rows[1:], start=2):
        kind = row.get("kind") if isinstance(row, dict) else None
        if kind == "metric":
            if head is not None and len(items) != head["n_items"]:
                raise AuditUsageError(f"{path}: {head['probe']} {head['metric']} has {len(items)} of its "
                                      f"{head['n_items']} items; the file is corrupt.")
            close()
            head, items = _checked_head(path, number, row), []
        elif kind == "item" and head is not None:
            items.append(_checked_item(path, number, row, head))
        else:
            raise AuditUsageError(f"{path}: unexpected line {json.dumps(row)[:120]}; the file is corrupt.")
    if head is not None and len(items) != head["n_items"]:
        truncated = True  # the last block was cut short
    close()
    return ItemsFile(run, blocks, truncated)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _damaged(path: Path, number: int, what: str) -> AuditUsageError:
    return AuditUsageError(f"{path}: line {number}: {what}; the file was edited or is damaged. Fix: copy the baseline "
                           "run folder again from the job that wrote it, or re-run the baseline audit.")


def _checked_head(path: Path, number: int, row: dict[str, Any]) -> dict[str, Any]:
    """A ``metric`` line whose fields have their types (a traceback is never the answer to an edit)."""
    for key in ("probe", "metric", "probe_version", "probe_sha256"):
        if not isinstance(row.get(key), str):
            raise _damaged(path, number, f"the metric line has no text {key!r} (got {json.dumps(row.get(key))[:40]})")
    if not _number(row.get("value")):
        raise _damaged(path, number, f"{row['probe']} {row['metric']}: the value is {json.dumps(row.get('value'))[:40]}, "
                                     "not a finite number")
    n = row.get("n_items")
    if not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
        raise _damaged(path, number, f"{row['probe']} {row['metric']}: n_items is {json.dumps(n)[:40]}, not a count")
    return row


def _checked_item(path: Path, number: int, row: dict[str, Any], head: dict[str, Any]) -> ItemValue:
    what = f"{head['probe']} {head['metric']}"
    if not isinstance(row.get("id"), str):
        raise _damaged(path, number, f"an item of {what} has no text id")
    if "value" not in row:
        raise _damaged(path, number, f"item {row['id']!r} of {what} has no value (not even null)")
    value = row["value"]
    if value is not None and not _number(value):
        raise _damaged(path, number, f"item {row['id']!r} of {what} has the value {json.dumps(value)[:40]}, "
                                     "neither a finite number nor null")
    prompt, output, group = row.get("prompt", ""), row.get("output"), row.get("group")
    if not isinstance(prompt, str) or any(t is not None and not isinstance(t, str) for t in (output, group)):
        raise _damaged(path, number, f"item {row['id']!r} of {what} has a prompt, output or group that is not text")
    return ItemValue(row["id"], None if value is None else float(value), prompt, output, group)


def locate_items(run: str | os.PathLike[str]) -> Path:
    """The per-item file of a run, given the run folder, its results.json or the file itself."""
    p = Path(run)
    if p.is_dir():
        return p / ITEMS_FILE
    if p.name.endswith(".json") and not p.name.endswith(".jsonl.gz"):
        return p.with_name(ITEMS_FILE)
    return p
