"""What the toolkit keeps to itself, and how it stops its own processes (real `train`, real mpirun):
- every documented setting reaches the program, the rank contract (the control token) does not; secrets never appear in toolkit lines or output/failure;
- helpers are stopped together against one deadline, even one that ignores SIGTERM; asked to stop ahead, once;
- a failure while starting is reported with its own class and code and leaves nothing running;
- ending what a job left behind reaps every descendant, also those that die while it looks."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smtrain.wire.contract import RANK_CONTRACT_ENV
from tests.support import TRAIN, documented_variables, make_tree, processes_mentioning, run_train

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
MPI_2 = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"}
SECRET = "hunter2-Very-Secret"

FAILING = """
import os, sys
print("program argv:", sys.argv[1:], flush=True)
sys.stderr.write(f"about to fail with {sys.argv[-1]}\\n")
raise RuntimeError("boom " + sys.argv[-1])
"""


def _toolkit_lines(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode().splitlines() if line.startswith("[train")]


# A value for every variable the README documents as a job's setting (tests.support.documented_variables),
# each one that `train` accepts on a one-host job; the program must get each, unchanged.
SETTINGS = {
    "SM_GRACE_PERIOD_SECONDS": "100", "SM_PEER_WAIT_SECONDS": "60", "SM_HEARTBEAT_TIMEOUT_SECONDS": "12",
    "SM_STALL_TIMEOUT_SECONDS": "1700", "SM_PIPE_EMULATION": "off", "SM_SYSTEM_MONITOR": "off",
    "SM_SYSTEM_MONITOR_INTERVAL_MS": "400", "SM_FRAMEWORK_METRICS": "off", "SM_DETAILED_PROFILING": "off",
    "SM_PYTHON_PROFILING": "off", "SM_PROFILER_MIN_FREE_MB": "512", "SM_CURRENT_HOST": "algo-1",
    "SM_HOSTS": '["algo-1"]', "SM_NETWORK_INTERFACE_NAME": "lo", "SM_NUM_CPUS": "2", "SM_NUM_GPUS": "0",
    "SMTRAIN_SSHD_PORT": "2222", "SMTRAIN_SSHD_CONFIG": "/etc/ssh/sshd_config", "SMTRAIN_MODELTRAINER_DRIVERS": "sdk",
    "SMTRAIN_S3_FILESYSTEM": "on", "SMTRAIN_S3_READAHEAD_BYTES": "1048576", "SMTRAIN_S3_MULTIPART_THRESHOLD_BYTES": "16777216",
    "SMTRAIN_S3_PART_BYTES": "6291456", "SMTRAIN_S3_UPLOADS_IN_FLIGHT": "4", "SMTRAIN_NATIVE_PIPES": "0",
    "SMTRAIN_MAX_RESTARTS": "1", "SM_SKIP_TEARDOWN_ON_FAILURE": "0", "SMTRAIN_INTERMEDIATE_RETRY_S": "1,2",
    "SMTRAIN_PIPE_DEALING": "host", "SMTRAIN_LIVE_METRICS": "off", "SMTRAIN_LIVE_METRICS_INTERVAL_S": "3",
    "SMTRAIN_STRAGGLER_WINDOW_S": "30",
}  # SM_CHECKPOINT_DIR and SM_CONTROL_PORT: set per run below


@pytest.fixture(scope="module")
def mpi_ranks_env(tmp_path_factory) -> tuple[dict, list[dict]]:
    """One 2-rank MPI job on one host with every documented setting: what was set, what each rank got."""
    base = tmp_path_factory.mktemp("settings")
    tree = make_tree(base / "ml", hyperparameters=MPI_2, channels={"train": {"TrainingInputMode": "Pipe"}})
    tree.write_program("train.py", "import json, os\nrank = os.environ['SM_RANK']\n"
                       "json.dump(dict(os.environ), open(os.environ['SM_OUTPUT_DATA_DIR'] + f'/env-{rank}.json', 'w'))\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    given = {**SETTINGS, "SM_CHECKPOINT_DIR": str(base / "checkpoints"), "SM_CONTROL_PORT": str(port),
             "SMTRAIN_RANK_CONTRACT": "a stale one from an outer job"}
    done = run_train(tree, env=tree.env(**given), timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    ranks = [json.loads((tree.base / "output" / "data" / f"env-{rank}.json").read_text()) for rank in (0, 1)]
    return {**tree.env(**given), "_toolkits": ",".join(_toolkits_names(tree.env(**given)))}, ranks


def _toolkits_names(environ: dict) -> list[str]:
    """The variables sagemaker-training and sagemaker-tensorflow-training give this job's program (their rules
    as the conformance tests hold them: plan.smenv, plan.tfconfig)."""
    from smtrain.config import hostfacts
    from smtrain.config.load import load_config
    from smtrain.plan.launch import plan_launch
    from smtrain.plan.smenv import process_env_vars, sm_env_vars
    from smtrain.plan.tfconfig import container_env

    config = load_config(environ)
    facts = hostfacts.gather(environ, config)
    shape = plan_launch(config, facts, sys.executable).shape
    process = process_env_vars(config)
    return sorted({*sm_env_vars(config, facts, shape), *process, *container_env(process["SAGEMAKER_REGION"], environ)})


def test_every_documented_setting_is_covered_here() -> None:
    assert sorted([*SETTINGS, "SM_CHECKPOINT_DIR", "SM_CONTROL_PORT"]) == documented_variables()


@pytest.mark.parametrize("name", documented_variables())
def test_a_documented_setting_reaches_every_rank_unchanged(mpi_ranks_env, name: str) -> None:
    given, ranks = mpi_ranks_env
    assert [env.get(name) for env in ranks] == [given[name]] * 2


# What mpirun, Python and the shell put in every process's environment
# Open MPI's own (its launch, and libopen-pal switching off the PSM/HFI libraries' backtraces), the shell's
NOT_OURS = ("OMPI_", "PMIX_", "OPAL_", "PRTE_", "HWLOC_", "HFI_NO_BACKTRACE", "IPATH_NO_BACKTRACE", "PWD", "OLDPWD",
            "SHLVL", "_", "LC_CTYPE", "PYTHONPATH")


def test_every_variable_the_ranks_get_beyond_the_toolkits_and_the_job_is_declared(mpi_ranks_env) -> None:
    """What the image adds to a program's environment is the declaration's (smtrain.config.program_env, the
    README's table): a variable a rank gets that neither the job's environment nor sagemaker-training's rules
    give it must be declared there."""
    from smtrain.config.program_env import declared

    given, ranks = mpi_ranks_env
    theirs = set(given) | set(given["_toolkits"].split(","))
    added = {name for env in ranks for name in env if name not in theirs and not name.startswith(NOT_OURS)}
    assert {"SM_RANK", "SM_PIPE_TRAIN", "SM_PROGRESS_FILE", "HOROVOD_STALL_CHECK_TIME_SECONDS"} <= added
    assert sorted(name for name in added if not declared(name)) == []


def test_only_the_rank_contract_is_kept_from_the_ranks(mpi_ranks_env) -> None:
    _, ranks = mpi_ranks_env
    for rank, env in enumerate(ranks):
        assert RANK_CONTRACT_ENV not in env
        assert env["SM_RANK"] == str(rank) and env["SM_PIPE_TRAIN"].endswith(f"train-{rank}")
        cores_each = str(max(1, (os.cpu_count() or 1) // 2))  # no GPU, 2 ranks: the cores are split
        assert env["OMP_NUM_THREADS"] == env["TF_NUM_INTRAOP_THREADS"] == cores_each
        assert env["OMPI_MCA_mpi_yield_when_idle"] == "1"  # and MPI yields them while it waits


def test_the_s3_and_pipe_reader_settings_take_effect_in_the_program(tmp_path: Path) -> None:
    """The readers of SMTRAIN_S3_FILESYSTEM (the plugin's loader, as TensorFlow is imported) and of
    SMTRAIN_NATIVE_PIPES (smtrain.pipes) live in the program's process."""
    tree = make_tree(tmp_path / "ml")
    tree.write_program("train.py", "import tensorflow as tf\n"
                       "from smtrain.data.native import native_pipes\n"
                       "try:\n    tf.io.gfile.exists('s3://bucket/key'); s3 = 'on'\n"
                       "except tf.errors.UnimplementedError:\n    s3 = 'off'\n"
                       "print('s3', s3, 'native', native_pipes() is not None, flush=True)\n")
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", SM_FRAMEWORK_METRICS="off",
                                        SMTRAIN_S3_FILESYSTEM="off", SMTRAIN_NATIVE_PIPES="0"), timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert "s3 off native False" in done.stdout.decode()


def test_a_secret_hyperparameter_is_masked_in_toolkit_lines_and_the_failure_file(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={"db_password": json.dumps(SECRET)})
    tree.write_program("train.py", FAILING)
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"))
    assert done.returncode == 1
    assert SECRET in done.stdout.decode()  # the program got it unchanged
    toolkit = _toolkit_lines(done.stderr)
    assert any("--db_password ****" in line for line in toolkit), toolkit
    assert not any(SECRET in line for line in toolkit)
    failure = tree.failure.read_text()
    assert failure.startswith("RuntimeError:") and "boom ****" in failure and SECRET not in failure


def test_a_secret_is_masked_when_a_rank_fails_under_mpi(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={**MPI_2, "api_token": json.dumps(SECRET)})
    tree.write_program("train.py", FAILING)
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=120)
    assert done.returncode == 1
    assert not any(SECRET in line for line in _toolkit_lines(done.stderr))
    failure = tree.failure.read_text()
    assert "rank" in failure and "****" in failure and SECRET not in failure


