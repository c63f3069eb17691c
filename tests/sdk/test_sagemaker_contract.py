"""SageMaker's container contract where the stand-in (tests/harness/sagemaker.py) follows the developer guide
and the API reference to the letter, and the image meets it there: one job on a container of the image,
started by a ContainerEntrypoint without arguments, its hosts' network on eth1, a Pipe channel of gzip objects
that SageMaker wraps in RecordIO records and shuffles each epoch - read from SageMaker's FIFOs by a script
that closes epoch 0's early and goes on to epoch 1 -, the same objects through smtrain's reader, a FastFile
channel, a checkpoint in S3 while the job runs, a log of stdout and stderr in the order written, a container
whose hostname is not the job's host name, the request's ProfilerConfig as profilerconfig.json, and the job
ended by MaxRuntimeInSeconds with the script's own failure as the FailureReason. The program:
tests/programs/stand_in_probe.py. And the stand-in's stop itself, on bare containers of the image: SIGTERM
first, SIGKILL after the grace (status 137), also when a test's own timeout comes before MaxRuntimeInSeconds."""
from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
import threading
import time
from pathlib import Path

from tests.harness import sagemaker_contract as contract
from tests.harness.docker_cluster import docker
from tests.harness.moto import KEYS
from tests.harness.sagemaker import NETWORK, USER_BUCKET, SageMakerS3, TrainingJob, wait_or_stop

PROBE = Path(__file__).resolve().parent.parent / "programs" / "stand_in_probe.py"
# larger than a pipe's buffer together, so that a reader closing a FIFO early leaves most of its epoch unsent
OBJECTS = {f"contract/train/part-{i:02d}": f"object-{i} " + "x" * 32767 for i in range(8)}
MAX_RUNTIME_S = 30


def _code_tarball(folder: Path) -> bytes:
    shutil.copy(PROBE, folder / "train.py")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(folder / "train.py", arcname="train.py")
    return buffer.getvalue()


def _channel(name: str, prefix: str, mode: str = "Pipe", **extra: object) -> dict:
    return {"ChannelName": name, "InputMode": mode, **extra, "DataSource": {"S3DataSource": {
        "S3Uri": f"s3://{USER_BUCKET}/{prefix}", "S3DataType": "S3Prefix", "S3DataDistributionType": "FullyReplicated"}}}


