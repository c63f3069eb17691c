"""A stand-in for SageMaker's training service, to run a CreateTrainingJob request - as an SDK sent it -
on containers of the image, as SageMaker runs it, following its documented container contract
(tests/harness/sagemaker_contract.py): each host's `/opt/ml` laid out from the request; File (and FastFile)
channels as files; Pipe channels as FIFOs `<channel>_<epoch>` fed from the channel's S3 objects (each host
its share, shuffled each epoch where the channel says, decompressed and RecordIO-wrapped where it says),
the next FIFO made once the last was read to its end or closed - a reader may close one early and go on to
the next; the hosts on a network whose interface is not eth0 (eth0 is each host's own, reaching no other
host), as resourceconfig.json says; the checkpoint folder restored from the request's checkpoint URI before
the job and copied to it as files appear; StoppingCondition's MaxRuntimeInSeconds and a spot interruption
as SageMaker makes them (SIGTERM, SIGKILL 120 s later - shorter where a test says so -, a host killed so ending
137; after a spot interruption the same request again on new hosts), and a test's own timeout the same way;
each host's container named by Docker (its hostname is not the job's host name, which is an alias on the job's
network); profilerconfig.json from the request's ProfilerConfig; each host's log as one stream, stdout and stderr in the order written; `output/failure` read
as the FailureReason; and after a job that succeeded, the model and output folders packed into the output
path, every host's merged (a later host's file replacing an earlier one's of the same path). S3 is a real S3 API (moto's server, which the containers reach on the job's network).

What it leaves out: the role's credentials come as keys in the environment (SageMaker serves them at
AWS_CONTAINER_CREDENTIALS_RELATIVE_URI), and the metric count is not enforced. Every wait is bounded."""
from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import select
import struct
import tarfile
import termios
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional

from tests.harness import sagemaker_contract as contract
from tests.harness.docker_cluster import docker, interleaved_logs, wait_containers

STOP_GRACE_S = contract.STOP_GRACE_S
NETWORK = "smtrain-sm"  # the stand-in's jobs' Docker network (the tests make one S3 on it: tests/sdk/conftest.py)
MOTO_BIN = Path("/opt/smtrain/moto/bin")
USER_BUCKET = "my-bucket"  # the README's
SDK_BUCKET = "sagemaker-us-east-1-123456789012"  # the SDK's default bucket for the README's account
CHECKPOINT_SYNC_S = 0.5  # how often a host's new checkpoint files go to S3 while the job runs


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
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            self.upload_file(path, folder, uri)

    def upload_file(self, path: Path, folder: Path, uri: str) -> None:
        """`path` (below `folder`) to its path below the prefix `uri`."""
        bucket, prefix = split_uri(uri)
        key = "/".join(filter(None, (prefix.rstrip("/"), path.relative_to(folder).as_posix())))
        self.client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    def delete(self, uri: str) -> None:
        """Every object under the prefix `uri`."""
        for key in self.keys(uri):
            self.client.delete_object(Bucket=split_uri(uri)[0], Key=key)

    def put(self, uri: str, data: bytes) -> None:
        bucket, key = split_uri(uri)
        self.client.put_object(Bucket=bucket, Key=key, Body=data)


class SageMakerS3(NamedTuple):
    """The stand-in's S3: moto's server on the job network's gateway (the containers and the tests reach it there)."""
    url: str
    store: S3Store


class Run(NamedTuple):
    """One run of the request on its hosts: the job, or the part a stop ended."""
    statuses: dict[str, Optional[int]]  # each container's exit status; None: it outlived every wait
    logs: dict[str, list[str]]  # each host's log, stdout and stderr in the order written, as CloudWatch gets it
    folder: Path  # <host>/ml: what each host's /opt/ml held at the end
    failure_reason: Optional[str] = None  # DescribeTrainingJob's: the first 1024 characters of a host's output/failure
    stopped: Optional[str] = None  # why it was stopped: "MaxRuntimeExceeded", "SpotInterruption", "TestTimeout"
    fed: dict[str, list[int]] = {}  # each host's Pipe channel (host/channel): the bytes each epoch's FIFO took

    def ml(self, host: str) -> Path:
        return self.folder / host / "ml"


