"""A probe is a named, versioned list of items with its provenance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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

    @property
    def prompts(self) -> list[str]:
        return [item.prompt for item in self.items]

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]
