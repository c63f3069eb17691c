"""A local cluster of simulated SageMaker hosts `algo-1 ... algo-N` on one machine (root only).

Each host has its own network namespace (an `eth0` on a private bridge that lives in a namespace of
its own, so nothing is added to the machine's network), and runs in its own UTS, mount and PID
namespaces: its hostname, its `/etc/hosts`, its `/opt/ml` tree (bind-mounted at one common path,
as every SageMaker host sees `/opt/ml`), root's `~/.ssh`, and its `train` as PID 1, as in a container.
Root's `~/.bashrc` is empty there, as the image's does nothing in a shell that is not interactive: the
shell of every ssh session mpirun opens reads it (this machine's may run anything - pyenv's set-up,
0.1 s of CPU a session).

    scripts/cluster.py up NAME --hosts 2 [--mpi 2]   # make hosts with a sample job; prints the folder
    scripts/cluster.py start NAME                    # run `train` on every host (background)
    scripts/cluster.py exec NAME algo-2 -- ps aux    # run a command inside a host
    scripts/cluster.py wait NAME                     # wait for every host's train; print exit statuses
    scripts/cluster.py down NAME                     # kill everything, remove namespaces and files

Tests use the `Cluster` class directly. Every wait is bounded.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

from smtrain.common.linux import alive

SUBNET = "10.250.{net}.{host}"
STATE_ROOT = Path(tempfile.gettempdir()) / "smtrain-clusters"
DOCKER = Path(__file__).resolve().parent.parent.parent / "docker"


def sshd_config() -> str:
    """The image's sshd settings; StrictModes off: the hosts' key folders live under this machine's
    world-writable temporary folder."""
    return (DOCKER / "sshd_config").read_text() + "StrictModes no\n"


def ssh_client_config() -> str:
    """The image's ssh client settings (mpirun's ssh)."""
    return (DOCKER / "ssh_config").read_text()


def _cgroup_mounts(mounts: str) -> str:
    """Shell words that mount this machine's memory cgroup hierarchy in a host's mount namespace, at
    /sys/fs/cgroup as a container sees it (`ip netns exec` mounts a fresh /sys without it), so that the
    OOM-kill counter of the cgroup a host runs in can be read there; `true` where there is none."""
    kinds = {(fields[1], fields[2]) for fields in (line.split() for line in mounts.splitlines()) if len(fields) > 2}
    if ("/sys/fs/cgroup/memory", "cgroup") in kinds:
        return ("mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/memory "
                "&& mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory")
    if ("/sys/fs/cgroup", "cgroup2") in kinds:
        return "mount -t cgroup2 cgroup2 /sys/fs/cgroup"
    return "true"


def _run(*argv: str, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60, **kwargs)


class Host:
    def __init__(self, cluster: "Cluster", index: int) -> None:
        self.cluster = cluster
        self.index = index
        self.name = f"algo-{index}"
        self.netns = f"smt-{cluster.name}-{index}"
        self.address = SUBNET.format(net=cluster.net, host=index + 1)
        self.folder = cluster.folder / "hosts" / self.name
        self.ml = self.folder / "ml"  # this host's /opt/ml, seen at cluster.ml_mount inside the host
        # what the host's /run/smtrain (a new tmpfs at each start) holds when train starts: nothing, unless a
        # test puts files here - as a container started again would keep them
        self.run_files = self.folder / "run_smtrain"
        self.proc: Optional[subprocess.Popen] = None

    @property
    def pid1(self) -> Optional[int]:
        """The host's init (PID 1 of its namespace), as seen from outside."""
        return _first_child(self.proc.pid) if self.proc is not None else None

    @property
    def train_pid(self) -> Optional[int]:
        """The host's `train`, as seen from outside (None once it has exited)."""
        pid1 = self.pid1
        return _first_child(pid1) if pid1 is not None else None

    def start(self, argv: Sequence[str], env: Mapping[str, str], stderr: Optional[int] = None,
              preexec_fn: Optional[Callable[[], None]] = None) -> None:
        """Run `argv` (train) as this host's PID 1's child; its stderr goes to the host's `stderr`
        file, or to the file descriptor `stderr` (a test's pipe). `preexec_fn` runs in the host's
        first process before it starts (e.g. to join a memory cgroup, as a container's limit)."""
        # PID 1 is a minimal init (sh), as `docker run --init` gives: it runs train and, once train
        # has exited, lists what still lives in the host, so tests can tell that train left nothing.
        script = (
            'hostname "$1" && mount --bind "$2" /etc/hosts && mount --bind "$3" "$4" '
            f'&& mkdir -p /root/.ssh /run/smtrain && mount --bind "$5" /root/.ssh '
            '&& { [ ! -f /root/.bashrc ] || mount --bind /dev/null /root/.bashrc; } '
            f'&& mount -t tmpfs -o mode=755 smtrain /run/smtrain && {_cgroup_mounts(Path("/proc/mounts").read_text())} '
            '&& { [ ! -d "$7" ] || cp -a "$7"/. /run/smtrain/; } && left="$6" && shift 7 '
            '|| exit 99; "$@"; rc=$?; ps -e -o pid=,comm= > "$left"; exit $rc'
        )
        c = self.cluster
        argv = [
            "ip", "netns", "exec", self.netns,
            "unshare", "--uts", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
            "sh", "-c", script, "sh", self.name, str(c.folder / "etc_hosts"), str(self.ml), str(c.ml_mount),
            str(c.folder / "ssh" / "client"), str(self.folder / "leftovers"), str(self.run_files), *argv,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            argv, env=dict(env), stdout=open(self.folder / "stdout", "wb"),
            stderr=open(self.folder / "stderr", "wb") if stderr is None else stderr, preexec_fn=preexec_fn,
        )
        deadline = time.monotonic() + 10
        while self.train_pid is None and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)

    def signal(self, signum: int) -> None:
        """Send `signum` to this host's train (as `docker stop` would to the container's entry point)."""
        pid = self.train_pid
        if pid is not None:
            os.kill(pid, signum)

    def kill(self) -> None:
        """The host dies: SIGKILL its PID 1, which takes every process of its PID namespace with it."""
        pid = self.pid1
        if pid is not None:
            os.kill(pid, signal.SIGKILL)

    def cut_cable(self) -> None:
        """A network partition: the host's link to the switch goes down. Nothing is closed, no packet
        says goodbye; the other hosts only hear silence."""
        _run("ip", "-n", self.cluster.switch, "link", "set", self.cluster.outer_link(self), "down")

    def wait(self, timeout: float) -> Optional[int]:
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def exec(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        pid = self.pid1
        if pid is None:
            raise RuntimeError(f"{self.name} is not running")
        return subprocess.run(["nsenter", "-t", str(pid), "-n", "-u", "-m", "-p", "--", *argv],
                              capture_output=True, text=True, timeout=timeout)

    def leftovers(self) -> list[str]:
        """What still ran in this host when its train exited (its init and `ps` aside): `pid comm`."""
        try:
            lines = (self.folder / "leftovers").read_text().splitlines()
        except OSError:
            return ["<no record: the host's init did not get to write one>"]
        return [line.strip() for line in lines if line.split()[0] != "1" and line.split()[-1] != "ps"]

    def stdout(self) -> str:
        return (self.folder / "stdout").read_text(errors="replace")

    def stderr(self) -> str:
        return (self.folder / "stderr").read_text(errors="replace")

    def log_tail(self, chars: int = 2000) -> str:
        """The end of this host's log, after the first fatal error's report of a rank (faulthandler's stacks:
        where a rank crashed) where there is one - for a failed test's message."""
        text = self.stderr()
        fatal = text.find("Fatal Python error")
        return (text[fatal:fatal + 4000] + "\n...\n" if fatal >= 0 else "") + text[-chars:]

    def failure(self) -> Optional[str]:
        path = self.ml / "output" / "failure"
        return path.read_text() if path.exists() else None


class Cluster:
    """N hosts on a private bridge. Use as a context manager: `down()` always runs."""

    def __init__(self, name: str, num_hosts: int, net: int = 1) -> None:
        if os.geteuid() != 0:
            raise PermissionError("the cluster harness needs root (network and mount namespaces)")
        if not 2 <= len(name) <= 6 or not name.isalnum():
            raise ValueError("a cluster name is 2-6 letters or digits (it goes into interface names)")
        self.name = name
        self.net = net
        self.folder = STATE_ROOT / name
        self.ml_mount = self.folder / "ml"
        self.switch = f"smt-{name}-sw"
        self.hosts = [Host(self, i) for i in range(1, num_hosts + 1)]

    def __enter__(self) -> "Cluster":
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    # -- set-up ----------------------------------------------------------------------------------
    def up(self) -> None:
        self.down()
        self.ml_mount.mkdir(parents=True)
        self._make_ssh()
        (self.folder / "etc_hosts").write_text(
            "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in self.hosts)
        )
        _run("ip", "netns", "add", self.switch)
        _run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", self.switch, "link", "set", "br0", "up")
        for h in self.hosts:
            h.folder.mkdir(parents=True)
            (h.ml / "input" / "config").mkdir(parents=True)
            (h.ml / "code").mkdir()
            _run("ip", "netns", "add", h.netns)
            outer = self.outer_link(h)
            _run("ip", "-n", self.switch, "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
            _run("ip", "-n", self.switch, "link", "set", outer, "master", "br0", "up")
            _run("ip", "-n", h.netns, "addr", "add", f"{h.address}/24", "dev", "eth0")
            _run("ip", "-n", h.netns, "link", "set", "eth0", "up")
            _run("ip", "-n", h.netns, "link", "set", "lo", "up")
            _run("ip", "-n", h.netns, "route", "add", "default", "dev", "eth0")

    def outer_link(self, host: Host) -> str:
        """The switch's end of a host's cable."""
        return f"s{self.name}{host.index}"

    def _make_ssh(self) -> None:
        ssh = self.folder / "ssh"
        client = ssh / "client"
        client.mkdir(parents=True, mode=0o700)
        # root's own key on every host: a key that is not the job's, which no host's sshd may accept (a test
        # may put its public half in root's authorized_keys here, where an sshd would look by default)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(client / "id_ed25519"))
        (client / "config").write_text(ssh_client_config())
        (ssh / "sshd_config").write_text(sshd_config())

    def write_job(self, hyperparameters: Mapping[str, Any], program: Optional[Path] = None,
                  program_name: str = "train.py", extra: Optional[Mapping[str, Any]] = None,
                  groups: Optional[Mapping[str, Sequence[str]]] = None, as_sagemaker_lists: bool = False) -> None:
        """The same job on every host, as SageMaker writes it (hyperparameters as JSON strings); `groups`
        (name -> hosts) makes a heterogeneous cluster, each host told its own group. `as_sagemaker_lists`:
        `hosts` sorted lexicographically, as the guide says (algo-10 before algo-2), beside the one instance
        group SageMaker names for a job without groups, its hosts in an order of their own (files of real jobs
        list them unsorted: here last first)."""
        names = [h.name for h in self.hosts]
        if as_sagemaker_lists:
            groups = {"homogeneousCluster": names[::-1]}
            names = sorted(names)
        for h in self.hosts:
            config = h.ml / "input" / "config"
            resources = {"current_host": h.name, "hosts": names, "network_interface_name": "eth0", **(extra or {})}
            if groups:
                resources["current_group_name"] = next(g for g, members in groups.items() if h.name in members)
                resources["instance_groups"] = [{"instance_group_name": g, "instance_type": "ml.c5.xlarge",
                                                 "hosts": list(members)} for g, members in groups.items()]
            (config / "resourceconfig.json").write_text(json.dumps(resources))
            hps = {"sagemaker_program": json.dumps(program_name),
                   **{k: v if isinstance(v, str) else json.dumps(v) for k, v in hyperparameters.items()}}
            (config / "hyperparameters.json").write_text(json.dumps(hps))
            (config / "inputdataconfig.json").write_text("{}")
            if program is not None:
                shutil.copy(program, h.ml / "code" / program_name)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_", "OMPI_"))}
        env.update(SAGEMAKER_BASE_DIR=str(self.ml_mount), SMTRAIN_SSHD_CONFIG=str(self.folder / "ssh" / "sshd_config"),
                   PYTHONUNBUFFERED="1")
        env.update(extra)
        return env

    # -- running ---------------------------------------------------------------------------------
    def start(self, argv: Sequence[str], env: Optional[Mapping[str, str]] = None,
              hosts: Optional[Sequence[Host]] = None) -> None:
        for h in hosts or self.hosts:
            h.start(argv, env or self.env())

    def wait(self, timeout: float, hosts: Optional[Sequence[Host]] = None) -> dict[str, Optional[int]]:
        """Exit status of every host's train (None: still running at the deadline)."""
        deadline = time.monotonic() + timeout
        return {h.name: h.wait(max(0.0, deadline - time.monotonic())) for h in hosts or self.hosts}

    def wait_timed(self, timeout: float, program_name: str = "train.py") -> "JobEdges":
        """Wait for every host's train (at most `timeout`), noting when each host ended (its init, which
        lists what is left once train exits: a few ms more) and when the last process running the
        program (`python <code>/<program_name>`, a rank; not its launcher, nor mpirun) ended - of those
        that ran for 0.1 s at least."""
        program = str(self.ml_mount / "code" / program_name).encode()
        ended: dict[str, float] = {}
        last_rank, ranks, next_scan = 0.0, set(), 0.0
        deadline = time.monotonic() + timeout
        while len(ended) < len(self.hosts) and time.monotonic() < deadline:
            now = time.monotonic()
            # /proc scanned for ranks every 0.1 s (2-5 ms of CPU), those found checked every few ms (a
            # signal 0 each: until its launcher reaps it): scanning every few ms would take half a core
            # from the simulated hosts it measures
            if now >= next_scan:
                ranks, next_scan = ranks | _running(program), now + 0.1
            ranks = {pid for pid in ranks if _exists(pid)}
            if ranks:
                last_rank = now
            for h in self.hosts:
                if h.name not in ended and h.proc is not None and h.proc.poll() is not None:
                    ended[h.name] = now
            time.sleep(0.003)
        return JobEdges({h.name: h.proc.poll() if h.proc is not None else None for h in self.hosts}, ended, last_rank)

    def leftovers(self) -> dict[str, list[str]]:
        return {h.name: h.leftovers() for h in self.hosts if h.leftovers()}

    def down(self) -> None:
        for h in self.hosts:
            if h.proc is not None and h.proc.poll() is None:
                h.kill()
                h.wait(10)
                if h.proc.poll() is None:
                    h.proc.kill()
                    h.wait(5)
        for h in self.hosts:
            _run("ip", "netns", "delete", h.netns, check=False)
        _run("ip", "netns", "delete", self.switch, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


class JobEdges(NamedTuple):
    """How a job ended: each host's exit status (None: still running), when each host ended and when
    the last rank did (time.monotonic(); 0.0: no rank was seen)."""

    statuses: dict[str, Optional[int]]
    ended: dict[str, float]
    last_rank: float

    def after_last_rank(self) -> dict[str, float]:
        """Seconds from the last rank's end to each host's."""
        return {name: at - self.last_rank for name, at in self.ended.items()}


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _running(program: bytes) -> set[int]:
    """The processes of any simulated host (they share this /proc) that are `python <program>`."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if len(argv) > 1 and argv[1] == program:
                found.add(int(entry.name))
    return found


def _first_child(pid: int) -> Optional[int]:
    try:
        pids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(pids[0]) if pids else None


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up")
    up.add_argument("name")
    up.add_argument("--hosts", type=int, default=2)
    up.add_argument("--mpi", type=int, default=2, help="processes per host")
    for name in ("start", "wait", "down"):
        sub.add_parser(name).add_argument("name")
    ex = sub.add_parser("exec")
    ex.add_argument("name")
    ex.add_argument("host")
    ex.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    state = STATE_ROOT / f"{args.name}.json"
    if args.command == "up":
        cluster = Cluster(args.name, args.hosts)
        cluster.up()
        sample = Path(__file__).resolve().parent.parent / "programs" / "hello_mpi.py"
        cluster.write_job({"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": args.mpi},
                          program=sample)
        state.write_text(json.dumps({"hosts": args.hosts}))
        print(cluster.folder)
        return 0
    cluster = Cluster(args.name, json.loads(state.read_text())["hosts"] if state.exists() else 0)
    if args.command == "down":
        cluster.down()
        state.unlink(missing_ok=True)
        return 0
    if args.command == "start":
        # Detached: each host's train keeps running after this command returns.
        for h in cluster.hosts:
            h.start([str(Path(sys.executable).parent / "train")], cluster.env())
            print(f"{h.name}: train pid {h.train_pid}, logs in {h.folder}")
        return 0
    if args.command == "exec":
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        pid = _find_pid1(cluster.host(args.host))
        if pid is None:
            print(f"{args.host} is not running (its train has ended, or `start` was not run)", file=sys.stderr)
            return 1
        return subprocess.call(["nsenter", "-t", str(pid), "-n", "-u", "-m", "-p", "--", *cmd])
    if args.command == "wait":
        for h in cluster.hosts:
            pid = _find_pid1(h)
            deadline = time.monotonic() + 600
            while pid and alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            print(f"{h.name}: {'ended' if not pid or not alive(pid) else 'still running'}; "
                  f"failure: {h.failure() or '-'}")
        return 0
    return 2


def _find_pid1(host: Host) -> Optional[int]:
    """A host's init from an earlier command: the process of its network namespace that is PID 1 inside."""
    for pid in map(int, _run("ip", "netns", "pids", host.netns, check=False).stdout.split()):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspids = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
        if nspids and nspids[-1] == "1":
            return pid
    return None


if __name__ == "__main__":
    sys.exit(main())
