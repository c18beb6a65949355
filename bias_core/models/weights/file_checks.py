"""Is a weight file whole? Checks that read headers only, run before any model loads.

A cut or garbled file otherwise ends deep inside a library ("incomplete metadata", "cannot
reshape array of size ...") with a traceback in every test. Each check returns what is wrong,
or None; callers add which option named the file and the fix.
"""

from __future__ import annotations

import zipfile
from pathlib import Path


def safetensors_problem(path: Path) -> str | None:
    """The header must parse and its tensors must cover the file exactly (safetensors checks both)."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy"):
            return None
    except (SafetensorError, OSError) as exc:
        return f"not a readable safetensors file ({exc}): it is cut short (an interrupted copy or download) or garbled"


def torch_bin_problem(path: Path) -> str | None:
    """A pickled torch checkpoint. torch.save writes a zip archive (since torch 1.6) whose
    directory sits at its end, so a cut file has none; older files are bare pickles, not checked."""
    try:
        with path.open("rb") as fh:
            head = fh.read(2)
        if head != b"PK":
            return None if head[:1] == b"\x80" else "neither a zip archive nor a pickle: the file is garbled"
        zipfile.ZipFile(path).close()
    except (zipfile.BadZipFile, OSError) as exc:
        return f"not a readable torch checkpoint ({exc}): it is cut short (an interrupted copy or download) or garbled"
    return None


def gguf_problem(path: Path) -> str | None:
    """Every tensor the GGUF header lists must lie inside the file (the gguf package's reader maps
    each tensor onto the file and fails on one that runs past its end)."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return None  # loading needs gguf and says so itself
    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - ValueError, IndexError, struct.error...: the reader's words for "not whole"
        if "magic" in str(exc).lower():
            return "not a GGUF file: it does not start with the GGUF magic bytes"
        return (f"not a readable GGUF file (the gguf reader: {type(exc).__name__}: {str(exc)[:160]}): the file is cut "
                "short (an interrupted copy or download) or garbled")
    size = path.stat().st_size
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > size:
        return f"not a whole GGUF file: its tensors end at byte {end:,}, the file has {size:,} bytes (cut short)"
    return None


def problem(path: Path) -> str | None:
    """The check for ``path``'s format (by its suffix), or None for formats not checked."""
    check = {".safetensors": safetensors_problem, ".gguf": gguf_problem, ".bin": torch_bin_problem,
             ".pt": torch_bin_problem, ".pth": torch_bin_problem}.get(Path(path).suffix)
    return check(Path(path)) if check else None


RESTORE = "copy or download the file again from its source (compare its size and SHA-256 with the original's)"
