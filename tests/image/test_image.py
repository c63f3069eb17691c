"""The image with a real Docker engine (the CPU flavour here; $SMTRAIN_IMAGE picks another, as
buildspec.yml does for both): Horovod's build, a final stage without build tools or caches, `docker
run` of a job with a mounted /opt/ml, `docker stop`, and two containers as SageMaker hosts running
Horovod with Pipe mode and checkpoints (the demo job). Run on the GPU flavour ($SMTRAIN_IMAGE=smtrain:gpu)
they check its CPU code paths; its own parts: tests/image/test_gpu_image.py."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.benchmarks import run_quick
from tests.harness.docker_cluster import IMAGE_TAG, REPO, ContainerCluster, docker, shell
from tests.harness.keyscan import scan_image
from tests.support import assert_only_the_jobs_key_logs_in, assert_outside_host_gets_the_system_settings
# Each test's own time only: the first one also waits for the session's image build (minutes when the
# build cache is cold), which is bounded by its own timeout in tests/harness/docker_cluster.py.
pytestmark = pytest.mark.timeout(300, func_only=True)


def _job(folder: Path, program: str, hps: dict) -> Path:
    ml = folder / "ml"
    (ml / "input" / "config").mkdir(parents=True)
    (ml / "code").mkdir()
    (ml / "input" / "config" / "resourceconfig.json").write_text('{"current_host": "algo-1", "hosts": ["algo-1"]}')
    (ml / "input" / "config" / "hyperparameters.json").write_text(json.dumps({"sagemaker_program": '"p.py"', **hps}))
    (ml / "code" / "p.py").write_text(program)
    return ml


def test_the_image_benchmark_runs_in_its_quick_mode(image: str) -> None:
    """benchmarks/bench_image.py on the image just built (the other benchmarks' quick runs: tests/process/test_benchmarks.py)."""
    if image != IMAGE_TAG:
        pytest.skip(f"the benchmark measures {IMAGE_TAG}, not the image given ({image})")
    assert any(line.startswith("figure image_cpu_gb ") for line in run_quick("bench_image.py"))


def test_horovod_is_built_with_tensorflow_mpi_and_gloo(image: str) -> None:
    out = docker("run", "--rm", image, "horovodrun", "--check-build", timeout=300).stdout
    for line in ("[X] TensorFlow", "[X] MPI", "[X] Gloo"):
        assert line in out, out


def _image_env(image: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in shell(image, "env").splitlines() if "=" in line)


def test_final_stage_has_no_build_tools_or_caches(image: str) -> None:
    found = shell(image, "for t in gcc g++ cc c++ make cmake nvcc; do command -v $t; done; "
                          "ls -d /root/.cache/pip /src /var/lib/apt/lists/*_Packages* 2>/dev/null; true")
    assert found.strip() == "", f"left in the image: {found.split()}"
    assert shell(image, "command -v train").strip() == "/opt/smtrain/venv/bin/train"
    env = _image_env(image)
    assert env.get("PYTHONUNBUFFERED") == "1" and env.get("TF_USE_LEGACY_KERAS") == "1"


# On top of the image under test: a key made in one step and removed in the next, after going into a wheel
# and a tarball there; the last step removes everything, so the final filesystem holds no key at all.
PLANTED_KEYS = """FROM {image}
RUN mkdir /planted && ssh-keygen -q -t ed25519 -N '' -f /planted/key
RUN python3 -c "import zipfile; zipfile.ZipFile('/planted/keys.whl', 'w', zipfile.ZIP_DEFLATED).write('/planted/key', 'pkg/key')" \
 && tar czf /planted/keys.tar.gz -C / planted/key && rm /planted/key
RUN rm -rf /planted
"""


# Keys compiled into Debian's libraries as their self-tests' known answers: public test vectors, no secret
# of anybody's (every such file is named here, so that a new one fails the test until looked at).
TEST_VECTORS = re.compile(r"usr/lib/x86_64-linux-gnu/libgnutls\.so\.30[.\d]*")


def test_no_layer_of_the_image_holds_a_private_key(image: str, tmp_path: Path) -> None:
    """Every layer as `docker save` gives it, archives and wheels opened (tests/harness/keyscan.py): each
    container makes its own host key and each job its own key pair (docs/design.md, "The job's ssh keys").
    Scanned with keys planted in layers on top of the image: those are found, in their layers, and
    nothing in the image's own but its libraries' self-test vectors."""
    own = int(docker("inspect", "--format", "{{len .RootFS.Layers}}", image).stdout)
    planted = f"smtrain-keyscan:{os.getpid()}"
    (tmp_path / "Dockerfile").write_text(PLANTED_KEYS.format(image=image))
    docker("build", "-q", "-t", planted, str(tmp_path), timeout=300)
    try:
        found = scan_image(planted)
    finally:
        docker("rmi", "-f", planted, check=False)
    vectors = sorted(path for paths in found.values() for path in paths if TEST_VECTORS.fullmatch(path))
    assert vectors, "the scan no longer sees GnuTLS's self-test keys: does it read binary files?"
    found = {layer: sorted(p for p in paths if not TEST_VECTORS.fullmatch(p)) for layer, paths in found.items()}
    found = {layer: paths for layer, paths in found.items() if paths}
    assert found == {own: ["planted/key"], own + 1: ["planted/keys.tar.gz!planted/key", "planted/keys.whl!pkg/key"]}, \
        f"private keys in the image's layers 0-{own - 1} (or the planted ones missed): {found}"


def test_the_jobs_ssh_uses_its_key_for_its_hosts_and_the_systems_settings_for_any_other(image: str,
                                                                                       tmp_path: Path) -> None:
    """Two containers, an MPI job of tests/programs/ssh_probe.py: mpirun reaches the worker with the job's
    key; from the master's container, ssh to a host outside the job checks its host key and offers no key
    of the job (docker/ssh_config includes the job's settings for its hosts alone)."""
    with ContainerCluster("smtrain-it", 2, tmp_path, image) as cluster:
        cluster.write_job({"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 1, "job": "image"},
                          REPO / "tests" / "programs" / "ssh_probe.py", {})
        cluster.start({"SM_PEER_WAIT_SECONDS": "120"})
        statuses = cluster.wait(180)
        assert statuses == {"algo-1": 0, "algo-2": 0}, (statuses, cluster.logs("algo-1")[-3000:])
        found = json.loads((cluster.ml("algo-1") / "output" / "data" / "ssh-image-rank0.json").read_text())
    assert_only_the_jobs_key_logs_in(found["logins"])
    assert_outside_host_gets_the_system_settings(found["outside"])


def test_tf_container_scripts_find_their_apis_in_the_image(image: str) -> None:
    """The PipeModeDataset drop-in ships, Horovod's Keras callbacks are patched onto tf_keras, and
    smtrain's native Pipe reader was built for the image's TensorFlow and loads."""
    script = ("/opt/smtrain/venv/bin/python -c 'import horovod.tensorflow.keras.callbacks as c, inspect; "
              "from sagemaker_tensorflow import PipeModeDataset; from smtrain.data.native import native_pipes; "
              "print(c.K.__name__, \"smtrain\" in inspect.getsource(c), PipeModeDataset.__name__, "
              "native_pipes() is not None)'")
    backend, patched, name, native = shell(image, script).split()[-4:]
    assert backend.startswith("tf_keras.") and (patched, name, native) == ("True", "PipeModeDataset", "True")


def test_docker_run_passes_the_status_through_and_writes_the_failure_file(image: str, tmp_path: Path) -> None:
    ml = _job(tmp_path, "import sys\nprint('args', sys.argv[1:])\nraise SystemExit(3)\n", {"lr": '"0.1"'})
    done = subprocess.run(["docker", "run", "--rm", "-v", f"{ml}:/opt/ml", image, "train"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr
    assert "args ['--lr', '0.1']" in done.stdout
    assert (ml / "output" / "failure").read_text().startswith("ProgramError: program /opt/ml/code/p.py exited with status 3")


def test_docker_stop_delivers_sigterm_to_the_program(image: str, tmp_path: Path) -> None:
    program = ("import signal, sys, time\n"
               "signal.signal(signal.SIGTERM, lambda *a: (print('got SIGTERM', flush=True), sys.exit(0)))\n"
               "print('ready', flush=True)\ntime.sleep(120)\n")
    ml = _job(tmp_path, program, {})
    name = f"smtrain-stop-{tmp_path.name[-8:]}"
    docker("run", "-d", "--name", name, "-v", f"{ml}:/opt/ml", image, "train")
    try:
        deadline = time.monotonic() + 60
        while "ready" not in docker("logs", name).stdout and time.monotonic() < deadline:
            time.sleep(0.2)
        started = time.monotonic()
        docker("stop", "-t", "30", name, timeout=60)
        assert time.monotonic() - started < 10  # the program finished well inside the grace period
        assert docker("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip() == "0"
        assert "got SIGTERM" in docker("logs", name).stdout
    finally:
        docker("rm", "-f", name, check=False)


def test_the_demo_trains_two_containers_with_pipe_mode_and_checkpoints_and_keeps_its_output(image: str,
                                                                                         tmp_path: Path) -> None:
    """scripts/demo.py as the README runs it (with this image): it keeps each host's folders and log and
    prints where the report and the model are."""
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--out", str(out), "--image", image],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    master, worker = (out / "algo-1" / "train.log").read_text(), (out / "algo-2" / "train.log").read_text()
    assert "epoch=0; loss=" in master and "epoch=1; loss=" in master
    assert "reading Pipe mode through Python" not in master  # the native reader was used
    dealt = "dealt 64 records as [32, 32] (of the 128 records the job's hosts deal alike)"  # each record once a job
    assert dealt in master and dealt in worker
    checkpoints = sorted(p.name for p in (out / "algo-1" / "ml" / "checkpoints").glob("ckpt-*"))
    assert checkpoints == ["ckpt-000000000001", "ckpt-000000000002"]
    printed = dict(line[len("demo: "):].split(": ", 1) for line in done.stdout.splitlines()
                   if line.startswith("demo: ") and ": /" in line[len("demo: "):])
    report, model = Path(printed["profiler report"]), Path(printed["model"])
    assert report == out / "algo-1" / "ml" / "output" / "data" / "profiler-report" / "profiler-report.html"
    assert model == out / "algo-1" / "ml" / "model" / "model.keras"
    assert report.stat().st_size > 10_000 and model.stat().st_size > 1_000


OOM_RANK = """import sys, time
import numpy as np, tensorflow as tf, horovod.tensorflow as hvd
hvd.init()
if hvd.rank() == int(sys.argv[sys.argv.index("--oom-rank") + 1]):
    hog = []
    while True:
        hog.append(np.ones(4 << 20))  # 32 MB a time, touched, until the kernel's OOM killer ends it
while True:
    hvd.allreduce(tf.constant(1.0))
    time.sleep(0.05)
"""


@pytest.mark.parametrize("rank,host", [(3, "algo-2")], ids=["on-a-worker"])
def test_an_oom_killed_horovod_rank_is_named_out_of_memory_on_every_host(image: str, tmp_path: Path, rank: int,
                                                                        host: str) -> None:
    """Two containers with `--memory=2g`, two Horovod ranks each; a rank on the worker allocates until
    the OOM killer ends it: every host's failure says OutOfMemory and names that rank and its host (a
    rank on the master: tests/process/test_oom.py; a failing rank ending every host:
    tests/cluster/test_multihost.py, and in containers through the SDK: tests/sdk/test_local_mode.py)."""
    program = tmp_path / "oom.py"
    program.write_text(OOM_RANK)
    with ContainerCluster("smtrain-it", 2, tmp_path, image) as cluster:
        cluster.write_job({"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2,
                           "oom-rank": rank}, program, {})
        cluster.start({"SM_PEER_WAIT_SECONDS": "120"}, options=["--memory=2g"])
        statuses = cluster.wait(300)
        assert statuses == {"algo-1": 137, "algo-2": 137}, (statuses, cluster.logs("algo-1")[-3000:])
        for each in cluster.hosts:
            failure = (cluster.ml(each) / "output" / "failure").read_text()
            assert failure.startswith(f"OutOfMemory: program /opt/ml/code/oom.py (rank {rank}, local rank 1, on host "
                                      f"{host}) was killed by SIGKILL (exit status 137); the kernel's OOM killer ran"), \
                (each, failure)
