"""The Dockerfile and the shell scripts are lint clean (hadolint and shellcheck, both installed from
PyPI), and the GPU flavour's pins agree with what TensorFlow's own wheel declares. The GPU flavour
cannot be built here (no registry for NVIDIA's CUDA images, no route to AWS's EFA installer), so these
are the checks that can run here; buildspec.yml builds it and runs the image tests against it."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
DOCKERFILE = (REPO / "Dockerfile").read_text()
# The Python that each Ubuntu release of NVIDIA's CUDA images brings (its python3 package).
UBUNTU_PYTHON = {"ubuntu22.04": "3.10", "ubuntu24.04": "3.12"}


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
    assert "docker/install-efa.sh" in scripts and "scripts/build-stack.sh" in scripts
    done = subprocess.run([str(BIN / "shellcheck"), *scripts, ".ci/run"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _tensorflow_cuda_pins() -> dict[str, str]:
    """The CUDA wheels TensorFlow's `and-cuda` extra asks for (`==` up to 2.18, `>=` lower bounds
    since): the CUDA and cuDNN its wheel was built with."""
    pins = {}
    for requirement in metadata.requires("tensorflow-cpu") or []:
        match = re.match(r"(nvidia-[\w-]+) ?[^;]*?(?:==|>=)([\d.]+)[^;]*; extra == .and-cuda.", requirement)
        if match:
            pins[match.group(1)] = match.group(2)
    assert pins, "tensorflow-cpu declares no and-cuda pins"
    return pins


def _cuda_tag(image: str) -> tuple[str, str, str]:
    match = re.fullmatch(r"nvidia/cuda:(\d+\.\d+\.\d+)-cudnn-(devel|runtime)-(ubuntu\d+\.\d+)", image)
    assert match, f"not an NVIDIA CUDA + cuDNN image: {image}"
    return match.group(1), match.group(2), match.group(3)


def test_gpu_base_images_carry_the_cuda_tensorflow_was_built_with() -> None:
    devel, runtime = _cuda_tag(_arg("CUDA_DEVEL_IMAGE")), _cuda_tag(_arg("CUDA_RUNTIME_IMAGE"))
    assert (devel[1], runtime[1]) == ("devel", "runtime")
    assert (devel[0], devel[2]) == (runtime[0], runtime[2]), "the build and final stages must share CUDA and OS"
    pins = _tensorflow_cuda_pins()
    cuda_runtime = pins["nvidia-cuda-runtime-cu12"]  # 12.5.82 is CUDA 12.5.1's runtime
    assert devel[0].split(".")[:2] == cuda_runtime.split(".")[:2], (devel[0], cuda_runtime)
    # The tag names no cuDNN version: NVIDIA's 12.5.1 cudnn images carry 9.3.0.75 (their NV_CUDNN_VERSION),
    # which tests/image checks against TensorFlow's build info inside the built GPU image.
    assert pins["nvidia-cudnn-cu12"].startswith("9.")


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


def test_gpu_images_python_is_one_tensorflow_supports() -> None:
    python = UBUNTU_PYTHON[_cuda_tag(_arg("CUDA_RUNTIME_IMAGE"))[2]]
    classifiers = metadata.metadata("tensorflow-cpu").get_all("Classifier") or []
    assert f"Programming Language :: Python :: {python}" in classifiers, python


def _find_python(version: str) -> str | None:
    """A working python<version>: on PATH (a pyenv shim may name one it cannot run), or in pyenv's versions."""
    candidates = [shutil.which(f"python{version}"),
                  *sorted(map(str, Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}")))]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "pass"], capture_output=True, timeout=60).returncode == 0:
            return candidate
    return None


def test_entrypoint_plans_the_same_on_the_gpu_images_python(tmp_path: Path) -> None:
    """The entry point is plain standard library; on the GPU image's Python (3.10 on Ubuntu 22.04) it must
    import every module and plan a job exactly as on this one."""
    python = UBUNTU_PYTHON[_cuda_tag(_arg("CUDA_RUNTIME_IMAGE"))[2]]
    interpreter = _find_python(python)
    if interpreter is None:
        pytest.skip(f"no python{python} on this machine (looked on PATH and in pyenv's versions)")
    from tests.support import make_tree

    tree = make_tree(tmp_path, hosts=("algo-1", "algo-2"), hyperparameters={"sagemaker_mpi_enabled": "true"})
    tree.write_program("train.py", "pass\n")
    source = REPO / "entrypoint"
    env = {**tree.env(), "PYTHONPATH": str(source)}
    # every module but the Keras callbacks (they import tf_keras, which that Python lacks here)
    modules = sorted(".".join(p.relative_to(source).with_suffix("").parts).removesuffix(".__init__")
                     for p in (source / "smtrain").rglob("*.py") if p.stem not in ("__main__", "callbacks"))
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\n"
    imported = subprocess.run([interpreter, "-c", code, *modules], env=env, capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr
    plans = [subprocess.run([exe, "-m", "smtrain", "--dry-run"], env=env, cwd=REPO, capture_output=True, text=True,
                            timeout=120) for exe in (interpreter, sys.executable)]
    assert [p.returncode for p in plans] == [0, 0], plans[0].stderr + plans[1].stderr
    # the plan names the interpreter it runs helpers with, and a fresh random token; the rest must match
    older, ours = (json.loads(p.stdout.replace(json.dumps(exe)[1:-1], "PYTHON"))
                   for p, exe in zip(plans, (interpreter, sys.executable)))
    for plan in (older, ours):
        contract = json.loads(plan["env"].pop("SMTRAIN_RANK_CONTRACT"))
        assert re.fullmatch(r"[0-9a-f]{32}", contract.pop("token"))
        plan["contract"] = contract
    assert "PYTHON" in json.dumps(ours)
    assert older == ours
