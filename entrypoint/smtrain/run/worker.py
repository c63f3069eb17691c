"""The worker role, for every distribution kind: starts what the master needs of this host (the
policy's `before_connect`: sshd for mpirun), says hello, does its part (the policy's `work`) while a
link thread follows the master (run.link), and ends with the job's outcome as the master tells it,
or MasterLost when the master goes silent."""
from __future__ import annotations

import base64
import time

from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS
from .job import HostJob
from .link import MasterLink, connect_to_master
from ..wire.control_protocol import PROFILE_CHUNK, MessageType
from .outcome import JobOutcome
from .policy import Policy

__all__ = ["Worker", "ship_profile"]


def ship_profile(link: MasterLink, job: HostJob) -> None:
    """This host's profiler data to the master, once the job is over, for the job's one report: the
    helpers stopped first (the monitor writes its last samples), then the files in pieces."""
    from ..profiler.shipping import pack

    started = time.monotonic()
    job.helpers.stop()
    assert job.plan.profiler_dir is not None
    packed = pack(job.plan.profiler_dir, job.started_at - 1.0)
    data = packed.data
    for at in range(0, len(data), PROFILE_CHUNK):
        piece = data[at:at + PROFILE_CHUNK]
        link.send(MessageType.PROFILE, data=base64.b64encode(piece).decode(), last=at + PROFILE_CHUNK >= len(data))
    left = f"; {packed.left_out_files} file(s) past the cap left out" if packed.left_out_files else ""
    log(f"sent {packed.files} profiler file(s) ({len(data)} bytes packed) to the master in "
        f"{time.monotonic() - started:.2f} s{left}")


class Worker:
    """The worker role (see the module's docstring)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def run(self, job: HostJob) -> JobOutcome:
        self.job = job
        peers = self.policy.peers(job.plan)
        self.deadline = time.monotonic() + peers.peer_wait_s  # for the master to be reachable
        job.start_helpers()
        self.policy.before_connect(self)
        log(f"connecting to the master {peers.master}:{peers.control_port}")
        client = connect_to_master(job.plan.host, peers.master, peers.control_port, self.deadline, peers.peer_wait_s)
        try:
            self.link = MasterLink(client, peers.master, peers.heartbeat_timeout_s, job.waker).start()
            self.policy.work(self)
            outcome = self._await_end()
            if self.link.end is not None and job.plan.profiler_dir is not None:
                ship_profile(self.link, job)
            return outcome
        finally:
            client.close()

    def _await_end(self) -> JobOutcome:
        """The job's outcome, as the master tells it (the heartbeats bound the wait)."""
        while not self.link.over():
            if any(signum in SHUTDOWN_SIGNALS for signum in self.job.waker.wait(1.0)):
                log("this host's part has ended; waiting for the master to end the job")
        return self.link.outcome()
