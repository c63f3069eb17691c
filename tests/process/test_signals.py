"""SIGTERM/SIGINT reach the program's whole process tree at once; the grace period; no orphans."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smtrain.common.linux import alive
from tests.support import TRAIN, Tree, make_tree

# A program that starts helpers (one in its process group, one that escaped into its own session),
# records every pid, then waits. What it does on SIGTERM is set per test.
PROGRAM = """
import os, signal, subprocess, sys, time
out = sys.argv[sys.argv.index('--out') + 1]
behaviour = sys.argv[sys.argv.index('--on-term') + 1]
in_group = subprocess.Popen(['sleep', '1000'])
escaped = subprocess.Popen(['sleep', '1001'], start_new_session=True)
def on_term(signum, frame):
    open(out + '.got', 'w').write(signal.Signals(signum).name)
    if behaviour == 'exit0':
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term if behaviour != 'ignore' else signal.SIG_IGN)
signal.signal(signal.SIGINT, on_term)
open(out, 'w').write(' '.join(map(str, [os.getpid(), in_group.pid, escaped.pid])))
while True:
    time.sleep(0.05)
"""


def _start(tree: Tree, out: Path, on_term: str, grace: str) -> subprocess.Popen:
    tree.write_program("train.py", PROGRAM)
    tree.write_config("hyperparameters.json", {"sagemaker_program": '"train.py"', "out": f'"{out}"',
                                                "on-term": f'"{on_term}"'})
    proc = subprocess.Popen([TRAIN], env=tree.env(SM_GRACE_PERIOD_SECONDS=grace),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not out.exists() or not out.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.02)
    return proc


def _pids(out: Path) -> list[int]:
    return [int(p) for p in out.read_text().split()]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_program_that_handles_the_signal_exits_cleanly(tmp_path: Path, signum: int) -> None:
    tree, out = make_tree(tmp_path / "ml"), tmp_path / "pids"
    proc = _start(tree, out, "exit0", "30")
    sent = time.monotonic()
    proc.send_signal(signum)
    assert proc.wait(timeout=20) == 0
    assert time.monotonic() - sent < 10  # well inside the 30 s grace period
    assert Path(str(out) + ".got").read_text() == signal.Signals(signum).name
    assert not any(alive(p) for p in _pids(out)), "a process outlived train"
    assert not tree.failure.exists()


def test_program_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    tree, out = make_tree(tmp_path / "ml"), tmp_path / "pids"
    proc = _start(tree, out, "ignore", "1.5")
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    status = proc.wait(timeout=30)
    waited = time.monotonic() - sent
    assert status == 128 + signal.SIGKILL
    assert 1.5 <= waited < 8, waited
    assert not any(alive(p) for p in _pids(out)), "a process outlived train"
    reason = tree.failure.read_text()
    assert "killed by SIGKILL" in reason and "after SIGTERM and the grace period" in reason


def test_escaped_descendant_gets_sigterm_at_once(tmp_path: Path) -> None:
    """The helper that left the program's session still gets SIGTERM while the program lives."""
    tree, out = make_tree(tmp_path / "ml"), tmp_path / "pids"
    proc = _start(tree, out, "ignore", "3")
    program, _, escaped = _pids(out)
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 2.5
    while alive(escaped) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(escaped), "the escaped helper did not get SIGTERM before the grace period ended"
    assert alive(program)  # it ignores SIGTERM: still running inside its grace period
    assert proc.wait(timeout=20) == 128 + signal.SIGKILL


def test_other_signals_are_forwarded(tmp_path: Path) -> None:
    tree, out = make_tree(tmp_path / "ml"), tmp_path / "pids"
    proc = _start(tree, out, "exit0", "30")
    proc.send_signal(signal.SIGUSR1)  # to train; the program has no handler: it dies of it
    assert proc.wait(timeout=20) == 128 + signal.SIGUSR1
    assert not any(alive(p) for p in _pids(out))


def test_leftover_processes_are_ended_after_a_successful_program(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml")
    out = tmp_path / "pids"
    tree.write_program("train.py", f"""
import subprocess
import sys
a = subprocess.Popen(['sleep', '1000'])
b = subprocess.Popen(['sh', '-c', 'trap "" TERM; exec sleep 1001'], start_new_session=True)
open({str(out)!r}, 'w').write(f'{{a.pid}} {{b.pid}}')
""")
    started = time.monotonic()
    done = subprocess.run([TRAIN], env=tree.env(), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 20
    assert not any(alive(p) for p in _pids(out))
    assert b"process(es) left running" in done.stderr


@pytest.mark.parametrize("parent_alive", [True, False])
def test_parent_death_signal_comes_even_if_the_parent_died_before_it_was_set(parent_alive: bool) -> None:
    """The kernel sends the parent-death signal only for a death after prctl(); a child whose parent
    is already gone (here: a pid that is not its parent) must signal itself."""
    code = ("import os, signal, sys\nfrom smtrain.common import linux\n"
            "linux.set_parent_death_signal(signal.SIGTERM, int(sys.argv[1]))\nprint('still here')\n")
    parent = os.getpid() if parent_alive else 1
    done = subprocess.run([sys.executable, "-c", code, str(parent)], capture_output=True, timeout=60)
    if parent_alive:
        assert (done.returncode, done.stdout) == (0, b"still here\n"), done.stderr.decode()
    else:
        assert done.returncode == -signal.SIGTERM and done.stdout == b""
