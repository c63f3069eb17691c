"""The checkpoint folder carried from one local run to the next, so that a spot restart can be
rehearsed where SageMaker's checkpoint sync is missing (SDK local mode drops checkpointconfig.json).

- Before the program: a channel named `checkpoints` (its folder) is copied into the checkpoint
  folder when that folder is empty, as SageMaker restores a job's checkpoints from S3 before it starts.
- After the job on this host, however it ended (a SIGTERM'd run too): under local mode, the checkpoint
  folder is copied into `output/data/checkpoints`, which the SDK packs into the job's output.tar.gz.
  The next run names that folder as its `checkpoints` channel.

Also whether the program wrote to it since a time (an in-job restart's sign of progress).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from ..common.console import log

__all__ = ["keep_checkpoints", "restore_checkpoints", "written_since"]


def _files(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def restore_checkpoints(channel: Optional[Path], checkpoint_dir: Path) -> None:
    """Copy the `checkpoints` channel into an empty checkpoint folder."""
    if channel is None or not channel.is_dir() or not any(channel.iterdir()):
        return
    if checkpoint_dir.is_dir() and any(checkpoint_dir.iterdir()):
        log(f"{checkpoint_dir} is not empty: the checkpoints channel ({channel}) is not restored over it")
        return
    import shutil  # here: a job without a checkpoints channel starts its program without it

    shutil.copytree(channel, checkpoint_dir, dirs_exist_ok=True, symlinks=True)
    log(f"restored {_files(checkpoint_dir)} files from the checkpoints channel ({channel}) into {checkpoint_dir}")


def keep_checkpoints(checkpoint_dir: Path, kept_in: Optional[Path]) -> None:
    """Copy the checkpoint folder, if it holds anything, into `kept_in` (the job's output)."""
    if kept_in is None or _files(checkpoint_dir) == 0:
        return
    try:
        import shutil  # at the job's end

        shutil.rmtree(kept_in, ignore_errors=True)
        shutil.copytree(checkpoint_dir, kept_in, symlinks=True)
    except OSError as e:
        log(f"could not keep the checkpoint folder in {kept_in}: {e}")
        return
    log(f"kept the checkpoint folder ({_files(kept_in)} files) in {kept_in}: name it as the next local run's "
        "checkpoints channel to resume from it")


def written_since(folder: Path, since: float, limit: int = 10_000) -> bool:
    """Whether a file in `folder` (or below) was written at or after `since` (wall clock); at most
    `limit` entries are looked at."""
    seen = 0
    for root, dirs, files in os.walk(folder):
        for name in files:
            seen += 1
            try:
                if os.stat(os.path.join(root, name)).st_mtime >= since:
                    return True
            except OSError:
                continue
            if seen >= limit:
                return False
    return False
