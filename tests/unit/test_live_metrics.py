"""The live metrics' parts: TensorBoard scalars read back by TensorBoard's own loader, a rank's step recorder
followed across its files, and the master's straggler verdict - the report's RankImbalance rule over the last
window - on made-up steps. The whole path on simulated hosts: tests/cluster/test_live_metrics.py."""
from __future__ import annotations

import random
from pathlib import Path

from smtrain.profiler.events import bin_centre_ms, bin_of
from smtrain.profiler.live import Scalars, system_scalars
from smtrain.profiler.live_steps import RankWindow, StepTail, windows
from smtrain.profiler.monitor import Sample
from smtrain.profiler.steprules import DEFAULTS, JobPhases, StepContext, rank_imbalance
from smtrain.profiler.steps import StepRecorder
from smtrain.run.stragglers import Stragglers
from smtrain.wire.profiler_settings import ProfilerSettings


def test_scalars_are_read_back_by_tensorboards_own_loader(tmp_path: Path) -> None:
    """TensorBoard 2.21's event accumulator (what its server reads) finds every run and tag, with its values,
    steps and wall times; a program's own event file in the same folder is left as it was."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    own = tmp_path / "events.out.tfevents.1.program"
    own.write_bytes(b"the program's own")
    scalars = Scalars(tmp_path / "smtrain")
    samples = [Sample("cpu", "cpu_total", "CPUUtilization", 40.0), Sample("cpu", "cpu_total", "CPUUtilization", 60.0),
               Sample("gpu", "gpu0", "GPUUtilization", 90.0), Sample("network", "total", "ReceiveBytesPerSecond", 2e6)]
    scalars.add("algo-1", system_scalars(samples), 5, 1000.5)
    scalars.add("algo-1/rank-1", {"steps/step_ms": 12.5}, 5, 1000.5)
    scalars.add("algo-1", {"system/cpu_percent": 70.0}, 10, 1005.5)
    scalars.flush()
    host = EventAccumulator(str(tmp_path / "smtrain" / "algo-1"))
    host.Reload()
    assert [(e.step, e.wall_time, e.value) for e in host.Scalars("system/cpu_percent")] == [(5, 1000.5, 50.0),
                                                                                            (10, 1005.5, 70.0)]
    assert host.Scalars("system/gpu0_percent")[0].value == 90.0
    assert host.Scalars("system/network_receive_mb_per_s")[0].value == 2.0
    rank = EventAccumulator(str(tmp_path / "smtrain" / "algo-1" / "rank-1"))
    rank.Reload()
    assert rank.Tags()["scalars"] == ["steps/step_ms"] and rank.Scalars("steps/step_ms")[0].value == 12.5
    scalars.close()
    assert own.read_bytes() == b"the program's own"


def test_the_tail_follows_a_ranks_step_recorder_across_its_files(tmp_path: Path) -> None:
    """The real step recorder, its file renamed into place after a minute: every step once, none lost at the
    rename; the window counts them and holds their durations and the gaps before them."""
    now = [1000.0]
    recorder = StepRecorder(ProfilerSettings(str(tmp_path), "algo-1"), 3, clock=lambda: now[0])
    tail = StepTail(tmp_path)
    start = 1000.0
    seen = []
    for batch in range(3):
        for _ in range(10):
            recorder.add_step("TRAIN", start, start + 0.020)  # 20-ms steps, 30-ms gaps
            start += 0.050
        now[0] += 40  # the second flush comes past ROTATE_S: the file is renamed, the next one opened
        recorder.flush()
        seen.append(windows(tail.poll()))
    assert all(set(w) == {"3-algo-1"} for w in seen)
    assert [w["3-algo-1"].steps for w in seen] == [10, 10, 10] and seen[-1]["3-algo-1"].last_step == 29
    window = seen[0]["3-algo-1"]
    assert window.step_bins == ((bin_centre_ms(bin_of(20.0)), 10),)
    assert window.between_bins == ((bin_centre_ms(bin_of(30.0)), 9),)  # the first step has no gap before it
    assert list((tmp_path / "framework").rglob("*_pythontimeline.json"))  # a file was renamed into place
    assert RankWindow.from_json(window.to_json()) == window
    tail.close()


def _window(gap_ms: float, cycle_ms: float, noise: random.Random, steps: int = 20) -> list:
    """A rank's 5 s of steps in a synchronous job: gaps of `gap_ms` +-20 %, each step the rest of the job's
    cycle (a fast rank's step holds its wait in the collective for the slow one)."""
    between: dict[float, int] = {}
    step: dict[float, int] = {}
    for _ in range(steps):
        gap = gap_ms * noise.uniform(0.8, 1.2)
        for bins, ms in ((between, gap), (step, max(cycle_ms - gap, 1.0))):
            key = bin_centre_ms(bin_of(ms))
            bins[key] = bins.get(key, 0) + 1
    return RankWindow(steps, 0, tuple(sorted(step.items())), tuple(sorted(between.items()))).to_json()


def test_the_straggler_verdict_names_the_slow_rank_then_its_host_once_each_and_nobody_on_noise() -> None:
    """2 hosts x 2 ranks, a window of 20 s (said after 5 s of the same verdict), a message a host every 5 s:
    ranks whose gaps differ by noise (+-20 %) are named by nobody; rank 3 waiting 150 ms more a step is named
    with its host, once; both of algo-2's ranks name the host; back to equal gaps, the log says so once."""
    said: list[str] = []
    clock = [0.0]
    stragglers = Stragglers(said.append, 20.0, clock=lambda: clock[0])
    noise = random.Random(7)

    def run(seconds: int, gaps: dict[int, float]) -> None:
        for _ in range(seconds // 5):
            clock[0] += 5
            for host, ranks in (("algo-1", (0, 1)), ("algo-2", (2, 3))):
                cycle = max([40.0, *gaps.values()]) + 10
                stragglers.take(host, {"host": host, "ranks": {f"{r}-{host}": _window(gaps.get(r, 40.0), cycle, noise)
                                                               for r in ranks}})

    run(60, {})
    assert said == []
    run(40, {3: 190.0})
    assert len(said) == 1 and said[0].startswith("straggler: rank 3 on algo-2 spends "), said
    assert "the other ranks wait for it in their collectives (RankImbalance, over the last 20 s)" in said[0]
    # one rule, two moments: the report's RankImbalance on the same evidence says the same
    verdict, why = rank_imbalance(StepContext(stragglers.evidence(), JobPhases(0.0, None, None, 0.0), None),
                                  DEFAULTS["RankImbalance"])
    assert verdict is True and why.startswith("rank 3-algo-2 spends "), why
    run(40, {2: 190.0, 3: 190.0})
    assert len(said) == 2 and said[1].startswith("straggler: host algo-2 (its ranks 2, 3) spend "), said
    run(40, {})
    assert said[2:] == ["straggler: none any more - every rank's gap between steps is within the rule's bounds "
                        "(RankImbalance, over the last 20 s)"]
