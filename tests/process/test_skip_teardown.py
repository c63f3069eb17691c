"""The start-up hook's quick exit after an uncaught exception (SM_SKIP_TEARDOWN_ON_FAILURE, set where
restarts in place are asked for): real Python processes with the hook on their PYTHONPATH, as a rank's
program has it. What the program can rely on - its non-daemon threads, its atexit handlers, what it
printed, its exit status - is kept; only the interpreter's teardown (an object collected with its
module, here) is skipped, and only after an exception nobody caught, which the hook tells the rank's
launcher first (its progress file), so that the failure report need not wait for the program's end."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from smtrain.rank.startup_hook import STARTUP_HOOK
from smtrain.wire import progress_file
from smtrain.config.settings import CURRENT_HOST, SKIP_TEARDOWN

PROGRAM = r'''
import atexit, os, sys, threading, time
out, mode = sys.argv[1], sys.argv[2]
mark = lambda name: open(os.path.join(out, name), "w").close()

class Torn:  # holds what it needs: the teardown may clear the module's names before it
    def __init__(self):
        self.open, self.path = open, os.path.join(out, "torn")

    def __del__(self):
        self.open(self.path, "w").close()

torn = Torn()  # collected when the interpreter tears its modules down
atexit.register(mark, "atexit")
threading.Thread(target=lambda: (time.sleep(0.2), mark("thread"))).start()  # not a daemon
print("printed without a newline", end="")
if mode == "raise":
    raise RuntimeError("boom")
if mode == "handled":  # a program's own call of the hook (a REPL's, a logger's) is no uncaught exception
    try:
        raise ValueError("handled")
    except ValueError:
        sys.excepthook(*sys.exc_info())
if mode == "interrupt":
    raise KeyboardInterrupt
if mode == "own-hook":
    sys.excepthook = lambda *exc: sys.__excepthook__(*exc)
    raise RuntimeError("boom")
'''


def _run(tmp_path: Path, mode: str, setting: str | None) -> tuple[int, set[str], str, str]:
    """Runs the program; returns its status, the marks it left, its stdout and stderr; whether it said
    its main thread died of an uncaught exception is in `progress`, its progress file."""
    out = tmp_path / mode
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k != SKIP_TEARDOWN.variable}
    env["PYTHONPATH"] = STARTUP_HOOK
    (tmp_path / "progress").write_bytes(bytes(progress_file.FILE_SIZE))
    env[progress_file.PROGRESS_FILE_ENV] = str(tmp_path / "progress")
    if setting is not None:
        env[SKIP_TEARDOWN.variable] = setting
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(out), mode], env=env, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, {p.name for p in out.iterdir()}, done.stdout, done.stderr


def test_an_uncaught_exception_ends_the_program_after_its_threads_and_atexit_handlers_without_teardown(tmp_path) -> None:
    status, marks, stdout, stderr = _run(tmp_path, "raise", "1")
    assert status == 1
    assert progress_file.uncaught(str(tmp_path / "progress"))  # told the launcher, before the traceback
    assert marks == {"thread", "atexit"}  # no "torn": the teardown was skipped
    assert stdout == "printed without a newline"
    assert "RuntimeError: boom" in stderr


@pytest.mark.parametrize("mode, setting, status", [
    ("raise", None, 1),  # not asked for
    ("raise", "0", 1),  # the user's own "0"
    ("handled", "1", 0),
    ("interrupt", "1", -2),  # Python ends with SIGINT after its teardown, as the shell expects
    ("own-hook", "1", 1),  # a program's own excepthook: left alone
    ("none", "1", 0),
])
def test_everything_else_keeps_the_interpreters_teardown(tmp_path, mode: str, setting: str | None, status: int) -> None:
    got, marks, stdout, _ = _run(tmp_path, mode, setting)
    assert got == status and not progress_file.uncaught(str(tmp_path / "progress"))
    assert marks == {"thread", "atexit", "torn"}
    assert stdout == "printed without a newline"


def test_the_hook_names_the_settings_variables_and_the_progress_files_slot() -> None:
    """The hook loads nothing of smtrain at start-up, so it spells what it reads itself: held to the declarations."""
    tree = ast.parse((Path(STARTUP_HOOK) / "sitecustomize.py").read_text())
    copies = {"SKIP_TEARDOWN_ENV": SKIP_TEARDOWN.variable, "CURRENT_HOST_ENV": CURRENT_HOST.variable,
              "UNCAUGHT_OFFSET": progress_file.UNCAUGHT_OFFSET}
    named = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
             if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in copies}
    assert named == copies