class TrainingJob:
    """The request on containers of `image` on the Docker network `network`, whose containers reach
    S3 at `s3_endpoint`. `run()` once for a job; again after an interrupted run, as SageMaker restarts a
    managed spot job."""

    def __init__(self, request: Mapping[str, Any], s3: S3Store, folder: Path, image: str, network: str,
                 s3_endpoint: str, credentials: Mapping[str, str], stop_grace_s: float = STOP_GRACE_S) -> None:
        self.request, self.s3, self.folder, self.image, self.network = request, s3, folder, image, network
        self.stop_grace_s = stop_grace_s  # from SIGTERM to SIGKILL when the job is stopped
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
        fed: dict[str, list[int]] = {}
        feeders = [threading.Thread(target=feed, args=(fifo, epoch_data, gate, fed.setdefault(f"{host}/{fifo.name}", [])),
                                    daemon=True)
                   for host in self.hosts for fifo, epoch_data in self._lay_out(run_folder / host / "ml", host)]
        containers = {host: f"{self.network}-{host}" for host in self.hosts}
        own = {host: f"0own-{self.network}-{host}" for host in self.hosts}  # sorts first: each host's eth0
        checkpoints = CheckpointSync(self, run_folder)
        stopped: Optional[str] = None
        try:
            for thread in feeders:
                thread.start()
            checkpoints.start()
            for host in reversed(self.hosts):  # workers first: SageMaker gives no order
                self._start(host, containers[host], own[host], run_folder / host / "ml")
            if interrupt_after_checkpoint:
                self._await_checkpoint(run_folder, list(containers.values()), timeout)
                statuses, stopped = stop(containers, self.stop_grace_s, gate), "SpotInterruption"
            else:
                statuses, stopped = wait_or_stop(containers, contract.max_runtime_s(self.request), timeout,
                                                 self.stop_grace_s)
        finally:
            gate.close()
            checkpoints.stop()
            logs = {host: interleaved_logs(name) for host, name in containers.items()}
            for host, lines in logs.items():
                (run_folder / host / "log").write_text("\n".join(lines))
            docker("rm", "-f", *containers.values(), check=False)
            docker("network", "rm", *own.values(), check=False)
        for thread in feeders:
            thread.join(timeout=10)
        done = Run(statuses, logs, run_folder, self._failure_reason(run_folder), stopped, fed)
        if stopped is None and all(status == 0 for status in statuses.values()):
            self._pack(done)
        return done

    def _lay_out(self, ml: Path, host: str) -> list[tuple[Path, Callable[[int], list[bytes]]]]:
        """`ml` as SageMaker lays out a host's /opt/ml; returns its Pipe channels' FIFO prefixes, each with
        what epoch e of it streams."""
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
            keys = self.s3.keys(channel.s3_uri)
            if channel.mode == "Pipe":
                objects = {key: self.s3.get(channel.s3_uri, key) for key in keys}

                def epoch_data(epoch: int, channel: contract.Channel = channel, objects: dict = objects) -> list[bytes]:
                    share = contract.share(objects, channel.distribution, index, len(self.hosts), channel.seed, epoch)
                    return [contract.pipe_record(objects[key], channel) for key in share]

                pipes.append((ml / "input" / "data" / channel.name, epoch_data))
            else:  # File, and FastFile: the container sees a folder either way
                share = contract.share(keys, channel.distribution, index, len(self.hosts), channel.seed)
                self.s3.download(channel.s3_uri, share, ml / "input" / "data" / channel.name)
        return pipes

    def _start(self, host: str, name: str, own_network: str, ml: Path) -> None:
        """The host's container: on a network of its own (eth0, reaching no other host of the job) and on the
        job's network (eth1, the host's name an alias there), as resourceconfig.json's network_interface_name says."""
        entrypoint, arguments = contract.command(self.request)
        variables = {**contract.environment(self.request), **self.s3_access}
        options = ["--entrypoint", entrypoint[0]] if entrypoint else []
        cpus = own_cpus(self.hosts.index(host), len(self.hosts))
        if cpus:  # each host its own CPUs, as instances have: ranks bound by one host never starve another
            options += ["--cpuset-cpus", ",".join(map(str, cpus))]
        docker("network", "create", own_network)
        docker("create", "--name", name, "--network", own_network, "-v", f"{ml}:/opt/ml",
               *[a for k, v in variables.items() for a in ("-e", f"{k}={v}")], *options, self.image, *entrypoint[1:],
               *arguments)
        docker("network", "connect", "--alias", host, self.network, name)
        docker("start", name)
        # Docker names a container's interfaces in the order it sorts its networks (by name, where all have a
        # gateway): the own network's name sorts first. Checked, since resourceconfig.json says eth1.
        interface = contract.NETWORK_INTERFACE
        looked = docker("exec", name, "cat", f"/sys/class/net/{interface}/address", check=False)
        if looked.returncode != 0 and docker("inspect", "-f", "{{.State.Running}}", name).stdout.strip() != "true":
            return  # over already (a job that fails at once): nothing ran on the network to look at
        seen = looked.stdout.strip()
        job_mac = docker("inspect", "-f", f'{{{{(index .NetworkSettings.Networks "{self.network}").MacAddress}}}}',
                         name).stdout.strip()
        if seen != job_mac:
            raise RuntimeError(f"{name}: the job's network is not {interface} ({interface}: {seen!r}, the job's: "
                               f"{job_mac!r}); resourceconfig.json would name the wrong interface")

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

    def _failure_reason(self, run_folder: Path) -> Optional[str]:
        for host in self.hosts:
            failure = run_folder / host / "ml" / "output" / "failure"
            if failure.is_file():
                return contract.failure_reason(failure.read_text(errors="replace"))
        return None

    def _output(self, name: str) -> str:
        """Where SageMaker puts the job's `name` (model.tar.gz, output.tar.gz): under its output path."""
        path = self.request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        return f"{path}/{self.request['TrainingJobName']}/output/{name}"

    def _pack(self, done: Run) -> None:
        for name, folder in (("model.tar.gz", "model"), ("output.tar.gz", "output/data")):
            self.s3.put(self._output(name), pack(contract.artifact_files([done.ml(h) / folder for h in self.hosts])))

    def artifact(self, name: str) -> dict[str, bytes]:
        """model.tar.gz or output.tar.gz from the output path: its files' contents by path."""
        uri = self._output(name)
        with tarfile.open(fileobj=io.BytesIO(self.s3.get(uri, split_uri(uri)[1]))) as archive:
            return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


