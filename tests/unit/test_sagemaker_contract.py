"""The SageMaker stand-in's reading of a CreateTrainingJob request (tests/harness/sagemaker_contract.py)
against SageMaker's documented container contract (DESIGN.md): which mode each channel gets, which
objects each host gets, what each host's resourceconfig.json and environment say, what the metric
definitions find."""
from __future__ import annotations

import pytest

from tests.harness import sagemaker_contract as contract

REQUEST = {
    "TrainingJobName": "job-1", "RoleArn": "arn:aws:iam::123456789012:role/R",
    "AlgorithmSpecification": {"TrainingInputMode": "Pipe", "TrainingImage": "image",
                               "MetricDefinitions": [{"Name": "loss", "Regex": r"\bloss=([-+0-9.eE]+);"}]},
    "HyperParameters": {"epochs": "3", "sagemaker_program": '"train.py"'},
    "InputDataConfig": [
        {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": "s3://b/train", "S3DataType": "S3Prefix",
                                                                 "S3DataDistributionType": "ShardedByS3Key"}}},
        {"ChannelName": "code", "InputMode": "File", "ContentType": "text/plain",
         "DataSource": {"S3DataSource": {"S3Uri": "s3://b/code", "S3DataType": "S3Prefix"}}},
    ],
    "ResourceConfig": {"InstanceCount": 3, "InstanceType": "ml.c5.4xlarge", "VolumeSizeInGB": 30},
    "CheckpointConfig": {"S3Uri": "s3://b/ckpt"},
    "Environment": {"MY_SETTING": "1"},
}


def test_a_channel_s_own_input_mode_wins_over_the_job_s() -> None:
    config = contract.input_data_config(REQUEST)
    assert config["train"] == {"TrainingInputMode": "Pipe", "S3DistributionType": "ShardedByS3Key",
                               "RecordWrapperType": "None"}
    assert config["code"] == {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                              "RecordWrapperType": "None", "ContentType": "text/plain"}


def test_sharded_channels_give_each_host_every_nth_object_and_replicated_ones_all() -> None:
    keys = [f"train/part-{i}" for i in (3, 0, 4, 1, 2)]
    shares = [contract.share(keys, "ShardedByS3Key", i, 3) for i in range(3)]
    assert shares == [["train/part-0", "train/part-3"], ["train/part-1", "train/part-4"], ["train/part-2"]]
    assert contract.share(keys, "FullyReplicated", 2, 3) == sorted(keys)
    with pytest.raises(ValueError, match="ShardedByS3Key expected"):
        contract.share(keys, "Sharded", 0, 3)


def test_each_host_gets_its_resource_config_hyperparameters_as_strings_and_the_checkpoint_path_alone() -> None:
    files = contract.config_files(REQUEST, "algo-2")
    assert files["resourceconfig.json"] == {
        "current_host": "algo-2", "current_instance_type": "ml.c5.4xlarge", "current_group_name": "homogeneousCluster",
        "hosts": ["algo-1", "algo-2", "algo-3"], "network_interface_name": "eth1",
        "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.c5.4xlarge",
                             "hosts": ["algo-1", "algo-2", "algo-3"]}]}
    assert files["hyperparameters.json"] == REQUEST["HyperParameters"]
    assert files["checkpointconfig.json"] == {"LocalPath": "/opt/ml/checkpoints"}


