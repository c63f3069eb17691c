"""Helpers shared by the tests: build an /opt/ml tree, run the real `train`, run the oracle."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

BIN = Path(sys.executable).parent
TRAIN = str(BIN / "train")
# sagemaker-training's own `train` console script is shadowed by ours in this environment: ORACLE calls its main,
# given one list instead of importing all of TensorFlow (4 s here) to make it in each run: the names of the classes
# TensorFlow's errors_impl.py defines (process.get_tensorflow_exception_classes: the errors its failure messages
# name), read from that file's source (tests/process/test_conformance.py holds the two lists equal). The
# TensorFlow container's entry point (TF_ORACLE_MODULE) imports TensorFlow at its top all the same.
TF_ERROR_NAMES = """
import ast, importlib.util, os
def tensorflow_error_names():
    package = importlib.util.find_spec("tensorflow").submodule_search_locations[0]
    with open(os.path.join(package, "python", "framework", "errors_impl.py")) as source:
        tree = ast.parse(source.read())
    return sorted(node.name for node in tree.body if isinstance(node, ast.ClassDef)) + ["XlaRuntimeError"]
"""
ORACLE = [sys.executable, "-c", TF_ERROR_NAMES + """
from sagemaker_training import process
process.get_tensorflow_exception_classes = tensorflow_error_names
from sagemaker_training.cli.train import main; main()
"""]
# smdebug 1.0.34 in an environment of its own (requirements/smdebug.txt; its protobuf 3.20 pin conflicts
# with TensorFlow's), and the script that reads with it (tests/programs/smdebug_read.py).
README = Path(__file__).resolve().parent.parent / "README.md"
REFERENCE = README.parent / "docs" / "reference.md"  # the settings, exit statuses and program's variables
# Variables only this toolkit sets (documented additions), left out where its environment is compared with an oracle's.
OWN_VARIABLES = ("SM_CHECKPOINT_DIR", "SM_FRAMEWORK_PROFILER", "SM_PIPE_", "SM_PROGRESS_FILE", "SM_TENSORBOARD_DIR")
SMDEBUG_READ = ["/opt/smtrain/smdebug/bin/python", str(Path(__file__).resolve().parent / "programs" / "smdebug_read.py")]


@dataclasses.dataclass
class Tree:
    """An /opt/ml stand-in under a temporary folder."""

    base: Path

    @property
    def config_dir(self) -> Path:
        return self.base / "input" / "config"

    @property
    def code_dir(self) -> Path:
        return self.base / "code"

    @property
    def failure(self) -> Path:
        return self.base / "output" / "failure"

    def write_config(self, name: str, content: Any) -> Path:
        path = self.config_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    def write_program(self, name: str, source: str, mode: int = 0o644) -> Path:
        path = self.code_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        path.chmod(mode)
        return path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_"))}
        env.update(SAGEMAKER_BASE_DIR=str(self.base), PYTHONUNBUFFERED="1")
        env.update(extra)
        return env


def make_tree(
    base: Path,
    hosts: Sequence[str] = ("algo-1",),
    current_host: Optional[str] = None,
    hyperparameters: Optional[Mapping[str, Any]] = None,
    channels: Optional[Mapping[str, Any]] = None,
    program: str = "train.py",
    resource_extra: Optional[Mapping[str, Any]] = None,
) -> Tree:
    """A tree as SageMaker writes it; hyperparameter values are written as given (strings as the SDK does)."""
    tree = Tree(base)
    resource = {"current_host": current_host or hosts[0], "hosts": list(hosts), **(resource_extra or {})}
    tree.write_config("resourceconfig.json", resource)
    hps = {"sagemaker_program": json.dumps(program), **(hyperparameters or {})}
    tree.write_config("hyperparameters.json", hps)
    tree.write_config("inputdataconfig.json", dict(channels or {}))
    tree.code_dir.mkdir(parents=True, exist_ok=True)
    return tree


def run_train(
    tree: Tree, *args: str, env: Optional[Mapping[str, str]] = None, timeout: float = 60, **kwargs: Any
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TRAIN, *args], env=dict(env or tree.env()), capture_output=True, timeout=timeout, **kwargs
    )


def run_oracle(tree: Tree, env: Mapping[str, str], hosts: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """sagemaker-training's real `train` (5.1.4, requirements/common.txt; ORACLE), in a private mount namespace
    whose /etc/hosts names the job's hosts (it waits until every host name resolves)."""
    hosts_file = tree.base.parent / f"{tree.base.name}.hosts"
    hosts_file.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {h}\n" for h in hosts))
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(hosts_file), *ORACLE],
        env=dict(env), capture_output=True, timeout=timeout, cwd=tree.base,
    )


