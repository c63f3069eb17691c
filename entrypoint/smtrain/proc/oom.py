"""The kernel's OOM-kill counter of the memory cgroup this process runs in, to tell an OOM kill from
another SIGKILL where the program ran (each host's `train`, each rank's launcher).

cgroup v2 keeps it as `oom_kill N` in `memory.events` (counting the cgroup's descendants too), cgroup
v1 in `memory.oom_control`. The cgroup is the one /proc/self/cgroup names; inside a container the
file system shows the container's own cgroup at the mount's root instead, which is tried next.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional

__all__ = ["oom_kill_count", "oom_count_files"]

CGROUP_ROOT = Path("/sys/fs/cgroup")


def oom_count_files(proc_cgroup: str, root: Path = CGROUP_ROOT) -> Iterator[Path]:
    """Where the counter of the cgroup described by `proc_cgroup` (the text of /proc/self/cgroup)
    may be, most specific first."""
    for line in proc_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        relative = path.strip().lstrip("/")
        if hierarchy == "0" and controllers == "":
            for base in (root, root / "unified"):
                if relative:
                    yield base / relative / "memory.events"
        elif "memory" in controllers.split(",") and relative:
            yield root / "memory" / relative / "memory.oom_control"
    yield root / "memory.events"
    yield root / "memory" / "memory.oom_control"


def _own_cgroups() -> str:
    try:
        return Path("/proc/self/cgroup").read_text()
    except OSError:
        return ""


def oom_kill_count(files: Optional[list[Path]] = None) -> Optional[int]:
    """The OOM-kill counter of this process's memory cgroup; None when no counter is readable."""
    for path in files if files is not None else oom_count_files(_own_cgroups()):
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None
