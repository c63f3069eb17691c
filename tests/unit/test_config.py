"""Config: SM_* overrides for local use, defaults, role planning; real files in a tmp tree."""
import json
from pathlib import Path

import pytest

from smtrain.config.load import load_config
from smtrain.config.model import InputMode
from smtrain.config.settings import GRACE_PERIOD
from smtrain.errors import ConfigError
from smtrain.config.hostfacts import HostFacts
from smtrain.plan.mpirun_command import NetworkFacts
from smtrain.plan.launch import Role, plan_launch
from tests.support import make_tree

FACTS = HostFacts(num_cpus=4, num_gpus=0, num_neurons=0, smddprun_installed=False, smddpmprun_installed=False,
                  network=NetworkFacts(("eth0", "lo"), "eth0", efa_present=False))


def test_env_overrides_stand_in_for_files(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, hosts=("algo-1",))
    env = tree.env(SM_HOSTS='["a", "b"]', SM_CURRENT_HOST="b", SM_CHECKPOINT_DIR="/ck", SM_GRACE_PERIOD_SECONDS="5")
    config = load_config(env)
    assert config.resources.hosts == ("a", "b") and config.resources.current_host == "b"
    assert config.checkpoint_dir == Path("/ck") and config.settings[GRACE_PERIOD] == 5.0


def test_checkpointconfig_wins_over_env(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    tree.write_config("checkpointconfig.json", {"LocalPath": "/from/file"})
    assert load_config(tree.env(SM_CHECKPOINT_DIR="/env")).checkpoint_dir == Path("/from/file")


def test_missing_files_mean_a_local_single_host_job(tmp_path: Path) -> None:
    config = load_config({"SAGEMAKER_BASE_DIR": str(tmp_path), "SAGEMAKER_PROGRAM": "t.py"})
    assert len(config.resources.hosts) == 1 and config.channels == ()
    assert config.checkpoint_dir == tmp_path / "checkpoints"


def test_channel_modes_any_case(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, channels={"a": {"TrainingInputMode": "PIPE"}, "b": {}})
    config = load_config(tree.env())
    assert [c.mode for c in config.channels] == [InputMode.PIPE, InputMode.FILE]


def test_several_hosts_without_mpi_each_run_their_own_copy(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, hosts=("algo-1", "algo-2"), current_host="algo-2")
    plan = plan_launch(load_config(tree.env()), FACTS, "/usr/bin/python3")
    assert plan.role is Role.SINGLE and plan.host == "algo-2"
    assert plan.env_set["SM_CURRENT_HOST"] == "algo-2" and json.loads(plan.env_set["SM_HOSTS"]) == ["algo-1", "algo-2"]


def test_bad_env_override(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    with pytest.raises(ConfigError, match="SM_HOSTS"):
        load_config(tree.env(SM_HOSTS="[not json"))


GROUPS = {"current_group_name": "train", "instance_groups": [
    {"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1"]},
    {"instance_group_name": "train", "instance_type": "ml.c5.xlarge", "hosts": ["algo-2", "algo-3"]}]}


@pytest.mark.parametrize("value,expected", [('["trian"]', "names instance group.s. trian, which resourceconfig.json "
                                                          "does not have .it has data, train."),
                                            ('"train"', "expected a JSON list of instance group names")])
def test_a_bad_distribution_instance_group_is_named(tmp_path: Path, value: str, expected: str) -> None:
    tree = make_tree(tmp_path, hosts=("algo-1", "algo-2", "algo-3"), current_host="algo-2", resource_extra=GROUPS,
                     hyperparameters={"sagemaker_mpi_enabled": "true", "sagemaker_distribution_instance_groups": value})
    with pytest.raises(ConfigError, match=f"hyperparameters.json: hyperparameter 'sagemaker_distribution_instance_groups'.*{expected}"):
        load_config(tree.env())


@pytest.mark.parametrize("spec,hyperparameters,expected", [
    ({"TrainingInputMode": "Pipe"}, {}, "tfrecord"),
    ({"TrainingInputMode": "Pipe", "RecordWrapperType": "RecordIO"}, {}, "recordio"),
    ({"TrainingInputMode": "Pipe", "RecordWrapperType": "None", "ContentType": "application/x-recordio"}, {}, "recordio"),
    ({"TrainingInputMode": "Pipe", "RecordWrapperType": "RecordIO"}, {"sagemaker_pipe_record_format": '"lines"'}, "lines"),
], ids=["default", "wrapped-by-sagemaker", "content-type", "hyperparameter-wins"])
def test_a_pipe_channels_record_format(tmp_path: Path, spec: dict, hyperparameters: dict, expected: str) -> None:
    """SageMaker wraps each object of a RecordWrapperType=RecordIO channel in a RecordIO record: the channel reads
    as RecordIO unless the job names another format."""
    tree = make_tree(tmp_path, channels={"train": spec}, hyperparameters=hyperparameters)
    channel = load_config(tree.env()).channels[0]
    assert channel.record_format.value == expected
