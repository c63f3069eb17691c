"""Every default the toolkit uses, defined once (the README's settings table lists them)."""
from __future__ import annotations

__all__ = ["ABORT_GRACE_S", "DEFAULT_BASE_DIR", "DEFAULT_CONTROL_PORT", "DEFAULT_GRACE_PERIOD_S",
    "DEFAULT_MONITOR_INTERVAL_MS", "DEFAULT_STALL_TIMEOUT_S",
    "HEARTBEAT_S", "HEARTBEAT_TIMEOUT_S", "HELPER_STOP_S", "PROFILE_WAIT_S", "REPORT_TIMEOUT_S", "STACK_DUMP_WAIT_S", "STALL_EXIT_HOLD_S",
    "default_peer_wait_s"]

DEFAULT_BASE_DIR = "/opt/ml"
# SageMaker stops a job 120 s after SIGTERM; leave the toolkit time to report after the grace period.
DEFAULT_GRACE_PERIOD_S = 110.0
DEFAULT_CONTROL_PORT = 7077
DEFAULT_MONITOR_INTERVAL_MS = 500.0
# The control channel: master and workers beat every HEARTBEAT_S; a side that hears nothing from
# the other for the heartbeat timeout has lost it.
HEARTBEAT_S = 1.0
HEARTBEAT_TIMEOUT_S = 10.0  # both ways: sagemaker_heartbeat_timeout_seconds / SM_HEARTBEAT_TIMEOUT_SECONDS
# The stall watchdog: a job whose ranks all stopped making progress for this long fails (0: off).
DEFAULT_STALL_TIMEOUT_S = 1800.0
# After a stall, the ranks get SIGABRT (Python's faulthandler logs their stacks) and this long to die.
STACK_DUMP_WAIT_S = 3.0
# A rank launcher whose program dumped its stack holds its own exit this long (cut short by SIGTERM):
# mpirun ends every rank once one exits non-zero, which would cut the other ranks' dumps short.
STALL_EXIT_HOLD_S = 2.0
# When the job must end at once (a host was lost), ranks get SIGTERM and this long before SIGKILL.
ABORT_GRACE_S = 5.0
# How long the toolkit's helper processes (monitor, demultiplexers, sshd, feeder) get between
# SIGTERM and SIGKILL, all together, when the job is over.
HELPER_STOP_S = 3.0
# The profiler report written when a job ends: at most this long (it never changes the job's outcome).
REPORT_TIMEOUT_S = 120.0
# How long a restart in place waits for a demultiplexer of SageMaker's FIFOs to let go of the failed
# attempt's FIFOs (it looks every 0.2 s, between reads of SageMaker's FIFO).
DEMUX_RESTART_WAIT_S = 30.0
# How long the master waits for the workers' profiler data after the job's end (a lost host: not at all).
PROFILE_WAIT_S = 10.0


def default_peer_wait_s(num_hosts: int) -> float:
    """How long hosts wait for each other: instances of one job start minutes apart at worst."""
    return 240.0 + 5.0 * num_hosts
