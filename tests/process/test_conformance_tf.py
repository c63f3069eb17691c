"""The program gets what SageMaker's TensorFlow container (sagemaker-tensorflow-training 20.5.0)
gives it: TF_CONFIG for MultiWorkerMirroredStrategy and parameter servers, the tuning-job model_dir,
the arguments, SM_* and the variables its start-up sets.

The oracle is the container's real entry point, run through sagemaker-training's `train` on the
same tree with the same program. Trees where this host runs alone are run by both `train`s and
compared as the program saw them; trees where this host is part of a job across hosts are compared
with `train --dry-run`'s plan (the program's environment and arguments; the cluster tests run
those jobs for real). Deliberate differences: docs/design.md, "Differences from SageMaker's containers".
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import OWN_VARIABLES, TF_ORACLE_MODULE, make_tree, require_root, run_tf_oracle, run_train

DUMP_PROGRAM = Path(__file__).parent.parent / "programs" / "dump_env.py"
CONTAINER_VARIABLES = ("TF_CONFIG", "S3_REGION", "S3_USE_HTTPS", "TF_CPP_MIN_LOG_LEVEL", "CURRENT_HOST",
                       "SAGEMAKER_JOB_NAME", "SAGEMAKER_REGION")
MWMS = {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}
PS = {"sagemaker_parameter_server_enabled": "true"}
THREE = ("algo-1", "algo-2", "algo-3")
GROUPS = {"current_group_name": "train", "instance_groups": [
    {"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1"]},
    {"instance_group_name": "train", "instance_type": "ml.c5.xlarge", "hosts": ["algo-2", "algo-3"]}]}
TUNING = {"_tuning_objective_metric": '"loss"', "sagemaker_job_name": '"tuning-007"'}

# name: (tree, runs alone on this host)
CASES = {
    "plain-one-host": (dict(hyperparameters={"epochs": "3", "model_dir": '"/opt/ml/model"'}), True),
    "mwms-one-host": (dict(hyperparameters={**MWMS, "lr": "0.1"}), True),
    "mwms-three-hosts-second": (dict(hosts=THREE, current_host="algo-2", hyperparameters=MWMS), False),
    "mwms-three-hosts-first": (dict(hosts=THREE, hyperparameters={**MWMS, "batch-size": "32"}), False),
    "ps-one-host": (dict(hyperparameters={**PS, "epochs": "1"}), True),
    "ps-three-hosts-master": (dict(hosts=THREE, hyperparameters=PS), False),
    "ps-three-hosts-worker": (dict(hosts=THREE, current_host="algo-3", hyperparameters={**PS, "x": "1"}), False),
    "tuning-shared-model-dir": (dict(hyperparameters={**TUNING, "model_dir": '"/shared/models"', "lr": "0.3"}), True),
    "tuning-opt-ml-model-dir": (dict(hyperparameters={**TUNING, "model_dir": '"/opt/ml/model"'}), True),
    "tuning-mwms-three-hosts": (dict(hosts=THREE, current_host="algo-3",
                                     hyperparameters={**TUNING, **MWMS, "model_dir": '"/shared/m"'}), False),
    "instance-groups-mwms": (dict(hosts=THREE, current_host="algo-2", resource_extra=GROUPS,
                                  hyperparameters={**MWMS, "sagemaker_distribution_instance_groups": '["train"]'}),
                             False),
    "instance-groups-mwms-worker": (dict(hosts=THREE, current_host="algo-3", resource_extra=GROUPS,
                                         hyperparameters={**MWMS, "sagemaker_distribution_instance_groups": '["train"]'}),
                                    False),
    "instance-groups-outside": (dict(hosts=THREE, current_host="algo-1", resource_extra={**GROUPS,
                                     "current_group_name": "data"},
                                     hyperparameters={**MWMS, "sagemaker_distribution_instance_groups": '["train"]'}),
                                True),
}


def _compared(env: dict) -> dict:
    """What both must give alike. Variables whose names are not identifiers (SM_HP_BATCH-SIZE) are
    left out: sagemaker-training passes them, the TensorFlow container loses them (we pass them)."""
    return {k: v for k, v in env.items() if k.isidentifier()
            and ((k.startswith("SM_") and not k.startswith(OWN_VARIABLES)) or k in CONTAINER_VARIABLES)}


def _ours_dry_run(tree, env: dict) -> dict:
    """The program's environment and arguments as `train --dry-run` plans them for this host."""
    done = run_train(tree, "--dry-run", env=env)
    assert done.returncode == 0, done.stderr.decode()
    plan = json.loads(done.stdout)
    argv = plan["argv"]
    program_argv = argv[argv.index("--") + 1:] if "--" in argv else argv
    return {"env": {**env, **plan["env"]}, "argv": program_argv[2:]}  # after `python train.py`


