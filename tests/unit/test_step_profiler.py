"""The step profiler's pure parts: its settings (profilerconfig.json as the SDK writes it, the
hyperparameters), the event files (written, complete or cut short, read back), the step rules on
constructed steps (each fires just past its threshold, not short of it), Horovod's timeline, and the
recorder's windows and files."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from smtrain.config.profiling import Profiling, profiling_of
from smtrain.errors import ConfigError
from smtrain.profiler import job_report, steprules
from smtrain.profiler.events import (STEP, StepEvent, StepSummary, bin_of, file_header, parse, read_folder, summary_lines,
                                     to_lines)
from smtrain.profiler.rules import DEFAULTS, parse_overrides
from smtrain.profiler.steps import SUMMARY_S, StepRecorder
from smtrain.profiler.timeline import summarise_timeline
from smtrain.wire.profiler_settings import ProfilerSettings, Window
from tests.harness.steps import fast_steps
from tests.support import require_root

# What sagemaker 2.257.7's ProfilerConfig(framework_profile_params=FrameworkProfile(start_step=3,
# num_steps=2))._to_request_dict() gives (its strings are Python dicts with a trailing comma).
SDK_PROFILER_CONFIG = {
    "DisableProfiler": False, "ProfilingIntervalInMilliseconds": 500,
    "ProfilingParameters": {
        "LocalPath": "/opt/ml/output/profiler", "RotateMaxFileSizeInBytes": "10485760",
        "DetailedProfilingConfig": "{\"StartStep\": 3, \"NumSteps\": 2, }",
        "PythonProfilingConfig": "{\"StartStep\": 3, \"NumSteps\": 2, \"ProfilerName\": \"cprofile\", "
                                 "\"cProfileTimer\": \"total_time\", }",
    },
}


def test_profilerconfig_as_the_sdk_writes_it() -> None:
    got = profiling_of({}, {}, SDK_PROFILER_CONFIG, "hp.json", "profilerconfig.json")
    assert got == Profiling(True, Window(3, 2), Window(3, 2))
    assert profiling_of({}, {}, {}, "hp.json", "p.json") == Profiling(True, None, None)  # no file: steps only
    lower = json.loads(json.dumps(SDK_PROFILER_CONFIG).lower())  # smdebug reads keys in any case
    assert profiling_of({}, {}, lower, "hp.json", "p.json").detailed == Window(3, 2)
    assert profiling_of({}, {}, {"DisableProfiler": True}, "hp.json", "p.json").steps is False


def test_settings_switch_each_on_and_off_and_win_over_the_file() -> None:
    hps = {"sagemaker_framework_metrics": "off", "sagemaker_detailed_profiling": "5:1"}
    assert profiling_of(hps, {}, SDK_PROFILER_CONFIG, "hp", "p") == Profiling(False, Window(5, 1), Window(3, 2))
    env = {"SM_PYTHON_PROFILING": "off", "SM_FRAMEWORK_METRICS": "on"}
    assert profiling_of(hps, env, SDK_PROFILER_CONFIG, "hp", "p") == Profiling(True, Window(5, 1), None)


@pytest.mark.parametrize("hps,config,message", [
    ({"sagemaker_detailed_profiling": "5"}, {}, "sagemaker_detailed_profiling (or SM_DETAILED_PROFILING) must be START:NUM"),
    ({"sagemaker_python_profiling": "3:0"}, {}, "must be START:NUM, NUM >= 1"),
    ({}, {"ProfilingParameters": {"DetailedProfilingConfig": "{not a dict"}}, "ProfilingParameters.DetailedProfilingConfig must be a dict"),
    ({}, {"ProfilingParameters": {"PythonProfilingConfig": "{\"StartTimeInSecSinceEpoch\": 1, \"DurationInSeconds\": 5}"}},
     "only step windows"),
])
def test_bad_profiling_settings_name_the_field(hps: dict, config: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        profiling_of(hps, {}, config, "hyperparameters.json", "profilerconfig.json")


def test_settings_travel_to_the_rank_as_json() -> None:
    settings = ProfilerSettings("/opt/ml/output/profiler", "algo-2", True, Window(3, 2), None)
    assert ProfilerSettings.from_json(settings.to_json()) == settings
    assert ProfilerSettings.from_environ({"SM_FRAMEWORK_PROFILER": "{broken"}) is None


def _events(records: list[tuple], node: str = "0-algo-1") -> list[StepEvent]:
    pids: dict[str, int] = {}
    text = file_header(1_000_000) + to_lines(records, 1_000_000, pids, 42)
    return parse(text, node)


def test_events_round_trip_also_from_a_file_cut_short() -> None:
    records = [(STEP, "TRAIN", i, 2.0 + i * 0.1, 2.05 + i * 0.1) for i in range(5)]
    events = _events(records)
    assert [(e.step, round(e.start, 6), round(e.duration, 6)) for e in events] == \
        [(i, round(2.0 + i * 0.1, 6), 0.05) for i in range(5)]
    text = file_header(1_000_000) + to_lines(records, 1_000_000, {}, 42)
    assert len(parse(text[: len(text) - 30], "0-algo-1")) == 4  # the last line torn by a kill
    assert len(parse(text.rstrip().rstrip(",") + "\n]\n", "0-algo-1")) == 5  # closed


def _rank(node: str, step_ms: float, between_ms: float, n: int = 20, start: float = 100.0) -> list[tuple]:
    out, t = [], start
    for i in range(n):
        out.append(("Between", "TRAIN", i, t, t + between_ms / 1e3))
        t += between_ms / 1e3
        out.append((STEP, "TRAIN", i, t, t + step_ms / 1e3))
        t += step_ms / 1e3
    return out


def _verdicts(events: list[StepEvent], start: float = 90.0, end: float = 200.0, timeline=None, **overrides) -> dict:
    ctx = steprules.StepContext(steprules.rank_stats(events), steprules.phases(events, start, end), timeline)
    return {r.rule: r for r in steprules.evaluate(ctx, overrides)}


def test_a_rank_the_others_wait_for_trips_rank_imbalance_and_names_it() -> None:
    fast = _events(_rank("0-algo-1", 40, 1), "0-algo-1")
    healthy = fast + _events(_rank("1-algo-1", 40, 2), "1-algo-1")
    assert not _verdicts(healthy)["RankImbalance"].triggered
    noisy = fast + _events(_rank("1-algo-1", 32, 9), "1-algo-1")  # 8 ms more of a 41-ms cycle: an input's jitter
    assert not _verdicts(noisy)["RankImbalance"].triggered
    slow = fast + _events(_rank("1-algo-1", 15, 26), "1-algo-1")  # 25 ms more between steps of a ~41 ms cycle
    verdict = _verdicts(slow)["RankImbalance"]
    assert verdict.triggered and verdict.reason.startswith("rank 1-algo-1 spends 26.0 ms between steps"), verdict.reason


@pytest.mark.parametrize("between_ms,fires", [(9.0, False), (11.0, True)])
def test_input_bound(between_ms: float, fires: bool) -> None:
    verdict = _verdicts(_events(_rank("0-algo-1", 40, between_ms)))["InputBound"]  # threshold 20 % of the cycle
    assert verdict.triggered is fires, verdict.reason


def test_step_outliers() -> None:
    records = _rank("0-algo-1", 20, 1, n=400)
    slow = [(k, m, s, a, b + (0.5 if k == STEP and s % 25 == 5 else 0.0)) for k, m, s, a, b in records]
    assert not _verdicts(_events(records))["StepOutlier"].triggered
    verdict = _verdicts(_events(slow))["StepOutlier"]
    assert verdict.triggered and "16 of 400 steps" in verdict.reason, verdict.reason


def test_slow_initialization_counts_from_the_job_start() -> None:
    events = _events(_rank("0-algo-1", 20, 1, start=400.0))
    assert _verdicts(events, start=0.0, end=430.0)["SlowInitialization"].triggered  # 400 s of 430
    assert not _verdicts(events, start=300.0, end=430.0)["SlowInitialization"].triggered  # 100 s < 120 s
    assert _verdicts(events, start=300.0, end=430.0, SlowInitialization={"min_seconds": 60})["SlowInitialization"].triggered


def test_horovod_timeline_shares_and_the_allreduce_rule() -> None:
    events = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "grad_0"}}]
    for i in range(10):  # per 100 ms: 20 ms negotiating, 60 ms in the allreduce
        t = i * 100_000
        events += [{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": t, "pid": 1}, {"ph": "E", "ts": t + 20_000, "pid": 1},
                   {"ph": "B", "name": "ALLREDUCE", "ts": t + 20_000, "pid": 1},
                   {"ph": "B", "name": "MPI_ALLREDUCE", "ts": t + 30_000, "pid": 1}, {"ph": "E", "ts": t + 70_000, "pid": 1},
                   {"ph": "E", "ts": t + 80_000, "pid": 1}]
    stats = summarise_timeline(events)
    assert round(stats.collective_share, 2) == round(0.6 / 0.98, 2) and round(stats.negotiate_s, 3) == 0.2
    assert set(stats.by_activity) == {"NEGOTIATE_ALLREDUCE", "ALLREDUCE"}
    steps = _events(_rank("0-algo-1", 20, 1))
    assert _verdicts(steps, timeline=stats)["AllreduceBound"].triggered
    assert not _verdicts(steps, timeline=stats, AllreduceBound={"threshold": 0.7})["AllreduceBound"].triggered
    assert "no Horovod timeline" in _verdicts(steps)["AllreduceBound"].reason


def test_report_parameters_cover_the_step_rules() -> None:
    known = {**DEFAULTS, **steprules.DEFAULTS}
    assert parse_overrides(["RankImbalance.threshold=0.3"], known) == {"RankImbalance": {"threshold": 0.3}}
    with pytest.raises(ValueError, match="unknown rule parameter"):
        parse_overrides(["RankImbalance.nope=1"], known)


def test_the_recorder_numbers_steps_measures_gaps_and_closes_its_file(tmp_path: Path) -> None:
    clock = iter([float(t) for t in range(100, 200)])
    recorder = StepRecorder(ProfilerSettings(str(tmp_path), "algo_1"), rank=3, clock=lambda: next(clock))
    recorder.run_begin("TRAIN")
    for _ in range(3):
        recorder.begin("TRAIN")
        recorder.end("TRAIN")
    recorder.boundary(110.0, 111.0, extends=False)
    recorder.boundary(111.0, 112.0, extends=True)  # the same eager step, made longer
    recorder.close()
    assert not list((tmp_path / "framework").glob("*.tmp"))
    events = sorted(read_folder([tmp_path]), key=lambda e: (e.start, e.kind))
    assert {e.node for e in events} == {"3-algo-1"}  # smdebug's node id: no underscore
    steps = [(e.step, e.start, e.end) for e in events if e.kind == STEP]
    assert steps == [(0, 100.0, 101.0), (1, 102.0, 103.0), (2, 104.0, 105.0), (3, 110.0, 112.0)]
    assert [(e.start, e.end) for e in events if e.kind == "Between"] == [(101.0, 102.0), (103.0, 104.0), (105.0, 110.0)]


def test_a_million_fast_steps_keep_a_bounded_file_and_every_count(tmp_path: Path) -> None:
    """The documented bound: each mode's first FULL_STEPS steps one by one (~0.5 MB), then at most
    ~0.31 MB an hour of summaries, whatever the step rate; the report's statistics from what is kept."""
    recorder = StepRecorder(ProfilerSettings(str(tmp_path), "algo-1", min_free_mb=0), rank=0)
    recorder.thread = object()  # no writer thread: this test flushes as the writer would
    end = fast_steps(recorder, 1_000_000, slow_every=1000)
    recorder.close()
    hours = (end - 1000.0) / 3600
    kept = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert kept <= 0.55e6 + 0.35e6 * hours, (kept, hours)
    events = list(read_folder([tmp_path]))
    summaries = [e for e in events if isinstance(e, StepSummary)]
    assert summaries and all(s.end - s.start <= SUMMARY_S + 1 for s in summaries)
    stats = steprules.rank_stats(events)["0-algo-1"]
    assert stats.steps["TRAIN"] == 1_000_000 and stats.train_steps == 1_000_000
    assert abs(stats.median_step_ms - 1.0) < 0.05 and abs(stats.median_between_ms - 0.1) < 0.005
    found, mean, _ = steprules.outliers(stats, 3, 2)
    assert 990 <= len(found) <= 1000, len(found)  # the 20-ms steps, one in a thousand: each seen
    assert sum(1 for n, _ in found if n >= 0) >= sum(1 for s in summaries if s.kind == STEP)  # intervals' longest: numbered
    assert abs(stats.total_s["train"] - 1_000_000 * 0.001 - 1000 * 0.019) < 1.0


