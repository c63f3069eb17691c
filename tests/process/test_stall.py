"""The stall watchdog through the real `train` (one host, and a one-host MPI job through the rank
launchers and the master's control channel)."""
from __future__ import annotations

import time
from pathlib import Path

from tests.support import make_tree, processes_mentioning, run_train

STALLS = """
import time
from smtrain import progress
for step in range(5):
    progress.step()
    time.sleep(0.1)
def waiting_for_the_others():
    time.sleep(3600)
waiting_for_the_others()
"""

QUIET_BUT_BUSY = """
import os, sys, time
from smtrain import progress
end = time.monotonic() + float(sys.argv[sys.argv.index("--seconds") + 1])
while time.monotonic() < end:
    progress.step()
    time.sleep(0.5)
"""


def test_a_stalled_program_fails_as_stalled_with_its_stack_logged(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={"sagemaker_stall_timeout_seconds": "3"})
    tree.write_program("train.py", STALLS)
    started = time.monotonic()
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=60)
    stderr = done.stderr.decode()
    assert done.returncode == 124, stderr[-2000:]
    assert time.monotonic() - started < 3 + 15
    failure = tree.failure.read_text()
    assert failure.startswith("Stalled: no rank made progress for 3 s") and "rank 0 on algo-1 (5 steps" in failure
    assert "in waiting_for_the_others" in stderr and "Fatal Python error: Aborted" in stderr  # the stack
    assert processes_mentioning(str(tree.base)) == []


def test_a_quiet_program_that_progresses_is_not_stalled(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={"sagemaker_stall_timeout_seconds": "2", "seconds": "6"})
    tree.write_program("train.py", QUIET_BUT_BUSY)
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_a_program_that_never_reports_progress_is_not_judged(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={"sagemaker_stall_timeout_seconds": "1"})
    tree.write_program("train.py", "import time\ntime.sleep(4)\n")
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_an_mpi_job_silent_for_two_minutes_while_progressing_is_not_killed_at_a_60_s_timeout(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
        "sagemaker_stall_timeout_seconds": "60", "seconds": "125"})
    tree.write_program("train.py", QUIET_BUT_BUSY)
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=240)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"Stalled" not in done.stderr


def test_a_stalled_rank_of_an_mpi_job_is_named(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
        "sagemaker_stall_timeout_seconds": "4"})
    tree.write_program("train.py", "import os, time\nfrom smtrain import progress\n"
                       "steps = 6 if os.environ['SM_RANK'] == '0' else 3\n"
                       "for _ in range(steps):\n    progress.step()\n    time.sleep(0.6)\n"
                       "def stuck():\n    time.sleep(3600)\nstuck()\n")
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=90)
    stderr = done.stderr.decode()
    assert done.returncode == 124, stderr[-3000:]
    failure = tree.failure.read_text()
    assert "stopped first: rank 1 on algo-1 (3 steps; the furthest rank 6)" in failure, failure
    assert stderr.count("in stuck") >= 2  # both ranks' stacks
    assert processes_mentioning(str(tree.base)) == []
