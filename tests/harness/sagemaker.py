"""A stand-in for SageMaker's training service, to run a CreateTrainingJob request - as an SDK sent it -
on containers of the image, as SageMaker runs it, following its documented container contract
(tests/harness/sagemaker_contract.py): each host's `/opt/ml` laid out from the request, File channels
as files and Pipe channels as FIFOs `<channel>_<epoch>` fed from the channel's S3 objects (each host
its share), the checkpoint folder restored from the request's checkpoint S3 URI before the job and
copied back after it, a spot interruption as SageMaker makes one (SIGTERM, SIGKILL 120 s later, then
the same request again on new hosts), and at the end the model and output folders packed into the
output path. S3 is a real S3 API (moto's server, which the containers reach on the job's network).

What it leaves out: the role's credentials come as keys in the environment (SageMaker serves them at
AWS_CONTAINER_CREDENTIALS_RELATIVE_URI), checkpoints go to S3 when a run ends rather than as they
appear, the model is packed from the first host's folder, and limits (runtime, metric count) are not
enforced. Every wait is bounded."""
from __future__ import annotations

import errno
import io
import json
import os
import tarfile
import threading
import time
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from tests.harness import sagemaker_contract as contract
from tests.harness.docker_cluster import container_logs, docker, wait_containers

STOP_GRACE_S = 120  # SIGTERM, then SIGKILL this long after (SageMaker's stop and spot interruption)


def split_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


class S3Store:
    """A bucket's objects through a boto3 S3 client (the test's, on moto's server)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def keys(self, uri: str) -> list[str]:
        bucket, prefix = split_uri(uri)
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def get(self, uri: str, key: str) -> bytes:
        return self.client.get_object(Bucket=split_uri(uri)[0], Key=key)["Body"].read()

    def download(self, uri: str, keys: list[str], into: Path) -> None:
        """Each object under the prefix `uri` to its path below it in `into` (S3Prefix's layout)."""
        prefix = split_uri(uri)[1]
        for key in keys:
            target = into / key[len(prefix):].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.get(uri, key))

    def upload(self, folder: Path, uri: str) -> None:
        """Each file below `folder` to its path below the prefix `uri` (a bucket's root: `s3://bucket`)."""
        bucket, prefix = split_uri(uri)
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            key = "/".join(filter(None, (prefix.rstrip("/"), path.relative_to(folder).as_posix())))
            self.client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    def delete(self, uri: str) -> None:
        """Every object under the prefix `uri`."""
        for key in self.keys(uri):
            self.client.delete_object(Bucket=split_uri(uri)[0], Key=key)

    def put(self, uri: str, data: bytes) -> None:
        bucket, key = split_uri(uri)
        self.client.put_object(Bucket=bucket, Key=key, Body=data)


class Run(NamedTuple):
    """One run of the request on its hosts: the job, or the part a spot interruption ended."""
    statuses: dict[str, Optional[int]]  # each container's exit status; None: it outlived every wait
    logs: dict[str, list[str]]  # each host's stdout and stderr lines, as CloudWatch gets them
    folder: Path  # <host>/ml: what each host's /opt/ml held at the end

    def ml(self, host: str) -> Path:
        return self.folder / host / "ml"


