"""s3:// in TensorFlow against a real S3 server on loopback (moto): every operation a script uses, in a
program that never imports smtrain (the plugin is registered as TensorFlow is imported)."""
from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import sys
from pathlib import Path

import boto3

from tests.harness.moto import S3Server, start_moto
from tests.support import make_tree, run_train

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"


def _run(program: str, *args: str, env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PROGRAMS / program), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _job_env(s3: S3Server, tree, **extra: str) -> dict:
    """`train`'s environment for a job tree whose program talks to the test's S3 server."""
    return {**s3.env(), **tree.env(**{k: v for k, v in s3.env().items() if k.startswith("AWS_")}, **extra)}


def test_every_gfile_operation_and_tfrecords_over_s3(s3: S3Server) -> None:
    bucket = s3.new_bucket()
    done = _run("s3_gfile.py", f"s3://{bucket}/job", env=s3.env(SMTRAIN_S3_PART_BYTES=str(5 << 20), SMTRAIN_S3_MULTIPART_THRESHOLD_BYTES=str(5 << 20),
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


def test_a_keras_job_writes_to_its_s3_model_dir_through_train_and_the_next_job_restores(s3: S3Server, tmp_path: Path) -> None:
    """As SageMaker's TensorFlow estimator starts it: `--model_dir s3://...` among the hyperparameters."""
    bucket = s3.new_bucket()
    model_dir = f"s3://{bucket}/job-1/model"
    results = []
    for run in range(2):
        tree = make_tree(tmp_path / f"run{run}", hyperparameters={"model_dir": json.dumps(model_dir)},
                         program="keras_model_dir.py")
        shutil.copy(PROGRAMS / "keras_model_dir.py", tree.code_dir)
        done = run_train(tree, env=_job_env(s3, tree, TF_USE_LEGACY_KERAS="1"), timeout=300)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        line = [x for x in done.stdout.decode().splitlines() if x.startswith("RESULT ")][-1]
        results.append(json.loads(line[len("RESULT "):]))
    first, second = results
    assert first["restored"] is None and first["step"] == 2
    assert second["restored"] == f"{model_dir}/manager/ckpt-1" and second["step"] == 4
    assert first["latest_weights"] == second["latest_weights"] == f"{model_dir}/weights/ckpt-02"
    assert first["events"] == 1 and second["events"] == 2 and first["serves"]
    keys = {o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"]}
    assert {"job-1/model/export/1/saved_model.pb", "job-1/model/manager/checkpoint",
            "job-1/model/weights/ckpt-02.index"} <= keys
    assert not any("tmp" in k or "temp" in k for k in keys), sorted(keys)  # nothing left aside


def test_an_s3_submit_directory_is_fetched_and_run(s3: S3Server, tmp_path: Path) -> None:
    """Script mode on SageMaker: `sagemaker_submit_directory` is an s3:// tarball of the code."""
    bucket = s3.new_bucket()
    source = tmp_path / "src"
    source.mkdir()
    (source / "entry.py").write_text("import sys, helper; print('RAN', helper.VALUE, sys.argv[1:])\n")
    (source / "helper.py").write_text("VALUE = 42\n")
    with tarfile.open(tmp_path / "sourcedir.tar.gz", "w:gz") as tar:
        for name in ("entry.py", "helper.py"):
            tar.add(source / name, arcname=name)
    s3.client().upload_file(str(tmp_path / "sourcedir.tar.gz"), bucket, "job/source/sourcedir.tar.gz")
    tree = make_tree(tmp_path / "job", program="entry.py", hyperparameters={
        "sagemaker_submit_directory": json.dumps(f"s3://{bucket}/job/source/sourcedir.tar.gz"), "epochs": "3"})
    done = run_train(tree, env=_job_env(s3, tree), timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert "RAN 42 ['--epochs', '3']" in done.stdout.decode()


def test_signatures_verified_by_the_server_and_bad_credentials_named(tmp_path: Path) -> None:
    """moto checking every request's SigV4 against IAM (after the set-up's first actions): the plugin's
    signature passes; a wrong secret comes back as an UnauthenticatedError naming the key's source."""
    process, url = start_moto(tmp_path / "moto.log", INITIAL_NO_AUTH_ACTION_COUNT="4")
    try:
        server = S3Server(url)
        iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        iam.create_user(UserName="trainer")
        key = iam.create_access_key(UserName="trainer")["AccessKey"]
        iam.put_user_policy(UserName="trainer", PolicyName="s3", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        server.client().create_bucket(Bucket="signed")
        script = ("import sys, tensorflow as tf\n"
                  "try:\n"
                  "    with tf.io.gfile.GFile(sys.argv[1], 'w') as f:\n"
                  "        f.write('x' * 100000)\n"
                  "    print('READ', len(tf.io.gfile.GFile(sys.argv[1]).read()), tf.io.gfile.listdir('s3://signed/dir'))\n"
                  "except tf.errors.OpError as e:\n"
                  "    print('ERROR', type(e).__name__, e.message)\n")
        for secret, expected in ((key["SecretAccessKey"], "READ 100000 ['a b+c.txt']"),
                                 ("wrong-secret", "ERROR UnauthenticatedError s3://signed/dir/a b+c.txt: PUT answered HTTP 403 SignatureDoesNotMatch")):
            env = server.env(AWS_ACCESS_KEY_ID=key["AccessKeyId"], AWS_SECRET_ACCESS_KEY=secret)
            done = subprocess.run([sys.executable, "-c", script, "s3://signed/dir/a b+c.txt"], env=env,
                                  capture_output=True, text=True, timeout=120)
            line = done.stdout.strip().splitlines()[-1]
            assert line.startswith(expected), line
            if secret == "wrong-secret":
                assert "credentials from the environment" in line and key["AccessKeyId"][:4] in line
                assert secret not in line
    finally:
        process.kill()
        process.wait()


def test_throttling_is_retried_with_backoff_and_named_when_it_persists(s3: S3Server, flaky_front) -> None:
    bucket = s3.new_bucket()
    front = flaky_front(fail=2)
    script = ("import sys, time, tensorflow as tf\n"
              "try:\n"
              "    start = time.monotonic()\n"
              "    with tf.io.gfile.GFile(sys.argv[1], 'w') as f:\n"
              "        f.write('payload')\n"
              "    print('READ', tf.io.gfile.GFile(sys.argv[1]).read(), round(time.monotonic() - start, 2))\n"
              "except tf.errors.OpError as e:\n"
              "    print('ERROR', type(e).__name__, e.message)\n")
    done = subprocess.run([sys.executable, "-c", script, f"s3://{bucket}/retried.txt"],
                          env=s3.env(AWS_ENDPOINT_URL=front.url), capture_output=True, text=True, timeout=120)
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("READ payload"), line + done.stderr[-2000:]
    assert [m for m, _ in front.failed].count("PUT") == 2 and [m for m, _ in front.failed].count("GET") == 2
    assert ("PUT", f"/{bucket}/retried.txt") in front.passed  # the third try went through
    # AWS_MAX_ATTEMPTS bounds the tries (5 by default): the error says how many and what S3 answered
    front = flaky_front(fail=10)
    done = subprocess.run([sys.executable, "-c", script, f"s3://{bucket}/throttled.txt"],
                          env=s3.env(AWS_ENDPOINT_URL=front.url, AWS_MAX_ATTEMPTS="2"), capture_output=True,
                          text=True, timeout=120)
    line = done.stdout.strip().splitlines()[-1]
    assert line == (f"ERROR UnavailableError s3://{bucket}/throttled.txt: PUT answered HTTP 503 SlowDown: "
                    "Please reduce your request rate. (after 2 attempts)"), line
