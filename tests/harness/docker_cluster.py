"""Containers of the image as SageMaker hosts `algo-1 ... algo-N` on a private Docker network, each
with its own /opt/ml folder; and the steps before: a running Docker engine and the built image.
Used by scripts/demo.py and tests/image/. Every wait is bounded.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLE = REPO / "examples" / "pipe_horovod"  # the demo job's program and data maker
BASE_TAG = "smtrain-base:bookworm"
IMAGE_TAG = "smtrain:cpu"


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def shell(image: str, script: str, *options: str, timeout: float = 300) -> str:
    """What `sh -c script` prints in a new container of `image` (`options` for docker run)."""
    return docker("run", "--rm", *options, "--entrypoint", "sh", image, "-c", script, timeout=timeout).stdout


def wait_containers(containers: Mapping[str, str], timeout: float) -> dict[str, Optional[int]]:
    """Each host's container's exit status (`containers`: host -> container name), all within
    `timeout`; None for one still running at the deadline."""
    deadline = time.monotonic() + timeout
    statuses: dict[str, Optional[int]] = {}
    for host, name in containers.items():
        try:
            statuses[host] = int(docker("wait", name, timeout=max(1.0, deadline - time.monotonic())).stdout.strip())
        except subprocess.TimeoutExpired:
            statuses[host] = None
    return statuses


def container_logs(name: str) -> str:
    """What a container wrote, stdout then stderr."""
    done = docker("logs", name, check=False)
    return done.stdout + done.stderr


def interleaved_logs(name: str) -> list[str]:
    """What a container wrote, stdout and stderr lines in the order they were written, as CloudWatch gets
    one stream (by Docker's timestamp of each line; lines of the same nanosecond keep their stream's order)."""
    done = docker("logs", "--timestamps", name, check=False)
    lines = []
    for stream, text in enumerate((done.stdout, done.stderr)):
        for index, line in enumerate(text.splitlines()):
            stamp, _, rest = line.partition(" ")
            day, _, time_of_day = stamp.rstrip("Z").partition("T")
            seconds, _, fraction = time_of_day.partition(".")
            lines.append(((day, seconds, fraction.ljust(9, "0")), stream, index, rest))
    return [rest for *_, rest in sorted(lines)]


def ensure_docker(wait_s: float = 60) -> None:
    """A Docker engine answering: the running one, else dockerd started here (no systemd needed)."""
    if docker("info", check=False, timeout=30).returncode == 0:
        return
    log = open("/var/log/smtrain-dockerd.log", "ab")
    subprocess.Popen(["dockerd"], stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if docker("info", check=False, timeout=30).returncode == 0:
            return
        time.sleep(0.5)
    raise RuntimeError(f"dockerd did not answer within {wait_s:g} s (see /var/log/smtrain-dockerd.log)")


def ensure_image(tag: str = IMAGE_TAG, timeout: float = 3600) -> float:
    """Build the CPU image; returns the seconds it took. The base is $SMTRAIN_BASE_IMAGE where a
    registry can be reached, else one made locally from the OS mirror (scripts/base-image.sh)."""
    started = time.monotonic()
    base = os.environ.get("SMTRAIN_BASE_IMAGE")
    if not base:
        base = BASE_TAG
        subprocess.run([str(REPO / "scripts" / "base-image.sh"), base], check=True, timeout=timeout)
    subprocess.run(["docker", "build", "-q", "--build-arg", f"BASE_IMAGE={base}", "--target", "cpu", "-t", tag,
                    str(REPO)], check=True, timeout=timeout, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def image_under_test() -> str:
    """$SMTRAIN_IMAGE (an image built elsewhere, e.g. by CodeBuild) or this checkout's, built now."""
    prebuilt = os.environ.get("SMTRAIN_IMAGE")
    if prebuilt:
        return prebuilt
    ensure_image()
    return IMAGE_TAG


