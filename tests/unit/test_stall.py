"""The stall watchdog's judgement (smtrain.run.stall.StallWatch), on made-up clocks, and how Horovod's
stall inspector is read (smtrain.rank.collectives)."""
from smtrain.progress import Counts, InitPhase
from smtrain.rank.collectives import CollectiveWaits, StallInspectorLines, check_interval_s
from smtrain.run.stall import RankProgress, StallEvidence, StallWatch

WAITING, DONE = InitPhase.WAITING, InitPhase.DONE


def _watch(timeout_s: float = 20) -> StallWatch:
    watch = StallWatch(timeout_s=timeout_s, now=0)
    for rank in range(4):
        watch.expect(f"algo-{rank // 2 + 1}", rank)
    return watch


def _all(watch: StallWatch, counts: Counts, now: float, ranks=range(4)) -> None:
    for rank in ranks:
        watch.observe(f"algo-{rank // 2 + 1}", rank, counts, now)


# -- steps the program reports (smtrain's helpers) ----------------------------------------------------
def test_a_job_that_never_reports_progress_is_not_judged() -> None:
    assert _watch().check(now=10_000) is None


def test_signs_of_life_and_a_finished_init_alone_never_end_a_job() -> None:
    watch = _watch()
    _all(watch, Counts(0, 3, DONE), now=5)  # every rank returned from hvd.init, read data, went quiet
    assert watch.check(now=10_000) is None


def test_no_progress_for_the_timeout_names_the_ranks_with_fewest_steps() -> None:
    watch = _watch()
    for rank, steps in enumerate((6, 6, 6, 5)):
        watch.observe(f"algo-{rank // 2 + 1}", rank, Counts(steps), now=10)
    assert watch.check(now=29) is None
    stall = watch.check(now=30)
    assert stall is not None and stall.evidence is StallEvidence.STEPS
    assert stall.stopped == (RankProgress("algo-2", 3, 5),) and stall.most_steps == 6
    assert stall.describe() == "no rank made progress for 20 s; stopped first: rank 3 on algo-2 (5 steps; the furthest rank 6)"


def test_ranks_that_stopped_together_are_said_to_have_and_no_culprit_is_invented() -> None:
    watch = _watch()
    _all(watch, Counts(7), now=3)
    watch.observe("algo-1", 0, Counts(7, 2), now=4)  # more signs of life do not make the others culprits
    stall = watch.check(now=24)
    assert stall is not None and len(stall.stopped) == 4
    assert stall.describe() == "no rank made progress for 20 s; all 4 ranks stopped together at 7 steps (none is behind the others)"


def test_one_rank_on_its_own() -> None:
    watch = StallWatch(timeout_s=3, now=0)
    watch.expect("algo-1", 0)
    watch.observe("algo-1", 0, Counts(5), now=1)
    stall = watch.check(now=4)
    assert stall is not None and stall.describe() == "no rank made progress for 3 s; rank 0 on algo-1 stopped at 5 steps"


def test_any_step_or_sign_of_life_resets_the_clock() -> None:
    watch = _watch()
    watch.observe("algo-1", 0, Counts(1), now=5)
    watch.observe("algo-1", 0, Counts(1, 7), now=20)  # no new step, but data was read
    assert watch.check(now=39) is None
    watch.observe("algo-1", 0, Counts(1, 7), now=39)  # the same counts again: no progress
    assert watch.check(now=40) is not None


def test_a_rank_that_never_reported_counts_with_zero_steps() -> None:
    watch = _watch()
    _all(watch, Counts(3), now=1, ranks=(0, 1, 2))
    stall = watch.check(now=21)
    assert stall is not None and [r.rank for r in stall.stopped] == [3]


def test_zero_switches_it_off() -> None:
    watch = StallWatch(timeout_s=0, now=0)
    watch.observe("algo-1", 0, Counts(1), now=1)
    assert watch.check(now=1e9) is None


