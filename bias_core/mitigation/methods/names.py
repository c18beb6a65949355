"""Mitigation names, light to import (the command line validates them before torch loads)."""

from __future__ import annotations

from bias_core.errors import AuditUsageError

# DA-Gender's methods ("Unmasking the Trade-off"): tuned on a text corpus, or no training (SD).
CORPUS_METHODS = ("cds", "er", "sentence-debias")
MITIGATIONS = ("hyperparameter", "instruction", "debias-tuning", "debias-tuning-no-Ld", "debias-tuning-no-Lg",
               "debias-tuning-no-Ll", "gendercare-cda", *CORPUS_METHODS)
# Variants that change the model get the over-debiasing and damage guards: trained weights, or
# SentenceDebias's projection on the hidden states (no new weights, but every score moves).
WEIGHT_CHANGING = tuple(m for m in MITIGATIONS if m.startswith(("debias-tuning", "gendercare"))) + CORPUS_METHODS
# The project's own GenderPair set lists 14 trait pairs, then 10 occupation pairs per target.
PROJECT_TRAIT_PAIRS = 14


def parse_mitigations(value: str | None) -> tuple[str, ...]:
    """``--mitigation a,b`` -> ("a", "b"), with a usage error naming unknown names."""
    if not value:
        return ()
    names = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    unknown = [n for n in names if n not in MITIGATIONS]
    if unknown:
        raise AuditUsageError(f"--mitigation {','.join(unknown)}: unknown; choose from {', '.join(MITIGATIONS)} "
                              "(comma-separated).")
    return names
