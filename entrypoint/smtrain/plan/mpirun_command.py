"""The `mpirun` command line, as a pure function of the config, the host facts and the environment.

Choices (and why):
- The master's own host is given to Open MPI as `localhost`: in SDK local mode the container's
  hostname is its id, not `algo-1-xxxxx`, and Open MPI must still start the master's ranks locally.
- The interface from `network_interface_name` is used for BTL, OOB, NCCL and Gloo only where it exists;
  otherwise (SDK local mode says `ethwe`, containers have `eth0`) the default-route interface.
- A rank failing aborts the job at once (`orte_abort_on_non_zero_status`, no SIGTERM-to-SIGKILL
  delay): graceful stops go through `train`'s own signal path, not through mpirun's kill.
- On a SageMaker instance without GPUs where each of P ranks can have cores/P CPUs of its own (P >= 2),
  every rank is bound to its own cores/P CPUs (hardware threads, as `os.cpu_count()` counts them and as the rank
  launcher splits TensorFlow's and OpenMP's threads), as plain mpirun binds each rank to a core:
  Horovod's synthetic benchmark (benchmarks/bench_hvd_synthetic.py) needs it to keep up with mpirun. With GPUs, one rank, more ranks
  than CPUs, or outside SageMaker (local mode, `docker run`), nothing is bound. A user `--bind-to` or `--map-by` replaces the whole placement.
- No `--tag-output`: it prefixes every line, which breaks SageMaker metric regexes anchored at `^`.
- The ranks' stdout and stderr do not go through mpirun's forwarding, which cuts lines of two ranks into
  each other: each rank launcher sends them to the master's `train` (smtrain.run.rank_output), unless
  the user's options ask mpirun itself for something of the ranks' output (`mpirun_shapes_output`).
- EFA (`FI_PROVIDER=efa`, and Open MPI's libfabric btl) wherever an EFA device is present, whatever
  the instance type says; device RDMA on the instance types whose EFA has it (EFA_RDMA_INSTANCE_TYPES);
  `NCCL_PROTO=simple` only where NCCL goes over EFA (the image has aws-ofi-nccl) without RDMA
  (out-of-order delivery). Without the plugin NCCL is asked for nothing: it uses sockets.
"""
from __future__ import annotations

import shlex
from typing import Mapping, NamedTuple, Optional, Sequence

from ..config.model import NetworkFacts
from ..config.settings import CURRENT_HOST
from ..wire.ssh_trust import AUTHORIZED_KEYS, HOST_KEY

__all__ = ["EFA_RDMA_INSTANCE_TYPES", "MPI_YIELD", "RANK_IDENTITY", "WAITING_YIELDS", "OUTPUT_OPTIONS", "mpirun_shapes_output", "ssh_port", "NOT_EXPORTED", "NOT_EXPORTED_PREFIXES", "SSHD", "MpiLayout",
    "MpirunCommand", "MpirunSpec", "SshdCommand", "choose_interface", "sshd_command", "cpus_per_rank", "is_exported", "layout", "mpirun_command", "split_nccl_debug"]

SSHD = "/usr/sbin/sshd"
# Who a rank is, as mpirun says it: (the program's variable, Open MPI's) - the rank launcher copies them (wire.contract)
RANK_IDENTITY = (("SM_RANK", "OMPI_COMM_WORLD_RANK"), ("SM_SIZE", "OMPI_COMM_WORLD_SIZE"),
                 ("SM_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"), ("SM_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"))
# Open MPI's: a rank waiting in MPI yields its core (Open MPI does so by itself only where a host has fewer slots
# than ranks); set unless set where a host runs several ranks without GPUs (rank.launcher.cpu_share)
MPI_YIELD = "OMPI_MCA_mpi_yield_when_idle"
WAITING_YIELDS = ((MPI_YIELD, "1"),)


# mpirun's options that shape the ranks' output (Open MPI 4.1's names; one dash or two): a user who asks for
# one gets mpirun's forwarding, with its tags or files, as plain mpirun gives it
OUTPUT_OPTIONS = frozenset({"tag-output", "timestamp-output", "output-filename", "merge-stderr-to-stdout", "xml",
                            "xml-file", "xterm"})


def mpirun_shapes_output(custom_options: Sequence[str]) -> bool:
    """Whether the user's mpirun options ask mpirun for something of the ranks' output (`OUTPUT_OPTIONS`)."""
    return any(option.lstrip("-").partition("=")[0] in OUTPUT_OPTIONS for option in custom_options
               if option.startswith("-"))


def ssh_port(custom_options: Sequence[str]) -> int:
    """The port mpirun's ssh connects to on the workers: ssh's default, 22, unless the user's options give
    `--mca plm_rsh_args` with `-p N` or `-o Port=N`."""
    items = list(custom_options)
    args = next((items[i + 2] for i, item in enumerate(items[:-2]) if _SAME_AS.get(item, item) == "--mca"
                 and items[i + 1] == "plm_rsh_args"), "")
    words = shlex.split(args)
    port = 22
    for i, word in enumerate(words):
        given = words[i + 1] if i + 1 < len(words) else ""
        if word == "-p" and given.isdigit():
            port = int(given)
        elif word.startswith("-p") and word[2:].isdigit():
            port = int(word[2:])
        elif word == "-o" and given.lower().startswith("port="):
            port = int(given[5:]) if given[5:].isdigit() else port
        elif word.lower().startswith("-oport=") and word[7:].isdigit():
            port = int(word[7:])
    return port


