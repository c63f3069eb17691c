"""The master's held ssh connections (entrypoint/smtrain/starters/mpirun/holds.py) where they cannot be had: an ssh that fails, no
ssh client at all, a stop asked for while one is still connecting - each said in the log, none keeps
mpirun waiting, nothing left running. The connections themselves, shared by mpirun across a restart:
tests/cluster/test_restart.py. A fake `ssh` on PATH plays the client here (each case in a process of
its own, for its signal handlers)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import os, signal, sys, time
from smtrain.common.signals import SignalWaker
from smtrain.proc.helpers import HelperGroup
from smtrain.starters.mpirun.holds import SshHolds
waker = SignalWaker()
with HelperGroup() as helpers:
    holds = SshHolds(helpers, ["algo-9"])
    processes = [h.process for h in helpers.helpers]
    if sys.argv[1] == "stop":
        os.kill(os.getpid(), signal.SIGTERM)
    began = time.monotonic()
    holds.wait_ready(began + 20, waker)
    print(f"waited {time.monotonic() - began:.2f}", flush=True)
    holds.release()
    print("left", len(helpers.helpers), "running", sum(p.poll() is None for p in processes), flush=True)
"""

FAKES = {
    "refused": "#!/bin/sh\necho 'ssh: connect to host algo-9 port 22: Connection refused' >&2\nexit 255\n",
    "stop": "#!/bin/sh\nexec sleep 30\n",
}


@pytest.mark.parametrize("case", ["refused", "missing", "stop"])
def test_a_connection_not_had_is_said_and_left_to_mpirun(tmp_path: Path, case: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if case in FAKES:
        (bin_dir / "ssh").write_text(FAKES[case])
        (bin_dir / "ssh").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin" if case in FAKES else str(bin_dir)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, case], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    waited = float(done.stdout.split()[1])
    assert waited < 5.0 and "left 0 running 0" in done.stdout, (done.stdout, done.stderr)
    said = {
        "refused": "no ssh connection held to algo-9 (ssh exited 255): mpirun logs into them on its own",
        "missing": "cannot hold ssh connections to the workers ([Errno 2] No such file or directory: 'ssh')",
        "stop": "no ssh connection held to algo-9 (not up yet after",
    }[case]
    assert said in done.stderr, done.stderr
    if case == "refused":  # ssh's own word comes through the helper's relay
        assert "ssh: connect to host algo-9 port 22: Connection refused" in done.stderr
