"""The README's SageMaker examples (a real job, which cannot run here: no AWS) checked against the
real SDKs they are written for, in a network namespace of its own, with credentials that are not real:
each example's objects are built by that SDK (which validates them) and its last call is bound to the
SDK method's signature (tests/sdk/drivers/check_example.py); and each example runs whole, as the README
writes it with only its placeholders filled in, until the SDK sends CreateTrainingJob, whose request is
checked against what the example says it asks for - Pipe mode, MPI with 2 processes on each of 2
hosts, spot capacity, the checkpoint folder's S3 URI, metrics that the script's lines match
(tests/sdk/drivers/capture_request.py: S3 is moto's server, the other services' few calls are answered below the SDK,
and any other call fails the run). The same jobs in local mode
run in tests/sdk/test_local_mode.py."""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.harness.readme_examples import EXAMPLES, REPO, captured_request, example, run_driver, uploaded

@pytest.mark.parametrize("sdk", ["v3", "v2"])
def test_the_readme_example_fits_the_real_sdk(tmp_path: Path, sdk: str) -> None:
    code = example(EXAMPLES[sdk])
    assert "s3://" in code and "ml." in code and "role=ROLE" in code.replace(" ", "")  # a real job, not local mode
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('the example only names it')\n")
    (tmp_path / "example.py").write_text(code)
    done = run_driver(sdk, "check_example.py", tmp_path, "example.py")
    expected = {"v3": "EXAMPLE-OK ModelTrainer.train", "v2": "EXAMPLE-OK TensorFlow.fit"}[sdk]
    assert expected in done.stdout, (done.stdout + done.stderr)[-3000:]


@pytest.mark.parametrize("sdk", ["v3", "v2"])
def test_the_readme_example_asks_sagemaker_for_what_it_says(tmp_path: Path, sdk: str) -> None:
    request = captured_request(sdk, tmp_path)
    algorithm = request["AlgorithmSpecification"]
    channels = {c["ChannelName"]: c for c in request["InputDataConfig"]}
    train = channels["train"]
    # SageMaker feeds a channel in its own InputMode where it has one, else in the job's
    assert train.get("InputMode", algorithm["TrainingInputMode"]) == "Pipe", (train, algorithm)
    assert train["DataSource"]["S3DataSource"]["S3Uri"] == "s3://my-bucket/data/train"
    assert request["ResourceConfig"]["InstanceCount"] == 2 and request["ResourceConfig"]["InstanceType"] == "ml.c5.4xlarge"
    assert request["EnableManagedSpotTraining"] is True
    assert request["CheckpointConfig"]["S3Uri"] == "s3://my-bucket/checkpoints/my-job"
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    # each metric definition finds its metric in the line the script prints: its own call of
    # smtrain.metrics.log_metrics, run (the job's real log is searched so in tests/sdk/test_readme_on_sagemaker.py)
    call = re.search(r"^\s*(log_metrics\(.*\))$", (REPO / "examples" / "pipe_horovod" / "train.py").read_text(), re.M)
    assert call, "the example prints no metric line"
    printed = subprocess.run([sys.executable, "-c", "from smtrain.metrics import log_metrics\nepoch, loss = 0, 0.0712\n"
                              + call.group(1)], capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0 and printed.stdout.strip(), printed.stderr
    for definition in algorithm["MetricDefinitions"]:
        found = re.search(definition["Regex"], printed.stdout.strip())
        assert found and float(found.group(1)) == 0.0712, (definition, printed.stdout)
    script = (REPO / "examples" / "pipe_horovod" / "train.py").read_bytes()
    hyperparameters = request["HyperParameters"]
    assert hyperparameters["epochs"] == "3"
    if sdk == "v2":
        assert hyperparameters["sagemaker_mpi_enabled"] == "true"
        assert hyperparameters["sagemaker_mpi_num_of_processes_per_host"] == "2"
        shipped = uploaded(tmp_path, json.loads(hyperparameters["sagemaker_submit_directory"]))
        with tarfile.open(fileobj=io.BytesIO(shipped.read_bytes())) as tar:
            assert tar.extractfile("train.py").read() == script
    else:
        for name in ("code", "sm_drivers"):
            assert channels[name].get("InputMode", "File") == "File"
        code = uploaded(tmp_path, channels["code"]["DataSource"]["S3DataSource"]["S3Uri"])
        assert (code / "train.py").read_bytes() == script
        drivers = uploaded(tmp_path, channels["sm_drivers"]["DataSource"]["S3DataSource"]["S3Uri"])
        distributed = json.loads((drivers / "distributed.json").read_text())
        assert distributed.get("process_count_per_node") == 2, distributed


def test_a_call_the_capture_does_not_answer_fails_the_run_naming_it(tmp_path: Path) -> None:
    """What the capture answers by hand is only what the examples need: an AWS call of any other kind ends the
    run as a failure (where an answer of nothing would let a changed SDK pass unseen)."""
    (tmp_path / "example.py").write_text("import boto3\nboto3.client('ec2').describe_instances()\n")
    done = run_driver("v2", "capture_request.py", tmp_path, "example.py", "request.json")
    assert done.returncode != 0 and "REQUEST-CAPTURED" not in done.stdout, done.stdout
    assert "an AWS call this stand-in does not answer: ec2 DescribeInstances" in done.stderr, done.stderr[-2000:]
