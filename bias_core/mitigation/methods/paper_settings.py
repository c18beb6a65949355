"""DA-Gender's published settings ("Unmasking the Trade-off", Appendix Tables 11 and 12).

- ``TABLE11_GRID``: the strengths the paper sweeps for its trade-off curves (Figure 2), the
  same for every model;
- ``TABLE12``: per model of the paper, the strength each method was run at (chosen on the
  development set) and the fine-tuning schedule of CDS and ER (batch size, learning rate,
  epochs); the released code (mulinShi/DA-Gender, ``*_CDS.py`` / ``*_ER.py``) fine-tunes every
  weight with AdamW (eps 1e-8, no weight decay), a linear schedule after 100 warm-up steps,
  gradient norms clipped at 1.0 and sentences cut at 128 tokens;
- ``PAPER_SEEDS``: CDS and ER numbers are averaged over five runs (§7.1); SentenceDebias is
  deterministic, so the paper runs it once.

A model that is none of the paper's six gets the column of the paper's model of its kind
(causal: GPT2, masked: BERT, seq2seq: BART) and size: the large column from ``LARGE_FROM``
parameters (the paper's base models have 110-140M, its large ones 336-406M).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TABLE11_GRID: dict[str, tuple[float, ...]] = {
    "cds": (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95),
    "er": (0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0),
    "sentence-debias": (0.01, 0.05, 0.1, 0.15, 0.2, 0.4, 0.6, 1.0),
}
PAPER_SEEDS = 5
LARGE_FROM = 250_000_000
# The released code's schedule, beyond Table 12's batch size, learning rate and epochs.
WARMUP_STEPS = 100
MAX_GRAD_NORM = 1.0
MAX_LENGTH = 128


@dataclass(frozen=True)
class Table12Column:
    """One model's column of Table 12."""

    swap_rate: float
    lam: float
    ratio_of_pairs: float
    batch_size: int
    lr: float
    epochs: int

    def strengths(self) -> dict[str, float]:
        """method -> the strength the paper ran it at on this model."""
        return {"cds": self.swap_rate, "er": self.lam, "sentence-debias": self.ratio_of_pairs}


TABLE12: dict[str, Table12Column] = {
    "bert-base": Table12Column(1.0, 0.5, 0.05, 8, 2e-5, 8),
    "bert-large": Table12Column(1.0, 0.5, 0.05, 2, 2e-5, 8),
    "gpt2": Table12Column(0.9, 0.5, 1.0, 8, 5e-5, 8),
    "gpt2-medium": Table12Column(0.9, 1.0, 1.0, 2, 5e-5, 8),
    "bart-base": Table12Column(1.0, 1.25, 0.07, 8, 2e-5, 8),
    "bart-large": Table12Column(1.0, 1.25, 0.07, 2, 2e-5, 8),
}
# model kind -> (base column, large column)
COLUMNS_OF_KIND: dict[str, tuple[str, str]] = {
    "causal": ("gpt2", "gpt2-medium"), "masked": ("bert-base", "bert-large"), "seq2seq": ("bart-base", "bart-large")}


def table12_column(kind: str, n_parameters: int) -> str:
    """The Table 12 column for a model of ``kind`` with ``n_parameters`` (module doc)."""
    if kind not in COLUMNS_OF_KIND:
        from bias_core.errors import AuditUsageError

        raise AuditUsageError(f"DA-Gender's Table 12 has no column for a {kind} model; it covers causal (GPT2), "
                              "masked (BERT) and seq2seq (BART) models.")
    base, large = COLUMNS_OF_KIND[kind]
    return large if n_parameters >= LARGE_FROM else base


def model_column(lm: Any) -> str:
    """The Table 12 column of a loaded model (its kind and parameter count)."""
    model = lm.training().model
    return table12_column(lm.kind, sum(p.numel() for p in model.parameters()))


def paper_strengths(lm: Any) -> dict[str, float]:
    """method -> Table 12's strength for this model's column."""
    return TABLE12[model_column(lm)].strengths()


def paper_seeds(seed: int) -> tuple[int, ...]:
    """The five training seeds of a paper-schedule point: ``seed`` and the four after it."""
    return tuple(seed + i for i in range(PAPER_SEEDS))