class SshdCommand(NamedTuple):
    """The sshd a worker serves for the master's mpirun."""
    argv: tuple[str, ...]
    port: int


def sshd_command(config: str, port: int, ssh_dir: str) -> SshdCommand:
    """sshd's command: its configuration file and port (the settings), the job's host key and trusted key
    in `ssh_dir`; key authentication only (docker/sshd_config)."""
    return SshdCommand((SSHD, "-D", "-e", "-f", config, "-p", str(port), "-h", f"{ssh_dir}/{HOST_KEY}",
                        "-o", f"AuthorizedKeysFile={ssh_dir}/{AUTHORIZED_KEYS}"), port)


class MpirunSpec(NamedTuple):
    """The rank starter of MPI jobs (smtrain.starters.mpirun carries it out): the master's mpirun starts every
    rank, on the workers through their sshd; the master makes the job's ssh key and gives its public half to
    each worker as it joins; where restarts in place are asked for, it holds an ssh connection to each worker
    for every attempt's mpirun."""

    ssh_dir: str  # the job's keys (empty: no host logs into another)
    sshd: Optional[SshdCommand]  # what this worker serves (None on the master)
    held: tuple[str, ...]  # the workers the master holds a connection to
    name: str = "mpirun"
    ssh_port: int = 22  # where mpirun's ssh reaches each worker's sshd (`ssh_port`)


EFA_RDMA_INSTANCE_TYPES = frozenset(
    {
        "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge",
        "ml.trn1.32xlarge", "ml.trn1n.32xlarge",
    }
)  # fmt: skip
# Variables that describe one host or one login, never the job: they must not travel with -x.
NOT_EXPORTED = frozenset(
    {
        "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "TERM", "SHELL", "HOME", "USER", "LOGNAME", "MAIL",
        "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "SSH_AUTH_SOCK", "DISPLAY", "LS_COLORS", "PS1",
        "CURRENT_HOST", CURRENT_HOST.variable,
    }
)  # fmt: skip
NOT_EXPORTED_PREFIXES = ("BASH_FUNC_", "OMPI_", "PMIX_", "OPAL_", "ORTE_")


class MpirunCommand(NamedTuple):
    """The mpirun command line and the environment it runs with."""
    argv: tuple[str, ...]
    env: dict[str, str]  # the environment mpirun runs with; -x names what travels, values stay off argv
    kept: dict[str, str] = {}  # network variables the user set (environment or -x): the image's value each replaced


class MpiLayout(NamedTuple):
    """Which hosts run how many ranks each, and how many in all."""
    hosts: tuple[str, ...]
    processes_per_host: int
    num_processes: int


def layout(hosts: Sequence[str], processes_per_host: Optional[int], num_processes: Optional[int], num_gpus: int) -> MpiLayout:
    """The ranks' layout: processes per host as asked, else one per GPU, else one."""
    per_host = processes_per_host or max(num_gpus, 1)
    return MpiLayout(tuple(hosts), per_host, num_processes or per_host * len(hosts))


def choose_interface(wanted: Optional[str], network: NetworkFacts) -> Optional[str]:
    """The interface to pin MPI and NCCL to, or None to leave Open MPI's own choice (loopback only)."""
    if wanted and wanted in network.interfaces:
        return wanted
    return network.default_route_interface


def is_exported(name: str) -> bool:
    """Whether mpirun passes the variable to the ranks (`-x NAME`)."""
    return (
        name not in NOT_EXPORTED
        and not name.startswith(NOT_EXPORTED_PREFIXES)
        and "=" not in name
        and name.isascii()
        and name != ""
    )


def split_nccl_debug(options: Sequence[str]) -> tuple[Optional[str], tuple[str, ...]]:
    """`--NCCL_DEBUG=X` or `--NCCL_DEBUG X` (as AWS's samples write it) is not an mpirun option:
    as sagemaker-training does, it becomes the ranks' NCCL_DEBUG. Returns (X or None, the rest)."""
    rest: list[str] = []
    value: Optional[str] = None
    items = list(options)
    i = 0
    while i < len(items):
        item = items[i]
        if item.startswith("--NCCL_DEBUG="):
            value = item.split("=", 1)[1]
        elif item == "--NCCL_DEBUG" and i + 1 < len(items):
            value, i = items[i + 1], i + 1
        else:
            rest.append(item)
        i += 1
    return value, tuple(rest)


def cpus_per_rank(ranks_per_host: int, cpus: int, num_gpus: int, instance_type: str) -> int:
    """How many CPUs each rank is bound to; 0: ranks are not bound. Only on a SageMaker instance
    (`ml.*`), which is the host's alone: SDK local mode (`local`) and `docker run` may put several
    hosts' containers on one machine, whose ranks would then be pinned to the same CPUs (two such
    containers on two CPUs starved a worker's `train` for 60 s)."""
    if not instance_type.startswith("ml.") or num_gpus > 0 or ranks_per_host < 2 or cpus < ranks_per_host:
        return 0
    return cpus // ranks_per_host