def test_instance_groups_number_hosts_across_the_groups() -> None:
    grouped = {**REQUEST, "ResourceConfig": {"InstanceGroups": [
        {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
        {"InstanceGroupName": "train", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2}]}}
    config = contract.resource_config(grouped, "algo-3")
    assert (config["current_group_name"], config["current_instance_type"]) == ("train", "ml.p4d.24xlarge")
    assert [g["hosts"] for g in config["instance_groups"]] == [["algo-1"], ["algo-2", "algo-3"]]


def test_the_environment_and_the_command_are_the_request_s() -> None:
    env = contract.environment(REQUEST)
    assert env["MY_SETTING"] == "1" and env["TRAINING_JOB_NAME"] == "job-1"
    assert env["TRAINING_JOB_ARN"] == "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-1"
    assert not any(name.startswith("SM_") for name in env)
    assert contract.command(REQUEST) == ([], ["train"])
    overridden = {**REQUEST, "AlgorithmSpecification": {**REQUEST["AlgorithmSpecification"],
                                                        "ContainerEntrypoint": ["/bin/bash"], "ContainerArguments": ["-c", "x"]}}
    assert contract.command(overridden) == (["/bin/bash"], ["-c", "x"])
    bare = {**REQUEST, "AlgorithmSpecification": {**REQUEST["AlgorithmSpecification"], "ContainerEntrypoint": ["train"]}}
    assert contract.command(bare) == (["train"], [])  # the entrypoint takes precedence over `train`: no argument


def test_hosts_are_sorted_lexicographically_and_groups_keep_their_own_order() -> None:
    """The guide: resourceconfig.json's `hosts`, "sorted lexicographically" - algo-10 before algo-2."""
    eleven = {**REQUEST, "ResourceConfig": {"InstanceCount": 11, "InstanceType": "ml.c5.xlarge"}}
    config = contract.resource_config(eleven, "algo-2")
    assert config["hosts"][:4] == ["algo-1", "algo-10", "algo-11", "algo-2"]
    assert config["instance_groups"][0]["hosts"] == [f"algo-{i}" for i in range(1, 12)]


def test_a_fastfile_channel_is_written_as_file() -> None:
    """The guide: FastFile mode's "TrainingInputMode parameter written to inputdataconfig.json: "File"."""
    fast = {**REQUEST, "InputDataConfig": [{**REQUEST["InputDataConfig"][1], "InputMode": "FastFile"}]}
    assert contract.input_data_config(fast)["code"]["TrainingInputMode"] == "File"


def test_a_pipe_channel_is_shuffled_each_epoch_decompressed_and_wrapped() -> None:
    import gzip
    import struct

    keys = [f"train/part-{i:02d}" for i in range(12)]
    epochs = [contract.share(keys, "FullyReplicated", 0, 1, seed=7, epoch=e) for e in range(3)]
    assert all(sorted(e) == keys for e in epochs) and len({tuple(e) for e in epochs}) == 3
    assert contract.share(keys, "FullyReplicated", 0, 1, seed=7, epoch=1) == epochs[1]  # the seed decides
    dealt = [contract.share(keys, "ShardedByS3Key", h, 3, seed=7, epoch=0) for h in range(3)]
    assert sorted(k for share in dealt for k in share) == keys
    channel = contract.Channel("train", "Pipe", "s3://b/train", "FullyReplicated", 7, "Gzip", "RecordIO")
    record = contract.pipe_record(gzip.compress(b"hello"), channel)
    assert record == struct.pack("<II", 0xCED7230A, 5) + b"hello\0\0\0"


def test_max_runtime_and_the_failure_reason() -> None:
    assert contract.max_runtime_s({**REQUEST, "StoppingCondition": {"MaxRuntimeInSeconds": 86400}}) == 86400
    assert contract.max_runtime_s(REQUEST) is None
    assert contract.failure_reason("x" * 2000) == "x" * 1024 and contract.failure_reason(None) is None


def test_metric_definitions_take_their_first_group_from_every_matching_line() -> None:
    lines = ["epoch=0; loss=0.5;", "[train] noise", "epoch=1; loss=2e-3;", "loss=nan;"]
    assert contract.metrics(REQUEST, lines) == {"loss": [0.5, 0.002]}


def test_the_artifacts_merge_every_host_s_folder_a_later_host_s_file_replacing_an_earlier_one_s(tmp_path) -> None:
    for host, files in (("algo-1", {"model.keras": "1", "shared/vocab.txt": "from 1"}),
                        ("algo-2", {"shared/vocab.txt": "from 2", "algo-2.txt": "2"}),
                        ("algo-3", {})):
        for name, text in files.items():
            (tmp_path / host / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / host / name).write_text(text)
    folders = [tmp_path / host for host in ("algo-1", "algo-2", "algo-3")]  # algo-3 wrote no folder at all
    found = {name: path.read_text() for name, path in contract.artifact_files(folders).items()}
    assert found == {"model.keras": "1", "shared/vocab.txt": "from 2", "algo-2.txt": "2"}
