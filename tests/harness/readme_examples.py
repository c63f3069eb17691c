"""The README's SageMaker examples, as the tests run them: each example's code (its placeholders filled in as a
user would), run by the real SDK's own Python in a network namespace of its own, and the CreateTrainingJob
request it makes the SDK send (tests/sdk/drivers/capture_request.py: S3 is moto's server in that namespace, the
other services are answered below the SDK)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from tests.sdk.sdk import DRIVERS, SDKS

REPO = Path(__file__).resolve().parent.parent.parent
README = REPO / "README.md"
# The README's placeholders, filled in as a user would
PLACEHOLDERS = {"<REPO_URI>": "123456789012.dkr.ecr.us-east-1.amazonaws.com/smtrain", "<account>": "123456789012",
                "<a role SageMaker may assume>": "SageMakerTraining"}
EXAMPLES = {"v3": "### A job with SDK v3's ModelTrainer", "v2": "### A job with SDK v2's TensorFlow estimator"}


def example(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    after = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


def run_driver(sdk: str, driver: str, folder: Path, *args: str) -> subprocess.CompletedProcess:
    """A driver in the SDK's own Python, in `folder`, in a network namespace of its own (no network but its own
    loopback) and credentials that are not real."""
    env = {"PATH": os.environ["PATH"], "HOME": str(folder), "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-a-secret", "AWS_EC2_METADATA_DISABLED": "true",
           "SAGEMAKER_SUPPRESS_V2_WARNING": "1"}
    return subprocess.run(["unshare", "--net", str(SDKS[sdk][0]), str(DRIVERS / driver), *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=180)


def captured_request(sdk: str, folder: Path) -> dict:
    """The CreateTrainingJob request the README's example makes the SDK send, `src/train.py` being the
    script the README names (made here where `folder` has no `src/`); what the SDK uploaded is under
    `folder/s3/<bucket>/<key>`."""
    code = example(EXAMPLES[sdk])
    for placeholder, value in PLACEHOLDERS.items():
        code = code.replace(placeholder, value)
    assert "<" not in code.replace("<=", ""), code  # no placeholder left unfilled
    if not (folder / "src").exists():
        (folder / "src").mkdir()
        (folder / "src" / "train.py").write_bytes((REPO / "examples" / "pipe_horovod" / "train.py").read_bytes())
    (folder / "example.py").write_text(code)
    done = run_driver(sdk, "capture_request.py", folder, "example.py", "request.json")
    assert "REQUEST-CAPTURED" in done.stdout, (done.stdout + done.stderr)[-3000:]
    return json.loads((folder / "request.json").read_text())


def uploaded(folder: Path, uri: str) -> Path:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return folder / "s3" / bucket / key
