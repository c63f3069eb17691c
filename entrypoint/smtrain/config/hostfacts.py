"""Facts about this machine that the plan needs, gathered once at the edge and passed in.

Cheap on purpose: `train` must start fast, so GPUs are counted from their device nodes
(`/dev/nvidia0`, ...), which is what a container given GPUs sees, instead of running `nvidia-smi`.
"""
from __future__ import annotations

import os
import re
from typing import Mapping

from .model import CodeFacts, HostFacts, NetworkFacts, TrainingConfig
from .settings import NUM_CPUS, NUM_GPUS, Setting

__all__ = ["gather"]

_GPU_DEVICE = re.compile(r"^nvidia\d+$")


def on_path(name: str, path: str) -> bool:
    """Whether an executable `name` is on `path` (shutil.which without shutil's import cost)."""
    return any(os.access(os.path.join(d, name), os.X_OK) for d in path.split(os.pathsep) if d)


def count_gpus(dev_dir: str = "/dev") -> int:
    try:
        return sum(1 for name in os.listdir(dev_dir) if _GPU_DEVICE.match(name))
    except OSError:
        return 0


def network_facts(sys_net: str = "/sys/class/net", route_table: str = "/proc/net/route",
                  library_path: str = "") -> NetworkFacts:
    try:
        interfaces = tuple(sorted(os.listdir(sys_net)))
    except OSError:
        interfaces = ()
    default = None
    try:
        with open(route_table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if len(fields) > 1 and fields[1] == "00000000":
                    default = fields[0]
                    break
    except OSError:
        pass
    efa = os.path.exists("/dev/infiniband/uverbs0")
    plugin = any(os.path.exists(os.path.join(d, "libnccl-net.so")) for d in library_path.split(os.pathsep) if d)
    return NetworkFacts(interfaces, default, efa, plugin)


def _counted(environ: Mapping[str, str], setting: Setting[int], measured: int) -> int:
    """`measured`, or the count `setting`'s variable stands in with (checked when the config was loaded)."""
    given = setting.raw({}, environ)
    return measured if given is None else setting.type.parse(given)


def code_facts(config: TrainingConfig) -> CodeFacts:
    """Whether the submit directory is a tarball here, and whether a local program has a requirements.txt."""
    local = config.program.local_dir if config.program else None
    if local is None or local.is_file():
        return CodeFacts(submit_is_file=local is not None, has_requirements=False)
    return CodeFacts(submit_is_file=False, has_requirements=(local / "requirements.txt").is_file())


def gather(environ: Mapping[str, str], config: TrainingConfig) -> HostFacts:
    """Measure, then apply the counts a local user may set instead (NUM_CPUS, NUM_GPUS)."""
    instance_type = config.resources.current_instance_type
    return HostFacts(
        num_cpus=_counted(environ, NUM_CPUS, os.cpu_count() or 1),
        num_gpus=_counted(environ, NUM_GPUS, count_gpus()),
        # As sagemaker-training: trn2.48xlarge has 64 Neuron cores; this image has no Neuron SDK otherwise.
        num_neurons=64 if "trn2.48xlarge" in instance_type else 0,
        smddprun_installed=on_path("smddprun", environ.get("PATH", os.defpath)),
        smddpmprun_installed=on_path("smddpmprun", environ.get("PATH", os.defpath)),
        network=network_facts(library_path=environ.get("LD_LIBRARY_PATH", "")),
        code=code_facts(config),
        bindable_cpus=len(os.sched_getaffinity(0)),
        intermediate_exists=config.paths.output_intermediate_dir.exists(),
    )