# -- Horovod's init --------------------------------------------------------------------------------
def test_the_rank_that_never_reached_init_while_the_others_wait_in_it_is_named() -> None:
    watch = _watch(15)
    _all(watch, Counts(0, 1, WAITING), now=2, ranks=(0, 1, 3))
    assert watch.check(now=16) is None
    stall = watch.check(now=17)
    assert stall is not None and stall.evidence is StallEvidence.INIT
    assert stall.stopped == (RankProgress("algo-2", 2, 0),)
    assert stall.describe() == "rank 2 on algo-2 never reached hvd.init(); the other ranks have waited in it for 15 s"


def test_a_rank_still_on_its_way_to_init_or_every_rank_in_it_is_not_a_stall() -> None:
    watch = _watch(15)
    _all(watch, Counts(0, 1, WAITING), now=2, ranks=(0, 1, 3))
    watch.observe("algo-2", 2, Counts(0, 1), now=10)  # rank 2 shows a sign of life (imports, reads)
    assert watch.check(now=24) is None and watch.check(now=25) is not None
    slow = _watch(15)
    _all(slow, Counts(0, 1, WAITING), now=2, ranks=(0, 1, 3))
    slow.observe("algo-2", 2, Counts(0, 1, WAITING), now=14)  # it got there: init returns for all
    assert slow.check(now=100) is None


# -- Horovod's stall inspector -----------------------------------------------------------------------
def test_the_rank_the_others_waited_for_in_a_collective_for_the_timeout_is_named_alone() -> None:
    watch = _watch()
    _all(watch, Counts(0, 2, DONE), now=1)
    watch.waited_for({1: 3.0}, check_s=3, now=13)
    watch.waited_for({1: 16.0}, check_s=3, now=26)
    assert watch.check(now=26) is None
    watch.waited_for({1: 20.5}, check_s=3, now=30)
    stall = watch.check(now=30)
    assert stall is not None and stall.evidence is StallEvidence.COLLECTIVE
    assert stall.stopped == (RankProgress("algo-1", 1, 0, 2),)
    assert stall.describe() == ("rank 1 on algo-1 stopped: the other ranks have waited for it in a Horovod collective "
                                "for 20 s (Horovod's stall inspector)")


def test_a_waited_for_rank_that_shows_signs_of_life_is_not_stopped() -> None:
    watch = _watch()
    _all(watch, Counts(0, 2, DONE), now=1)
    watch.observe("algo-1", 1, Counts(0, 9, DONE), now=20)  # rank 0 evaluates alone: it reads data
    watch.waited_for({1: 25.0}, check_s=3, now=25)
    assert watch.check(now=25) is None


def test_an_old_word_of_the_inspector_does_not_count() -> None:
    watch = _watch()
    watch.waited_for({1: 25.0}, check_s=3, now=25)
    assert watch.check(now=25 + 1.5 * 3 + 2 + 0.1) is None


def test_the_inspector_warning_is_read_line_by_line_with_the_missing_ranks() -> None:
    named: list[tuple[int, float]] = []
    lines = StallInspectorLines(lambda rank, check_s: named.append((rank, check_s)))
    lines(b"epoch 1\n[2026-11-25 10:00:00.000001: W /tmp/horovod/common/stall_inspector.cc:105] One or more tensors "
          b"were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder "
          b"of ranks for more than 3 seconds. This may indicate that different ranks are trying to submit different "
          b"tensors or that only subset of ranks is submitting tensors, which will cause deadlock. \nMissing ranks:\n")
    lines(b"1: [allreduce.step]\n")  # std::cerr writes the message and its end apart
    lines(b"3!: [grad_0, grad_1 ...]\n12: [x]\nloss=0.5\n4: [not part of a warning]\n")
    assert named == [(1, 3.0), (3, 3.0), (12, 3.0)]


def test_waits_of_one_rank_add_up_only_while_the_inspector_names_it_every_interval() -> None:
    waits = CollectiveWaits()
    assert waits.named(1, 3, at=10) == 3  # it has waited at least one interval
    assert waits.named(1, 3, at=13.01) == 6.01
    assert waits.named(1, 3, at=16.02) == 9.02
    # one interval without the rank: the wait ended; a slower rank starts a new one
    assert waits.named(1, 3, at=22.05) == 3


def test_the_inspector_interval_follows_the_timeout() -> None:
    assert [check_interval_s(t) for t in (1, 20, 60, 1800)] == [2, 3, 10, 10]
