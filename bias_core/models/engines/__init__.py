"""The engines a run can audit through (``--engine NAME``), by name.

Adding an engine is one new file plus one line here (docs/engines.md, "Adding a model
backend"): the file defines ``ENGINE = EngineEntry(...)``, and ``BUILTIN`` names it. A
third-party package registers its own in the entry-point group ``bias_core.engines``::

    [project.entry-points."bias_core.engines"]
    toy = "toy_engine:ENGINE"

Entries load lazily: choosing ``--engine transformers`` never imports vLLM.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from bias_core.errors import AuditUsageError

ENTRY_POINT_GROUP = "bias_core.engines"

BUILTIN = {
    "transformers": "bias_core.models.engines.transformers:ENGINE",
    "vllm": "bias_core.models.engines.vllm:ENGINE",
    "openai": "bias_core.models.engines.openai:ENGINE",
}
DEFAULT_ENGINE = "transformers"


@dataclass(frozen=True)
class EngineEntry:
    """One engine: how it loads a model and which options it takes.

    - ``load(spec, opts)`` returns an ``Engine`` (models/protocol.py): it computes, the result
      cache is put around it by ``load_model``;
    - ``check(opts)`` raises ``AuditUsageError`` for options this engine cannot honour, before
      any model loads (it may import the engine's library, never load weights);
    - ``wrap(handle, opts)``, when given, turns the cached handle into what the run uses (the
      transformers engine applies ``--precision`` there);
    - ``options``: the engine options (``LoadOptions`` fields) it reads; any other one given on
      the command line is refused;
    - ``describe(opts)``: what the run header and JUnit say before the model loads (engine,
      dtype, device or URL), as ``{"engine": ..., "device": ..., "dtype": ...}``.
    """

    name: str
    load: Callable[[Any, Any], Any]
    check: Callable[[Any], None] | None = None
    wrap: Callable[[Any, Any], Any] | None = None
    options: tuple[str, ...] = ()
    summary: str = ""
    describe: Callable[[Any], dict[str, str]] | None = None


_LOADED: dict[str, EngineEntry] = {}


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def engine_names() -> list[str]:
    return list(BUILTIN) + sorted(n for n in _entry_points() if n not in BUILTIN)


def get_engine(name: str) -> EngineEntry:
    """The registered engine ``name``, or a usage error listing the known ones."""
    if name in _LOADED:
        return _LOADED[name]
    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        entry = getattr(importlib.import_module(module), attr)
    else:
        eps = _entry_points()
        if name not in eps:
            raise AuditUsageError(f"--engine {name}: unknown engine. Fix: choose one of {', '.join(engine_names())} "
                                  f"(a package adds one through the {ENTRY_POINT_GROUP!r} entry-point group).")
        entry = eps[name].load()
        entry = entry() if callable(entry) and not isinstance(entry, EngineEntry) else entry
    if not isinstance(entry, EngineEntry):
        raise AuditUsageError(f"--engine {name}: its registration gives {type(entry).__name__}, not an EngineEntry. "
                              "Fix: the package should point its entry point at an EngineEntry (docs/engines.md).")
    _LOADED[name] = entry
    return entry


def register(entry: EngineEntry) -> None:
    """Make ``entry`` choosable as ``--engine <entry.name>`` in this process (tests, notebooks);
    an installed package uses the entry-point group instead."""
    _LOADED[entry.name] = entry
