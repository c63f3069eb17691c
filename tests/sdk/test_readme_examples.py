"""The README's SageMaker examples (a real job, which cannot run here: no AWS) checked against the
real SDKs they are written for: each example's objects are built by that SDK (which validates them)
and its last call is bound to the SDK method's signature (tests/sdk/drivers/check_example.py), in a
network namespace of its own, with credentials that are not real. The same jobs in local mode run
in tests/sdk/test_local_mode.py."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.sdk.sdk import DRIVERS, SDKS

README = Path(__file__).resolve().parent.parent.parent / "README.md"
EXAMPLES = {"v3": "### A job with SDK v3's ModelTrainer", "v2": "### A job with SDK v2's TensorFlow estimator"}


def example(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    after = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


@pytest.mark.parametrize("sdk", ["v3", "v2"])
def test_the_readme_example_fits_the_real_sdk(tmp_path: Path, sdk: str) -> None:
    code = example(EXAMPLES[sdk])
    assert "s3://" in code and "ml." in code and "role=ROLE" in code.replace(" ", "")  # a real job, not local mode
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('the example only names it')\n")
    (tmp_path / "example.py").write_text(code)
    python = str(SDKS[sdk][0])
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-a-secret", "AWS_EC2_METADATA_DISABLED": "true",
           "SAGEMAKER_SUPPRESS_V2_WARNING": "1"}
    done = subprocess.run(["unshare", "--net", python, str(DRIVERS / "check_example.py"), str(tmp_path / "example.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    expected = {"v3": "EXAMPLE-OK ModelTrainer.train", "v2": "EXAMPLE-OK TensorFlow.fit"}[sdk]
    assert expected in done.stdout, (done.stdout + done.stderr)[-3000:]
