"""What a single host's `train` loads at run time before its program starts (tests/unit/test_startup_imports.py holds
what its modules import): the start-up goal of benchmarks/bench_startup.py (at most 50 ms over plain Python) rests on
it. Read from `python -X importtime`, whose lines go to stderr in order with `train`'s own."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import make_tree
from tests.unit.test_startup_imports import NOT_BEFORE_THE_PROGRAM


def test_a_usual_single_host_start_loads_nothing_of_later_steps_before_its_program(tmp_path: Path) -> None:
    """A usual start: nothing an earlier job left to clear, no requirements, File channels."""
    tree = make_tree(tmp_path)
    tree.write_program("train.py", "print('first line')\n")
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "smtrain"], env=tree.env(), capture_output=True,
                          text=True, timeout=60, cwd=os.fspath(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    started = next(i for i, line in enumerate(lines) if line.startswith("[train]") and " starting " in line)
    before = {line.rsplit("|", 1)[1].strip() for line in lines[:started] if line.startswith("import time:")}
    assert "smtrain.run.single" in before  # the reading works
    assert not before & set(NOT_BEFORE_THE_PROGRAM), sorted(before & set(NOT_BEFORE_THE_PROGRAM))
