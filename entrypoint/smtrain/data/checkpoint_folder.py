"""A job's checkpoint folder as it lies on disk (the layout: smtrain.checkpoints): which checkpoints
are complete and check out, and what each holds. Read by the program's CheckpointStore and by the
host's demultiplexer (a resumed epoch of a shuffled channel)."""
from __future__ import annotations

import json
import re
import shutil
import sys
from array import array
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Optional

from ..common.linux import alive
from .checkpoint_write import missing_state_files
from .fingerprints import from_bytes

__all__ = ["FORMAT", "MANIFEST", "STATE_PREFIX", "Checkpoint", "CheckpointFolder", "PipePosition", "file_crc",
           "fingerprint_file"]

MANIFEST = "MANIFEST.json"
FORMAT = "smtrain-checkpoint/1"
COMPLETE = re.compile(r"^ckpt-(\d{12})$")
INCOMPLETE = re.compile(r"^\.incomplete-ckpt-(\d{12})-(\d+)$")
STATE_PREFIX = "state"
PIPES_FOLDER = "pipes"  # <channel>.rank<r>.fp: a shuffled channel's consumed fingerprints


class PipePosition(NamedTuple):
    """Where a rank is in a Pipe channel: the epoch, and how many of its records it consumed."""

    epoch: int
    consumed: int


def fingerprint_file(channel: str, rank: int) -> str:
    """The file, inside a checkpoint, of the fingerprints a rank consumed in a channel's epoch."""
    return f"{PIPES_FOLDER}/{channel}.rank{rank}.fp"


class Checkpoint(NamedTuple):
    """A complete checkpoint on disk: its step, folder, Pipe positions and extra state."""
    step: int
    path: Path
    pipes: tuple[Mapping[str, PipePosition], ...]  # per rank (rank 0 first)
    extra: Mapping[str, Any]
    files: frozenset[str] = frozenset()  # what the manifest lists, relative to `path`

    def position(self, channel: str, rank: int = 0) -> Optional[PipePosition]:
        """Rank `rank`'s position in `channel`, if this checkpoint has one."""
        if rank >= len(self.pipes):
            return None
        return self.pipes[rank].get(channel)

    def fingerprints(self, channel: str, rank: int = 0) -> Optional["array[int]"]:
        """The fingerprints of the records rank `rank` consumed of `channel`'s epoch at this
        checkpoint (a channel with a ShuffleConfig), else None."""
        try:
            return from_bytes((self.path / fingerprint_file(channel, rank)).read_bytes())
        except FileNotFoundError:
            return None

    def consumed(self, rank: int) -> dict[str, "array[int]"]:
        """Rank `rank`'s consumed fingerprints, by shuffled channel (the other channels have none)."""
        channels = sorted(self.pipes[rank]) if rank < len(self.pipes) else []
        return {c: f for c in channels if (f := self.fingerprints(c, rank)) is not None}

    @property
    def state_prefix(self) -> str:
        """The prefix to pass to `tf.train.Checkpoint.read`."""
        return str(self.path / STATE_PREFIX)


def _log(message: str) -> None:
    sys.stderr.write(f"[checkpoints] {message}\n")
    sys.stderr.flush()


def file_crc(path: Path) -> int:
    """CRC32C of a file's bytes (what a checkpoint's manifest records)."""
    from crc32c import crc32c  # the hardware CRC, as Pipe mode uses

    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            crc = crc32c(chunk, crc)
    return crc


class CheckpointFolder:
    """The complete checkpoints in `directory`, newest first on request; torn ones removed."""

    def __init__(self, directory: Path, log: Callable[[str], None] = _log) -> None:
        self.directory = directory
        self._log = log
        self._warned: set[str] = set()

    def clean_incomplete(self) -> None:
        """Remove this manager's incomplete checkpoints (torn by a kill), except any still being written."""
        if not self.directory.is_dir():
            return
        for entry in self.directory.iterdir():
            match = INCOMPLETE.match(entry.name.removesuffix("-old"))
            if match and entry.is_dir() and not alive(int(match.group(2))):
                shutil.rmtree(entry, ignore_errors=True)

    # -- reading -----------------------------------------------------------------------------------
    def _complete_dirs(self) -> list[tuple[int, Path]]:
        if not self.directory.is_dir():
            return []
        found = []
        for entry in self.directory.iterdir():
            match = COMPLETE.match(entry.name)
            if match and entry.is_dir():
                found.append((int(match.group(1)), entry))
            elif not INCOMPLETE.match(entry.name.removesuffix("-old")):
                self._warn_once(entry.name, f"ignoring {entry}: not a checkpoint of this manager (left as it is)")
        return found

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self._log(message)

    def _load(self, step: int, path: Path, check_crc: bool) -> Optional[Checkpoint]:
        """The checkpoint at `path` if its manifest and files check out, else None (with a warning)."""
        try:
            manifest = json.loads((path / MANIFEST).read_text())
            if manifest.get("format") != FORMAT or manifest.get("step") != step:
                raise ValueError(f"manifest is not {FORMAT} for step {step}")
            if not manifest["files"]:  # how a failed asynchronous write was published before 2026-11
                raise ValueError("its manifest lists no files")
            state = manifest.get("state")
            problem = missing_state_files(set(manifest["files"]), state) if state is not None else None
            if problem is not None:
                raise ValueError(problem)
            for name, meta in manifest["files"].items():
                file = path / name
                if file.stat().st_size != meta["size"]:
                    raise ValueError(f"{name} has {file.stat().st_size} bytes, the manifest says {meta['size']}")
                if check_crc and file_crc(file) != meta["crc32c"]:
                    raise ValueError(f"{name} fails its CRC32C")
            pipes = tuple({c: PipePosition(*p) for c, p in r.items()} for r in manifest.get("pipes", [{}]))
        except (OSError, ValueError, KeyError, TypeError) as e:
            self._warn_once(str(path), f"ignoring damaged checkpoint {path}: {e}")
            return None
        return Checkpoint(step, path, pipes, manifest.get("extra", {}), frozenset(manifest["files"]))

    def checkpoints(self) -> list[Checkpoint]:
        """Every complete checkpoint that checks out (sizes), oldest first."""
        found = (self._load(step, path, check_crc=False) for step, path in sorted(self._complete_dirs()))
        return [c for c in found if c is not None]

    def candidates(self) -> Iterator[Checkpoint]:
        """The complete checkpoints whose files all check out (sizes and CRC32C), newest first;
        damaged ones are skipped with a warning."""
        for step, path in sorted(self._complete_dirs(), reverse=True):
            checkpoint = self._load(step, path, check_crc=True)
            if checkpoint is not None:
                yield checkpoint

    def latest(self) -> Optional[Checkpoint]:
        """The newest complete checkpoint whose files all check out (sizes and CRC32C)."""
        return next(self.candidates(), None)