class TrainingJob:
    """The request on containers of `image` on the Docker network `network`, whose containers reach
    S3 at `s3_endpoint`. `run()` once for a job; again after an interrupted run, as SageMaker restarts a
    managed spot job."""

    def __init__(self, request: Mapping[str, Any], s3: S3Store, folder: Path, image: str, network: str,
                 s3_endpoint: str, credentials: Mapping[str, str]) -> None:
        self.request, self.s3, self.folder, self.image, self.network = request, s3, folder, image, network
        self.s3_access = {"AWS_ENDPOINT_URL_S3": s3_endpoint, **credentials}
        self.hosts = contract.hosts(request)
        self.checkpoints = Path(contract.checkpoint_path(request)).relative_to("/opt/ml")  # below a host's ml/
        self.runs = 0

    def run(self, interrupt_after_checkpoint: bool = False, timeout: float = 300) -> Run:
        """The job from its start on new hosts. With `interrupt_after_checkpoint`: each Pipe channel
        holds back epoch 1 until a checkpoint appears on a host, and then every host is stopped as by a
        spot interruption."""
        self.runs += 1
        run_folder = self.folder / f"run-{self.runs}"
        gate = EpochGate(1 if interrupt_after_checkpoint else None)
        feeders = [threading.Thread(target=feed, args=(fifo, chunks, gate), daemon=True)
                   for host in self.hosts for fifo, chunks in self._lay_out(run_folder / host / "ml", host)]
        containers = {host: f"{self.network}-{host}" for host in self.hosts}
        names = list(containers.values())
        try:
            for thread in feeders:
                thread.start()
            for host in reversed(self.hosts):  # workers first: SageMaker gives no order
                self._start(host, containers[host], run_folder / host / "ml")
            if interrupt_after_checkpoint:
                self._await_checkpoint(run_folder, names, timeout)
                statuses = _interrupt(containers, gate)
            else:
                statuses = wait_containers(containers, timeout)
        finally:
            gate.close()
            logs = {host: container_logs(name).splitlines() for host, name in containers.items()}
            for host, lines in logs.items():
                (run_folder / host / "log").write_text("\n".join(lines))
            docker("rm", "-f", *names, check=False)
        for thread in feeders:
            thread.join(timeout=10)
        done = Run(statuses, logs, run_folder)
        self._keep_checkpoints(done)
        if not interrupt_after_checkpoint and all(status == 0 for status in statuses.values()):
            self._pack(done)
        return done

    def _lay_out(self, ml: Path, host: str) -> list[tuple[Path, list[bytes]]]:
        """`ml` as SageMaker lays out a host's /opt/ml; returns its Pipe channels' FIFO prefixes and data."""
        for sub in ("code", "model", "output/data", "input/data"):
            (ml / sub).mkdir(parents=True, exist_ok=True)
        for name, content in contract.config_files(self.request, host).items():
            path = ml / "input" / "config" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(content, default=str))
        if "CheckpointConfig" in self.request:
            (ml / self.checkpoints).mkdir(parents=True, exist_ok=True)
            uri = self.request["CheckpointConfig"]["S3Uri"]
            self.s3.download(uri, self.s3.keys(uri), ml / self.checkpoints)
        pipes = []
        index = self.hosts.index(host)
        for channel in contract.channels(self.request):
            keys = contract.share(self.s3.keys(channel.s3_uri), channel.distribution, index, len(self.hosts))
            if channel.mode == "Pipe":
                pipes.append((ml / "input" / "data" / channel.name, [self.s3.get(channel.s3_uri, k) for k in keys]))
            else:
                self.s3.download(channel.s3_uri, keys, ml / "input" / "data" / channel.name)
        return pipes

    def _start(self, host: str, name: str, ml: Path) -> None:
        entrypoint, arguments = contract.command(self.request)
        variables = {**contract.environment(self.request), **self.s3_access}
        options = ["--entrypoint", entrypoint[0]] if entrypoint else []
        cpus = own_cpus(self.hosts.index(host), len(self.hosts))
        if cpus:  # each host its own CPUs, as instances have: ranks bound by one host never starve another
            options += ["--cpuset-cpus", ",".join(map(str, cpus))]
        docker("run", "-d", "--name", name, "--hostname", host, "--network", self.network, "--network-alias", host,
               "-v", f"{ml}:/opt/ml", *[a for k, v in variables.items() for a in ("-e", f"{k}={v}")], *options,
               self.image, *entrypoint[1:], *arguments)

    def _await_checkpoint(self, run_folder: Path, names: list[str], timeout: float) -> None:
        """Until a host has a checkpoint (or a container has ended: the job, not the stand-in, stopped it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(any((run_folder / host / "ml" / self.checkpoints).glob("ckpt-*")) for host in self.hosts):
                return
            running = docker("ps", "-q", *[a for name in names for a in ("--filter", f"name=^{name}$")]).stdout.split()
            if len(running) < len(names):
                return
            time.sleep(0.5)
        raise TimeoutError(f"no checkpoint on any host within {timeout:g} s (logs: {run_folder}/<host>/log)")

    def _keep_checkpoints(self, done: Run) -> None:
        if "CheckpointConfig" not in self.request:
            return
        for host in self.hosts:
            self.s3.upload(done.ml(host) / self.checkpoints, self.request["CheckpointConfig"]["S3Uri"])

    def _output(self, name: str) -> str:
        """Where SageMaker puts the job's `name` (model.tar.gz, output.tar.gz): under its output path."""
        path = self.request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        return f"{path}/{self.request['TrainingJobName']}/output/{name}"

    def _pack(self, done: Run) -> None:
        first = done.ml(self.hosts[0])
        for name, folder in (("model.tar.gz", first / "model"), ("output.tar.gz", first / "output" / "data")):
            self.s3.put(self._output(name), pack(folder))

    def artifact(self, name: str) -> dict[str, bytes]:
        """model.tar.gz or output.tar.gz from the output path: its files' contents by path."""
        uri = self._output(name)
        with tarfile.open(fileobj=io.BytesIO(self.s3.get(uri, split_uri(uri)[1]))) as archive:
            return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def own_cpus(index: int, num_hosts: int) -> list[int]:
    """The CPUs of this machine that host `index` of `num_hosts` gets (none where there are fewer than hosts)."""
    cpus = sorted(os.sched_getaffinity(0))
    each = len(cpus) // num_hosts
    return cpus[index * each:(index + 1) * each]


