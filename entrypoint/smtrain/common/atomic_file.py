"""A file written whole or not at all, for files another process may read at any moment."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, text: str, mode: int = 0o666) -> None:
    """Write `text` to `path` so that a reader sees all of it or nothing; a new file gets `mode` (less the
    umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
