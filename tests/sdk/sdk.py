"""Jobs run through the real SageMaker Python SDKs in local mode (v2's estimator, v3's ModelTrainer),
each SDK in its own virtual environment (scripts/setup.sh), against the image under test, with Docker
and docker-compose as the SDKs use them. Every wait is bounded; the job's containers are removed after."""
from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from tests.harness.docker_cluster import docker

DRIVERS = Path(__file__).parent / "drivers"
# docker-compose's prefix of a container's log line, colours and all: "\x1b[33malgo-2_1  |\x1b[0m text"
COMPOSE_LINE = re.compile(r"^(?:\x1b\[[0-9;]*m)?(algo-\d+)\S*\s*\|(?:\x1b\[[0-9;]*m)? ?(.*)$")
SDKS = {
    "v2": (Path("/opt/smtrain/sdk2/bin/python"), DRIVERS / "v2_estimator.py"),
    "v3": (Path("/opt/smtrain/sdk3/bin/python"), DRIVERS / "v3_modeltrainer.py"),
}


class SdkJob(NamedTuple):
    output: str  # what the SDK printed: the containers' logs, as its user sees them
    error: Optional[str]  # the exception the SDK raised, None when the job succeeded
    root: Path

    def by_host(self) -> dict[str, list[str]]:
        """Each container's log lines, in order, by host name (algo-1, algo-2, ...)."""
        hosts: dict[str, list[str]] = {}
        for line in self.output.splitlines():
            match = COMPOSE_LINE.match(line)
            if match:
                hosts.setdefault(match[1], []).append(match[2])
        return hosts

    def report(self, lines: int = 60) -> str:
        """For a failed assertion: the SDK's error and the last `lines` lines of every host's log,
        host by host (docker-compose interleaves them, and one host's tail would hide the other's)."""
        parts = [f"SDK error: {self.error}"]
        for host, logged in sorted(self.by_host().items()):
            parts.append(f"--- {host}, its last {min(lines, len(logged))} of {len(logged)} lines:")
            parts.extend(logged[-lines:])
        return "\n".join(parts) if len(parts) > 1 else f"{parts[0]}\n{self.output[-4000:]}"

    def artifact(self, name: str) -> Path:
        """model.tar.gz or output.tar.gz, where the SDK put it."""
        found = sorted(self.root.rglob(name))
        assert found, f"the SDK wrote no {name} under {self.root}; it printed:\n{self.output[-3000:]}"
        return found[-1]

    def extract(self, name: str, into: Path) -> Path:
        into.mkdir(parents=True, exist_ok=True)
        with tarfile.open(self.artifact(name)) as archive:
            archive.extractall(into)  # written by the SDK from this test's own job
        return into


def job_containers(image: str) -> list[str]:
    return docker("ps", "-aq", "--filter", f"ancestor={image}").stdout.split()


def exit_codes(image: str) -> list[int]:
    """The exit codes of the (stopped) containers of the image."""
    ids = job_containers(image)
    if not ids:
        return []
    shown = docker("inspect", "--format", "{{.State.ExitCode}}", *ids).stdout.split()
    return sorted(int(code) for code in shown)


def remove_containers(image: str) -> None:
    ids = job_containers(image)
    if ids:
        docker("rm", "-f", *ids, check=False)


def start_sdk_job(sdk: str, image: str, root: Path, source_dir: Path, entry_point: str,
                  channels: Mapping[str, Path], hyperparameters: Mapping[str, Any], instance_count: int = 1,
                  processes_per_host: int = 0, input_mode: str = "File") -> subprocess.Popen:
    """The SDK's job, started: `processes_per_host` > 0 asks for MPI (distribution / distributed=MPI)."""
    python, driver = SDKS[sdk]
    root.mkdir(parents=True, exist_ok=True)
    spec = {"image": image, "root": str(root), "source_dir": str(source_dir), "entry_point": entry_point,
            "channels": {name: str(path) for name, path in channels.items()}, "hyperparameters": dict(hyperparameters),
            "instance_count": instance_count, "processes_per_host": processes_per_host, "mpi": processes_per_host > 0,
            "input_mode": input_mode}
    # The SDKs' telemetry would try to reach AWS (no network here): opted out in an SDK defaults file
    defaults = root / "sagemaker-config.yaml"
    defaults.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "PYTHONUNBUFFERED": "1",
           "SAGEMAKER_USER_CONFIG_OVERRIDE": str(defaults)}
    return subprocess.Popen([str(python), str(driver), json.dumps(spec)], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish_sdk_job(process: subprocess.Popen, root: Path, timeout: float = 300) -> SdkJob:
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"the SDK's job did not end within {timeout:g} s:\n{output[-3000:]}") from None
    lines = [line for line in output.splitlines() if line.startswith("SDK-RESULT ")]
    assert lines, f"the SDK driver ended without a result (status {process.returncode}):\n{output[-3000:]}"
    return SdkJob(output, json.loads(lines[-1][len("SDK-RESULT "):])["error"], root)


def run_sdk_job(sdk: str, image: str, root: Path, *args: Any, timeout: float = 300, **kwargs: Any) -> SdkJob:
    return finish_sdk_job(start_sdk_job(sdk, image, root, *args, **kwargs), root, timeout)


def wait_for(condition, timeout: float, what: str, job: subprocess.Popen) -> None:
    """Until `condition()` holds, while the SDK's `job` runs."""
    deadline = time.monotonic() + timeout
    while not condition():
        if job.poll() is not None or time.monotonic() > deadline:
            output = job.communicate(timeout=60)[0] if job.poll() is not None else "(still running)"
            raise AssertionError(f"{what} did not happen within {timeout:g} s; the SDK printed:\n{output[-3000:]}")
        time.sleep(0.2)
