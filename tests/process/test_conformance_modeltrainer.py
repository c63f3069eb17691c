"""A job SDK v3's ModelTrainer started gets the environment v3's own drivers would give its script: the
oracle is SDK 3.27's `set_env` (sagemaker/train/container_drivers/scripts/environment.py), run by the
SDK's environment on the same tree, compared key by key with what the program saw under `train` (a job
on one host) or what `train --dry-run` plans (a host of an MPI job). Both run with the tree mounted at
/opt/ml in a mount namespace of their own, where the drivers' constants point."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import Tree, make_tree, require_root

SDK3_PYTHON = Path("/opt/smtrain/sdk3/bin/python")
TRAIN = Path(os.environ.get("SMTRAIN_VENV", "/opt/smtrain/venv")) / "bin" / "train"
DUMP_PROGRAM = Path(__file__).parent.parent / "programs" / "dump_env.py"
ORACLE = """
import json, sys
from sagemaker.train.container_drivers.scripts import environment
configs = [json.load(open(f"/opt/ml/input/config/{name}.json")) for name in ("resourceconfig", "inputdataconfig",
                                                                               "hyperparameters")]
environment.set_env(*configs, output_file=sys.argv[1])
"""
CASES = {
    "entry-script": (dict(channels={"train": {"TrainingInputMode": "File"}, "code": {"TrainingInputMode": "File"},
                                    "sm_drivers": {"TrainingInputMode": "File"}},
                          resource_extra={"current_instance_type": "local_cpu", "network_interface_name": "eth0"}),
                     {"source_dir": "/home/me/src", "entry_script": "train.py", "requirements": None, "command": None},
                     {}, {"epochs": "3", "learning-rate": "0.1", "layers": "[64, 32]", "name": "resnet"}, True),
    "mpi-second-of-two": (dict(hosts=("algo-2", "algo-1"), current_host="algo-1",
                               channels={"code": {"TrainingInputMode": "File"}, "sm_drivers": {"TrainingInputMode": "File"}},
                               resource_extra={"current_instance_type": "ml.c5.xlarge", "network_interface_name": "eth1"}),
                          {"source_dir": "/src", "entry_script": "hvd.py", "requirements": "requirements-train.txt"},
                          {"process_count_per_node": 2, "mpi_additional_options": ["-x", "NCCL_DEBUG=INFO"]},
                          {"batch_size": "64"}, False),
}


def _tree(tmp_path: Path, spec: dict, source: dict, distributed: dict, hyperparameters: dict) -> Tree:
    tree = make_tree(tmp_path / "ml", **spec)
    tree.write_config("hyperparameters.json", hyperparameters)
    drivers = tree.base / "input" / "data" / "sm_drivers"
    drivers.mkdir(parents=True, exist_ok=True)
    (drivers / "sourcecode.json").write_text(json.dumps(source))
    (drivers / "distributed.json").write_text(json.dumps(distributed))
    code = tree.base / "input" / "data" / "code"
    code.mkdir(parents=True, exist_ok=True)
    shutil.copy(DUMP_PROGRAM, code / source["entry_script"])
    (code / "requirements-train.txt").write_text("")
    return tree


def _at_opt_ml(tree: Tree, argv: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """`argv` in a mount namespace of its own where /opt/ml is the tree."""
    Path("/opt/ml").mkdir(parents=True, exist_ok=True)
    script = 'mount --bind "$0" /opt/ml && exec "$@"'
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(tree.base), *argv],
                          env=env, capture_output=True, text=True, timeout=timeout)


def _exported(path: Path) -> dict[str, str]:
    """sm_training.env's `export NAME='value'` lines."""
    found = {}
    for line in path.read_text().splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        found[name] = value[1:-1]
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_program_gets_what_sdk_v3s_drivers_give_it(tmp_path: Path, case: str) -> None:
    require_root()
    spec, source, distributed, hyperparameters, alone = CASES[case]
    tree = _tree(tmp_path, spec, source, distributed, hyperparameters)
    env = {"PATH": "/usr/bin:/bin", "TRAINING_JOB_NAME": "v3-job-7", "SM_SYSTEM_MONITOR": "off"}
    oracle = _at_opt_ml(tree, [str(SDK3_PYTHON), "-c", ORACLE, "/opt/ml/theirs.env"], env)
    assert oracle.returncode == 0, oracle.stderr[-2000:]
    theirs = _exported(tree.base / "theirs.env")
    if alone:
        done = _at_opt_ml(tree, [str(TRAIN)], {**env, "DUMP_TO": "/opt/ml/ours.json"})
        assert done.returncode == 0, done.stderr[-3000:]
        ours: dict[str, Any] = json.loads((tree.base / "ours.json").read_text())["env"]
    else:
        done = _at_opt_ml(tree, [str(TRAIN), "--dry-run"], env)
        assert done.returncode == 0, done.stderr[-3000:]
        ours = json.loads(done.stdout)["env"]
    assert set(theirs) - set(ours) == set(), "variables v3's drivers set that the program does not get"
    assert {k: ours[k] for k in theirs} == theirs
    assert theirs["SM_MASTER_ADDR"] == "algo-1" and json.loads(theirs["SM_HOSTS"]) == sorted(spec.get("hosts", ["algo-1"]))
    assert ours["SM_USER_ENTRY_POINT"] == source["entry_script"]  # sagemaker-training's names v3 has not stay
