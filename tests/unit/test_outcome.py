import signal

from smtrain.errors import FailureCause
from smtrain.run.outcome import JobOutcome, describe_program_failure, failure_text, python_exception
from smtrain.proc.supervise import ProcessResult

TRACEBACK = b"Traceback (most recent call last):\n  File \"a.py\", line 2, in <module>\nRuntimeError: failed on purpose\n"


def test_python_exception_from_the_last_traceback() -> None:
    tail = (b"Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'\nretrying\n"
            b"Traceback (most recent call last):\n  File \"a.py\", line 2, in <module>\n    f()\n"
            b"tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating\n")
    assert python_exception(tail) == "tensorflow.python.framework.errors_impl.ResourceExhaustedError"
    assert python_exception(b"plain error output\n") is None
    assert python_exception(b"Traceback (most recent call last):\n  File \"x\"\nKeyboardInterrupt\n") == "KeyboardInterrupt"


def _killed(tail: bytes, shutdown_signal=None, after_grace: bool = False, signum: int = signal.SIGSEGV) -> ProcessResult:
    return ProcessResult(128 + signum, signum, shutdown_signal, after_grace, tail)


# What faulthandler (PYTHONFAULTHANDLER, set for every rank) prints when the teardown crashes.
CRASH_DUMP = (b"Fatal Python error: Illegal instruction\n\nThread 0x00007f3a (most recent call first):\n"
              b"  <no Python frame>\n\nCurrent thread 0x00007f3b (most recent call first):\n  <no Python frame>\n\n"
              b"Extension modules: numpy.core._multiarray_umath, google._upb._message (total: 2)\n")


def test_an_uncaught_exception_then_a_crash_at_exit_ends_with_status_1_whatever_the_signal() -> None:
    # TensorFlow's gRPC server segfaults or hits an illegal instruction while the interpreter exits
    for signum in (signal.SIGSEGV, signal.SIGILL):
        failure = describe_program_failure(_killed(TRACEBACK + CRASH_DUMP, signum=signum), "train.py")
        name = signal.Signals(signum).name
        assert failure == JobOutcome(1, "RuntimeError", (
            f"program train.py raised an uncaught RuntimeError (status 1); the interpreter then died of {name} "
            f"while it shut down (exit status {128 + signum})"), TRACEBACK)  # the dump left out of the tail shown
    # oneDNN's last words before the SIGILL (seen on a fresh clone, TF's parameter-server workers)
    onednn = describe_program_failure(_killed(TRACEBACK + b"could not execute a primitive\n", signum=signal.SIGILL),
                                      "train.py")
    assert onednn[:2] == (1, "RuntimeError")
    assert describe_program_failure(_killed(b"no traceback\n"), "train.py")[:3] == (
        139, FailureCause.PROGRAM_KILLED, "program train.py was killed by SIGSEGV (exit status 139)")


def test_a_traceback_the_program_went_on_from_does_not_hide_a_later_crash() -> None:
    went_on = TRACEBACK + b"epoch 2: loss 0.5\n" + CRASH_DUMP
    assert describe_program_failure(_killed(went_on), "p")[:3] == (
        139, FailureCause.PROGRAM_KILLED, "program p was killed by SIGSEGV (exit status 139)")


def test_a_traceback_does_not_hide_a_kill_that_train_caused_or_an_oom_kill() -> None:
    after_term = describe_program_failure(_killed(TRACEBACK, int(signal.SIGTERM)), "p")
    assert after_term[:2] == (139, FailureCause.PROGRAM_KILLED)
    after_grace = describe_program_failure(_killed(TRACEBACK, int(signal.SIGTERM), True), "p")
    assert after_grace[:3] == (139, FailureCause.PROGRAM_KILLED, "program p was killed by SIGSEGV (exit status 139) after SIGTERM and the grace period")
    oom = describe_program_failure(_killed(TRACEBACK)._replace(oom_killed=True), "p")
    assert oom[:2] == (139, FailureCause.OUT_OF_MEMORY) and "OOM killer" in oom.what


def test_failure_text_is_bounded_and_keeps_the_last_whole_lines() -> None:
    tail = "".join(f"line {i} ü\n" for i in range(1000)).encode()
    text = failure_text("ProgramError", "program x exited with status 3", tail)
    assert len(text.encode()) <= 1024
    assert text.startswith("ProgramError: program x exited with status 3\nstderr (last lines):\n")
    assert text.endswith("line 999 ü\n")
    kept = text.splitlines()[2:]
    assert kept == [f"line {i} ü" for i in range(1000 - len(kept), 1000)]


def test_failure_text_with_one_huge_line_keeps_its_end() -> None:
    text = failure_text("E", "w", ("é" * 5000 + "END").encode())
    assert len(text.encode()) <= 1024 and text.rstrip().endswith("END")


def test_oom_kill_counter_from_cgroup_v2_or_v1(tmp_path) -> None:
    from smtrain.proc.oom import oom_kill_count

    v2, v1 = tmp_path / "memory.events", tmp_path / "memory.oom_control"
    assert oom_kill_count([v2, v1]) is None
    v1.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert oom_kill_count([v2, v1]) == 2
    v2.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert oom_kill_count([v2, v1]) == 1


def test_oom_counter_files_are_those_of_the_process_own_cgroup_first(tmp_path) -> None:
    from smtrain.proc.oom import oom_count_files

    v1 = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
    assert list(oom_count_files(v1, tmp_path)) == [
        tmp_path / "memory/process_api/abc/memory.oom_control", tmp_path / "memory.events",
        tmp_path / "memory/memory.oom_control"]
    v2 = "0::/system.slice/docker-1.scope\n"
    assert list(oom_count_files(v2, tmp_path))[:2] == [
        tmp_path / "system.slice/docker-1.scope/memory.events", tmp_path / "unified/system.slice/docker-1.scope/memory.events"]
    assert list(oom_count_files("0::/\n", tmp_path)) == [tmp_path / "memory.events", tmp_path / "memory/memory.oom_control"]
