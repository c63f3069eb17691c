"""A program killed by the kernel's OOM killer is named `OutOfMemory`, with its rank and host, for a
program on its own and for a rank of an MPI job: the real `train` in a memory cgroup of its own with
a limit (what `docker run --memory` gives a container), a real allocation, the real OOM killer.
(The Docker test in tests/image and the strategy test in tests/cluster do the same across hosts.)"""
from __future__ import annotations

import os
from pathlib import Path

from tests.support import make_tree, memory_cgroup, require_root, run_train

LIMIT = 400 << 20
# Allocates and touches memory until the OOM killer ends it (a rank chosen by SM_RANK, else the program).
HOG = """import os, sys, time
if int(os.environ.get("SM_RANK", "0")) == {rank}:
    hog = []
    while True:
        hog.append(bytearray(16 << 20))
time.sleep({others_sleep})
"""


def test_an_oom_killed_program_is_named_out_of_memory(tmp_path: Path) -> None:
    require_root()
    tree = make_tree(tmp_path)
    tree.write_program("train.py", HOG.format(rank=0, others_sleep=0))
    with memory_cgroup(f"smtrain-oom-{os.getpid()}-a", LIMIT) as join:
        done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=120, preexec_fn=join)
    assert done.returncode == 137, done.stderr.decode()[-2000:]
    text = tree.failure.read_text()
    assert text.startswith(f"OutOfMemory: program {tree.code_dir / 'train.py'} was killed by SIGKILL (exit status 137); "
                           "the kernel's OOM killer ran in its container"), text


def test_an_oom_killed_rank_of_an_mpi_job_is_named_with_its_rank_and_host(tmp_path: Path) -> None:
    require_root()
    tree = make_tree(tmp_path, hyperparameters={"sagemaker_mpi_enabled": "true",
                                                "sagemaker_mpi_num_of_processes_per_host": "2"})
    tree.write_program("train.py", HOG.format(rank=1, others_sleep=60))
    with memory_cgroup(f"smtrain-oom-{os.getpid()}-b", LIMIT) as join:
        done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", SM_CONTROL_PORT="17341"), timeout=120,
                         preexec_fn=join)
    assert done.returncode == 137, done.stderr.decode()[-3000:]
    text = tree.failure.read_text()
    assert text.startswith(f"OutOfMemory: program {tree.code_dir / 'train.py'} (rank 1, local rank 1, on host algo-1) "
                           "was killed by SIGKILL (exit status 137); the kernel's OOM killer ran in its container"), text
