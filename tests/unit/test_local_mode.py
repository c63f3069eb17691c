"""What the SDKs' local mode and SDK v3's ModelTrainer hand the container, planned (pure: real config
files in a tmp tree, no process): which File channels are streamed as Pipe mode and how (the local
feeder, one FIFO per rank under Horovod), and the program and MPI settings ModelTrainer's driver
files describe."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smtrain.config.load import load_config
from smtrain.errors import ConfigError
from smtrain.plan.helper_plan import FEEDER
from smtrain.plan.localmode import emulated_channels
from smtrain.plan.launch import plan_launch
from smtrain.wire.pipe_assignment import PipeMode
from tests.support import make_tree
from tests.harness.plans import FACTS

FILES = {"train": {"TrainingInputMode": "File"}, "eval": {"TrainingInputMode": "File"}}
LOCAL = {"current_instance_type": "local"}
MPI = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"}


def _config(tmp_path: Path, channels=FILES, resource_extra=None, hyperparameters=None, **env: str):
    tree = make_tree(tmp_path, channels=channels, resource_extra=resource_extra, hyperparameters=hyperparameters)
    return load_config(tree.env(**env))


@pytest.mark.parametrize("instance_type", ["local", "local_cpu", "local_gpu"])
def test_local_mode_streams_every_file_channel_as_pipe_mode(tmp_path: Path, instance_type: str) -> None:
    config = _config(tmp_path, resource_extra={"current_instance_type": instance_type}, hyperparameters=MPI)
    plan = plan_launch(config, FACTS, "/venv/bin/python")
    assert plan.emulated == ("train", "eval")
    data = tmp_path / "input" / "data"
    feeder = plan.helper(FEEDER)
    assert feeder is not None and feeder.argv == (
        "/venv/bin/python", "-m", "smtrain.data.feeder", "--base", str(tmp_path), "--emulate",
        "--source", f"train={data / 'train'}", "--source", f"eval={data / 'eval'}")
    assert {(p.channel, p.mode) for p in plan.pipes} == {("train", PipeMode.DEMUX), ("eval", PipeMode.DEMUX)}
    assert len(plan.demux) == 2  # one FIFO per rank, as in a real job
    assert plan.env_set.get("SM_CHANNEL_TRAIN") == str(data / "train")  # the files stay readable


def test_outside_local_mode_nothing_is_emulated_unless_asked(tmp_path: Path) -> None:
    assert emulated_channels(_config(tmp_path / "a", resource_extra={"current_instance_type": "ml.p4d.24xlarge"})) == ()
    assert emulated_channels(_config(tmp_path / "b")) == ()  # a local run without an instance type
    plan = plan_launch(_config(tmp_path / "c"), FACTS, "/venv/bin/python")
    assert plan.helper(FEEDER) is None and plan.pipes == ()
    assert emulated_channels(_config(tmp_path / "d", SM_PIPE_EMULATION="eval")) == ("eval",)
    assert emulated_channels(_config(tmp_path / "e", hyperparameters={"sagemaker_pipe_emulation": '"on"'})) == (
        "train", "eval")
    assert emulated_channels(_config(tmp_path / "f", resource_extra=LOCAL, SM_PIPE_EMULATION="off")) == ()


def test_a_channel_named_for_a_fifo_of_another_and_the_toolkit_channels_are_not_emulated(tmp_path: Path) -> None:
    """AWS's per-rank layout declares `train_0`, `train_1` beside `train`: train's FIFO train_0 would be
    that channel's folder. ModelTrainer's `code` and `sm_drivers` are never data."""
    channels = {n: {"TrainingInputMode": "File"} for n in ("train", "train_0", "train_1", "code", "sm_drivers")}
    assert emulated_channels(_config(tmp_path, channels=channels, resource_extra=LOCAL)) == ("train_0", "train_1")


def test_an_unknown_channel_in_the_setting_is_an_error_naming_it(tmp_path: Path) -> None:
    config = _config(tmp_path, SM_PIPE_EMULATION="train,test")
    with pytest.raises(ConfigError, match=r"SM_PIPE_EMULATION names \['test'\].*File channels: \['train', 'eval'\]"):
        emulated_channels(config)


def _model_trainer(tmp_path: Path, source: dict, distributed: dict, hyperparameters=None) -> Path:
    """A tree as ModelTrainer's local container mode writes it: no sagemaker_program, the drivers' channel."""
    tree = make_tree(tmp_path, hosts=("algo-1", "algo-2"), channels={"code": {"TrainingInputMode": "File"},
                     "sm_drivers": {"TrainingInputMode": "File"}}, resource_extra={"current_instance_type": "local_cpu",
                     "network_interface_name": "ethwe"})
    tree.write_config("hyperparameters.json", hyperparameters or {})
    drivers = tmp_path / "input" / "data" / "sm_drivers"
    drivers.mkdir(parents=True)
    (drivers / "sourcecode.json").write_text(json.dumps(source))
    (drivers / "distributed.json").write_text(json.dumps(distributed))
    return tmp_path


def test_model_trainer_entry_script_and_mpi_become_the_program_and_the_mpi_settings(tmp_path: Path) -> None:
    base = _model_trainer(tmp_path, {"source_dir": "/home/me/src", "entry_script": "train.py", "command": None},
                          {"process_count_per_node": 2, "mpi_additional_options": ["-x", "NCCL_DEBUG=INFO"]},
                          {"epochs": "3", "lr": "0.1"})
    config = load_config({"SAGEMAKER_BASE_DIR": str(base)})
    assert config.model_trainer_mpi is not None and config.model_trainer_mpi.processes_per_host == 2
    assert config.model_trainer_mpi.custom_options == ("-x", "NCCL_DEBUG=INFO")
    plan = plan_launch(config, FACTS, "/venv/bin/python", token="t" * 32)
    code = base / "input" / "data" / "code"
    assert plan.argv[0] == "mpirun" and plan.argv[plan.argv.index("-np") + 1] == "4"
    assert plan.argv[-5:] == (str(code / "train.py"), "--epochs", "3", "--lr", "0.1")
    assert plan.cwd == code
    assert plan.env_set["SM_USER_ENTRY_POINT"] == "train.py" and plan.env_set["SM_MODULE_DIR"] == str(code)


def test_model_trainer_command_runs_in_bash_and_without_distributed_on_each_host(tmp_path: Path) -> None:
    base = _model_trainer(tmp_path, {"source_dir": "/src", "command": "python train.py", "args": ["--name", "a b"]},
                          {}, {"epochs": "3"})
    plan = plan_launch(load_config({"SAGEMAKER_BASE_DIR": str(base)}), FACTS, "/venv/bin/python")
    assert plan.coordination is None
    assert plan.argv == ("/bin/bash", "-c", "python train.py --name 'a b'")  # hyperparameters only in SM_HPS


def test_model_trainer_running_train_itself_keeps_the_hyperparameters_program(tmp_path: Path) -> None:
    base = _model_trainer(tmp_path, {"command": "train"}, {}, {"sagemaker_program": '"job.py"'})
    assert load_config({"SAGEMAKER_BASE_DIR": str(base)}).program.entry_point == "job.py"


@pytest.mark.parametrize("distributed,error", [
    ({"process_count_per_node": 2, "smp": None}, r"distributed=\['process_count_per_node', 'smp'\] is not MPI"),
    ({"process_count_per_node": 0, "mpi_additional_options": None}, "process_count_per_node must be a positive"),
])
def test_model_trainer_distributions_the_image_cannot_serve_are_config_errors(tmp_path: Path, distributed: dict,
                                                                              error: str) -> None:
    base = _model_trainer(tmp_path, {"entry_script": "train.py"}, distributed)
    with pytest.raises(ConfigError, match=error):
        load_config({"SAGEMAKER_BASE_DIR": str(base)})


def test_model_trainer_with_a_strategy_hyperparameter_runs_multi_worker_mirrored(tmp_path: Path) -> None:
    """TF strategies need one line with ModelTrainer: the v2 SDK's distribution hyperparameter."""
    base = _model_trainer(tmp_path, {"source_dir": "/src", "entry_script": "train.py"}, {},
                          {"sagemaker_multi_worker_mirrored_strategy_enabled": "true", "epochs": "2"})
    plan = plan_launch(load_config({"SAGEMAKER_BASE_DIR": str(base)}), FACTS, "/venv/bin/python")
    assert plan.distribution == "multi-worker-mirrored" and plan.coordination is not None
    assert json.loads(plan.env_set["TF_CONFIG"])["cluster"]["worker"] == ["algo-1:8890", "algo-2:8890"]
    assert plan.argv[-2:] == ("--epochs", "2")  # the strategy's flag is no argument