def pack(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(folder.rglob("*")):
            archive.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return buffer.getvalue()


class EpochGate:
    """How many epochs the Pipe feeders may give (None: any number), until closed."""

    def __init__(self, limit: Optional[int]) -> None:
        self._limit, self._closed, self._cond = limit, False, threading.Condition()

    def allow(self, limit: int) -> None:
        with self._cond:
            self._limit = limit
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def wait_for(self, epoch: int) -> bool:
        """Whether epoch `epoch` may be fed (False: the run is over)."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._limit is None or epoch < self._limit)
            return not self._closed


def feed(prefix: Path, chunks: list[bytes], gate: EpochGate) -> None:
    """SageMaker's side of one Pipe channel on one host: FIFO `<prefix>_<epoch>` for epoch 0, 1, ...
    as `gate` allows, each made once the last was read through, each carrying every object of the
    host's share. Ends when the gate closes or the reader goes away."""
    epoch = 0
    while gate.wait_for(epoch):
        fifo = Path(f"{prefix}_{epoch}")
        os.mkfifo(fifo)
        fd = None
        while fd is None and not gate.closed:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until a reader opens it
            except OSError as e:
                if e.errno != errno.ENXIO:
                    raise
                time.sleep(0.05)
        if fd is None:
            return
        os.set_blocking(fd, True)
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
        except BrokenPipeError:
            return
        finally:
            os.close(fd)
        epoch += 1


def _interrupt(containers: Mapping[str, str], gate: EpochGate) -> dict[str, Optional[int]]:
    """A spot interruption: SIGTERM to every host, SIGKILL to what is left STOP_GRACE_S later. The data
    goes on streaming meanwhile: each Pipe channel gets one epoch more than it had."""
    for name in containers.values():
        docker("kill", "--signal", "TERM", name, check=False)
    time.sleep(1)  # the signal on its way to the ranks before their next data
    gate.allow(2)
    statuses = wait_containers(containers, STOP_GRACE_S)
    for host, status in statuses.items():
        if status is None:
            docker("kill", containers[host], check=False)
    return statuses
