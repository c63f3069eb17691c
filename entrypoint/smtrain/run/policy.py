"""What a distribution kind decides, as one `Policy` per kind (run.kinds); the role skeletons
(run.master, run.worker) do everything else, the same way for every kind.

Adding a kind: a planner row in smtrain.plan.launch.PLANNERS, a Policy subclass in run/kinds/ and
its row in run.kinds.POLICIES."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol

from ..plan.launch import LaunchPlan
from ..proc.supervise import ProcessResult
from ..wire.rank_failure import RankFailure

if TYPE_CHECKING:  # types only: the roles import this module, never the reverse
    from .control_server import ControlServer
    from .job import HostJob
    from .link import MasterLink

__all__ = ["MasterRole", "Peers", "Policy", "WorkerRole"]


class Peers(Protocol):
    """Where the job's hosts meet: the plan's MpiPlan or StrategyPlan."""

    master: str
    workers: tuple[str, ...]
    control_bind: str
    control_port: int
    peer_wait_s: float
    heartbeat_timeout_s: float


class MasterRole(Protocol):
    """What a policy may use of the master role (run.master)."""

    job: "HostJob"
    server: "ControlServer"
    aborted: Optional[str]

    def abort(self, reason: str) -> None: ...

    def why_end(self) -> Optional[str]: ...


class WorkerRole(Protocol):
    """What a policy may use of the worker role (run.worker)."""

    job: "HostJob"
    link: "MasterLink"
    deadline: float  # for the master to be reachable (time.monotonic)


class Policy:
    # A task's failure (its final report, a worker's program ending non-zero) ends the job at once.
    # False where the launcher does it itself (mpirun aborts the job when a rank fails).
    """A distribution kind's decisions; every hook has the role's object to act on."""
    ends_on_task_failure = False

    def peers(self, plan: LaunchPlan) -> Peers:
        raise NotImplementedError

    # -- the master --------------------------------------------------------------------------------
    def expected_ranks(self, plan: LaunchPlan) -> list[tuple[str, int]]:
        """(host, rank) of every process the stall watchdog watches."""
        raise NotImplementedError

    def program_env(self, master: MasterRole) -> dict[str, str]:
        return master.job.plan.child_env(master.job.inherited_env)

    def start_line(self, plan: LaunchPlan) -> str:
        raise NotImplementedError

    def start_tasks(self, master: MasterRole) -> None:
        """Start what runs beside the program once the job started (a parameter server)."""

    def forward(self, master: MasterRole, pid: int, signum: int) -> None:
        """Pass a signal `train` received on to the job's processes, here and on the workers."""
        raise NotImplementedError

    def after_program(self, master: MasterRole, result: ProcessResult) -> None:
        """What the master does once its own program (mpirun, or its task's program) has ended."""

    def where(self, plan: LaunchPlan, report: RankFailure) -> str:
        """How the job's failure names the process of a rank's report."""
        raise NotImplementedError

    def program_name(self, plan: LaunchPlan) -> str:
        """How the job's failure names the master's own program."""
        raise NotImplementedError

    # -- a worker ----------------------------------------------------------------------------------
    def before_connect(self, worker: WorkerRole) -> None:
        """What must run on a worker before it says hello (sshd, for mpirun to reach it)."""

    def work(self, worker: WorkerRole) -> None:
        """This worker's part of the job; returns when it is done (the job's end is awaited after)."""
        raise NotImplementedError
