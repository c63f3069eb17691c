"""The README's way to a first SageMaker job, followed as written, run as SageMaker runs it: its steps
(make `src/`, make the data, upload it with the AWS CLI) run verbatim against a real S3 API (moto's
server, on the job's Docker network), its v3 and v2 examples run whole with the real SDKs until they
send CreateTrainingJob (tests/sdk/test_readme_examples.py), what the SDK uploaded goes to that S3, and
the request runs through the SageMaker stand-in (tests/harness/sagemaker.py) on two containers of the
image. The job must read Pipe mode where the example says Pipe, succeed, and give the metrics its definitions
ask for. The v3 job is also stopped as by a spot interruption once a checkpoint is written, then run again on
new hosts, and must resume from its checkpoint: what happens then is the stand-in's and the image's, the same
for both SDKs' requests (their checkpoint configuration is checked in tests/sdk/test_readme_examples.py), so it
is run once."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.harness.docker_cluster import REPO
from tests.harness.sagemaker import S3Store, TrainingJob, split_uri
from tests.harness.sagemaker_contract import metrics
from tests.harness.moto import KEYS
from tests.harness.sagemaker import MOTO_BIN, NETWORK, USER_BUCKET, SageMakerS3
from tests.harness.readme_examples import EXAMPLES, captured_request


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


@pytest.mark.parametrize("sdk,interrupted", [("v3", True), ("v2", False)])
def test_the_readme_job_runs_on_sagemaker_with_pipe_mode_a_spot_restart_and_its_metrics(
        image: str, s3_on_the_network: SageMakerS3, user_folder: Path, tmp_path: Path, sdk: str, interrupted: bool) -> None:
    shutil.copytree(user_folder / "src", tmp_path / "src")
    request = captured_request(sdk, tmp_path)
    _relay_uploads(tmp_path, s3_on_the_network.store)
    s3_on_the_network.store.delete(request["CheckpointConfig"]["S3Uri"])  # both examples name the same folder
    job = TrainingJob(request, s3_on_the_network.store, tmp_path / "job", image, NETWORK, s3_on_the_network.url, KEYS)

    runs = []
    if interrupted:
        first = job.run(interrupt_after_checkpoint=True)
        assert None not in first.statuses.values(), _tail(first)  # ended inside the stop's grace period
        checkpoints = s3_on_the_network.store.keys(request["CheckpointConfig"]["S3Uri"])
        assert any("/ckpt-" in key for key in checkpoints), (checkpoints, _tail(first))
        runs.append(first)
    last = job.run()
    runs.append(last)
    assert last.statuses == {"algo-1": 0, "algo-2": 0}, _tail(last)
    for run in runs:
        for host in ("algo-1", "algo-2"):
            config = json.loads((run.ml(host) / "input" / "config" / "inputdataconfig.json").read_text())
            assert config["train"]["TrainingInputMode"] == "Pipe", config  # SageMaker was asked for Pipe mode
            assert run.fed[f"{host}/train"][:1] and run.fed[f"{host}/train"][0] > 0, run.fed  # and streamed it
            assert not any("Pipe mode emulated" in line for line in run.logs[host]), _tail(run)  # train took it as such
            assert any(line.startswith("[demux train] train epoch 0: dealt 64 records as [32, 32] (of the 128 records "
                                       "the job's hosts deal alike)") for line in run.logs[host]), _tail(run)
    epochs = [[int(e) for e in re.findall(r"^epoch=(\d+); loss=", "\n".join(run.logs["algo-1"]), re.M)] for run in runs]
    if interrupted:
        # the epochs before the interruption (0, and 1 where the stop came while it streamed), then the rest
        # on the new hosts, resumed from the checkpoint: each epoch once
        assert epochs[0][:1] == [0] and epochs[1] and epochs[0] + epochs[1] == [0, 1, 2], "".join(map(_tail, runs))
        assert "[checkpoints] restored step " in "\n".join(last.logs["algo-1"]), _tail(last)
    else:
        assert epochs == [[0, 1, 2]], _tail(last)
    found = metrics(request, [line for run in runs for lines in run.logs.values() for line in lines])
    assert [len(values) for values in found.values()] == [3], found
    assert "model.keras" in job.artifact("model.tar.gz")
    assert split_uri(request["CheckpointConfig"]["S3Uri"])[0] == USER_BUCKET
