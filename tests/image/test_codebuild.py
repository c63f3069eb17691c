"""buildspec.yml's own commands, run as CodeBuild runs them: its phases in order in one shell, in a
fresh Python environment standing in for CodeBuild's (only what the install phase installs), with
the buildspec's variables. What cannot run here is replaced, and only that: the ECR login (by
nothing), each build (by tagging the image under test with the build's tags), each push (by a line
saying it). The image tests run as written, narrowed to two quick tests: the whole tier runs against
the same image in this session anyway."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.harness.docker_cluster import REPO, docker

pytestmark = pytest.mark.timeout(600, func_only=True)
NARROWED = "-k 'final_stage_has_no_build_tools or passes_the_status_through'"


def _as_run_here(command: str) -> str:
    if "docker login" in command:
        return "true  # the ECR login: no registry here"
    if command.startswith("scripts/build-image.sh "):
        tags = re.findall(r'-t ("[^"]+")', command)
        assert tags, command
        return " && ".join(f'docker tag "$IMAGE_UNDER_TEST" {tag}' for tag in tags)
    if command.startswith("docker push "):
        return f"echo would push {command[len('docker push '):]}"
    if " -m pytest " in command:
        return f"{command} {NARROWED}"
    return command


def buildspec_script(spec: dict) -> str:
    """The buildspec's phases as one bash script: install, pre_build and build stop at a failed command;
    post_build runs after them, as CodeBuild does."""
    lines = ["set -e"]
    for phase in ("install", "pre_build", "build", "post_build"):
        lines.append(f"echo 'codebuild: phase {phase}'")
        lines += [_as_run_here(c) for c in spec["phases"][phase]["commands"]]
    return "\n".join(lines) + "\n"


def test_buildspec_installs_and_tests_in_a_fresh_python_as_codebuild_would(image: str, tmp_path: Path) -> None:
    spec = yaml.safe_load((REPO / "buildspec.yml").read_text())
    python = tmp_path / "codebuild-python"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(python)], check=True, timeout=120)
    registry = "registry.example/smtrain-test"
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "SMTRAIN_IMAGE")}
    env.update({k: str(v) for k, v in spec["env"]["variables"].items()})
    env.update(PATH=f"{python}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", ECR_REGISTRY=registry,
               AWS_DEFAULT_REGION="us-west-2", CODEBUILD_RESOLVED_SOURCE_VERSION="0123456789abcdef0123",
               CODEBUILD_BUILD_SUCCEEDING="1", IMAGE_UNDER_TEST=image)
    try:
        done = subprocess.run(["bash", "-c", buildspec_script(spec)], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=540)
    finally:
        tags = docker("images", "--format", "{{.Repository}}:{{.Tag}}", f"{registry}/smtrain", check=False).stdout.split()
        if tags:  # the image under test keeps its own tag
            docker("rmi", *tags, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert output.count(" passed") >= 2 and " failed" not in output, output[-4000:]
    version = re.search(r'^version = "(.*)"', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    tensorflow = (REPO / "requirements" / "tensorflow-version").read_text().strip()
    for flavour in ("cpu", "gpu"):
        for tag in (f"{version}-tf{tensorflow}-{flavour}", f"{version}-tf{tensorflow}-{flavour}-0123456789ab"):
            assert f"would push {registry}/smtrain:{tag}" in output, output[-3000:]
