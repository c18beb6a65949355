"""SEAT-v1 and SEAT-v2 of the DA-Gender paper (section 4.2).

- ``seat-v1``: WEAT (Caliskan et al. 2017) on sentence encodings, as in May et al.'s SEAT:
  target sentences X (male persons) and Y (female persons) in bleached templates ("There is
  my brother."), attribute sentences A (male-typed professions) and B (female-typed) ("The
  plumber is here."). A ``WeatProbe`` holds the four sets.
- ``seat-v2``: the paper's variant on the Kurita templates: per sentence, the cosine between
  the encoding of the target-masked sentence and of the attribute-masked sentence, then the
  same per-target effect size as the log probability score (the paper's ``add_assos`` +
  ``get_effect_size``). A ``Probe`` whose items carry both masked forms.

Encodings come from ``lm.embed``: mean-pooled last hidden states for encoders, the last
token's last hidden state for causal models (what the paper's GPT-2 code does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bias_core.errors import DataFileError
from bias_core.probes.base import Probe
from bias_core.probes.kurita import (
    article,
    capitalize,
    load_data,
    load_logprob_professions,
    split_lists,
)
from bias_core.probes.sources import REINSTALL, project_data

PROBE_NAMES = ("seat-v1", "seat-v2")


@dataclass(frozen=True)
class WeatProbe:
    """Target sets X, Y and attribute sets A, B of sentences (WEAT/SEAT)."""

    name: str
    version: str
    x: tuple[str, ...]
    y: tuple[str, ...]
    a: tuple[str, ...]
    b: tuple[str, ...]
    provenance: dict[str, str] = field(default_factory=dict)

    @property
    def sentences(self) -> list[str]:
        return list(dict.fromkeys([*self.x, *self.y, *self.a, *self.b]))


def _target_sentences(target: str, spec: dict) -> list[str]:
    templates = spec["target_templates"] if " " in target else spec["pronoun_templates"]
    return [capitalize(t.format(target)) for t in templates]


def load_seat_v1(split: str = "whole") -> WeatProbe:
    spec = load_data("seat.json")
    kurita = load_data("kurita.json")
    targets, profs = split_lists(kurita, split)

    def attrs(words):
        return tuple(t.format(w, a=article(w, kurita["an_words"])) for w in words for t in spec["attribute_templates"])

    x = tuple(s for t in targets["male"] for s in _target_sentences(t, spec))
    y = tuple(s for t in targets["female"] for s in _target_sentences(t, spec))
    a, b = attrs(profs["male"]), attrs(profs["female"])
    for what, first, second in (("target", x, y), ("attribute", a, b)):
        # WEAT compares two disjoint sets: a sentence in both (a word listed for both genders) cancels itself
        both = sorted(set(first) & set(second))
        if both:
            raise DataFileError(f"{project_data('kurita.json')} with {project_data('seat.json')}: {len(both)} {what} "
                                f"sentence(s) in both the male and the female set (first: {both[0]!r}): a word is listed "
                                f"for both genders. {REINSTALL}")
    return WeatProbe(
        name="seat-v1", version=str(spec["version"]), x=x, y=y, a=a, b=b,
        provenance={"source": spec["source"], "licence": spec["licence"], "split": split, "loaded_from": "project data"},
    )


def load_seat_v2(split: str = "whole") -> Probe:
    base = load_logprob_professions(split)
    return Probe("seat-v2", base.version, base.items, {**base.provenance, "note": "Kurita templates (Table 4) with masking"})


def load_probe(name: str, split: str = "whole") -> WeatProbe | Probe:
    if name == "seat-v1":
        return load_seat_v1(split)
    if name == "seat-v2":
        return load_seat_v2(split)
    raise KeyError(f"unknown SEAT probe {name!r}; known: {', '.join(PROBE_NAMES)}")
