"""The engines' command-line options: ``--engine`` and each engine's own (``EngineEntry.options``).

Each engine declares its options in its own file (``EngineOption``: flag, help, type, default,
checks); this module adds them to pytest's parser, those of every built-in engine and of every
installed package's (entry-point group ``bias_core.engines``), reads their values into
``LoadOptions.engine_options``, and validates them before any model loads: a value of the
wrong type or range, and an option of another engine than the chosen one, are usage errors.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable

from bias_core.errors import AuditUsageError
from bias_core.models.engines import BUILTIN, DEFAULT_ENGINE, EngineEntry, EngineOption, engine_names, get_engine

# Options of installed packages' engines that pytest could not take (the name is already
# another option's): engine name -> those flags. Choosing that engine is then a usage error.
_CLASHES: dict[str, list[str]] = {}


def declared(builtin_only: bool = False) -> dict[str, list[tuple[str, EngineOption]]]:
    """flag -> [(engine name, its declaration)] of every engine whose entry loads, in the order
    of ``engine_names()``. A package whose entry fails to load is left out here: choosing its
    engine names the failure (``get_engine``)."""
    out: dict[str, list[tuple[str, EngineOption]]] = {}
    for name in (BUILTIN if builtin_only else engine_names()):
        try:
            entry = get_engine(name)
        except AuditUsageError:
            continue
        for option in entry.options:
            if option.flag not in _CLASHES.get(name, ()):
                out.setdefault(option.flag, []).append((name, option))
    return out


def add_engine_options(group: Any) -> None:
    """``--engine`` and the built-in engines' options, in ``pytest --help``'s bias-audit group."""
    group.addoption("--engine", default=DEFAULT_ENGINE,
                    help=f"what runs the model: {', '.join(BUILTIN)} or an installed package's engine "
                         f"(default: {DEFAULT_ENGINE}; docs/engines.md)")
    for flag, owners in declared(builtin_only=True).items():
        _add(group, flag, owners)


def add_package_engine_options(group: Any) -> None:
    """The options of installed packages' engines, added after every option of bias_core so
    that one whose name is taken is found (and refused when its engine is chosen), not a
    conflict that stops pytest for every run."""
    parser = getattr(group, "parser", None)
    taken = {name for g in getattr(parser, "_groups", [group]) for o in g.options for name in o.names()}
    for flag, owners in declared().items():
        packages = [(engine, option) for engine, option in owners if engine not in BUILTIN]
        if not packages or len(packages) < len(owners):
            continue  # a package's engine may take a built-in engine's option: it is added already
        try:
            if flag in taken:
                raise ValueError(flag)
            _add(group, flag, packages)
        except (ValueError, argparse.ArgumentError):  # pytest's refusal of a name or destination in use
            for engine, _ in packages:
                _CLASHES.setdefault(engine, []).append(flag)


def _add(group: Any, flag: str, owners: list[tuple[str, EngineOption]]) -> None:
    """``flag`` in pytest's parser, its help after ``--engine NAME:``; an option that only the
    default engine takes (transformers' ``--load-in-4bit``) shows its help alone, as a run
    without ``--engine`` takes it."""
    first = owners[0][1]
    engines = ", ".join(engine for engine, _ in owners)
    kind = {"action": "store_true"} if first.type is bool else {}
    prefix = "" if engines == DEFAULT_ENGINE else f"--engine {engines}: "
    group.addoption(flag, default=None, help=prefix + first.help, **kind)


def engine_fields(opt: Callable[..., Any]) -> dict[str, Any]:
    """``LoadOptions`` keyword arguments from the command line's engine options: ``engine``,
    ``engine_options`` (the options given, converted to their declared types) and
    ``adapters_expected``. A value that does not convert is a usage error here."""
    engine = opt("--engine")
    given: dict[str, Any] = {}
    for flag, owners in declared().items():
        value = opt(flag, None)
        if value is None:
            continue
        option = next((o for name, o in owners if name == engine), owners[0][1])
        given[option.key] = option.convert(value)  # its range once the engine is known to take it
    return {"engine": engine, "engine_options": given,
            "adapters_expected": any(opt(o, None) for o in ("--adapter", "--baseline-adapter", "--mitigation",
                                                             "--mitigation-sweep"))}


def engine_option_values(entry: EngineEntry, given: dict[str, Any]) -> dict[str, Any]:
    """Every option of ``entry``: the value given (typed and checked), else its default.

    Raises ``AuditUsageError`` for a given option ``entry`` does not take, and for a value
    that does not convert or fails its check."""
    if entry.name in _CLASHES:
        flags = ", ".join(_CLASHES[entry.name])
        raise AuditUsageError(f"--engine {entry.name}: its option {flags} is already an option of pytest or another "
                              "plugin, so pytest could not take it. Fix: the engine's package should rename it "
                              "(docs/engines.md, \"Adding a model backend\").")
    own = {o.key: o for o in entry.options}
    given = {key: value for key, value in given.items() if value is not None}  # None: not given
    foreign = [key for key in given if key not in own]
    if foreign:
        names = ", ".join("--" + key.replace("_", "-") for key in foreign)
        raise AuditUsageError(f"{names}: not an option of --engine {entry.name}. Fix: drop it, or choose the engine "
                              "it belongs to (docs/engines.md lists each engine's options).")
    return {key: option.parse(given[key]) if key in given else option.default for key, option in own.items()}


def with_engine_options(opts: Any) -> Any:
    """``opts`` (``LoadOptions``) with every option of its engine in ``engine_options``, validated:
    what ``load``, ``check``, ``wrap`` and ``describe`` of an engine receive."""
    values = engine_option_values(get_engine(opts.engine), dict(opts.engine_options))
    return dataclasses.replace(opts, engine_options=values)
