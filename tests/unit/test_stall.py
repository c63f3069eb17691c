"""The stall watchdog's judgement (smtrain.run.stall.StallWatch), on made-up clocks."""
from smtrain.run.stall import RankProgress, StallWatch


def _watch() -> StallWatch:
    watch = StallWatch(timeout_s=20, now=0)
    for rank in range(4):
        watch.expect(f"algo-{rank // 2 + 1}", rank)
    return watch


def test_a_job_that_never_reports_progress_is_not_judged() -> None:
    assert _watch().check(now=10_000) is None


def test_no_progress_for_the_timeout_names_the_ranks_with_fewest_steps() -> None:
    watch = _watch()
    for rank, steps in enumerate((6, 6, 6, 5)):
        watch.observe(f"algo-{rank // 2 + 1}", rank, steps, 0, now=10)
    assert watch.check(now=29) is None
    stall = watch.check(now=30)
    assert stall is not None and stall.stopped == (RankProgress("algo-2", 3, 5),) and stall.most_steps == 6
    assert "rank 3 on algo-2" in stall.describe() and "20 s" in stall.describe()


def test_any_step_or_sign_of_life_resets_the_clock() -> None:
    watch = _watch()
    watch.observe("algo-1", 0, 1, 0, now=5)
    watch.observe("algo-1", 0, 1, 7, now=20)  # no new step, but data was read
    assert watch.check(now=39) is None
    watch.observe("algo-1", 0, 1, 7, now=39)  # the same counts again: no progress
    assert watch.check(now=40) is not None


def test_a_rank_that_never_reported_counts_with_zero_steps() -> None:
    watch = _watch()
    for rank in (0, 1, 2):
        watch.observe(f"algo-{rank // 2 + 1}", rank, 3, 0, now=1)
    stall = watch.check(now=21)
    assert stall is not None and [r.rank for r in stall.stopped] == [3]


def test_zero_switches_it_off() -> None:
    watch = StallWatch(timeout_s=0, now=0)
    watch.observe("algo-1", 0, 1, 0, now=1)
    assert watch.check(now=1e9) is None


def test_among_ranks_without_steps_the_one_without_a_sign_of_life_is_named() -> None:
    watch = _watch()  # ranks 0-2 reached hvd.init (a sign of life each); rank 3 never did
    for rank in (0, 1, 2):
        watch.observe(f"algo-{rank // 2 + 1}", rank, 0, 1, now=2)
    stall = watch.check(now=22)
    assert stall is not None and [(r.host, r.rank) for r in stall.stopped] == [("algo-2", 3)]

