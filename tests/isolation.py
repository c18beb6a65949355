"""No patch of process-wide state leaks into an import that outlives the test (issue 22).

A module reads some state once, when it is first imported: bitsandbytes picks its backend from
``torch.cuda.is_available()``, huggingface_hub and datasets read ``HF_*_OFFLINE``, transformers
asks ``importlib.util.find_spec`` which packages exist. A test that patches such state and, while
the patch is in place, makes some module import for the first time leaves that module as it read
the patch, for every later test in the worker: which tests fail then depends on the order the
tests ran in (issue 22: bitsandbytes half-imported under a patched ``torch.cuda.is_available``).

``ImportWatch`` observes every import (a ``sys.meta_path`` entry that finds nothing itself) and
notes each one made while watched state differs from what it was before the test: the callables
of the modules below, and the environment variables a test set or deleted with ``monkeypatch``
(except ``BIAS_CORE_*``, which bias_core reads when called, never at import; variables that
libraries set for themselves, such as torch's TORCHINDUCTOR_CACHE_DIR, are no test's patch).
After the test, a noted module still in ``sys.modules`` fails the test with the patch it saw and
the fix.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import pytest

# Modules (and classes) whose callables tests patch; a patched one differs by identity.
WATCHED = ("os", "os.path", "tempfile", "shutil", "importlib", "importlib.util", "importlib.metadata",
           "builtins", "pathlib:Path", "subprocess", "torch.cuda", "torch.backends.cuda", "torch.backends.mps")
ENV_IGNORED_PREFIXES = ("BIAS_CORE_", "SYNTHETIC_", "PYTEST_")


def _owner(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    owner = importlib.import_module(module)
    return getattr(owner, attr) if attr else owner


def _callables(owner: Any) -> dict[str, int]:
    names = vars(owner)
    return {name: id(value) for name, value in list(names.items()) if callable(value)}


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(ENV_IGNORED_PREFIXES)}


def _record_env_patches(names: set[str]) -> None:
    """Have every MonkeyPatch note the environment variables it sets or deletes in ``names``."""
    setenv, delenv, setitem = pytest.MonkeyPatch.setenv, pytest.MonkeyPatch.delenv, pytest.MonkeyPatch.setitem

    def recording_setenv(self, name, value, prepend=None):
        names.add(str(name))
        return setenv(self, name, value, prepend)

    def recording_delenv(self, name, raising=True):
        names.add(str(name))
        return delenv(self, name, raising)

    def recording_setitem(self, dic, name, value):
        if dic is os.environ:
            names.add(str(name))
        return setitem(self, dic, name, value)

    pytest.MonkeyPatch.setenv, pytest.MonkeyPatch.delenv = recording_setenv, recording_delenv
    pytest.MonkeyPatch.setitem = recording_setitem


class ImportWatch:
    """Installed once per process (tests/conftest.py); ``start``/``check`` around each test."""

    def __init__(self) -> None:
        self.owners = {spec: _owner(spec) for spec in WATCHED}
        self.reference = {spec: _callables(owner) for spec, owner in self.owners.items()}
        self.environment = _environment()
        self.env_patched: set[str] = set()
        _record_env_patches(self.env_patched)
        self.noted: dict[str, str] = {}
        self._busy = False
        sys.meta_path.insert(0, self)

    # -- the meta path entry: observes, finds nothing --------------------------------------------
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        # The standard library's lazy imports (codecs such as encodings.idna) read none of it.
        if self._busy or name in self.noted or name.partition(".")[0] in sys.stdlib_module_names:
            return None
        self._busy = True
        try:
            changed = self.changes()
            if changed:
                self.noted[name] = changed
        finally:
            self._busy = False
        return None

    def changes(self) -> str:
        """The watched state that differs from the reference, in words ('' when none does)."""
        found = []
        for spec, owner in self.owners.items():
            now, before = _callables(owner), self.reference[spec]
            found += [f"{spec.replace(':', '.')}.{name}" for name, ident in now.items() if before.get(name) != ident]
        env = _environment()
        found += [f"${k}" for k in sorted(self.env_patched) if env.get(k) != self.environment.get(k)]
        return ", ".join(found)

    # -- around each test ------------------------------------------------------------------------
    def start(self) -> None:
        """Take the state as it stands as the reference (a module-scoped fixture's patch, or a
        variable a library set for itself, is the baseline, not a test's patch)."""
        self.reference = {spec: _callables(owner) for spec, owner in self.owners.items()}
        self.environment = _environment()
        self.env_patched.clear()
        self.noted.clear()

    def leaks(self) -> list[str]:
        """Modules imported under a patch that are still imported, by patch; clears the notes."""
        by_patch: dict[str, list[str]] = {}
        for name, changed in self.noted.items():
            if name in sys.modules:
                by_patch.setdefault(changed, []).append(name)
        self.noted.clear()
        return [f"{', '.join(names[:6])}{f' and {len(names) - 6} more' if len(names) > 6 else ''} "
                f"(imported while {changed} differed)" for changed, names in by_patch.items()]


LEAK_FIX = ("Fix: import these modules before patching (in the test module, or in tests/conftest.py's "
            "pre-imports for modules many tests use), so the patch cannot leak into a module that outlives the test.")