class CheckpointSync:
    """Each host's checkpoint folder to the request's checkpoint URI as files appear or change (SageMaker
    copies new local checkpoints to S3 while the job runs), and a last time when the run ends."""

    def __init__(self, job: TrainingJob, run_folder: Path) -> None:
        self.job, self.run_folder = job, run_folder
        self.uri = job.request.get("CheckpointConfig", {}).get("S3Uri")
        self.sent: dict[Path, tuple[int, int]] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        if self.uri:
            self.thread.start()

    def stop(self) -> None:
        if self.uri:
            self.done.set()
            self.thread.join(timeout=30)
            self._sweep()

    def _loop(self) -> None:
        while not self.done.wait(CHECKPOINT_SYNC_S):
            self._sweep()

    def _sweep(self) -> None:
        for host in self.job.hosts:
            folder = self.run_folder / host / "ml" / self.job.checkpoints
            for path in sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []:
                try:
                    stat = path.stat()
                    if self.sent.get(path) != (stat.st_mtime_ns, stat.st_size):
                        self.job.s3.upload_file(path, folder, self.uri)
                        self.sent[path] = (stat.st_mtime_ns, stat.st_size)
                except FileNotFoundError:  # written aside and renamed meanwhile: the next sweep takes it
                    continue


def own_cpus(index: int, num_hosts: int) -> list[int]:
    """The CPUs of this machine that host `index` of `num_hosts` gets (none where there are fewer than hosts)."""
    cpus = sorted(os.sched_getaffinity(0))
    each = len(cpus) // num_hosts
    return cpus[index * each:(index + 1) * each]


