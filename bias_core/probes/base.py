"""A probe is a named, versioned list of items with its provenance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bias_core.errors import DataFileError


@dataclass(frozen=True)
class ProbeItem:
    id: str
    prompt: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Probe:
    name: str
    version: str
    items: tuple[ProbeItem, ...]
    # where it came from, licence, how it was derived, which source the loader used
    provenance: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Results are keyed by item id: two items under one id would be scored as one, and the
        # metric's n would no longer match its items. The readers name the row; this catches ids
        # a loader derives (a word listed twice, a hub copy with repeated rows).
        first: dict[str, int] = {}
        for k, item in enumerate(self.items):
            if first.setdefault(item.id, k) != k:
                where = self.provenance.get("loaded_from", "its data")
                raise DataFileError(
                    f"probe {self.name}: item id {item.id!r} is given to items {first[item.id]} and {k} (from {where}): "
                    "each item must appear once. Fix: restore the data from its source (the published copy, or "
                    "reinstall bias-core for its own data), or remove the repeated entry.")

    @property
    def prompts(self) -> list[str]:
        return [item.prompt for item in self.items]

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]
