"""A probe is a named, versioned list of items with its provenance."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from bias_core.errors import DataFileError


@dataclass(frozen=True)
class ProbeItem:
    id: str
    prompt: str
    meta: dict[str, Any] = field(default_factory=dict)


# What a loader is handed to keep part of a large pool (``select``, offered by the suite under
# --sample auto): called with the probe's name and a function making every item of the pool in
# order, it returns the items to keep (in pool order) and the number of sampling units in the pool.
Select = Callable[[str, Callable[[], Iterable[ProbeItem]]], "tuple[tuple[ProbeItem, ...], int]"]


@dataclass(frozen=True)
class Pool:
    """The whole pool a probe's items were cut from, when its loader kept only what a run can
    reach (GenderPair's 100,000 prompts and 400,000 reworded ones under --sample auto, of which a
    run uses at most a few hundred): how many sampling units it has, and every item again on
    demand (its content hash), made one at a time and never held."""

    units: int
    every_item: Callable[[], Iterable[ProbeItem]]


@dataclass(frozen=True)
class Probe:
    name: str
    version: str
    items: tuple[ProbeItem, ...]
    # where it came from, licence, how it was derived, which source the loader used
    provenance: dict[str, str] = field(default_factory=dict)
    # None: ``items`` is the whole probe; else the pool they were cut from (see ``Pool``).
    pool: Pool | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for _ in unique_ids(self.name, self.items, self.provenance):
            pass

    @property
    def prompts(self) -> list[str]:
        return [item.prompt for item in self.items]

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]


def unique_ids(name: str, items: Iterable[ProbeItem], provenance: dict[str, str]) -> Iterator[ProbeItem]:
    """``items`` passed through, checked as they go: two items under one id raise ``DataFileError``."""
    # Results are keyed by item id: two items under one id would be scored as one, and the
    # metric's n would no longer match its items. The readers name the row; this catches ids
    # a loader derives (a word listed twice, a hub copy with repeated rows).
    first: dict[str, int] = {}
    for k, item in enumerate(items):
        if first.setdefault(item.id, k) != k:
            where = provenance.get("loaded_from", "its data")
            raise DataFileError(
                f"probe {name}: item id {item.id!r} is given to items {first[item.id]} and {k} (from {where}): "
                "each item must appear once. Fix: restore the data from its source (the published copy, or "
                "reinstall bias-core for its own data), or remove the repeated entry.")
        yield item


def pooled_probe(name: str, version: str, every_item: Callable[[], Iterable[ProbeItem]], provenance: dict[str, str],
                 select: Select | None = None) -> Probe:
    """The probe of every item ``every_item()`` makes, or with ``select`` only the items it keeps,
    the pool described (``Probe.pool``) but not held. Either way every item of the pool is checked
    for repeated ids."""
    if select is None:
        return Probe(name, version, tuple(every_item()), provenance)
    checked: list[bool] = []

    def items() -> Iterable[ProbeItem]:  # the first pass checks the ids, the others need not
        if checked:
            return every_item()
        checked.append(True)
        return unique_ids(name, every_item(), provenance)

    kept, units = select(name, items)
    return Probe(name, version, tuple(kept), provenance, pool=Pool(units, every_item))