def pack(files: Mapping[str, Path]) -> bytes:
    """A gzipped tar of `files` (its path in the archive: the file)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, path in sorted(files.items()):
            archive.add(path, arcname=name, recursive=False)
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


def feed(prefix: Path, epoch_data: Callable[[int], list[bytes]], gate: EpochGate, fed: list[int]) -> None:
    """SageMaker's side of one Pipe channel on one host: FIFO `<prefix>_<epoch>` for epoch 0, 1, ... as
    `gate` allows, each made once the last was read to its end or closed (the guide: read a FIFO to its end,
    or close it early, then look for the next), each carrying `epoch_data(epoch)`. `fed` gets the bytes each
    epoch's reader took. Ends when the gate closes."""
    epoch = 0
    while gate.wait_for(epoch):
        fifo = Path(f"{prefix}_{epoch}")
        os.mkfifo(fifo)
        fd = _open_for_a_reader(fifo, gate)
        if fd is None:
            return
        sent = 0
        try:
            for chunk in epoch_data(epoch):
                view = memoryview(chunk)
                while view:
                    written = os.write(fd, view)
                    view, sent = view[written:], sent + written
            _until_read(fd, gate)
        except BrokenPipeError:  # the reader closed it early: the epoch ends here, the next FIFO follows
            pass
        finally:
            os.close(fd)
        fed.append(sent)
        epoch += 1


def _open_for_a_reader(fifo: Path, gate: EpochGate) -> Optional[int]:
    """`fifo`'s write end once a reader has opened it (blocking from then on); None when the run ended first."""
    while not gate.closed:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until a reader opens it
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)
        return fd
    return None


def _until_read(fd: int, gate: EpochGate) -> None:
    """Until the reader has taken every byte written to the FIFO `fd`, or has closed it, or the run ended."""
    unread = struct.pack("i", 0)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while not gate.closed:
        if struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, unread))[0] == 0:
            return
        if any(event & select.POLLERR for _, event in poller.poll(0)):  # no reader any more
            return
        time.sleep(0.01)


def wait_or_stop(containers: Mapping[str, str], limit: Optional[float], timeout: float,
                 grace_s: float = STOP_GRACE_S) -> tuple[dict[str, Optional[int]], Optional[str]]:
    """Every container's status once all have ended (`containers`: host -> container name), and why the job was
    stopped: where MaxRuntimeInSeconds (`limit`) comes first, SageMaker stops it there ("MaxRuntimeExceeded");
    where the test's own `timeout` does, it is stopped the same way ("TestTimeout")."""
    statuses = wait_containers(containers, timeout if limit is None else min(limit, timeout))
    if all(status is not None for status in statuses.values()):
        return statuses, None
    return stop(containers, grace_s), "MaxRuntimeExceeded" if limit is not None and limit <= timeout else "TestTimeout"


def stop(containers: Mapping[str, str], grace_s: float = STOP_GRACE_S, gate: Optional[EpochGate] = None
         ) -> dict[str, Optional[int]]:
    """SageMaker's stop: SIGTERM to every host, SIGKILL to what is left `grace_s` later (which then ends 137). The
    data goes on streaming meanwhile (a spot interruption's `gate`: each Pipe channel gets one epoch more than it had)."""
    for name in containers.values():
        docker("kill", "--signal", "TERM", name, check=False)
    if gate is not None:
        time.sleep(1)  # the signal on its way to the ranks before their next data
        gate.allow(2)
    statuses = wait_containers(containers, grace_s)
    left = {host: containers[host] for host, status in statuses.items() if status is None}
    for name in left.values():
        docker("kill", name, check=False)
    return {**statuses, **wait_containers(left, 30)}
