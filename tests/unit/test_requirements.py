"""Which requirements file a job installs and from where (plan.requirements), and the CodeArtifact index built
as sagemaker-training 5.1.4 builds it (its `modules._get_codeartifact_index`, the oracle). moto has no
CodeArtifact, so both sides get botocore's Stubber in place of the service, with the same answers."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from smtrain.config.hostfacts import HostFacts
from smtrain.config.load import load_config
from smtrain.config.model import CodeFacts
from smtrain.errors import ConfigError
from smtrain.plan.launch import plan_launch
from smtrain.plan.mpirun_command import NetworkFacts
from smtrain.plan.requirements import CodeArtifactRepository
from smtrain.run.pip_install import codeartifact_index
from tests.support import make_tree

FACTS = HostFacts(2, 0, 0, False, False, NetworkFacts(("eth0",), "eth0", False))
ARN = "arn:aws:codeartifact:eu-west-1:123456789012:repository/my-domain/my-repo"
TOKEN = {"authorizationToken": "tok3n-secret", "expiration": "2026-12-02T12:00:00Z"}
ENDPOINT = {"repositoryEndpoint": "https://my-domain-123456789012.d.codeartifact.eu-west-1.amazonaws.com/pypi/my-repo/"}


def _model_trainer(tree, source: dict) -> None:
    drivers = tree.base / "input" / "data" / "sm_drivers"
    drivers.mkdir(parents=True)
    (drivers / "sourcecode.json").write_text(json.dumps(source))


@pytest.mark.parametrize("how,files,expected", [
    ("sagemaker-training", ["requirements.txt"], "code/requirements.txt"),
    ("sagemaker-training", [], None),
    ("sdk-v3-named", ["requirements.txt", "requirements-train.txt"], "input/data/code/requirements-train.txt"),
    ("sdk-v3-none", ["requirements.txt"], None),
], ids=["v2-beside-the-program", "v2-none", "v3-the-named-file", "v3-none-named-none-installed"])
def test_the_requirements_file_follows_the_toolkit_that_started_the_job(tmp_path: Path, how: str, files: list,
                                                                         expected) -> None:
    tree = make_tree(tmp_path)
    code = tree.code_dir
    if how.startswith("sdk-v3"):
        code = tree.base / "input" / "data" / "code"
        tree.write_config("hyperparameters.json", {})
        _model_trainer(tree, {"source_dir": "/src", "entry_script": "train.py",
                              "requirements": "requirements-train.txt" if how == "sdk-v3-named" else None})
    code.mkdir(parents=True, exist_ok=True)
    for name in files:
        (code / name).write_text("")
    plan = plan_launch(load_config(tree.env()), FACTS._replace(code=CodeFacts(False, "requirements.txt" in files)),
                       "/venv/bin/python")
    assert plan.requirements.file == (tree.base / expected if expected else None), plan.requirements.rule
    assert plan.requirements.required == (how == "sdk-v3-named")


def test_the_plan_names_the_codeartifact_repository_and_the_warm_pools_cache(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    (tree.code_dir / "requirements.txt").write_text("")
    env = tree.env(CA_REPOSITORY_ARN=ARN, SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY="/opt/ml/sagemaker/warmpoolcache")
    shown = plan_launch(load_config(env), FACTS._replace(code=CodeFacts(False, True)), "/venv/bin/python").to_json()
    assert shown["requirements"]["codeartifact"] == {"region": "eu-west-1", "account": "123456789012",
                                                     "domain": "my-domain", "repository": "my-repo"}
    assert shown["requirements"]["cache"] == "/opt/ml/sagemaker/warmpoolcache/smtrain/wheels"


def test_a_malformed_repository_arn_is_a_config_error_naming_it(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    with pytest.raises(ConfigError, match="CA_REPOSITORY_ARN: expected a CodeArtifact repository's ARN"):
        plan_launch(load_config(tree.env(CA_REPOSITORY_ARN="arn:aws:s3:::bucket")), FACTS, "/venv/bin/python")


def _stubbed_client():  # type: ignore[no-untyped-def]
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("codeartifact", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    stub.add_response("get_authorization_token", TOKEN, {"domain": "my-domain", "domainOwner": "123456789012"})
    stub.add_response("get_repository_endpoint", ENDPOINT, {"domain": "my-domain", "domainOwner": "123456789012",
                                                            "repository": "my-repo", "format": "pypi"})
    stub.activate()
    return client


ORACLE = f"""
import boto3, json, os
from botocore.stub import Stubber
client = boto3.client("codeartifact", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y")
stub = Stubber(client)
stub.add_response("get_authorization_token", {TOKEN!r})
stub.add_response("get_repository_endpoint", {ENDPOINT!r})
stub.activate()
boto3.client = lambda *args, **kwargs: client
from sagemaker_training import modules
print(modules._get_codeartifact_index())
"""


def test_the_codeartifact_index_is_built_as_sagemaker_training_builds_it(tmp_path: Path) -> None:
    ours = codeartifact_index(CodeArtifactRepository("eu-west-1", "123456789012", "my-domain", "my-repo"),
                              _stubbed_client())
    done = subprocess.run([sys.executable, "-c", ORACLE], capture_output=True, text=True, timeout=60,
                          env={"SAGEMAKER_BASE_DIR": str(tmp_path), "CA_REPOSITORY_ARN": ARN, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert ours == done.stdout.strip() == \
        "https://aws:tok3n-secret@my-domain-123456789012.d.codeartifact.eu-west-1.amazonaws.com/pypi/my-repo/simple/"
