"""A worker host's profiler data, packed for the master at the job's end and unpacked into the master's
profiler folder, so that one report covers every host (smdebug's layout: node ids `<rank>-<host>` and
sample files `<epoch_s>.<host>.json` never collide across hosts).

Bounded: a host packs at most SHIP_CAP_BYTES of files (before compression), taken in this order while
they fit: its ranks' digests (smtrain.profiler.digests), their step events (with a killed rank's open
file and the free-space notes), its system samples from the newest back, then cProfile output, then
TensorFlow profiler traces. What is past the cap stays in the host's own output/profiler; the archive says how much was left out, and the report
shows it.
"""
from __future__ import annotations

import io
import json
import os
import tarfile
import time
from pathlib import Path
from typing import IO, Iterator, NamedTuple

__all__ = ["LEFT_OUT_NAME", "SHIP_CAP_BYTES", "Packed", "pack", "unpack"]

SHIP_CAP_BYTES = 64 << 20  # per host, before compression
LEFT_OUT_NAME = ".smtrain-left-out.json"  # in the archive: what the cap left out, for the report


class Packed(NamedTuple):
    """A host's profiler files as one gzip'd tar, and what did not fit."""

    data: bytes
    files: int
    left_out_files: int
    left_out_bytes: int


def _kind_order(relative: Path) -> int:
    """Which files ship first: the ranks' digests and step events, system samples, cProfile, TF traces,
    anything else."""
    parts = relative.parts
    if parts[:2] == ("framework", "rank-digests"):
        return -1
    if parts[:1] == ("framework",) and (parts[1:2] == ("pevents",) or len(parts) == 2):
        return 0
    if parts[:1] == ("system",):
        return 1
    if parts[:2] == ("framework", "python_profile"):
        return 2
    if parts[:2] == ("framework", "tensorflow"):
        return 3
    return 4


def _files(folder: Path, since: float) -> Iterator[tuple[Path, int, float]]:
    for path in folder.rglob("*"):
        try:
            stat = path.lstat()
        except OSError:
            continue
        if path.is_file() and not path.is_symlink() and stat.st_mtime >= since:
            yield path, stat.st_size, stat.st_mtime


def pack(folder: Path, since: float, cap_bytes: int = SHIP_CAP_BYTES) -> Packed:
    """This host's profiler files of this job (modified since `since`), capped, as a gzip'd tar."""
    def order(found: tuple[Path, int, float]) -> tuple[int, float, str]:
        kind = _kind_order(found[0].relative_to(folder))
        return kind, -found[2] if kind == 1 else 0.0, str(found[0])  # system samples: the newest first

    found = sorted(_files(folder, since), key=order)
    buffer = io.BytesIO()
    total = files = left_files = left_bytes = 0
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for path, size, _ in found:
            if total + size > cap_bytes:
                left_files, left_bytes = left_files + 1, left_bytes + size
                continue
            try:
                tar.add(str(path), arcname=str(path.relative_to(folder)), recursive=False)
            except OSError:  # gone meanwhile (a rank's file renamed at its exit)
                continue
            total, files = total + size, files + 1
        if left_files:
            note = json.dumps({"files": left_files, "bytes": left_bytes}).encode()
            info = tarfile.TarInfo(LEFT_OUT_NAME)
            info.size, info.mtime = len(note), int(time.time())
            tar.addfile(info, io.BytesIO(note))
    return Packed(buffer.getvalue(), files, left_files, left_bytes)


def unpack(archive: IO[bytes], into: Path) -> tuple[int, dict]:
    """Unpack a host's archive (a file open for reading) into `into`: regular files only, never outside
    it (the same checks as tarfile's `data` filter). Returns the files written and what the sender's
    cap left out (empty when nothing was)."""
    into = into.resolve()
    written, left_out = 0, {}
    now = time.time()
    with tarfile.open(fileobj=archive, mode="r:gz") as tar:
        for member in tar:
            target = (into / member.name).resolve()
            if not member.isfile() or into not in target.parents:
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            if member.name == LEFT_OUT_NAME:
                left_out = json.loads(source.read() or b"{}")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as out:
                while chunk := source.read(1 << 20):
                    out.write(chunk)
            os.utime(target, (now, now))  # the report reads this job's files by time: the master's clock decides
            written += 1
    return written, left_out
