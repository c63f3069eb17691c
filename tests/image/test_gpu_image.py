"""The GPU flavour's own parts, checked without a GPU (the image tier: `scripts/build-image.sh gpu`, then
`SMTRAIN_IMAGE=smtrain:gpu scripts/test.sh tests/image`; tests/image/test_image.py then also runs the
CPU code paths in it, a 2-container Horovod job included). Skipped for the CPU flavour."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.harness.docker_cluster import docker, shell

pytestmark = pytest.mark.timeout(300, func_only=True)
SITE = "/opt/smtrain/venv/lib/python3.11/site-packages"


@pytest.fixture(scope="module")
def gpu_image(image: str) -> str:
    if shell(image, f"test -d {SITE}/nvidia/nccl && echo gpu || echo cpu").strip() != "gpu":
        pytest.skip("the CPU flavour: the GPU flavour's tier is SMTRAIN_IMAGE=smtrain:gpu (docs/design.md, The image)")
    return image


def test_horovod_has_nccl_mpi_and_gloo_and_tensorflow_is_a_cuda_12_build(gpu_image: str) -> None:
    out = docker("run", "--rm", gpu_image, "horovodrun", "--check-build", timeout=300).stdout
    for line in ("[X] TensorFlow", "[X] MPI", "[X] Gloo", "[X] NCCL"):
        assert line in out, out
    code = ("import tensorflow as tf; i = tf.sysconfig.get_build_info(); "
            "print(tf.test.is_built_with_cuda(), i['cuda_version'], i['cudnn_version'])")
    cuda_built, cuda, cudnn = shell(gpu_image, f"python -c {shlex.quote(code)} 2>/dev/null").split()[-3:]
    assert cuda_built == "True" and cuda.startswith("12.") and cudnn.startswith("9"), (cuda_built, cuda, cudnn)


def test_every_shared_library_of_horovod_and_tensorflow_resolves_but_the_driver(gpu_image: str) -> None:
    """libcuda.so.1 is the driver's: the host provides it (the NVIDIA container runtime mounts it).
    Horovod's library names TensorFlow's own libraries without a path: `import tensorflow` has loaded
    them before it, so they are looked up in TensorFlow's folder here."""
    script = (f"export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:{SITE}/tensorflow; "
              f"find {SITE}/horovod {SITE}/tensorflow {SITE}/nvidia -name '*.so*' -type f | while read f; do "
              "ldd \"$f\" 2>/dev/null | grep 'not found' | sed \"s|^|$f: |\"; done")
    missing = [line for line in shell(gpu_image, script).splitlines() if "libcuda.so.1 " not in line]
    assert missing == [], "\n".join(missing[:20])


def test_tensorflow_and_horovod_load_the_same_one_nccl(gpu_image: str) -> None:
    files = shell(gpu_image, "find / -xdev -name 'libnccl.so*' \\( -type f -o -type l \\) 2>/dev/null").split()
    assert files == [f"{SITE}/nvidia/nccl/lib/libnccl.so.2"], files
    code = ("import tensorflow as tf, horovod.tensorflow as hvd; hvd.init(); "
            "print(hvd.allreduce(tf.constant([1.0, 2.0])).numpy().tolist()); "
            "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libnccl' in l}))")
    out = shell(gpu_image, f"python -c {shlex.quote(code)} 2>/dev/null").splitlines()
    assert out[-2] == "[1.0, 2.0]" and out[-1] == str([files[0]]), out


def test_dry_run_for_an_8_gpu_efa_instance_plans_8_ranks_a_host_with_the_efa_settings(
        gpu_image: str, tmp_path: Path) -> None:
    """The EFA device is a stand-in (/dev/null at its path: no EFA here); the GPUs come from SM_NUM_GPUS."""
    config = tmp_path / "ml" / "input" / "config"
    config.mkdir(parents=True)
    (tmp_path / "ml" / "code").mkdir()
    (tmp_path / "ml" / "code" / "train.py").write_text("print('hi')\n")
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-1", "hosts": ["algo-1", "algo-2"], "current_instance_type": "ml.p4d.24xlarge",
         "network_interface_name": "eth0"}))
    (config / "hyperparameters.json").write_text(json.dumps(
        {"sagemaker_program": '"train.py"', "sagemaker_mpi_enabled": "true"}))
    out = docker("run", "--rm", "-v", f"{tmp_path / 'ml'}:/opt/ml", "-e", "SM_NUM_GPUS=8",
                 "--device", "/dev/null:/dev/infiniband/uverbs0", gpu_image, "train", "--dry-run", timeout=300).stdout
    plan = json.loads(out[out.index("{"):])
    argv = plan["argv"]
    assert argv[argv.index("-np") + 1] == "16" and argv[argv.index("--host") + 1] == "localhost:8,algo-2:8"
    assert plan["env"]["FI_PROVIDER"] == "efa" and plan["env"]["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert plan["env"]["NCCL_SOCKET_IFNAME"] == "eth0" and argv[argv.index("btl") + 1] == "^openib"
    assert plan["notes"] == ["NCCL will use sockets between hosts: this image has no aws-ofi-nccl (NCCL's EFA plugin)"]
