"""The program gets the same SM_* environment and arguments from `train` as from sagemaker-training 5.1.4.

The oracle is sagemaker-training's real `train`, run on the same tree with the same program; both
runs record what the program saw. Deliberate differences (docs/design.md, "Differences from
sagemaker-training") are excluded by name here and asserted separately.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import OWN_VARIABLES, TF_ERROR_NAMES, make_tree, require_root, run_oracle, run_train

DUMP_PROGRAM = Path(__file__).parent.parent / "programs" / "dump_env.py"
# Plain variables sagemaker-training sets besides SM_*.
PLAIN_VARIABLES = ("CURRENT_HOST", "SAGEMAKER_JOB_NAME", "SAGEMAKER_REGION")

CASES = {
    "single-host-numbers": dict(hyperparameters={"epochs": "3", "lr": "0.001", "batch-size": "64"}),
    "three-hosts-second": dict(hosts=("algo-1", "algo-2", "algo-3"), current_host="algo-2",
                               hyperparameters={"epochs": "2"}),
    "sdk-local-mode-names": dict(hosts=("algo-1-ab3x9", "algo-2-ab3x9", "algo-3-ab3x9"), current_host="algo-3-ab3x9",
                                 hyperparameters={"model_dir": '"/opt/ml/model"'}),
    "json-types": dict(hyperparameters={
        "flag": "true", "off": "false", "none": "null", "layers": "[64, 32, 16]",
        "opt": '{"name": "adam", "beta": 0.9, "nested": {"a": [1, 2]}}', "ratio": "1e-3", "name": '"resnet"'}),
    "hyphens-and-one-letter": dict(hyperparameters={"learning-rate": "0.1", "x": "1", "warm-up-steps": "100",
                                                    "use_xla": '"yes"'}),
    "not-json-strings": dict(hyperparameters={"mode": "train", "path": "s3://bucket/key", "empty": "",
                                              "text": "héllo wörld", "quoted": '"a b c"', "glob": '"*.py [x]"'}),
    "file-and-pipe-channels": dict(channels={
        "train": {"TrainingInputMode": "Pipe", "ContentType": "application/x-tfrecord", "S3DistributionType":
                  "ShardedByS3Key", "RecordWrapperType": "None", "ShuffleConfig": {"Seed": 7}},
        "validation": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
        "test-set": {"TrainingInputMode": "FastFile"}}),
    "toolkit-hyperparameters": dict(hyperparameters={
        "sagemaker_job_name": '"job-123"', "sagemaker_region": '"eu-west-1"', "sagemaker_container_log_level": "30",
        "sagemaker_submit_directory": '"@CODE@"', "sagemaker_distributed_dataparallel_enabled": "false",
        "sagemaker_custom_flag": '"x"', "_tuning_objective_metric": '"loss"', "epochs": "1"}),
    "instance-groups": dict(hosts=("algo-1", "algo-2"), current_host="algo-2", resource_extra={
        "current_group_name": "train-group", "current_instance_type": "ml.c5.xlarge",
        "network_interface_name": "eth0",
        "instance_groups": [{"instance_group_name": "train-group", "instance_type": "ml.c5.xlarge",
                             "hosts": ["algo-2"]},
                            {"instance_group_name": "data-group", "instance_type": "ml.m5.xlarge", "hosts": ["algo-1"]}]},
        hyperparameters={"sagemaker_distribution_instance_groups": '["train-group"]'}),
    "gpu-instance-ethwe": dict(hosts=("algo-1", "algo-2"), resource_extra={
        "current_instance_type": "ml.p4d.24xlarge", "network_interface_name": "ethwe"},
        hyperparameters={"epochs": "10"}),
    "program-from-env": dict(env={"SAGEMAKER_PROGRAM": "train.py", "TRAINING_JOB_NAME": "tj-1",
                                  "AWS_DEFAULT_REGION": "us-east-2", "SAGEMAKER_TRAINING_MODULE": ""},
                             hyperparameters={"a": "1"}),
    # GB200 UltraServer clusters: resourceconfig.json's topology, host by host (SM_TOPOLOGY, sagemaker-training 5.1)
    "ultraserver-topology": dict(hosts=("algo-1", "algo-2", "algo-3"), current_host="algo-2", resource_extra={
        "current_instance_type": "ml.p6e-gb200.36xlarge",
        "topology": [{"hostName": "algo-1", "capacityUnitId": "cu-1"}, {"hostName": "algo-2", "capacityUnitId": "cu-1"},
                     {"hostName": "algo-3", "capacityUnitId": "cu-2"}]}, hyperparameters={"epochs": "1"}),
    "model-parallel-env": dict(env={"SM_HP_MP_PARAMETERS": '{"partitions": 2}'}, hyperparameters={"b": '"2"'}),
}


def _recorded(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_program_sees_what_sagemaker_training_gives(tmp_path: Path, case: str) -> None:
    require_root()
    spec = dict(CASES[case])
    env_extra = spec.pop("env", {})
    code_dir = str(tmp_path / "ml" / "code")
    spec["hyperparameters"] = {k: v.replace("@CODE@", code_dir) for k, v in spec.get("hyperparameters", {}).items()}
    tree = make_tree(tmp_path / "ml", **spec)
    shutil.copy(DUMP_PROGRAM, tree.code_dir / "train.py")
    ours_file, oracle_file = tmp_path / "ours.json", tmp_path / "oracle.json"

    done = run_train(tree, env=tree.env(DUMP_TO=str(ours_file), **env_extra))
    assert done.returncode == 0, done.stderr.decode()
    hosts = spec.get("hosts", ("algo-1",))
    oracle = run_oracle(tree, tree.env(DUMP_TO=str(oracle_file), **env_extra), hosts)
    assert oracle.returncode == 0, oracle.stderr.decode()[-3000:]
    ours, theirs = _recorded(ours_file), _recorded(oracle_file)

    def sm_vars(env: dict) -> dict:
        return {k: v for k, v in env.items() if k.startswith("SM_") and not k.startswith(OWN_VARIABLES)}

    # The inherited SM_HP_MP_PARAMETERS passes through both; everything else is computed.
    assert sm_vars(ours["env"]) == sm_vars(theirs["env"])
    assert len(sm_vars(ours["env"])) >= 30
    for name in PLAIN_VARIABLES:
        assert ours["env"].get(name) == theirs["env"].get(name), name
    # The program's folder comes first on PYTHONPATH in both.
    assert ours["env"]["PYTHONPATH"].split(":")[0] == theirs["env"]["PYTHONPATH"].split(":")[0]
    assert ours["argv"] == theirs["argv"] == json.loads(theirs["env"]["SM_USER_ARGS"])
    assert ours["cwd"] == theirs["cwd"]


def test_the_quick_oracle_names_the_tensorflow_errors_the_real_one_names() -> None:
    """The oracle is given the names of TensorFlow's error classes read from their source (ORACLE in tests/support.py),
    so that it does not import TensorFlow in every case: the same list it makes by importing it."""
    code = TF_ERROR_NAMES + ("from sagemaker_training import process\n"
                             "print(tensorflow_error_names() == process.get_tensorflow_exception_classes(), "
                             "len(tensorflow_error_names()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["True", "21"], (done.stdout, done.stderr[-2000:])


# A heterogeneous cluster as AWS documents it: a CPU `data` group feeding a GPU-sized `train` group, with
# `distribution={"mpi": {...}, "instance_groups": [train_group]}` (the SDK writes the last as the hyperparameter).
HETERO_HOSTS = ("algo-1", "algo-2", "algo-3")
HETERO_GROUPS = [{"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1"]},
                 {"instance_group_name": "train", "instance_type": "ml.c5.4xlarge", "hosts": ["algo-2", "algo-3"]}]
HETERO_MPI = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
              "sagemaker_distribution_instance_groups": '["train"]', "epochs": "1"}
ORACLE_SHAPE = Path(__file__).parent.parent / "programs" / "oracle_shape.py"


def _hosts_of(argv: list[str], master: str) -> tuple[list[str], str]:
    """mpirun's --host list (this toolkit names the master `localhost`) and -np."""
    hosts = [h.replace("localhost", master, 1) if h.startswith("localhost") else h
             for h in argv[argv.index("--host") + 1].split(",")]
    return hosts, argv[argv.index("-np") + 1]


