"""A host's profiler data packed for the master: this job's files only, step events first, the system
samples from the newest back, capped; unpacked only inside the master's folder."""
from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

from smtrain.profiler.shipping import pack, unpack


def _file(root: Path, relative: str, size: int, mtime: float) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (mtime, mtime))


def test_the_cap_keeps_step_events_and_the_newest_samples(tmp_path: Path) -> None:
    src, now = tmp_path / "src", time.time()
    _file(src, "framework/pevents/2026112711/1_0-algo-2_pythontimeline.json", 300, now)
    _file(src, "framework/0-algo-2_pythontimeline.json.tmp", 100, now)  # a killed rank's open file
    _file(src, "system/incremental/2026112711/100.algo-2.json", 400, now - 20)
    _file(src, "system/incremental/2026112711/110.algo-2.json", 400, now - 10)
    _file(src, "framework/tensorflow/detailed_profiling/0-algo-2/trace.pb", 50, now)
    _file(src, "system/incremental/2026112710/1.algo-2.json", 400, now - 7200)  # an earlier job's
    packed = pack(src, since=now - 60, cap_bytes=850)  # the older sample does not fit; the small trace still does
    assert (packed.files, packed.left_out_files, packed.left_out_bytes) == (4, 1, 400)
    out = tmp_path / "out"
    written, left_out = unpack_bytes(packed.data, out)
    assert written == 4 and left_out == {"files": 1, "bytes": 400}
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "framework/0-algo-2_pythontimeline.json.tmp", "framework/pevents/2026112711/1_0-algo-2_pythontimeline.json",
        "framework/tensorflow/detailed_profiling/0-algo-2/trace.pb", "system/incremental/2026112711/110.algo-2.json"]
    assert all(p.stat().st_mtime >= now - 1 for p in out.rglob("*") if p.is_file())  # the master's clock


def unpack_bytes(data: bytes, into: Path):
    return unpack(io.BytesIO(data), into)


def test_only_regular_files_inside_the_folder_are_written(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("../escaped.json", "/abs.json", "ok/fine.json"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"{}"))
        link = tarfile.TarInfo("ok/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    out = tmp_path / "out"
    written, _ = unpack_bytes(buffer.getvalue(), out)
    assert written == 1 and [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")] == [
        "out", "out/ok", "out/ok/fine.json"]
