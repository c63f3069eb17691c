"""The master's control server opened for the job, and its workers waited for until each has joined."""
from __future__ import annotations

import time
from typing import Callable, Optional

from ..common.console import log
from ..common.signals import SignalWaker
from ..config.settings import CONTROL_PORT
from ..errors import PeersUnreachable, StartupFailed, ToolkitError
from ..plan.coordination import Coordination
from .control_server import ControlServer
from .outcome import failure_text

__all__ = ["await_reach", "await_workers", "open_control"]


def open_control(coordination: Coordination, token: str, waker: SignalWaker, admission: str = "",
                 joined: str = "it has joined the job", progress: Callable[[], Optional[float]] = lambda: None
                 ) -> ControlServer:
    """The master's control server: what it hears wakes `waker`; each worker gets the rank starter's
    `admission` when it says hello (`joined`: how the log says it took it); `progress`: how long ago this
    host's ranks last trained (a silent worker is waited for while they do); StartupFailed naming the port
    when it is taken."""
    try:
        return ControlServer(coordination.control_bind, coordination.control_port, token, log,
                             coordination.heartbeat_timeout_s, on_lost=waker.post, on_news=waker.post,
                             admission=admission, joined=joined, straggler_window_s=coordination.straggler_window_s,
                             progress=progress)
    except OSError as e:
        raise StartupFailed(f"cannot listen on the control port {coordination.control_bind}:{coordination.control_port}: "
                            f"{e.strerror} (set {CONTROL_PORT.variable} to a free port)") from None


def await_workers(server: ControlServer, coordination: Coordination, not_admitted: Callable[[list[str]], str]) -> None:
    """Wait until every worker has joined (said hello and taken its admission); PeersUnreachable (told to
    those that came) when one never came, StartupFailed (`not_admitted` says why) when one came but did not
    join."""
    if not coordination.workers:
        return
    wait_s = coordination.peer_wait_s
    log(f"waiting up to {wait_s:g} s for workers {', '.join(coordination.workers)}")
    missing = server.wait_for_workers(list(coordination.workers), time.monotonic() + wait_s)
    if not missing:
        return
    absent = [host for host in missing if not server.said_hello(host)]
    error: ToolkitError
    if absent:
        error = PeersUnreachable(f"workers {', '.join(absent)} did not report within {wait_s:g} s "
                                 f"(their train must reach {coordination.master}:{coordination.control_port})")
    else:
        error = StartupFailed(not_admitted(missing))
    _refuse(server, error)


def await_reach(server: ControlServer, coordination: Coordination,
                unreachable: Callable[[tuple[str, ...], float], Optional[str]]) -> None:
    """Once every worker has joined: PeersUnreachable (told to every worker) when the rank starter cannot reach
    some of them within the peer wait (`unreachable` says why, naming them)."""
    if not coordination.workers:
        return
    why = unreachable(coordination.workers, time.monotonic() + coordination.peer_wait_s)
    if why is not None:
        _refuse(server, PeersUnreachable(f"{why} (in a VPC, let the job's security group reach itself)"))


def _refuse(server: ControlServer, error: ToolkitError) -> None:
    """The job cannot start: every worker is told why, and the master raises it."""
    server.end(int(error.exit_code), failure_text(error.cause, str(error)))
    raise error
