"""Scratch entries in shared memory: what a killed process left is removed by the next one of the
same kind; a live process's entries, and other PID namespaces', are kept. Real processes, real files."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from smtrain.common.scratch import make_scratch_dir, make_scratch_file

MAKE = ("import os, sys, time; from smtrain.common.scratch import make_scratch_file, make_scratch_dir; "
        "fd, path = make_scratch_file('t-file-', sys.argv[1]); d = make_scratch_dir('t-dir-', sys.argv[1]); "
        "print(path, d, flush=True); time.sleep(float(sys.argv[2]))")


def _made_by_another_process(folder: Path, lives: float) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen([sys.executable, "-c", MAKE, str(folder), str(lives)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().split()


def test_a_killed_processes_entries_go_a_live_ones_stay(tmp_path: Path) -> None:
    killed, (killed_file, killed_dir) = _made_by_another_process(tmp_path, 60)
    killed.kill()
    killed.wait()
    living, (living_file, living_dir) = _made_by_another_process(tmp_path, 60)
    foreign = tmp_path / "t-file-1-1-abc"  # another PID namespace's: never judged here
    foreign.write_text("")
    try:
        fd, mine = make_scratch_file("t-file-", str(tmp_path))
        os.close(fd)
        made = make_scratch_dir("t-dir-", str(tmp_path))
        assert not Path(killed_file).exists() and not Path(killed_dir).exists()
        assert Path(living_file).exists() and Path(living_dir).is_dir() and foreign.exists()
        assert Path(mine).name.startswith("t-file-") and f"-{os.getpid()}-" in Path(mine).name
        assert made.is_dir()
    finally:
        living.kill()
        living.wait()