@pytest.mark.parametrize("host", HETERO_HOSTS)
def test_a_heterogeneous_mpi_job_runs_on_the_distributions_hosts_as_sagemaker_training_decides(tmp_path: Path,
                                                                                                host: str) -> None:
    group = next(g for g in HETERO_GROUPS if host in g["hosts"])
    tree = make_tree(tmp_path / "ml", hosts=HETERO_HOSTS, current_host=host, hyperparameters=HETERO_MPI, resource_extra={
        "current_group_name": group["instance_group_name"], "current_instance_type": group["instance_type"],
        "network_interface_name": "eth0", "instance_groups": HETERO_GROUPS})
    shutil.copy(DUMP_PROGRAM, tree.code_dir / "train.py")
    done = run_train(tree, "--dry-run", env=tree.env())
    assert done.returncode == 0, done.stderr.decode()
    ours = json.loads(done.stdout)
    oracle = subprocess.run([sys.executable, str(ORACLE_SHAPE)], env=tree.env(), capture_output=True, text=True,
                            timeout=120, cwd=tree.base)
    assert oracle.returncode == 0, oracle.stderr[-3000:]
    theirs = json.loads(oracle.stdout.strip().splitlines()[-1])

    role = {"MasterRunner": "master", "WorkerRunner": "worker", "ProcessRunner": "single"}[theirs["runner"]]
    assert (ours["role"], ours["distribution"]) == (role, "single" if role == "single" else "mpi")
    assert ours["shape"]["master"] == theirs["master"] == "algo-2"
    assert ours["shape"]["hosts"] == theirs["distribution_hosts"] == ["algo-2", "algo-3"]
    if role == "master":  # mpirun over the train group's hosts only, 2 processes each
        assert _hosts_of(ours["argv"], "algo-2") == _hosts_of(theirs["command"], "algo-2") == (
            ["algo-2:2", "algo-3:2"], "4")
        assert ours["coordination"]["workers"] == ["algo-3"]  # the master waits for, and watches, algo-3 only
    elif role == "worker":
        assert ours["coordination"]["master"] == "algo-2" and ours["coordination"]["starter"]["sshd"]
    else:  # the data host runs its program on its own
        assert ours["coordination"] is None and ours["argv"][-3:] == [str(tree.code_dir / "train.py"), "--epochs", "1"]
    sm = {k: v for k, v in ours["env"].items() if k.startswith("SM_") and not k.startswith(OWN_VARIABLES)}
    assert sm == {k: v for k, v in theirs["env"].items() if k.startswith("SM_")} and len(sm) >= 30


def test_own_variables(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", channels={"train": {"TrainingInputMode": "pipe"},
                                                "eval": {"TrainingInputMode": "File"}})
    shutil.copy(DUMP_PROGRAM, tree.code_dir / "train.py")
    tree.write_config("checkpointconfig.json", {"LocalPath": str(tmp_path / "ckpt")})
    tree.write_config("tensorboardoutputconfig.json", {"LocalPath": str(tmp_path / "tb")})
    out = tmp_path / "ours.json"
    assert run_train(tree, env=tree.env(DUMP_TO=str(out))).returncode == 0
    env = _recorded(out)["env"]
    assert env["SM_CHECKPOINT_DIR"] == str(tmp_path / "ckpt")
    assert env["SM_TENSORBOARD_DIR"] == str(tmp_path / "tb") and (tmp_path / "tb").is_dir()
    assert env["SM_PIPE_TRAIN"] == str(tree.base / "input" / "data" / "train")
    assert "SM_PIPE_EVAL" not in env
    assert env["SM_PROGRESS_FILE"].startswith("/dev/shm/smtrain-progress-") and env["PYTHONFAULTHANDLER"] == "1"
    assert not Path(env["SM_PROGRESS_FILE"]).exists()  # removed when the program ended
