"""buildspec.yml's own commands, run as CodeBuild runs them: its phases in order in one shell, in a
fresh Python environment standing in for CodeBuild's (only what the install phase installs), with
the buildspec's variables; a failed command ends its phase, and post_build runs after a failed build
with CODEBUILD_BUILD_SUCCEEDING=0. What cannot run here is replaced, and only that: the ECR login (by
nothing), the GPU flavour's build (by tagging an image made here with the build's tags: it takes longer
than a test may, and is a tier of its own), each push (by a line saying it). The CPU flavour's build runs
as written - scripts/build-image.sh with the buildspec's arguments - from the base this session's image was
built from, so that Docker's cache makes it quick where the image under test is this checkout's (one built
elsewhere, $SMTRAIN_IMAGE, is tagged instead). The image tests run as written, narrowed to two quick tests:
the whole tier runs against the same image in this session anyway. Run twice: with the image under test for
both flavours (everything pushed), and with a GPU flavour whose image test fails (nothing pushed, not even
the CPU flavour that passed)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tests.harness.docker_cluster import BASE_TAG, IMAGE_TAG, REPO, docker

pytestmark = pytest.mark.timeout(600, func_only=True)
NARROWED = "-k 'final_stage_has_no_build_tools or passes_the_status_through'"
REGISTRY = "registry.example/smtrain-test"


def _as_run_here(command: str, built_here: bool) -> str:
    if "docker login" in command:
        return "true  # the ECR login: no registry here"
    if command.startswith("scripts/build-image.sh "):
        flavour = command.split()[1]
        tags = re.findall(r'-t ("[^"]+")', command)
        assert tags and flavour in ("cpu", "gpu"), command
        if flavour == "cpu" and built_here:
            return command
        return " && ".join(f'docker tag "$IMAGE_UNDER_TEST_{flavour.upper()}" {tag}' for tag in tags)
    if command.startswith("docker push "):
        return f"echo would push {command[len('docker push '):]}"
    if " -m pytest " in command:
        return f"{command} {NARROWED}"
    return command


def buildspec_script(spec: dict, built_here: bool = False) -> str:
    """The buildspec's phases as one bash script, as CodeBuild runs them: in order, in one shell (what a
    phase sets, the next sees); a failed command ends its phase; a failed install or pre_build ends the
    build; post_build runs after build whether it failed or not, CODEBUILD_BUILD_SUCCEEDING saying which.
    The script's status is the build's."""
    lines = [
        "export CODEBUILD_BUILD_SUCCEEDING=1",
        "run_phase() {",
        '  local name=$1 command; shift',
        '  echo "codebuild: phase $name"',
        '  for command in "$@"; do eval "$command" || { echo "codebuild: phase $name failed"; return 1; }; done',
        "}",
    ]
    after_failure = {"install": "exit 1", "pre_build": "exit 1", "build": "CODEBUILD_BUILD_SUCCEEDING=0",
                     "post_build": "CODEBUILD_BUILD_SUCCEEDING=0"}
    for phase, then in after_failure.items():
        commands = " ".join(shlex.quote(_as_run_here(c, built_here)) for c in spec["phases"][phase]["commands"])
        lines.append(f"run_phase {phase} {commands} || {then}")
    lines.append('[ "$CODEBUILD_BUILD_SUCCEEDING" = 1 ]')
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def codebuild_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = tmp_path_factory.mktemp("codebuild") / "python"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(python)], check=True, timeout=120)
    return python


def _tags() -> tuple[str, str]:
    version = re.search(r'^version = "(.*)"', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    tensorflow = (REPO / "requirements" / "tensorflow-version").read_text().strip()
    return version, tensorflow


def run_buildspec(python: Path, cpu_image: str, gpu_image: str) -> subprocess.CompletedProcess:
    spec = yaml.safe_load((REPO / "buildspec.yml").read_text())
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "SMTRAIN_IMAGE", "CODEBUILD_BUILD_SUCCEEDING")}
    env.update({k: str(v) for k, v in spec["env"]["variables"].items()})
    built_here = cpu_image == IMAGE_TAG and not os.environ.get("SMTRAIN_IMAGE")
    if built_here:  # the CPU build from the base the session's image came from: Docker's cache serves it
        env["BASE_IMAGE"] = os.environ.get("SMTRAIN_BASE_IMAGE") or BASE_TAG
    env.update(PATH=f"{python}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", ECR_REGISTRY=REGISTRY,
               AWS_DEFAULT_REGION="us-west-2", CODEBUILD_RESOLVED_SOURCE_VERSION="0123456789abcdef0123",
               IMAGE_UNDER_TEST_CPU=cpu_image, IMAGE_UNDER_TEST_GPU=gpu_image)
    try:
        return subprocess.run(["bash", "-c", buildspec_script(spec, built_here)], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=540)
    finally:
        tags = docker("images", "--format", "{{.Repository}}:{{.Tag}}", f"{REGISTRY}/smtrain", check=False).stdout.split()
        if tags:  # the images made here keep their own tags
            docker("rmi", *tags, check=False)


def test_buildspec_installs_tests_and_pushes_both_flavours_as_codebuild_would(image: str, codebuild_python: Path) -> None:
    done = run_buildspec(codebuild_python, image, image)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert output.count(" passed") >= 2 and " failed" not in output, output[-4000:]
    version, tensorflow = _tags()
    for flavour in ("cpu", "gpu"):
        for tag in (f"{version}-tf{tensorflow}-{flavour}", f"{version}-tf{tensorflow}-{flavour}-0123456789ab"):
            assert f"would push {REGISTRY}/smtrain:{tag}" in output, output[-3000:]
    if not os.environ.get("SMTRAIN_IMAGE"):  # the CPU flavour was built by build-image.sh, as CodeBuild builds it
        assert f"build-image: smtrain:{version}-tf{tensorflow}-cpu (" in output, output[-3000:]


@pytest.fixture
def image_failing_its_test(image: str, tmp_path: Path) -> Iterator[str]:
    """The image under test with a build tool left in it, which its final-stage test refuses."""
    tag = f"smtrain-failing:{os.getpid()}"
    (tmp_path / "Dockerfile").write_text(f"FROM {image}\nRUN ln -s /bin/true /usr/local/bin/make\n")
    docker("build", "-q", "-t", tag, str(tmp_path), timeout=300)
    yield tag
    docker("rmi", "-f", tag, check=False)


def test_a_failing_image_test_fails_the_build_and_nothing_is_pushed(image: str, image_failing_its_test: str,
                                                                    codebuild_python: Path) -> None:
    """The CPU flavour's tests pass, the GPU flavour's fail: post_build runs, and pushes neither."""
    done = run_buildspec(codebuild_python, image, image_failing_its_test)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-4000:]
    assert "codebuild: phase build failed" in output and "codebuild: phase post_build" in output, output[-4000:]
    assert re.search(r"^1 failed", output, re.M), output[-4000:]
    assert "FAILED tests/image/test_image.py::test_final_stage_has_no_build_tools" in output, output[-4000:]
    assert "would push" not in output, output[-3000:]
