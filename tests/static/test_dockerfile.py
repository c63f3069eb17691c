"""The Dockerfile and the shell scripts are lint clean (hadolint and shellcheck, both installed from
PyPI), and the GPU flavour's pins agree with what TensorFlow's own wheel declares: the checks that need
no build. The image tier builds both flavours and tests them (tests/image, buildspec.yml)."""
from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
DOCKERFILE = (REPO / "Dockerfile").read_text()


def _arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)$", DOCKERFILE, re.M)
    assert match, f"Dockerfile: no ARG {name}=..."
    return match.group(1)


def test_dockerfile_is_hadolint_clean() -> None:
    done = subprocess.run([str(BIN / "hadolint"), "--config", str(REPO / ".hadolint.yaml"), "--no-color", "Dockerfile"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, ""), done.stdout + done.stderr


def test_shell_scripts_are_shellcheck_clean() -> None:
    scripts = sorted(str(p.relative_to(REPO)) for p in [*REPO.glob("scripts/*.sh"), *REPO.glob("docker/*.sh")])
    assert "docker/nvidia-compiler.sh" in scripts and "scripts/build-stack.sh" in scripts
    done = subprocess.run([str(BIN / "shellcheck"), *scripts, ".ci/run"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _and_cuda_requirements() -> dict[str, Requirement]:
    """What TensorFlow's `and-cuda` extra asks for: the CUDA, cuDNN and NCCL wheels, as ranges."""
    found = {}
    for line in metadata.requires("tensorflow-cpu") or []:
        requirement = Requirement(line)
        if requirement.marker is not None and "and-cuda" in str(requirement.marker):
            found[requirement.name] = requirement
    assert found, "tensorflow-cpu declares no and-cuda extra"
    return found


def test_the_gpu_flavour_pins_every_cuda_wheel_inside_tensorflow_s_ranges() -> None:
    pins = {}
    for line in (REPO / "requirements" / "stack-gpu.txt").read_text().splitlines():
        if line.startswith("nvidia-"):
            name, _, version = line.partition("==")
            pins[name] = Version(version)
    wanted = _and_cuda_requirements()
    assert set(wanted) <= set(pins), set(wanted) - set(pins)
    for name, requirement in wanted.items():
        assert requirement.specifier.contains(pins[name]), (name, str(pins[name]), str(requirement.specifier))


def test_the_gpu_flavour_s_compiler_is_cuda_12_as_the_wheels() -> None:
    """Debian's nvcc compiles Horovod's kernels against the runtime wheel's headers: the same major."""
    compiler = _arg("NVIDIA_COMPILER_VERSION")
    assert re.fullmatch(r"12\.\d+\.\d+~12\.\d+\.\d+-\d+", compiler), compiler
    runtime = _and_cuda_requirements()["nvidia-cuda-runtime-cu12"]
    assert runtime.specifier.contains("12.9") and not runtime.specifier.contains("13.0")


def test_tensorflow_is_pinned_in_one_place_for_both_flavours() -> None:
    """requirements/tensorflow-version names the release; no requirements file pins TensorFlow or
    tf-keras itself (scripts/build-stack.sh installs both in that version, by flavour)."""
    version = (REPO / "requirements" / "tensorflow-version").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version) and version == metadata.version("tensorflow-cpu") \
        == metadata.version("tf-keras")
    for path in (REPO / "requirements").glob("*.txt"):
        assert not re.search(r"^(tensorflow|tensorflow-cpu|tf-keras)\b", path.read_text(), re.M), path
    for flavour in ("stack.txt", "stack-gpu.txt"):
        assert "-r common.txt" in (REPO / "requirements" / flavour).read_text()
