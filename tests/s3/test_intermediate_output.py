"""output/intermediate synced to S3 while the job runs, as sagemaker-training 5.1.4 does it (the hyperparameter
sagemaker_s3_output, <location>/<job>/output/intermediate/<path>), against moto's S3 server: a file written
during the job is in S3 before the job ends; after it every file is there as it was last written (one renamed
into the folder too); a failed upload is tried again; an upload that cannot succeed never fails the job."""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from tests.harness.moto import S3Server
from tests.support import TRAIN, make_tree, run_train

PROGRAM = Path(__file__).resolve().parent.parent / "programs" / "intermediate_writer.py"


def _tree(tmp_path: Path, location: str):
    tree = make_tree(tmp_path / "ml", hyperparameters={"sagemaker_s3_output": json.dumps(location)})
    shutil.copy(PROGRAM, tree.code_dir / "train.py")
    return tree


def _env(s3: S3Server, tree, tmp_path: Path, **extra: str) -> dict:
    return {**tree.env(), **s3.env(), "SAGEMAKER_BASE_DIR": str(tree.base), "TRAINING_JOB_NAME": "job-7",
            "SM_SYSTEM_MONITOR": "off", "GO_FILE": str(tmp_path / "go"), **extra}


def _objects(s3: S3Server, bucket: str) -> dict[str, bytes]:
    client = s3.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    return {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def test_intermediate_output_reaches_s3_during_the_job_and_all_of_it_by_its_end(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    tree = _tree(tmp_path, f"s3://{bucket}/runs")
    env = _env(s3, tree, tmp_path)
    shown = json.loads(run_train(tree, "--dry-run", env=env).stdout)["intermediate_sync"]
    assert shown == {"folder": str(tree.base / "output" / "intermediate"),
                     "to": f"s3://{bucket}/runs/job-7/output/intermediate"}
    job = subprocess.Popen([TRAIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline, during = time.monotonic() + 60, {}
        while "runs/job-7/output/intermediate/first.txt" not in during and time.monotonic() < deadline:
            assert job.poll() is None, job.communicate()[1].decode()[-3000:]
            time.sleep(0.1)
            during = _objects(s3, bucket)
        # in S3 while the job runs (its program waits for the go file): a syncer that uploads at the end fails here
        assert during.get("runs/job-7/output/intermediate/first.txt") == b"first" and job.poll() is None, during
        (tmp_path / "go").touch()
        _, stderr = job.communicate(timeout=120)
    finally:
        job.kill()
    assert job.returncode == 0, stderr.decode()[-3000:]
    prefix = "runs/job-7/output/intermediate/"
    assert _objects(s3, bucket) == {prefix + "first.txt": b"first, rewritten", prefix + "sub/second.txt": b"second",
                                    prefix + "third.txt": b"third"}


def test_a_failed_upload_is_tried_again_and_one_that_cannot_succeed_leaves_the_job_as_it_was(
        s3: S3Server, tmp_path: Path, flaky_front) -> None:
    """S3 refuses the first 6 uploads (SlowDown: more than boto3's own retries); then a bucket that does not exist."""
    front = flaky_front(6)
    bucket = s3.new_bucket()
    tree = _tree(tmp_path / "flaky", f"s3://{bucket}")
    (tmp_path / "go").touch()
    done = run_train(tree, env=_env(s3, tree, tmp_path, AWS_ENDPOINT_URL=front.url, SMTRAIN_INTERMEDIATE_RETRY_S="0.3,0.3"),
                     timeout=120)
    assert done.returncode == 0 and b"trying again" in done.stderr, done.stderr.decode()[-3000:]
    assert sorted(_objects(s3, bucket)) == ["job-7/output/intermediate/first.txt", "job-7/output/intermediate/sub/second.txt",
                                            "job-7/output/intermediate/third.txt"]
    tree = _tree(tmp_path / "nowhere", "s3://no-such-bucket-here/x")
    done = run_train(tree, env=_env(s3, tree, tmp_path, SMTRAIN_INTERMEDIATE_RETRY_S="0.1"), timeout=120)
    assert done.returncode == 0 and b"written" in done.stdout, done.stderr.decode()[-3000:]
    assert b"could not upload first.txt" in done.stderr and b"the program succeeded" in done.stderr