class ContainerCluster:
    def __init__(self, name: str, num_hosts: int, folder: Path, image: str = IMAGE_TAG) -> None:
        self.name, self.image, self.folder = name, image, folder
        self.hosts = [f"algo-{i}" for i in range(1, num_hosts + 1)]

    def ml(self, host: str) -> Path:
        return self.folder / host / "ml"

    def container(self, host: str) -> str:
        return f"{self.name}-{host}"

    def __enter__(self) -> "ContainerCluster":
        self.down()
        docker("network", "create", self.name)
        for host in self.hosts:
            for sub in ("input/config", "input/data", "code", "model", "output"):
                (self.ml(host) / sub).mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def write_job(self, hyperparameters: Mapping[str, Any], program: Path, channels: Mapping[str, Any]) -> None:
        for host in self.hosts:
            config = self.ml(host) / "input" / "config"
            (config / "resourceconfig.json").write_text(json.dumps(
                {"current_host": host, "hosts": self.hosts, "network_interface_name": "eth0"}))
            hps = {"sagemaker_program": json.dumps(program.name),
                   **{k: v if isinstance(v, str) else json.dumps(v) for k, v in hyperparameters.items()}}
            (config / "hyperparameters.json").write_text(json.dumps(hps))
            (config / "inputdataconfig.json").write_text(json.dumps(dict(channels)))
            shutil.copy(program, self.ml(host) / "code" / program.name)

    def run_once(self, *argv: str, mounts: Sequence[str] = (), timeout: float = 300) -> subprocess.CompletedProcess:
        volumes = [a for m in mounts for a in ("-v", m)]
        return docker("run", "--rm", *volumes, self.image, *argv, timeout=timeout)

    def feed(self, source: Path, channel: str, epochs: int) -> None:
        """One feeder container per host plays SageMaker's side of Pipe mode into the host's /opt/ml."""
        for host in self.hosts:
            docker("run", "-d", "--name", f"{self.container(host)}-feeder", "-v", f"{self.ml(host)}:/opt/ml",
                   "-v", f"{source}:/data:ro", self.image, "python", "-m", "smtrain.data.feeder", "--base", "/opt/ml",
                   "--source", f"{channel}=/data", "--epochs", str(epochs))

    def start(self, env: Optional[Mapping[str, str]] = None, hosts: Optional[Sequence[str]] = None,
              options: Sequence[str] = ()) -> None:
        """`train` in a container per host; `options` go to every `docker run` (e.g. `--memory=2g`)."""
        variables = [a for k, v in (env or {}).items() for a in ("-e", f"{k}={v}")]
        for host in reversed(hosts or self.hosts):  # workers first, as SageMaker gives no order
            docker("run", "-d", "--name", self.container(host), "--hostname", host, "--network", self.name,
                   "--network-alias", host, "-v", f"{self.ml(host)}:/opt/ml", *variables, *options, self.image,
                   "train")

    def wait(self, timeout: float) -> dict[str, Optional[int]]:
        return wait_containers({host: self.container(host) for host in self.hosts}, timeout)

    def logs(self, host: str) -> str:
        return container_logs(self.container(host))

    def start_demo_job(self, data: Path, env: Optional[Mapping[str, str]] = None, **hps: object) -> None:
        """The demo job (examples/pipe_horovod): synthetic TFRecords made into `data`, 2 Horovod ranks a
        host reading them through Pipe mode for 2 epochs, checkpoints; `hps` add hyperparameters."""
        self.run_once("python", "/example/make_data.py", "/data", mounts=[f"{EXAMPLE}:/example:ro", f"{data}:/data"])
        self.write_job({"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2, "epochs": 2, **hps},
                       EXAMPLE / "train.py", {"train": {"TrainingInputMode": "Pipe", "ContentType": "application/x-tfrecord"}})
        self.feed(data, "train", epochs=2)
        self.start({"SM_PEER_WAIT_SECONDS": "120", **(env or {})})

    def down(self) -> None:
        names = docker("ps", "-aq", "--filter", f"name=^{self.name}-", check=False).stdout.split()
        if names:
            docker("rm", "-f", *names, check=False)
        docker("network", "rm", self.name, check=False)
