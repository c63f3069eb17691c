"""The toolkit's fixed timings, which no setting changes (the settings and their defaults: config.settings)."""
from __future__ import annotations

__all__ = ["ABORT_GRACE_S", "DEFAULT_BASE_DIR", "DEMUX_RESTART_WAIT_S", "HEARTBEAT_S", "HELPER_STOP_S", "OUTPUT_CONNECT_S", "OUTPUT_DRAIN_S", "PROFILE_WAIT_S",
           "REPORT_TIMEOUT_S", "STACK_DUMP_WAIT_S", "STALL_EXIT_HOLD_S", "SYNC_LAST_PASS_S",
           "SYNC_LAST_PASS_STOPPING_S"]

DEFAULT_BASE_DIR = "/opt/ml"
# The control channel: master and workers beat every HEARTBEAT_S; a side that hears nothing from
# the other for the heartbeat timeout (config.settings.HEARTBEAT_TIMEOUT) has lost it.
HEARTBEAT_S = 1.0
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
# The helpers that outlive the program (the intermediate output's syncer, a report left over), once the job's
# outcome is written: SIGTERM - the syncer makes its last pass of uploads - then SIGKILL after this long; after
# a shutdown signal the shorter bound (a spot interruption leaves seconds). `train` never waits on S3 for long.
SYNC_LAST_PASS_S = 120.0
SYNC_LAST_PASS_STOPPING_S = 5.0
# How long a restart in place waits for a demultiplexer of SageMaker's FIFOs to let go of the failed
# attempt's FIFOs (it looks every 0.2 s, between reads of SageMaker's FIFO).
DEMUX_RESTART_WAIT_S = 30.0
# How long the master waits for the workers' profiler data after the job's end (a lost host: not at all).
PROFILE_WAIT_S = 10.0

# The ranks' output (smtrain.run.rank_output): how long a rank launcher tries to reach the master's control
# server for its output connections (then it leaves its output to mpirun's forwarding, and says so), and how
# long the master waits, once mpirun has ended, for the ranks' last lines to reach its log.
OUTPUT_CONNECT_S = 10.0
OUTPUT_DRAIN_S = 5.0
