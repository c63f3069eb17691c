"""What SageMaker makes of a CreateTrainingJob request on each host, from its documented container
contract (AWS's developer guide, "How Amazon SageMaker Provides Training Information" and "How Amazon
SageMaker Runs Your Training Image"; the API reference's Channel, AlgorithmSpecification and
StoppingCondition; the facts are listed in DESIGN.md and docs/design.md): pure functions from the request,
as the SDK sent it, to each host's `/opt/ml/input/config/*.json`, its environment, its share of each
channel's objects epoch by epoch (shuffled, decompressed and wrapped as the channel asks), the command
the container starts with, the failure reason and the metrics the request's MetricDefinitions find in
the job's log. The effects (S3, containers, FIFOs, stops) are in tests/harness/sagemaker.py."""
from __future__ import annotations

import gzip
import random
import re
import struct
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence

HOMOGENEOUS = "homogeneousCluster"  # the group name SageMaker gives a job without instance groups
NETWORK_INTERFACE = "eth1"  # the interface the stand-in's hosts reach each other on (the guide's own example)
FAILURE_REASON_CHARS = 1024  # "the first 1024 characters ... returned as FailureReason"
STOP_GRACE_S = 120  # SIGTERM, then SIGKILL this long after (a stop, a spot interruption, MaxRuntimeInSeconds)


class Channel(NamedTuple):
    name: str
    mode: str  # File | Pipe | FastFile: the channel's own InputMode, else the job's TrainingInputMode
    s3_uri: str
    distribution: str  # FullyReplicated | ShardedByS3Key
    seed: Optional[int] = None  # ShuffleConfig's Seed
    compression: str = "None"  # None | Gzip (Pipe mode only)
    wrapper: str = "None"  # None | RecordIO: each object wrapped in a RecordIO record (Pipe mode)


def channels(request: Mapping[str, Any]) -> list[Channel]:
    job_mode = request["AlgorithmSpecification"].get("TrainingInputMode", "File")
    found = []
    for entry in request.get("InputDataConfig", []):
        source = entry["DataSource"]["S3DataSource"]
        if source.get("S3DataType", "S3Prefix") != "S3Prefix":
            raise NotImplementedError(f"the stand-in reads S3Prefix channels only, not {source['S3DataType']}")
        found.append(Channel(entry["ChannelName"], entry.get("InputMode", job_mode), source["S3Uri"],
                             source.get("S3DataDistributionType", "FullyReplicated"),
                             entry.get("ShuffleConfig", {}).get("Seed"), entry.get("CompressionType", "None"),
                             entry.get("RecordWrapperType", "None")))
    return found


