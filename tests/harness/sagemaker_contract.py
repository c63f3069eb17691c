"""What SageMaker makes of a CreateTrainingJob request on each host, from its documented container
contract (AWS's developer guide, "How Amazon SageMaker Provides Training Information"; the facts are
listed in DESIGN.md): pure functions from the request, as the SDK sent it, to each host's
`/opt/ml/input/config/*.json`, its environment, its share of each channel's objects, and the metrics
the request's MetricDefinitions find in the job's log. The effects (S3, containers, FIFOs, stops) are
in tests/harness/sagemaker.py."""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

HOMOGENEOUS = "homogeneousCluster"  # the group name SageMaker gives a job without instance groups


class Channel(NamedTuple):
    name: str
    mode: str  # File | Pipe | FastFile: the channel's own InputMode, else the job's TrainingInputMode
    s3_uri: str
    distribution: str  # FullyReplicated | ShardedByS3Key


def channels(request: Mapping[str, Any]) -> list[Channel]:
    job_mode = request["AlgorithmSpecification"].get("TrainingInputMode", "File")
    found = []
    for entry in request.get("InputDataConfig", []):
        source = entry["DataSource"]["S3DataSource"]
        if source.get("S3DataType", "S3Prefix") != "S3Prefix":
            raise NotImplementedError(f"the stand-in reads S3Prefix channels only, not {source['S3DataType']}")
        found.append(Channel(entry["ChannelName"], entry.get("InputMode", job_mode), source["S3Uri"],
                             source.get("S3DataDistributionType", "FullyReplicated")))
    return found


def hosts_by_group(request: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(group name, instance type, its hosts) in order; hosts are algo-1..N across the groups."""
    resources = request["ResourceConfig"]
    groups = resources.get("InstanceGroups") or [
        {"InstanceGroupName": HOMOGENEOUS, "InstanceType": resources["InstanceType"],
         "InstanceCount": resources["InstanceCount"]}]
    laid, first = [], 1
    for group in groups:
        count = group["InstanceCount"]
        laid.append((group["InstanceGroupName"], group["InstanceType"],
                     [f"algo-{i}" for i in range(first, first + count)]))
        first += count
    return laid


def hosts(request: Mapping[str, Any]) -> list[str]:
    return [host for _, _, members in hosts_by_group(request) for host in members]


def resource_config(request: Mapping[str, Any], host: str) -> dict[str, Any]:
    groups = hosts_by_group(request)
    own = next((name, kind) for name, kind, members in groups if host in members)
    return {"current_host": host, "current_instance_type": own[1], "current_group_name": own[0],
            "hosts": hosts(request), "network_interface_name": "eth0",
            "instance_groups": [{"instance_group_name": name, "instance_type": kind, "hosts": members}
                                for name, kind, members in groups]}


def input_data_config(request: Mapping[str, Any]) -> dict[str, Any]:
    config = {}
    for entry, channel in zip(request.get("InputDataConfig", []), channels(request)):
        described = {"TrainingInputMode": channel.mode, "S3DistributionType": channel.distribution,
                     "RecordWrapperType": entry.get("RecordWrapperType", "None")}
        for optional in ("ContentType", "CompressionType", "ShuffleConfig"):
            if optional in entry:
                described[optional] = entry[optional]
        config[channel.name] = described
    return config


def config_files(request: Mapping[str, Any], host: str) -> dict[str, Any]:
    """Each file of `/opt/ml/input/config/` on `host`, by name: the hyperparameters as the request's
    strings exactly, checkpointconfig.json with LocalPath alone, the whole request as trainingjobconfig.json."""
    files = {"hyperparameters.json": dict(request.get("HyperParameters", {})),
             "inputdataconfig.json": input_data_config(request),
             "resourceconfig.json": resource_config(request, host),
             "trainingjobconfig.json": dict(request)}
    if "CheckpointConfig" in request:
        files["checkpointconfig.json"] = {"LocalPath": checkpoint_path(request)}
    return files


def checkpoint_path(request: Mapping[str, Any]) -> str:
    return request.get("CheckpointConfig", {}).get("LocalPath", "/opt/ml/checkpoints")


def environment(request: Mapping[str, Any], region: str = "us-east-1") -> dict[str, str]:
    """The container's environment: the request's Environment and the job's name, ARN and region (the
    role's credentials, which SageMaker serves at AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, are the
    stand-in's to give)."""
    name = request["TrainingJobName"]
    account = request["RoleArn"].split(":")[4]
    return {**request.get("Environment", {}), "TRAINING_JOB_NAME": name, "AWS_REGION": region,
            "TRAINING_JOB_ARN": f"arn:aws:sagemaker:{region}:{account}:training-job/{name.lower()}"}


def command(request: Mapping[str, Any]) -> tuple[Sequence[str], Sequence[str]]:
    """(entrypoint, arguments) the container starts with: the request's ContainerEntrypoint and
    ContainerArguments where given, else the image's entrypoint with the argument `train`."""
    algorithm = request["AlgorithmSpecification"]
    return algorithm.get("ContainerEntrypoint", []), algorithm.get("ContainerArguments", ["train"])


def share(keys: Iterable[str], distribution: str, host_index: int, num_hosts: int) -> list[str]:
    """The objects a host gets: all of them (FullyReplicated), or every num_hosts-th in key order
    starting at its own index (ShardedByS3Key)."""
    ordered = sorted(keys)
    if distribution == "FullyReplicated":
        return ordered
    if distribution == "ShardedByS3Key":
        return ordered[host_index::num_hosts]
    raise ValueError(f"S3DataDistributionType {distribution!r}: FullyReplicated or ShardedByS3Key expected")


def metrics(request: Mapping[str, Any], lines: Iterable[str]) -> dict[str, list[float]]:
    """Each MetricDefinition's values, in log order: its regex's first group on every line it matches."""
    definitions = request["AlgorithmSpecification"].get("MetricDefinitions", [])
    found: dict[str, list[float]] = {d["Name"]: [] for d in definitions}
    compiled = [(d["Name"], re.compile(d["Regex"])) for d in definitions]
    for line in lines:
        for name, regex in compiled:
            match = regex.search(line)
            if match:
                found[name].append(float(match.group(1)))
    return found
