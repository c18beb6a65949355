"""What every text classifier exposes, and the shared batching rule that keeps scores batch-invariant."""

from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from bias_core.errors import DataSourceMissing

# Column order of every regard scorer's output (the regard classifier's four classes).
REGARD_COLUMNS: tuple[str, ...] = ("positive", "negative", "neutral", "other")


class ClassifierUnavailable(DataSourceMissing):
    """A classifier's weights or package cannot be had here. A DataSourceMissing, so audits skip
    with the message (which names the fix) instead of crashing."""


@runtime_checkable
class TextClassifier(Protocol):
    """Scores texts; loads its weights on first use.

    - ``name``: short id shown in reports, e.g. ``"jigsaw-bilstm"``.
    - ``fingerprint``: changes whenever the numbers could change (weights, code); cache keys use it.
    - ``is_proxy``: True when the score stands in for the named quantity (VADER sentiment for regard).
    - ``stand_in`` (optional, "" if absent): the short name reports label its numbers with when it is
      an offline stand-in for the paper's classifier ("VADER proxy", "offline Jigsaw BiLSTM").
    - ``label``: one line saying what the score means.
    - ``columns``: the meaning of each output column (toxicity: one; regard: REGARD_COLUMNS).
    - ``score(texts)``: float64 array, shape ``(n,)`` for one column, else ``(n, len(columns))``.
      Deterministic, and a text's score does not depend on which texts it is scored with.
    """

    name: str
    is_proxy: bool
    label: str
    columns: tuple[str, ...]

    @property
    def fingerprint(self) -> str: ...

    def score(self, texts: Sequence[str], desc: str = ...) -> np.ndarray: ...


def classifier_record(role: str, scorer: object) -> dict[str, str]:
    """What a result row records of the classifier that scored it (``breakdown["classifier"]``):
    its ``role`` (toxicity, regard), name, label and ``stand_in`` ("" for the paper's own)."""
    return {"role": role, "name": str(getattr(scorer, "name", "")), "label": str(getattr(scorer, "label", "")),
            "stand_in": str(getattr(scorer, "stand_in", "") or "")}


def run_in_fixed_blocks(
    n: int,
    rows: int,
    run_block: Callable[[list[int]], np.ndarray],
    bar=None,
) -> list[np.ndarray]:
    """Call run_block on index lists of exactly ``rows`` entries (the last one padded by repeating
    its first index) and return one output row per original index.

    Why fixed: BLAS picks kernels and reduction orders by matrix shape, so a row scored in a block
    of 3 and in a block of 32 can differ in the last bits. Blocks of one shape make a text's score
    independent of how many texts the caller passed and which ones.
    """
    out: list[np.ndarray] = [np.empty(0)] * n
    for start in range(0, n, rows):
        idx = list(range(start, min(start + rows, n)))
        real = len(idx)
        idx += [idx[0]] * (rows - real)
        res = run_block(idx)
        for j in range(real):
            out[idx[j]] = res[j]
        if bar is not None:
            bar.update(real)
    return out
