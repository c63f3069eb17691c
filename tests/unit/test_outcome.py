import signal

from smtrain.errors import FailureKind
from smtrain.run.outcome import describe_program_failure, failure_text, python_exception
from smtrain.run.supervise import ProcessResult

TRACEBACK = b"Traceback (most recent call last):\n  File \"a.py\", line 2, in <module>\nRuntimeError: failed on purpose\n"


def test_python_exception_from_the_last_traceback() -> None:
    tail = (b"Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'\nretrying\n"
            b"Traceback (most recent call last):\n  File \"a.py\", line 2, in <module>\n    f()\n"
            b"tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating\n")
    assert python_exception(tail) == "tensorflow.python.framework.errors_impl.ResourceExhaustedError"
    assert python_exception(b"plain error output\n") is None
    assert python_exception(b"Traceback (most recent call last):\n  File \"x\"\nKeyboardInterrupt\n") == "KeyboardInterrupt"


def _killed(tail: bytes, shutdown_signal=None, after_grace: bool = False) -> ProcessResult:
    return ProcessResult(139, int(signal.SIGSEGV), shutdown_signal, after_grace, tail)


def test_a_crash_after_an_uncaught_exception_is_blamed_on_the_exception() -> None:
    # TensorFlow's gRPC server often segfaults while the interpreter exits after the exception
    kind, what = describe_program_failure(_killed(TRACEBACK), "train.py", oom_killed=False)
    assert (kind, what) == ("RuntimeError", "program train.py was killed by SIGSEGV (exit status 139) after it printed a RuntimeError traceback")
    assert describe_program_failure(_killed(b"no traceback\n"), "train.py", oom_killed=False) == (
        FailureKind.PROGRAM_KILLED, "program train.py was killed by SIGSEGV (exit status 139)")


def test_a_traceback_does_not_hide_a_kill_that_train_caused_or_an_oom_kill() -> None:
    after_term = describe_program_failure(_killed(TRACEBACK, int(signal.SIGTERM)), "p", oom_killed=False)
    assert after_term[0] is FailureKind.PROGRAM_KILLED
    after_grace = describe_program_failure(_killed(TRACEBACK, int(signal.SIGTERM), True), "p", oom_killed=False)
    assert after_grace == (FailureKind.PROGRAM_KILLED, "program p was killed by SIGSEGV (exit status 139) after SIGTERM and the grace period")
    assert describe_program_failure(_killed(TRACEBACK), "p", oom_killed=True)[0] is FailureKind.OUT_OF_MEMORY


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
    from smtrain.run.outcome import oom_kill_count

    v2, v1 = tmp_path / "memory.events", tmp_path / "memory.oom_control"
    assert oom_kill_count((v2, v1)) is None
    v1.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert oom_kill_count((v2, v1)) == 2
    v2.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert oom_kill_count((v2, v1)) == 1