def _placement(cpus_per_rank: int) -> list[list[str]]:
    if cpus_per_rank < 1:
        return [["--bind-to", "none"], ["--map-by", "slot"]]
    return [["--use-hwthread-cpus"], ["--bind-to", "hwthread"], ["--map-by", f"slot:PE={cpus_per_rank}"]]


_PLACEMENT_FLAGS = ("--bind-to", "--map-by", "--use-hwthread-cpus")
_SAME_AS = {"-bind-to": "--bind-to", "-map-by": "--map-by", "-mca": "--mca", "-use-hwthread-cpus": "--use-hwthread-cpus"}


def _option_keys(options: Sequence[str]) -> list[tuple[str, ...]]:
    """What each option sets, to tell when a user option contradicts a default: `--bind-to`,
    `--map-by`, `--mca KEY`, `-x NAME`."""
    keys: list[tuple[str, ...]] = []
    for i, item in enumerate(options):
        flag = _SAME_AS.get(item, item)
        following = options[i + 1] if i + 1 < len(options) else ""
        if flag in _PLACEMENT_FLAGS:
            keys.append((flag,))
        elif flag == "--mca" and following:
            keys.append(("--mca", following))
        elif flag == "-x" and following:
            keys.append(("-x", following.split("=", 1)[0]))
    return keys


def mpirun_command(
    job: MpiLayout,
    current_host: str,
    wanted_interface: Optional[str],
    instance_type: str,
    network: NetworkFacts,
    env: Mapping[str, str],
    custom_options: Sequence[str],
    rank_argv: Sequence[str],
    cpus_per_rank: int = 0,
    ssh_control_path: str = "",
) -> MpirunCommand:
    """mpirun ... <rank_argv>. Every exportable variable of `env` travels to the ranks by name
    (`-x NAME`), so no value, a credential say, appears on a command line. `cpus_per_rank` > 0 binds
    each rank to that many CPUs of its own (see cpus_per_rank). `ssh_control_path`: where mpirun's ssh
    finds a connection held to each worker (ssh's ControlPath; it connects on its own where none is)."""
    hosts = ["localhost" if h == current_host else h for h in job.hosts]
    nccl_debug, custom = split_nccl_debug(custom_options)
    efa = network.efa_present
    defaults = [
        ["--mca", "plm_rsh_no_tree_spawn", "1"],
        ["--mca", "pml", "ob1"],
        # libfabric's btl only where EFA is: elsewhere it carries nothing tcp does not, and its
        # finalize adds about a second to the end of every job (measured on Debian's Open MPI 4.1.4)
        ["--mca", "btl", "^openib" if efa else "^openib,ofi"],
        ["--mca", "btl_vader_single_copy_mechanism", "none"],
        ["--mca", "orte_abort_on_non_zero_status", "1"],
        ["--mca", "odls_base_sigkill_timeout", "0"],
    ]
    if ssh_control_path and len(set(hosts)) > 1:
        defaults.append(["--mca", "plm_rsh_args", f"-oControlPath={ssh_control_path}"])
    run_env = dict(env)
    if nccl_debug is not None:
        run_env["NCCL_DEBUG"] = nccl_debug
    interface = choose_interface(wanted_interface, network)
    network_env: dict[str, str] = {}  # the image's defaults for NCCL's, Gloo's and libfabric's network
    if interface:
        defaults += [["--mca", "btl_tcp_if_include", interface], ["--mca", "oob_tcp_if_include", interface]]
        network_env.update(dict.fromkeys(("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE"), interface))
    if efa:
        network_env["FI_PROVIDER"] = "efa"
        if instance_type in EFA_RDMA_INSTANCE_TYPES:
            network_env["FI_EFA_USE_DEVICE_RDMA"] = "1"
        elif network.nccl_net_plugin:
            network_env["NCCL_PROTO"] = "simple"
    overridden = _option_keys(custom)
    # a variable the user set (the job's environment, the image's, or `-x NAME=value` in their options) wins
    kept = {name: value for name, value in network_env.items()
            if (name in run_env and run_env[name] != value) or ("-x", name) in overridden}
    for name, value in network_env.items():
        run_env.setdefault(name, value)
    argv = ["mpirun", "--allow-run-as-root", "--host", ",".join(f"{h}:{job.processes_per_host}" for h in hosts),
            "-np", str(job.num_processes)]
    if not any((flag,) in overridden for flag in _PLACEMENT_FLAGS):  # the user's placement replaces ours whole
        argv += [item for group in _placement(cpus_per_rank) for item in group]
    for group in defaults:  # a user option that contradicts a default replaces it
        if _option_keys(group)[0] not in overridden:
            argv += group
    for name in sorted(run_env):
        if is_exported(name) and ("-x", name) not in overridden:
            argv += ["-x", name]
    argv += list(custom)
    argv += list(rank_argv)
    return MpirunCommand(tuple(argv), run_env, kept)
