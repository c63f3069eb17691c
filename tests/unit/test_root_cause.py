"""Which failed rank the master blames (smtrain.wire.rank_failure.root_cause)."""
from smtrain.wire.rank_failure import RankFailure, root_cause

SHUTDOWN = "UnknownError: Horovod has been shut down. This was caused by an exception on one of the ranks"


def r(rank, error_at, final=True, tail="RuntimeError: boom", host="algo-1") -> RankFailure:
    return RankFailure(host=host, rank=rank, local_rank=rank % 2, final=final, program="train.py",
                       error_at=error_at, stderr_tail=tail)


def test_horovod_consequences_are_not_blamed_even_when_earlier() -> None:
    # rank 3's teardown is slow: the ranks it brought down printed and ended first
    assert root_cause([r(0, 10.0, tail=SHUTDOWN), r(1, 10.1, tail=SHUTDOWN), r(3, 10.5, host="algo-2")]).rank == 3


def test_an_early_report_stands_when_mpirun_killed_the_launcher() -> None:
    assert root_cause([r(0, 10.0, tail=SHUTDOWN), r(3, 9.9, final=False, host="algo-2")]).rank == 3


def test_a_rank_that_mpiruns_abort_ended_without_an_error_of_its_own_is_not_blamed() -> None:
    # rank 3's launcher was killed before its final report; rank 0 printed no traceback, its launcher got
    # SIGTERM from mpirun's abort and its program ended 143
    aborted = r(0, 10.5, tail="some log line")._replace(shutdown_signal=15, traceback_seen=False, exit_code=143)
    assert root_cause([aborted, r(3, 10.0, final=False, host="algo-2")]).rank == 3
    # ... but a rank that failed on its own and then got the abort is still a cause
    own_error = aborted._replace(traceback_seen=True, rank=1)
    assert root_cause([own_error, r(3, 10.0, final=False, host="algo-2")]).rank == 1
    # ... and so is a rank that died without a traceback while nobody asked it to stop (a segfault)
    crashed = r(2, 10.5, tail="")._replace(term_signal=11, traceback_seen=False)
    assert root_cause([crashed, r(3, 10.0, final=False, host="algo-2")]).rank == 2


def test_final_reports_win_over_a_handled_traceback_long_before() -> None:
    assert root_cause([r(5, 100.0, final=False), r(2, 3000.0)]).rank == 2


def test_of_early_reports_only_the_latest_is_the_likeliest() -> None:
    assert root_cause([r(5, 100.0, final=False), r(3, 3000.0, final=False)]).rank == 3


def test_earliest_final_and_a_final_replaces_its_early_report() -> None:
    reports = [r(1, 5.0, final=False), r(2, 7.0), r(1, 5.0, tail="ValueError: whole tail")]
    chosen = root_cause(reports)
    assert chosen.rank == 1 and chosen.stderr_tail == "ValueError: whole tail"


def test_all_consequences_then_earliest() -> None:
    assert root_cause([r(0, 10.0, tail=SHUTDOWN), r(1, 9.0, tail=SHUTDOWN)]).rank == 1
    assert root_cause([]) is None


def test_a_report_survives_the_control_channel_and_bad_ones_are_refused() -> None:
    report = r(3, 12.5, host="algo-2")._replace(exit_code=1, traceback_seen=True, shutdown_signal=None)
    assert RankFailure.from_fields(report.to_fields()) == report
    import pytest

    with pytest.raises(ValueError):
        RankFailure.from_fields({"host": "algo-2"})


def test_an_uncaught_exceptions_early_report_ranks_as_a_final_one_and_settles_the_cause() -> None:
    from smtrain.wire.rank_failure import settled

    uncaught = r(3, 10.0, final=False, host="algo-2")._replace(uncaught=True)
    assert root_cause([r(1, 10.5), uncaught]).rank == 3  # the earliest of those that ended or are ending
    assert root_cause([r(1, 10.5), r(3, 10.0, final=False, host="algo-2")]).rank == 1  # a handled one may be stale
    assert settled(uncaught) and settled(r(1, 10.5))
    assert not settled(r(3, 10.0, final=False)) and not settled(r(0, 9.0, tail=SHUTDOWN)) and not settled(None)
    assert RankFailure.from_fields(uncaught.to_fields()) == uncaught