def test_summaries_round_trip_through_the_trace_format() -> None:
    pids: dict[str, int] = {}
    text = file_header(1_000_000) + summary_lines(
        [(STEP, "TRAIN", 2000, 2999, 2.0, 12.0, 1000, 1.5, 0.0012, 0.0031, {bin_of(1.25): 600, bin_of(2.5): 400})],
        1_000_000, pids, 42)
    (summary,) = parse(text.rstrip().rstrip(",") + "\n]\n", "0-algo-1")
    assert isinstance(summary, StepSummary) and summary.kind == STEP and summary.mode == "TRAIN"
    assert (summary.step, summary.last_step, summary.count, summary.total_s) == (2000, 2999, 1000, 1.5)
    assert (round(summary.start, 6), round(summary.end, 6)) == (2.0, 12.0)
    assert [n for _, n in summary.bins] == [600, 400]
    assert all(abs(ms / want - 1) < 0.045 for (ms, _), want in zip(summary.bins, (1.25, 2.5)))
    assert json.loads(text.splitlines()[-1].rstrip(","))["name"] == "Summary:ModeKeys.TRAIN"


def test_steps_in_a_profiling_window_are_kept_one_by_one(tmp_path: Path) -> None:
    recorder = StepRecorder(ProfilerSettings(str(tmp_path), "algo-1", detailed=Window(5000, 3), min_free_mb=0), rank=0)
    recorder.tf_trace_on = True  # as if the trace had started: the test keeps TensorFlow out
    recorder._tf_profiler = lambda start, w: True  # type: ignore[method-assign]
    recorder.thread = object()
    fast_steps(recorder, 6000)
    recorder.close()
    numbers = {e.step for e in read_folder([tmp_path]) if isinstance(e, StepEvent) and e.kind == STEP}
    assert {5000, 5001, 5002} <= numbers and set(range(2000)) <= numbers and 4000 not in numbers