@pytest.mark.parametrize("case", sorted(CASES))
def test_program_sees_what_the_tensorflow_container_gives(tmp_path: Path, case: str) -> None:
    require_root()
    spec, alone = CASES[case]
    tree = make_tree(tmp_path / "ml", **spec)
    shutil.copy(DUMP_PROGRAM, tree.code_dir / "train.py")
    ours_file, oracle_file = tmp_path / "ours.json", tmp_path / "oracle.json"
    env = tree.env(TRAINING_JOB_NAME="tuning-007-001-abc", AWS_DEFAULT_REGION="eu-west-1",
                   SAGEMAKER_TRAINING_MODULE=TF_ORACLE_MODULE)  # as the TF container's image sets it
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)

    if alone:
        done = run_train(tree, env={**env, "DUMP_TO": str(ours_file)})
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        ours = json.loads(ours_file.read_text())
    else:
        ours = _ours_dry_run(tree, env)
    status, log = run_tf_oracle(tree, {**env, "DUMP_TO": str(oracle_file)}, spec.get("hosts", ("algo-1",)), oracle_file)
    assert oracle_file.exists(), log
    theirs = json.loads(oracle_file.read_text())

    assert _compared(ours["env"]) == _compared(theirs["env"])
    assert ours["argv"] == theirs["argv"]
    assert all(ours["env"].get(f"SM_HP_{k.upper()}") for k in json.loads(theirs["env"]["SM_HPS"]))
    assert ("TF_CONFIG" in theirs["env"]) == ("strategy" in case or "mwms" in case or "ps-three" in case), theirs["env"]


def test_tf_config_builders_equal_the_containers() -> None:
    """Every host of 1-5 host jobs, every role, the same dicts (key order too) as the container's builders."""
    from sagemaker_tensorflow_container import training as container

    from smtrain.config.hyperparameters import with_tuning_model_dir
    from smtrain.plan.kinds import multi_worker_mirrored as tfconfig
    from smtrain.plan.kinds.parameter_server import tf_config_for_ps

    for count in range(1, 6):
        hosts = [f"algo-{i}-x7k2" for i in range(1, count + 1)]
        for host in hosts:
            ours, theirs = tfconfig.tf_config_for_mwms(hosts, host), container._build_tf_config_for_mwms(hosts, host)
            assert json.dumps(ours) == json.dumps(theirs)
            ours, theirs = tf_config_for_ps(hosts, host), container._build_tf_config_for_ps(hosts, host)
            assert json.dumps(ours) == json.dumps(theirs)
            if count > 1:
                assert json.dumps(tf_config_for_ps(hosts, host, ps_task=True)) == json.dumps(
                    container._build_tf_config_for_ps(hosts, host, ps_task=True))
    for model_dir in ("s3://bucket/prefix/model", "/opt/ml/model", "/opt/ml/checkpoints/m", "file:///x", "relative/dir"):
        decoded = {"_tuning_objective_metric": "loss", "model_dir": model_dir}
        assert with_tuning_model_dir(decoded, "job-1")["model_dir"] == container._model_dir_with_training_job(
            model_dir, "job-1")
        assert with_tuning_model_dir({"model_dir": model_dir}, "job-1")["model_dir"] == model_dir  # not tuning


ORACLE_WARNING = """
import logging, sys
logging.basicConfig(stream=sys.stdout, format="%(message)s")
from sagemaker_tensorflow_container import training
training._log_model_missing_warning(sys.argv[1])
"""


def test_a_job_that_saved_no_model_is_warned_in_the_tensorflow_containers_words(tmp_path: Path) -> None:
    """sagemaker-tensorflow-training's warning, from its own function on the same empty folder; none where the
    program saved a file."""
    import subprocess
    import sys

    quiet = make_tree(tmp_path / "quiet")
    quiet.write_program("train.py", "print('trained')\n")
    done = run_train(quiet, env=quiet.env(SM_SYSTEM_MONITOR="off"))
    assert done.returncode == 0, done.stderr.decode()
    oracle = subprocess.run([sys.executable, "-c", ORACLE_WARNING, str(quiet.base / "model")], capture_output=True,
                            text=True, timeout=60, env={"SAGEMAKER_BASE_DIR": str(tmp_path / "oracle"), "PATH": "/usr/bin:/bin"})
    words = oracle.stdout.splitlines()
    assert words and words[0].startswith("No model artifact is saved under path"), oracle.stderr[-2000:]
    ours = [line.removeprefix("[train] ") for line in done.stderr.decode().splitlines()]
    assert [line for line in ours if line in words] == words
    saved = make_tree(tmp_path / "saved")
    saved.write_program("train.py", "import os\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'm.txt'), 'w')\n")
    done = run_train(saved, env=saved.env(SM_SYSTEM_MONITOR="off"))
    assert done.returncode == 0 and b"No model artifact" not in done.stderr, done.stderr.decode()
