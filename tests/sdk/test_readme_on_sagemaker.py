"""The README's way to a first SageMaker job, followed as written, run as SageMaker runs it: its steps
(make `src/`, make the data, upload it with the AWS CLI) run verbatim against a real S3 API (moto's
server, on the job's Docker network), its v3 and v2 examples run whole with the real SDKs until they
send CreateTrainingJob (tests/sdk/test_readme_examples.py), what the SDK uploaded goes to that S3, and
the request runs through the SageMaker stand-in (tests/harness/sagemaker.py) on two containers of the
image: stopped as by a spot interruption once a checkpoint is written, then run again on new hosts.
The job must read Pipe mode where the example says Pipe, resume from its checkpoint, succeed, and give
the metrics its definitions ask for."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

from tests.harness.docker_cluster import REPO, docker
from tests.harness.sagemaker import S3Store, TrainingJob, split_uri
from tests.harness.sagemaker_contract import metrics
from tests.s3.conftest import KEYS, start_moto
from tests.sdk.test_readme_examples import EXAMPLES, captured_request

NETWORK = "smtrain-sm"
MOTO_BIN = Path("/opt/smtrain/moto/bin")
USER_BUCKET = "my-bucket"  # the README's
SDK_BUCKET = "sagemaker-us-east-1-123456789012"  # the SDK's default bucket for the README's account


class SageMakerS3(NamedTuple):
    url: str  # on the job's network's gateway: the containers and this test reach it there
    store: S3Store


@pytest.fixture(scope="module")
def s3_on_the_network(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SageMakerS3]:
    import boto3

    docker("network", "rm", NETWORK, check=False)
    docker("network", "create", NETWORK)
    process = None
    try:
        gateway = docker("network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", NETWORK).stdout.strip()
        process, url = start_moto(tmp_path_factory.mktemp("moto") / "moto.log", host=gateway)
        client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"])
        for bucket in (USER_BUCKET, SDK_BUCKET):
            client.create_bucket(Bucket=bucket)
        yield SageMakerS3(url, S3Store(client))
    finally:
        if process:
            process.kill()
            process.wait()
        docker("network", "rm", NETWORK, check=False)


def readme_steps() -> str:
    """The README's commands that make `src/` and the data and upload it (in the v3 example's section)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(EXAMPLES["v3"]):]
    return re.search(r"((?:^    .*\n)+)", section, re.M).group(1).replace("\n    ", "\n")[4:]


@pytest.fixture(scope="module")
def user_folder(image: str, s3_on_the_network: SageMakerS3, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder in which the README's steps ran: `src/`, `data/train/` made, the data in S3."""
    folder = tmp_path_factory.mktemp("user")
    shutil.copytree(REPO / "examples" / "pipe_horovod", folder / "examples" / "pipe_horovod")
    env = {**os.environ, **KEYS, "PATH": f"{MOTO_BIN}:{os.environ['PATH']}", "AWS_ENDPOINT_URL": s3_on_the_network.url,
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    script = "set -e\n" + readme_steps().replace("smtrain:cpu", image)
    done = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (script, done.stdout[-2000:], done.stderr[-3000:])
    assert s3_on_the_network.store.keys(f"s3://{USER_BUCKET}/data/train/"), done.stdout
    return folder


def _relay_uploads(folder: Path, store: S3Store) -> None:
    """What the SDK uploaded on its way to CreateTrainingJob (kept under `folder/s3`), into the S3 the job reads."""
    for bucket in sorted((folder / "s3").iterdir()):
        store.upload(bucket, f"s3://{bucket.name}")


def _tail(run, lines: int = 40) -> str:
    return "\n".join(f"--- {host} (exit {run.statuses[host]}):\n" + "\n".join(logged[-lines:])
                     for host, logged in run.logs.items())


@pytest.mark.parametrize("sdk", ["v3", "v2"])
def test_the_readme_job_runs_on_sagemaker_with_pipe_mode_a_spot_restart_and_its_metrics(
        image: str, s3_on_the_network: SageMakerS3, user_folder: Path, tmp_path: Path, sdk: str) -> None:
    shutil.copytree(user_folder / "src", tmp_path / "src")
    request = captured_request(sdk, tmp_path)
    _relay_uploads(tmp_path, s3_on_the_network.store)
    s3_on_the_network.store.delete(request["CheckpointConfig"]["S3Uri"])  # both examples name the same folder
    job = TrainingJob(request, s3_on_the_network.store, tmp_path / "job", image, NETWORK, s3_on_the_network.url, KEYS)

    first = job.run(interrupt_after_checkpoint=True)
    assert None not in first.statuses.values(), _tail(first)  # ended inside the stop's grace period
    checkpoints = s3_on_the_network.store.keys(request["CheckpointConfig"]["S3Uri"])
    assert any("/ckpt-" in key for key in checkpoints), (checkpoints, _tail(first))

    second = job.run()
    assert second.statuses == {"algo-1": 0, "algo-2": 0}, _tail(second)
    for run in (first, second):
        for host in ("algo-1", "algo-2"):
            data = run.ml(host) / "input" / "data"
            assert "train" not in os.listdir(data)  # no File-mode folder: the channel came as FIFOs
            assert any(line.startswith("[demux train] train epoch 0: dealt 128 records as [64, 64]") for line in run.logs[host]), \
                _tail(run)
    master = [first.logs["algo-1"], second.logs["algo-1"]]
    epochs = [[int(e) for e in re.findall(r"^epoch=(\d+); loss=", "\n".join(lines), re.M)] for lines in master]
    # the epochs before the interruption (0, and 1 where the stop came while it streamed), then the rest
    # on the new hosts, resumed from the checkpoint: each epoch once
    assert epochs[0][:1] == [0] and epochs[1] and epochs[0] + epochs[1] == [0, 1, 2], _tail(first) + _tail(second)
    assert "[checkpoints] restored step " in "\n".join(second.logs["algo-1"]), _tail(second)
    found = metrics(request, [line for run in (first, second) for lines in run.logs.values() for line in lines])
    assert [len(values) for values in found.values()] == [3], found
    assert "model.keras" in job.artifact("model.tar.gz")
    assert split_uri(request["CheckpointConfig"]["S3Uri"])[0] == USER_BUCKET