def test_the_image_meets_sagemakers_container_contract(image: str, s3_on_the_network: SageMakerS3,
                                                       tmp_path: Path) -> None:
    store = s3_on_the_network.store
    for key, text in OBJECTS.items():
        store.put(f"s3://{USER_BUCKET}/{key}", gzip.compress(text.encode()))
    store.put(f"s3://{USER_BUCKET}/contract/fast/a.csv", b"1,2\n")
    store.put(f"s3://{USER_BUCKET}/contract/code.tar.gz", _code_tarball(tmp_path))
    request = {
        "TrainingJobName": "contract-1", "RoleArn": "arn:aws:iam::123456789012:role/R",
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File", "ContainerEntrypoint": ["train"]},
        "HyperParameters": {"sagemaker_program": '"train.py"',
                            "sagemaker_submit_directory": json.dumps(f"s3://{USER_BUCKET}/contract/code.tar.gz")},
        "InputDataConfig": [
            _channel("train", "contract/train/", CompressionType="Gzip", RecordWrapperType="RecordIO",
                     ShuffleConfig={"Seed": 5}),
            _channel("wrapped", "contract/train/", CompressionType="Gzip", RecordWrapperType="RecordIO"),
            _channel("fast", "contract/fast/", mode="FastFile")],
        "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.c5.xlarge", "VolumeSizeInGB": 30},
        "CheckpointConfig": {"S3Uri": f"s3://{USER_BUCKET}/contract/checkpoints"},
        "StoppingCondition": {"MaxRuntimeInSeconds": MAX_RUNTIME_S},
        "OutputDataConfig": {"S3OutputPath": f"s3://{USER_BUCKET}/contract/output"},
        "Environment": {"SM_SYSTEM_MONITOR": "off"},
        "ProfilerConfig": {"DisableProfiler": False, "S3OutputPath": f"s3://{USER_BUCKET}/contract/profiler",
                           "ProfilingParameters": {"LocalPath": "/opt/ml/output/profiler"}},
    }
    job = TrainingJob(request, store, tmp_path / "job", image, NETWORK, s3_on_the_network.url, KEYS)
    seen: list[bool] = []
    runs: list = []
    thread = threading.Thread(target=lambda: runs.append(job.run(timeout=MAX_RUNTIME_S + 200)))
    thread.start()
    deadline = time.monotonic() + MAX_RUNTIME_S + 60
    while thread.is_alive() and not seen and time.monotonic() < deadline:
        if "contract/checkpoints/ckpt-1" in store.keys(f"s3://{USER_BUCKET}/contract/checkpoints"):
            running = docker("inspect", "-f", "{{.State.Running}}", f"{NETWORK}-algo-1", check=False).stdout.strip()
            seen.append(running == "true")
        time.sleep(0.2)
    thread.join(timeout=MAX_RUNTIME_S + 240)
    run = runs[0]
    log = "\n".join(run.logs["algo-1"])
    assert run.stopped == "MaxRuntimeExceeded" and run.statuses == {"algo-1": 1}, log[-3000:]
    assert run.failure_reason and run.failure_reason.startswith("ProgramError: ") and \
        "probe: stopped before its work was done" in run.failure_reason, run.failure_reason
    assert seen == [True]  # the checkpoint reached S3 while the job ran
    config = json.loads((run.ml("algo-1") / "input" / "config" / "inputdataconfig.json").read_text())
    assert config["fast"]["TrainingInputMode"] == "File"  # FastFile, as the guide says the container sees it
    assert json.loads((run.ml("algo-1") / "input" / "config" / "resourceconfig.json").read_text())[
        "network_interface_name"] == "eth1"
    probe = json.loads((run.ml("algo-1") / "output" / "data" / "probe.json").read_text())
    channel = contract.channels(request)[0]
    names = {key: text.split()[0] for key, text in OBJECTS.items()}
    order = [[names[k] for k in contract.share(OBJECTS, "FullyReplicated", 0, 1, channel.seed, e)] for e in (0, 1)]
    assert order[1] != sorted(names.values()) and order[0] != order[1]  # shuffled, anew each epoch
    assert probe == {"epoch0_first": order[0][0], "epoch1": order[1], "wrapped": sorted(names.values()),
                     "hostname": probe["hostname"]} and probe["hostname"] != "algo-1"  # Docker's, not the job's name
    assert json.loads((run.ml("algo-1") / "input" / "config" / "profilerconfig.json").read_text()) == \
        request["ProfilerConfig"]
    epoch_bytes = sum(len(contract.pipe_record(gzip.compress(t.encode()), channel)) for t in OBJECTS.values())
    fed = run.fed["algo-1/train"]
    assert fed[0] < epoch_bytes and fed[1] == epoch_bytes  # epoch 0 closed early, and the next FIFO came
    lines = [line for line in run.logs["algo-1"] if line.startswith("line ")]
    assert lines == [f"line {i} on {'stdout' if i % 2 == 0 else 'stderr'}" for i in range(8)], lines


def test_the_stand_in_stops_a_job_with_sigterm_then_sigkill_and_a_killed_host_ends_137(image: str) -> None:
    """Two bare containers of the image: one that ends on SIGTERM (with the status its trap gives), one that
    ignores it (killed after the grace: 137). Stopped by MaxRuntimeInSeconds, and by a test's timeout that comes
    before it - the same SIGTERM first, never SIGKILL alone."""
    programs = {"algo-1": "trap 'exit 7' TERM; while :; do sleep 0.1; done", "algo-2": "trap '' TERM; sleep 120"}
    for limit, timeout, why in ((2.0, 60.0, "MaxRuntimeExceeded"), (60.0, 2.0, "TestTimeout")):
        containers = {host: f"smtrain-stop-{host}" for host in programs}
        docker("rm", "-f", *containers.values(), check=False)
        try:
            for host, program in programs.items():
                docker("run", "-d", "--name", containers[host], "--entrypoint", "bash", image, "-c", program)
            assert wait_or_stop(containers, limit, timeout, grace_s=3.0) == ({"algo-1": 7, "algo-2": 137}, why)
        finally:
            docker("rm", "-f", *containers.values(), check=False)
