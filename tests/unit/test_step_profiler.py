"""The step profiler's pure parts: its settings (profilerconfig.json as the SDK writes it, the
hyperparameters), the event files (written, complete or cut short, read back), the step rules on
constructed steps (each fires just past its threshold, not short of it), Horovod's timeline, and the
recorder's windows and files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smtrain.config.profiling import Profiling, profiling_of
from smtrain.errors import ConfigError
from smtrain.profiler import steprules
from smtrain.profiler.events import STEP, StepEvent, file_header, parse, read_folder, to_lines
from smtrain.profiler.rules import DEFAULTS, parse_overrides
from smtrain.profiler.steps import StepRecorder
from smtrain.profiler.timeline import summarise_timeline
from smtrain.wire.profiling import ProfilerSettings, Window

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
    ({"sagemaker_python_profiling": "3:0"}, {}, "expected StartStep >= 0 and NumSteps >= 1"),
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