def hosts_by_group(request: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(group name, instance type, its hosts) in order; hosts are algo-1..N across the groups, each group's
    in number order (the guide says nothing of their order there, which is not lexicographic in files
    from real jobs)."""
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
    """Every host of the job, "sorted lexicographically" as the guide says resourceconfig.json lists them
    (algo-10 before algo-2)."""
    return sorted(host for _, _, members in hosts_by_group(request) for host in members)


def resource_config(request: Mapping[str, Any], host: str) -> dict[str, Any]:
    groups = hosts_by_group(request)
    own = next((name, kind) for name, kind, members in groups if host in members)
    return {"current_host": host, "current_instance_type": own[1], "current_group_name": own[0],
            "hosts": hosts(request), "network_interface_name": NETWORK_INTERFACE,
            "instance_groups": [{"instance_group_name": name, "instance_type": kind, "hosts": members}
                                for name, kind, members in groups]}


def input_data_config(request: Mapping[str, Any]) -> dict[str, Any]:
    """Each channel as inputdataconfig.json describes it; a FastFile channel's TrainingInputMode is written
    as "File" (the guide: "TrainingInputMode parameter written to inputdataconfig.json: "File"")."""
    config = {}
    for entry, channel in zip(request.get("InputDataConfig", []), channels(request)):
        mode = "File" if channel.mode == "FastFile" else channel.mode
        described = {"TrainingInputMode": mode, "S3DistributionType": channel.distribution,
                     "RecordWrapperType": entry.get("RecordWrapperType", "None")}
        for optional in ("ContentType", "CompressionType", "ShuffleConfig"):
            if optional in entry:
                described[optional] = entry[optional]
        config[channel.name] = described
    return config


def config_files(request: Mapping[str, Any], host: str) -> dict[str, Any]:
    """Each file of `/opt/ml/input/config/` on `host`, by name: the hyperparameters as the request's
    strings exactly, checkpointconfig.json with LocalPath alone, profilerconfig.json as the request's
    ProfilerConfig (SDK v2 sends one by default), the whole request as trainingjobconfig.json."""
    files = {"hyperparameters.json": dict(request.get("HyperParameters", {})),
             "inputdataconfig.json": input_data_config(request),
             "resourceconfig.json": resource_config(request, host),
             "trainingjobconfig.json": dict(request)}
    if "CheckpointConfig" in request:
        files["checkpointconfig.json"] = {"LocalPath": checkpoint_path(request)}
    if "ProfilerConfig" in request:
        files["profilerconfig.json"] = dict(request["ProfilerConfig"])
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
    """(entrypoint, arguments) the container starts with: `docker run image train` by default; a
    ContainerEntrypoint "takes precedence over the default train processing instructions", with the
    ContainerArguments alone (none where the request gives none)."""
    algorithm = request["AlgorithmSpecification"]
    if "ContainerEntrypoint" in algorithm:
        return algorithm["ContainerEntrypoint"], algorithm.get("ContainerArguments", [])
    return [], algorithm.get("ContainerArguments", ["train"])


def share(keys: Iterable[str], distribution: str, host_index: int, num_hosts: int, seed: Optional[int] = None,
          epoch: int = 0) -> list[str]:
    """The objects a host gets in an epoch: all of them (FullyReplicated), or every num_hosts-th starting
    at its own index (ShardedByS3Key), in key order - or, with a ShuffleConfig seed, in an order shuffled
    anew each epoch before the objects are dealt to the hosts ("For Pipe input mode, shuffling is done at
    the start of every epoch"; combined with ShardedByS3Key "the content sent to a particular node on the
    first epoch might be sent to a different node on the second epoch")."""
    ordered = sorted(keys)
    if seed is not None:
        random.Random(f"{seed}:{epoch}").shuffle(ordered)
    if distribution == "FullyReplicated":
        return ordered
    if distribution == "ShardedByS3Key":
        return ordered[host_index::num_hosts]
    raise ValueError(f"S3DataDistributionType {distribution!r}: FullyReplicated or ShardedByS3Key expected")


RECORDIO_MAGIC = 0xCED7230A


def pipe_record(data: bytes, channel: Channel) -> bytes:
    """An object as a Pipe channel streams it: decompressed where CompressionType is Gzip, then wrapped in one
    RecordIO record where RecordWrapperType is RecordIO (magic, length, the data padded to 4 bytes)."""
    if channel.compression == "Gzip":
        data = gzip.decompress(data)
    if channel.wrapper == "RecordIO":
        if struct.pack("<I", RECORDIO_MAGIC) in data:
            raise NotImplementedError("the stand-in wraps objects whose data holds no RecordIO magic")
        data = struct.pack("<II", RECORDIO_MAGIC, len(data)) + data + b"\0" * (-len(data) % 4)
    return data


def artifact_files(folders: Sequence[Path]) -> dict[str, Path]:
    """What model.tar.gz (or output.tar.gz) holds, by path: every host's folder (`folders`, in the hosts'
    order) merged, a later host's file replacing an earlier one's of the same path - SageMaker's, as the
    SDK's local mode documents it ("As the official SageMaker Training Service, it will override duplicate
    files if multiple containers have the same file names": sagemaker.local.image.retrieve_artifacts)."""
    files: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file():
                files[path.relative_to(folder).as_posix()] = path
    return files


def failure_reason(failure_file_text: Optional[str]) -> Optional[str]:
    """What DescribeTrainingJob shows as FailureReason: the first 1024 characters of output/failure."""
    return failure_file_text[:FAILURE_REASON_CHARS] if failure_file_text else None


def max_runtime_s(request: Mapping[str, Any]) -> Optional[float]:
    """StoppingCondition's MaxRuntimeInSeconds, where given: "When the job reaches the time limit, SageMaker
    ends the training job" with SIGTERM, and SIGKILL 120 s later."""
    value = request.get("StoppingCondition", {}).get("MaxRuntimeInSeconds")
    return float(value) if value is not None else None


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
