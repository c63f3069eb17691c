"""What a single host's `train` loads before its program starts, on which benchmarks/bench_startup.py's goal (at
most 50 ms over plain Python) rests: none of the modules below, which cost milliseconds each and serve only a job
of several hosts or a later step (measured with `python -X importtime`)."""
from __future__ import annotations

import subprocess
import sys

# What cli.main and a single host's role import on their way to the program's start.
START_PATH = ("smtrain.cli", "smtrain.config.hostfacts", "smtrain.plan.launch", "smtrain.run.host", "smtrain.run.single")
NOT_BEFORE_THE_PROGRAM = ("dataclasses", "inspect", "shutil", "tempfile", "smtrain.rank.launcher",
                          "smtrain.run.control_server", "smtrain.wire.control_protocol", "smtrain.profiler.events",
                          "smtrain.run.pipe_rewind", "smtrain.run.report")


def test_a_single_hosts_train_loads_nothing_of_several_hosts_nor_of_later_steps_before_its_program() -> None:
    code = f"import sys\nfor name in {START_PATH!r}:\n    __import__(name)\nprint(' '.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(done.stdout.split())
    assert set(START_PATH) <= loaded
    assert not loaded & set(NOT_BEFORE_THE_PROGRAM), sorted(loaded & set(NOT_BEFORE_THE_PROGRAM))
