"""The rank launcher's early failure report (smtrain.rank.watch.FailureWatch): sent once, as soon as the
traceback's exception line has arrived (it tells a Horovod consequence from a cause), or after a wait."""
from __future__ import annotations

import threading
import time

from smtrain.rank.reporter import Reporter
from smtrain.wire.rank_failure import RankFailure
from smtrain.rank.watch import FailureWatch, exception_line_seen

HEADER = b"Traceback (most recent call last):\n"
FRAME = b'  File "/opt/ml/code/train.py", line 52, in <module>\n    loss = step(x)\n'
SHUTDOWN = b"tensorflow.python.framework.errors_impl.UnknownError: Horovod has been shut down. This was caused by ...\n"


def test_exception_line_is_the_first_unindented_whole_line_after_the_header() -> None:
    assert not exception_line_seen(HEADER)
    assert not exception_line_seen(HEADER + FRAME)
    assert not exception_line_seen(HEADER + FRAME + b"RuntimeError: bo")  # not a whole line yet
    assert exception_line_seen(HEADER + FRAME + b"RuntimeError: boom\n")


class Sent(Reporter):
    """Records the reports instead of sending them to a master (the channel is tested in tests/cluster)."""

    def __init__(self) -> None:
        super().__init__(None, {"SM_CURRENT_HOST": "algo-2", "SM_RANK": "3", "SM_LOCAL_RANK": "1"}, "train.py")
        self.reports: list[RankFailure] = []
        self.arrived = threading.Event()

    def send(self, report: RankFailure) -> None:
        self.reports.append(report)
        self.arrived.set()


def test_the_report_waits_for_the_exception_line_across_chunks_and_goes_once() -> None:
    sent = Sent()
    watch = FailureWatch(sent, wait_s=30)
    watch(b"step 1\n")
    assert watch.first_error_at is None
    watch(b"epoch done\n" + HEADER)
    watch(FRAME)
    time.sleep(0.2)
    assert sent.reports == [] and watch.first_error_at is not None
    watch(SHUTDOWN + b"more output\n")
    assert sent.arrived.wait(5)
    watch(HEADER + FRAME + b"ValueError: later\n")
    time.sleep(0.2)
    assert len(sent.reports) == 1
    report = sent.reports[0]
    assert report.final is False and report.error_at == watch.first_error_at
    assert (report.host, report.rank, report.local_rank) == ("algo-2", 3, 1)
    assert report.stderr_tail.startswith(HEADER.decode()) and "Horovod has been shut down" in report.stderr_tail
    assert "epoch done" not in report.stderr_tail


def test_without_an_exception_line_the_report_goes_after_the_wait() -> None:
    sent = Sent()
    watch = FailureWatch(sent, wait_s=0.3)
    started = time.monotonic()
    watch(HEADER + FRAME)
    assert sent.arrived.wait(5)
    assert time.monotonic() - started >= 0.25
    assert sent.reports[0].stderr_tail == (HEADER + FRAME).decode()


def test_the_report_says_whether_the_start_up_hook_saw_the_exception_end_the_program() -> None:
    for said in (True, False):
        sent = Sent()
        watch = FailureWatch(sent, wait_s=30, uncaught=lambda: said)
        watch(HEADER + FRAME + b"RuntimeError: boom\n")
        assert sent.arrived.wait(5) and sent.reports[0].uncaught is said