def test_step_events_stop_short_of_the_free_space_margin(tmp_path: Path) -> None:
    """A real 4-MB tmpfs, 2 MB to be kept free: the writer stops once, says why, the report says so."""
    require_root()
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    try:
        recorder = StepRecorder(ProfilerSettings(str(disk / "profiler"), "algo-1", min_free_mb=2), rank=0)
        recorder.thread = object()
        (disk / "model.bin").write_bytes(b"\0" * 900_000)  # the job's own files take their share
        fast_steps(recorder, 1500, step_s=0.01)  # ~0.4 MB of events
        assert recorder.stopped is None
        (disk / "checkpoint.bin").write_bytes(b"\0" * 1_200_000)
        fast_steps(recorder, 100, step_s=0.01, start=2000.0)
        assert recorder.stopped is not None and "below the 2 MiB kept" in recorder.stopped
        size = sum(p.stat().st_size for p in disk.rglob("*") if p.is_file())
        fast_steps(recorder, 1000, step_s=0.01, start=3000.0)
        recorder.close()
        assert sum(p.stat().st_size for p in disk.rglob("*") if p.is_file()) <= size + 512
        notes = job_report.stopped_notes([disk / "profiler"])
        assert len(notes) == 1 and notes[0].startswith("rank 0-algo-1: step events stopped at ")
        assert sum(1 for e in read_folder([disk]) if e.kind == STEP) >= 1400  # what was written before stays
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_the_free_space_margin_is_a_setting() -> None:
    assert profiling_of({"sagemaker_profiler_min_free_mb": "512"}, {}, {}, "hp", "p").min_free_mb == 512
    assert profiling_of({}, {"SM_PROFILER_MIN_FREE_MB": "0"}, {}, "hp", "p").min_free_mb == 0
    assert profiling_of({}, {}, {}, "hp", "p").min_free_mb == 1024
    with pytest.raises(ConfigError, match=r"sagemaker_profiler_min_free_mb \(or SM_PROFILER_MIN_FREE_MB\) must be"):
        profiling_of({"sagemaker_profiler_min_free_mb": "lots"}, {}, {}, "hyperparameters.json", "p")


def test_the_start_up_hook_watches_every_module_the_hooks_patch() -> None:
    """The start-up hook names the patched modules itself (importing the hooks would cost every program's
    start-up); the two lists must agree."""
    import ast

    from smtrain.profiler.hooks import PATCHES
    from smtrain.rank.startup_hook import STARTUP_HOOK

    tree = ast.parse((Path(STARTUP_HOOK) / "sitecustomize.py").read_text())
    (names,) = [ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PROFILED_MODULES"]
    assert set(names) == set(PATCHES)
