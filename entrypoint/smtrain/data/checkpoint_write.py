"""What a written checkpoint must hold before it may be published, and the error a save raises when
it does not (a full disk, an I/O error, a saver that failed quietly in its own thread).

TensorFlow's `Checkpoint.write(prefix)` writes each shard into `<prefix>_temp/` and only then merges
the shards' indexes into `<prefix>.index` and renames the data files to `<prefix>.data-NNNNN-of-MMMMM`:
an index and every shard it names mean the write ran to its end. Its asynchronous write can fail in
TensorFlow's own thread and still return from `sync()`; then the folder holds an empty `<prefix>_temp/`
and no index (seen on a full disk with TensorFlow 2.18), which this check catches.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Optional

__all__ = ["CheckpointWriteError", "folder_bytes", "free_bytes", "human_bytes", "missing_state_files"]

_DATA_SHARD = re.compile(r"\.data-(\d{5})-of-(\d{5})$")


class CheckpointWriteError(OSError):
    """A checkpoint could not be written. Nothing was published: the newest checkpoint is still the
    one before, and the partly written folder is already removed. `errno` is the cause's, when it
    had one (ENOSPC for a full disk)."""

    __module__ = "smtrain.checkpoints"  # where users import it from, as tracebacks and failure files name it

    def __init__(self, message: str, step: int, errno: Optional[int] = None) -> None:
        if errno is None:
            super().__init__(message)
        else:
            super().__init__(errno, message)
        self.step = step
        self.message = message

    def __str__(self) -> str:
        return self.message


def missing_state_files(names: set[str], prefix: str) -> Optional[str]:
    """Why the files `names` (relative to the checkpoint folder) are not a complete TensorFlow
    checkpoint at `prefix`, or None when they are: the index and every data shard it belongs with."""
    if f"{prefix}.index" not in names:
        return f"the saver wrote no {prefix}.index"
    shards = [m for n in names if n.startswith(f"{prefix}.data-") and (m := _DATA_SHARD.search(n))]
    if not shards:
        return f"the saver wrote no {prefix}.data-* file"
    count = int(shards[0].group(2))
    have = {int(m.group(1)) for m in shards if int(m.group(2)) == count}
    lost = sorted(set(range(count)) - have)
    if lost:
        return f"the saver wrote {len(have)} of {count} data shards (missing {prefix}.data-{lost[0]:05d}-of-{count:05d})"
    return None


def folder_bytes(folder: Path) -> int:
    """Bytes in the files under `folder` (0 when it is gone)."""
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            continue
    return total


def human_bytes(n: float) -> str:
    """A byte count for people: `512 B`, `3.2 MB`."""
    if n < 1000:
        return f"{n:.0f} B"
    for unit in ("KB", "MB", "GB"):
        n /= 1000
        if n < 1000:
            break
    return f"{n:.1f} {unit}"


def free_bytes(folder: Path) -> Optional[int]:
    """Free bytes on the folder's file system; None where it cannot be read."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None
