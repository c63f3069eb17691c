"""The stall watchdog through the real `train` (one host, and a one-host MPI job through the rank
launchers and the master's control channel): with smtrain's step helpers, and with plain Horovod
scripts that never import smtrain (tests/programs/hvd_plain_loop.py, hvd_plain_keras.py), judged by what Horovod knows."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from tests.support import Tree, make_tree, processes_mentioning, run_train

PROGRAMS = Path(__file__).parent.parent / "programs"

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
    assert failure.startswith("Stalled: no rank made progress for ") and "rank 0 on algo-1 stopped at 5 steps" in failure
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


def test_an_mpi_job_silent_for_twice_its_stall_timeout_while_progressing_is_not_killed(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
        "sagemaker_stall_timeout_seconds": "4", "seconds": "10"})
    tree.write_program("train.py", QUIET_BUT_BUSY)
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=150)
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


# -- plain Horovod scripts (no smtrain import), 1 host x 2 ranks, stall timeout 12 s ----------------------
TIMEOUT_S = 12  # Horovod's stall inspector then looks every 2 s (rank.collectives.check_interval_s)
HEALTHY_TIMEOUT_S = 6  # the healthy jobs' (each runs for over three of them): the inspector still every 2 s
HEALTHY_S = 3 * HEALTHY_TIMEOUT_S + 3


def _plain_horovod_job(tmp_path: Path, program: str, timeout_s: int = TIMEOUT_S, **hyperparameters: Any) -> Tree:
    tree = make_tree(tmp_path / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
        "sagemaker_stall_timeout_seconds": str(timeout_s), **{k: str(v) for k, v in hyperparameters.items()}})
    shutil.copy(PROGRAMS / program, tree.code_dir / "train.py")
    text = (tree.code_dir / "train.py").read_text()
    assert "import smtrain" not in text and "from smtrain" not in text
    return tree


def _assert_ends_well(tree: Tree, limit_s: float) -> None:
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=limit_s)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr[-3000:]
    assert "Stalled" not in stderr and not tree.failure.exists()
    assert processes_mentioning(str(tree.base)) == []


def _assert_stalled_naming(tree: Tree, limit_s: float, named: str, stack_of: str) -> str:
    started = time.monotonic()
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=limit_s + 60)
    stderr = done.stderr.decode()
    assert done.returncode == 124, stderr[-3000:]
    stopped_at = float((tree.base / "output" / "data" / "stopped-at").read_text())
    print(f"the rank stopped -> train exited: {time.time() - stopped_at:.1f} s")
    assert time.time() - stopped_at < TIMEOUT_S + 30  # the timeout, then within 30 s (stacks and ending included)
    assert time.monotonic() - started < limit_s
    failure = tree.failure.read_text()
    assert failure.startswith(f"Stalled: {named} stopped: the other ranks have waited for it in a Horovod collective "), failure
    assert failure.count(" on algo-1") == 1, failure  # that rank alone
    assert f"in {stack_of}" in stderr and stderr.count("Fatal Python error: Aborted") >= 2  # every rank's stack
    assert processes_mentioning(str(tree.base)) == []
    return failure


def test_a_healthy_plain_horovod_eager_loop_of_over_three_timeouts_ends_0(tmp_path: Path) -> None:
    _assert_ends_well(_plain_horovod_job(tmp_path, "hvd_plain_loop.py", HEALTHY_TIMEOUT_S, seconds=HEALTHY_S,
                                         interval=0.5), 150)


def test_a_healthy_plain_horovod_keras_fit_of_over_three_timeouts_ends_0(tmp_path: Path) -> None:
    _assert_ends_well(_plain_horovod_job(tmp_path, "hvd_plain_keras.py", HEALTHY_TIMEOUT_S, epochs=3,
                                         batches=HEALTHY_S // 3 * 2, **{"batch-seconds": 0.5}), 180)


def test_every_rank_quiet_for_over_three_timeouts_between_two_collectives_ends_0(tmp_path: Path) -> None:
    _assert_ends_well(_plain_horovod_job(tmp_path, "hvd_plain_loop.py", HEALTHY_TIMEOUT_S, steps=5, interval=0.1,
                                         **{"sleep-between": HEALTHY_S}), 150)


def test_a_plain_tf_function_loop_whose_rank_1_stops_names_rank_1_alone(tmp_path: Path) -> None:
    tree = _plain_horovod_job(tmp_path, "hvd_plain_loop.py", mode="function", seconds=600, interval=0.2,
                              **{"stop-rank": 1, "stop-at": 20})
    _assert_stalled_naming(tree, 100, "rank 1 on algo-1", "stopped_in_the_training_loop")


def test_a_plain_keras_fit_whose_rank_1_blocks_in_a_callback_names_rank_1_alone(tmp_path: Path) -> None:
    tree = _plain_horovod_job(tmp_path, "hvd_plain_keras.py", epochs=100, batches=30,
                              **{"batch-seconds": 0.2, "block-rank": 1, "block-at-batch": 5})
    _assert_stalled_naming(tree, 100, "rank 1 on algo-1", "blocked_in_a_callback")
