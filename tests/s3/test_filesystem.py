"""s3:// in TensorFlow against a real S3 server on loopback (moto): every operation a script uses, in a
program that never imports smtrain (the plugin is registered as TensorFlow is imported)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.s3.conftest import S3Server

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"


def _run(program: str, *args: str, env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PROGRAMS / program), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_every_gfile_operation_and_tfrecords_over_s3(s3: S3Server) -> None:
    bucket = s3.new_bucket()
    done = _run("s3_gfile.py", f"s3://{bucket}/job", env=s3.env(SMTRAIN_S3_PART_BYTES=str(5 << 20),
                                                                 SMTRAIN_S3_READAHEAD_BYTES=str(256 << 10)))
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    root = f"s3://{bucket}/job"
    assert seen["empty_dir"] == [True, []]
    assert seen["text"] == "hello world"  # appended: read back and written again
    assert seen["listdir"] == ["b"]
    assert seen["stat"] == [11, True]
    assert seen["exists"] == [True, False, False]
    assert seen["glob"] == [f"{root}/a/renamed.txt"]
    assert seen["renamed_dir"] == [False, ["x.txt"]]
    assert seen["big"] == [True, True, True]
    assert seen["tfrecords"] == [3000, 3000]
    assert "no such key" in seen["removed"] and seen["after_rmtree"] is False
    assert seen["errors"]["missing_key"] == ["NotFoundError", f"{root}/no/such.txt: no such key"]
    assert seen["errors"]["missing_bucket"][0] == "NotFoundError"
    assert "bucket no-such-bucket-smtrain does not exist" in seen["errors"]["missing_bucket"][1]
    # what boto3 sees: real objects, the multipart one whole
    keys = {o["Key"]: o["Size"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"]}
    assert keys["job/big.bin"] == 12 << 20 and "job/moved/x.txt" in keys and "job/a/b/x.txt" not in keys


def test_credentials_from_the_container_endpoint_and_clear_errors_without_any(s3: S3Server, credentials_endpoint) -> None:
    bucket = s3.new_bucket()
    script = ("import sys, tensorflow as tf\n"
              "try:\n"
              "    with tf.io.gfile.GFile(sys.argv[1], 'w') as f:\n"
              "        f.write('x')\n"
              "    print('WROTE', tf.io.gfile.exists(sys.argv[1]))\n"
              "except tf.errors.OpError as e:\n"
              "    print('ERROR', type(e).__name__, e.message)\n")
    env = {k: v for k, v in s3.env().items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    container = {**env, "AWS_CONTAINER_CREDENTIALS_FULL_URI": credentials_endpoint.url,
                 "AWS_CONTAINER_AUTHORIZATION_TOKEN": "Bearer test-token"}
    done = subprocess.run([sys.executable, "-c", script, f"s3://{bucket}/k"], env=container, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "WROTE True", done.stdout + done.stderr[-2000:]
    assert credentials_endpoint.requests and set(credentials_endpoint.requests) == {"Bearer test-token"}
    assert len(credentials_endpoint.requests) == 1  # fetched once, kept until 5 minutes before expiry
    done = subprocess.run([sys.executable, "-c", script, f"s3://{bucket}/k"], env=env, capture_output=True,
                          text=True, timeout=120)
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith(f"ERROR UnauthenticatedError s3://{bucket}/k: no AWS credentials"), line
    assert "AWS_ACCESS_KEY_ID" in line and "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" in line and "AWS_EC2_METADATA_DISABLED" in line