TF_ORACLE_MODULE = "sagemaker_tensorflow_container.training:main"


def run_tf_oracle(tree: Tree, env: Mapping[str, str], hosts: Sequence[str], done: Path,
                  timeout: float = 120) -> tuple[int, str]:
    """SageMaker's TensorFlow container entry point (sagemaker-tensorflow-training 20.5.0, through
    sagemaker-training's real `train`), as `run_oracle`. It runs until `done` (what the program
    writes) exists and the oracle ended; a parameter-server job's oracle never ends by itself (its
    ps process lives on), so it is killed a few seconds after `done` appears. (status, stderr tail)."""
    hosts_file = tree.base.parent / f"{tree.base.name}.hosts"
    hosts_file.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {h}\n" for h in hosts))
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    log = tree.base.parent / f"{tree.base.name}.oracle.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(hosts_file), *ORACLE],
            env={**env, "SAGEMAKER_TRAINING_MODULE": TF_ORACLE_MODULE}, stdout=err, stderr=err, cwd=tree.base,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not done.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            status = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            status = proc.wait()
    return status, log.read_text(errors="replace")[-3000:]


def require_root() -> None:
    import pytest

    if os.geteuid() != 0:
        pytest.skip("needs root (namespaces, mounts)")


def which(name: str) -> Optional[str]:
    return shutil.which(name)


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains `text` (e.g. a test's own tmp folder)."""
    from smtrain.common.linux import alive

    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


@contextlib.contextmanager
def memory_cgroup(name: str, limit_bytes: int) -> Iterator[Callable[[], None]]:
    """A memory cgroup of its own under this process's (cgroup v1 or v2), limited to `limit_bytes` as
    a container's `--memory` is; yields a preexec function that moves a child (and what it starts)
    into it. Skips the test where no such cgroup can be made here. Removed afterwards."""
    import pytest

    own = Path("/proc/self/cgroup").read_text().splitlines()
    v1 = next((line.split(":", 2)[2] for line in own if "memory" in line.split(":")[1].split(",")), None)
    if v1 is not None:
        folder, limit_file = Path("/sys/fs/cgroup/memory") / v1.lstrip("/") / name, "memory.limit_in_bytes"
    else:
        v2 = next((line.split(":", 2)[2] for line in own if line.startswith("0::")), "/")
        folder, limit_file = Path("/sys/fs/cgroup") / v2.lstrip("/") / name, "memory.max"
    try:
        folder.mkdir()
        (folder / limit_file).write_text(str(limit_bytes))
    except OSError as e:
        pytest.skip(f"cannot make a memory cgroup with a limit here ({folder}: {e.strerror})")
    procs = folder / "cgroup.procs"

    def join() -> None:
        procs.write_text(str(os.getpid()))

    try:
        yield join
    finally:
        deadline = time.monotonic() + 10
        while True:
            try:
                folder.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def documented_variables() -> list[str]:
    """Every environment variable the reference's settings tables document for a job: the `SM_*` and
    `SMTRAIN_*` names in the first column of each table headed `hyperparameter / variable` or `setting`."""
    names: list[str] = []
    in_settings = False
    for line in REFERENCE.read_text().splitlines():
        if not line.startswith("|"):
            in_settings = False
            continue
        first = line.split("|")[1].strip()
        if first in ("hyperparameter / variable", "setting"):
            in_settings = True
        elif in_settings:
            names += [n for n in re.findall(r"`([A-Z][A-Z0-9_]*)`", first) if n.startswith(("SM_", "SMTRAIN_"))]
    return sorted(set(names))


def assert_outside_host_gets_the_system_settings(outside: dict) -> None:
    """What tests/programs/ssh_probe.py found reaching its sshd outside the job from the master: the host's
    unknown key refused, then (its key known) no key the sshd accepts offered - though the job's key,
    given explicitly, logs in there."""
    assert outside["unknown host"] == [255, ["Host key verification failed."]], outside
    assert outside["known host"][0] == 255 and "Permission denied (publickey)" in outside["known host"][1][0], outside
    assert outside["job key given"][0] == 0, outside


def assert_only_the_jobs_key_logs_in(logins: dict) -> None:
    """What tests/programs/ssh_probe.py found logging into the worker: the job's key in, every other key - root's
    own, the job before's - tried and refused by the worker's sshd (not an ssh that could not connect)."""
    assert logins["job"][0] == 0, logins
    for other in ("root", "previous job"):
        status, said = logins[other]
        assert status == 255 and said and "Permission denied (publickey" in said[0], (other, logins)
