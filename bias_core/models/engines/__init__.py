"""The engines a run can audit through (``--engine NAME``), by name, and the options each takes.

Adding an engine is one new file plus one line here (docs/engines.md, "Adding a model
backend"): the file defines ``ENGINE = EngineEntry(...)``, its options among it
(``EngineOption``), and ``BUILTIN`` names it. A third-party package registers its own in the
entry-point group ``bias_core.engines``, options included, without changing bias_core::

    [project.entry-points."bias_core.engines"]
    toy = "toy_engine:ENGINE"

Entries load lazily: choosing ``--engine transformers`` never imports vLLM. The plugin reads
every engine's entry when pytest builds its parser (to add the engines' options), so the module
an entry lives in imports its heavy library inside ``load`` and ``check``, never at the top.
"""

from __future__ import annotations

import importlib
import math
import re
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
_FLAG = re.compile(r"--[a-z][a-z0-9]*(-[a-z0-9]+)*")


def at_least_one(value: int) -> str | None:
    """``EngineOption.check`` of a count (GPUs, requests in flight)."""
    return None if value >= 1 else "must be a positive integer"


def positive_finite(value: float) -> str | None:
    """``EngineOption.check`` of an amount (seconds, MiB)."""
    return None if math.isfinite(value) and value > 0 else "must be a positive, finite number"


@dataclass(frozen=True)
class EngineOption:
    """One command-line option of one engine, declared in the engine's own file.

    - ``flag``: the option, e.g. ``--engine-url``; ``key`` (the flag without its dashes, ``-``
      as ``_``: ``engine_url``) names its value in ``LoadOptions.engine_options``;
    - ``help``: what ``pytest --help`` shows after ``--engine NAME:`` (alone for an option of
      the default engine only);
    - ``type``: ``str``, ``int``, ``float`` or ``bool`` (a flag without a value): the command
      line's text is converted to it, and a value of another type is refused;
    - ``default``: what the engine receives when the option is not given;
    - ``what`` and ``example``: the refusal of a value that does not convert, "``--flag
      VALUE``: must be ``what``. Fix: e.g. ``--flag example``.";
    - ``check(value)``: the converted value's problem ("must be a positive integer"), refused
      in the same words, or None when it is fine.

    The plugin adds the option to pytest's parser and validates a given value before any model
    loads (exit status 4); given with another engine, it is refused as not that engine's.
    """

    flag: str
    help: str
    type: type = str
    default: Any = None
    what: str = "a string"
    example: str = ""
    check: Callable[[Any], str | None] | None = None

    def __post_init__(self) -> None:
        if not _FLAG.fullmatch(self.flag):
            raise ValueError(f"engine option {self.flag!r}: not a long option (--lower-case-words)")
        if self.type not in (str, int, float, bool):
            raise ValueError(f"engine option {self.flag}: type {self.type!r} is not str, int, float or bool")

    @property
    def key(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def of(self, opts: Any) -> Any:
        """This option's value in ``opts`` (``LoadOptions``): as given, else the default."""
        return opts.engine_options.get(self.key, self.default)

    def convert(self, value: Any) -> Any:
        """``value`` (the command line's text, or a typed value) as this option's type, else a
        usage error naming the option, the value and an example."""
        typed = _convert(self.type, value)
        if typed is None:
            raise AuditUsageError(f"{self.flag} {value}: must be {self.what}.{self._fix}")
        return typed

    def parse(self, value: Any) -> Any:
        """``convert``, then ``check``: the value this engine receives, or a usage error."""
        typed = self.convert(value)
        problem = self.check(typed) if self.check is not None else None
        if problem:
            raise AuditUsageError(f"{self.flag} {typed}: {problem}.{self._fix}")
        return typed

    @property
    def _fix(self) -> str:
        return f" Fix: e.g. {self.flag} {self.example}." if self.example else ""


def _convert(kind: type, value: Any) -> Any:
    """``value`` as ``kind``, or None where it is not one (text is converted; bool is no number)."""
    if isinstance(value, str) and kind is not str:
        if kind is bool:
            return {"true": True, "false": False}.get(value.lower())
        try:
            return kind(value)
        except ValueError:
            return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) and kind is not bool:
        return None
    return value if isinstance(value, kind) else None


@dataclass(frozen=True)
class EngineEntry:
    """One engine: how it loads a model and which options it takes.

    - ``load(spec, opts)`` returns an ``Engine`` (models/protocol.py): it computes, the result
      cache is put around it by ``load_model``;
    - ``check(opts)`` raises ``AuditUsageError`` for options this engine cannot honour, before
      any model loads (it may import the engine's library, never load weights);
    - ``wrap(handle, opts)``, when given, turns the cached handle into what the run uses (the
      transformers engine applies ``--precision`` there);
    - ``options``: the engine's own command-line options (``EngineOption``); ``load``,
      ``check``, ``wrap`` and ``describe`` find each one's value, validated and typed, in
      ``opts.engine_options[option.key]`` (the default where not given). Another engine's
      option given on the command line is refused;
    - ``describe(opts)``: what the run header and JUnit say before the model loads (engine,
      dtype, device or URL), as ``{"engine": ..., "device": ..., "dtype": ...}``.
    """

    name: str
    load: Callable[[Any, Any], Any]
    check: Callable[[Any], None] | None = None
    wrap: Callable[[Any, Any], Any] | None = None
    options: tuple[EngineOption, ...] = ()
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
        try:
            entry = eps[name].load()
            entry = entry() if callable(entry) and not isinstance(entry, EngineEntry) else entry
        except Exception as exc:  # its package's own error (an import, a bad declaration): no traceback
            raise AuditUsageError(f"--engine {name}: its package's registration ({eps[name].value}) failed: "
                                  f"{type(exc).__name__}: {str(exc)[:300]}. Fix: reinstall or repair that "
                                  "package, or choose another engine.") from exc
    if not isinstance(entry, EngineEntry):
        raise AuditUsageError(f"--engine {name}: its registration gives {type(entry).__name__}, not an EngineEntry. "
                              "Fix: the package should point its entry point at an EngineEntry (docs/engines.md).")
    _LOADED[name] = entry
    return entry


def register(entry: EngineEntry) -> None:
    """Make ``entry`` choosable as ``--engine <entry.name>`` in this process (tests, notebooks);
    an installed package uses the entry-point group instead."""
    _LOADED[entry.name] = entry