def test_a_helper_that_ignores_sigterm_does_not_stretch_the_exit(tmp_path: Path) -> None:
    """Two demultiplexers and the monitor, all stopped (SIGSTOP: SIGTERM stays pending, as with a
    helper that ignores it): train must still end within the grace period plus 5 s."""
    tree = make_tree(tmp_path / "ml", hyperparameters=MPI_2,
                     channels={"train": {"TrainingInputMode": "Pipe"}, "eval": {"TrainingInputMode": "Pipe"}})
    tree.write_program("train.py", "import os, signal, sys, time\n"
                       "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
                       "print('ready', flush=True)\n"
                       "time.sleep(600)\n")
    proc = subprocess.Popen([TRAIN], env=tree.env(SM_GRACE_PERIOD_SECONDS="2"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert [proc.stdout.readline() for _ in range(2)] == [b"ready\n"] * 2  # both ranks handle SIGTERM now
        helpers = []
        deadline = time.monotonic() + 30
        while len(helpers) < 3 and time.monotonic() < deadline:
            helpers = [pid for pid in processes_mentioning(str(tree.base))
                       if b"smtrain.data.demux" in _cmdline(pid) or b"smtrain.profiler.monitor" in _cmdline(pid)]
            time.sleep(0.05)
        assert len(helpers) == 3, helpers
        for pid in helpers:
            os.kill(pid, signal.SIGSTOP)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert status == 0, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    assert took <= 2 + 5, f"train took {took:.1f} s after SIGTERM"
    assert processes_mentioning(str(tree.base)) == []


def test_helpers_asked_to_stop_finish_while_train_goes_on_and_get_one_sigterm(tmp_path: Path) -> None:
    """`ask_to_stop` (the master, before it gathers the workers' profiler data): SIGTERM now, no wait; `stop`
    then waits for the helper's own end, without a second SIGTERM (which would cut its last write short)."""
    from smtrain.proc.helpers import HelperGroup, HelperSpec

    told = tmp_path / "told"
    code = ("import signal, sys, time\n"
            "def stop(*_):\n"
            f"    open({str(told)!r}, 'a').write('term\\n'); time.sleep(0.5); sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, stop)\n"
            "time.sleep(60)\n")
    helpers = HelperGroup()
    with helpers:
        helper = helpers.start(HelperSpec("slow to stop", (sys.executable, "-c", code)))
        deadline = time.monotonic() + 30
        while not _catches_sigterm(helper.process.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        asked = time.monotonic()
        helpers.ask_to_stop()
        assert time.monotonic() - asked < 0.3 and helper.process.poll() is None  # still writing its last part
        while not told.exists() and time.monotonic() < deadline:  # train does something else meanwhile
            time.sleep(0.02)
        helpers.stop()
        assert helper.process.poll() == 0  # its own end, not a SIGKILL
    assert told.read_text() == "term\n"


def test_the_group_stops_what_ends_with_the_program_and_hands_over_what_outlives_it() -> None:
    """The job's one group: its stop leaves a helper that outlives the program (the syncer, the warm report) running,
    and `outliving` hands it to the job, which ends it once the outcome is out; an optional helper that cannot start
    is said and left out, any other's failure to start is the job's."""
    from smtrain.proc.helpers import HelperGroup, HelperSpec

    sleep = (sys.executable, "-c", "import time; time.sleep(60)")
    group = HelperGroup()
    with group:
        ends = group.start(HelperSpec("ends", sleep))
        outlives = group.start(HelperSpec("outlives", sleep, outlives_program=True))
        assert group.start(HelperSpec("missing", ("/nonexistent/helper",), optional=True)) is None
        with pytest.raises(OSError):
            group.start(HelperSpec("needed", ("/nonexistent/helper",)))
    assert ends is not None and outlives is not None
    assert ends.process.poll() is not None and outlives.process.poll() is None
    assert group.pids == [ends.process.pid, outlives.process.pid]
    assert group.outliving() == [outlives] and group.get("outlives") is None
    outlives.process.kill()
    outlives.process.wait()


def _catches_sigterm(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_control_port_in_use_is_a_startup_failure_that_leaves_nothing(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters=MPI_2)
    tree.write_program("train.py", "print('must not run')\n")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = run_train(tree, env=tree.env(SM_CONTROL_PORT=str(port)), timeout=60)
    assert done.returncode == 71, done.stderr.decode()
    failure = tree.failure.read_text()
    assert failure.startswith("StartupFailed:") and str(port) in failure and "SM_CONTROL_PORT" in failure
    assert b"must not run" not in done.stdout
    assert processes_mentioning(str(tree.base)) == []  # the monitor started before the port was tried


def test_custom_mpi_options_as_aws_samples_write_them(tmp_path: Path) -> None:
    """`--NCCL_DEBUG=INFO` would make mpirun fail with 'unknown option'; a repeated default is replaced."""
    tree = make_tree(tmp_path / "ml", hyperparameters={
        **MPI_2, "sagemaker_mpi_custom_mpi_options": '"--NCCL_DEBUG=INFO --map-by slot -x NCCL_ALGO=Ring"'})
    tree.write_program("train.py", "import json, os\nrank = os.environ['SM_RANK']\n"
                       "json.dump(dict(os.environ), open(os.environ['SM_OUTPUT_DATA_DIR'] + f'/env-{rank}.json', 'w'))\n")
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=120)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr[-2000:]
    for rank in (0, 1):
        env = json.loads((tree.base / "output" / "data" / f"env-{rank}.json").read_text())
        assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_ALGO"] == "Ring"
    line = next(line for line in stderr.splitlines() if line.startswith("[train] host algo-1: starting 2 ranks"))
    assert line.count("--map-by") == 1 and "NCCL_DEBUG=" not in line and "-x NCCL_ALGO=Ring" in line


ENDER = """
import os, subprocess, sys
from smtrain.common import linux
from smtrain.proc.supervise import end_descendants
linux.become_subreaper()
for round in range(5):
    children = [subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30; :"]) for _ in range(40)]
    end_descendants(0.1)
    try:
        unreaped = os.waitpid(-1, os.WNOHANG)[0]
    except ChildProcessError:
        unreaped = 0
    print(f"round {round}: unreaped {unreaped}", flush=True)
"""


def test_ending_descendants_leaves_no_zombie_to_the_hosts_init(tmp_path: Path) -> None:
    """Forty shells with a background child each, all ended at once, five times: when end_descendants
    returns, nothing it could reap is left. Zombies that died after its last reap used to be left
    (19 of 20 such rounds), and after train's exit the host's init listed them as leftovers."""
    done = subprocess.run([sys.executable, "-c", ENDER], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [f"round {r}: unreaped 0" for r in range(5)], done.stdout
