"""Each rule fires on series just past its threshold and stays silent just short of it (GPU series
are constructed: this machine has no GPU)."""
from __future__ import annotations

import pytest

from smtrain.profiler.rules import DEFAULTS, evaluate, parse_overrides

N = 1600  # past the default patience (1000) by more than one window (500)


def _series(**columns: list[float]) -> dict:
    """`columns`: host__name__dimension -> values, all sampled at the same times."""
    series = {}
    for key, values in columns.items():
        host, name, dimension = key.split("__")
        series[(host, name, dimension.replace("_SLASH_", "/"))] = [(float(t), v) for t, v in enumerate(values)]
    return series


def _fired(series: dict, rule: str, **overrides: float) -> bool:
    results = {r.rule: r for r in evaluate(series, {rule: overrides} if overrides else None)}
    return results[rule].triggered


def gpu_host(util: list[float], memory: list[float], cpu: list[float], iowait=None) -> dict:
    return _series(**{"algo-1__gpu0__GPUUtilization": util, "algo-1__gpu0__GPUMemoryUtilization": memory,
                      "algo-1__cpu_total__CPUUtilization": cpu,
                      "algo-1__cpu_iowait__I_SLASH_OWaitPercentage": iowait or [0.0] * len(cpu)})


@pytest.mark.parametrize("p95,fires", [(69.0, True), (71.0, False)])
def test_low_gpu_utilization_underused(p95: float, fires: bool) -> None:
    util = [p95] * N
    assert _fired(gpu_host(util, [80.0] * N, [50.0] * N), "LowGPUUtilization") is fires


@pytest.mark.parametrize("p5,fires", [(9.0, True), (11.0, False)])
def test_low_gpu_utilization_fluctuating(p5: float, fires: bool) -> None:
    util = ([p5] * 40 + [95.0] * 60) * (N // 100)  # p5 of each window is p5, p95 is 95
    assert _fired(gpu_host(util, [80.0] * N, [50.0] * N), "LowGPUUtilization") is fires


@pytest.mark.parametrize("share,fires", [(52, True), (48, False)])
def test_cpu_bottleneck(share: int, fires: bool) -> None:
    cpu = ([95.0] * share + [50.0] * (100 - share)) * (N // 100)
    util = ([5.0] * share + [50.0] * (100 - share)) * (N // 100)
    assert _fired(gpu_host(util, [50.0] * N, cpu), "CPUBottleneck") is fires


@pytest.mark.parametrize("level,fires", [(69.0, True), (71.0, False)])
def test_batch_size(level: float, fires: bool) -> None:
    assert _fired(gpu_host([level] * N, [level] * N, [level] * N), "BatchSize") is fires


@pytest.mark.parametrize("step,fires", [(5.5, True), (4.5, False)])
def test_gpu_memory_increase(step: float, fires: bool) -> None:
    memory = [20.0] * 1200 + [20.0 + step] * 400
    assert _fired(gpu_host([90.0] * N, memory, [50.0] * N), "GPUMemoryIncrease") is fires


@pytest.mark.parametrize("share,fires", [(52, True), (48, False)])
def test_io_bottleneck(share: int, fires: bool) -> None:
    iowait = ([60.0] * share + [5.0] * (100 - share)) * (N // 100)
    series = _series(**{"algo-1__cpu_total__CPUUtilization": [50.0] * N,
                        "algo-1__cpu_iowait__I_SLASH_OWaitPercentage": iowait})
    assert _fired(series, "IOBottleneck") is fires


@pytest.mark.parametrize("p95,fires", [(29.0, True), (31.0, False)])
def test_low_cpu_utilization(p95: float, fires: bool) -> None:
    assert _fired(_series(**{"algo-1__cpu_total__CPUUtilization": [p95] * N}), "LowCPUUtilization") is fires


@pytest.mark.parametrize("idle,fires", [(39.0, True), (41.0, False)])
def test_uneven_load_across_hosts(idle: float, fires: bool) -> None:
    series = _series(**{"algo-1__cpu_total__CPUUtilization": [80.0] * N,
                        "algo-2__cpu_total__CPUUtilization": [idle] * N})
    assert _fired(series, "UnevenLoad") is fires  # (80 - 39) / 80 = 0.51 > 0.5; (80 - 41) / 80 = 0.49


def test_uneven_load_says_it_judged_nothing_on_a_job_shorter_than_its_patience() -> None:
    short = _series(**{"algo-1__cpu_total__CPUUtilization": [80.0] * 600, "algo-2__cpu_total__CPUUtilization": [5.0] * 600})
    result = {r.rule: r for r in evaluate(short)}["UnevenLoad"]
    assert not result.triggered
    assert result.reason == "not judged: 0 of 2 hosts have more datapoints than the patience (1000)"
    alone = {r.rule: r for r in evaluate(_series(**{"algo-1__cpu_total__CPUUtilization": [80.0] * N}))}["UnevenLoad"]
    assert alone.reason == "not judged: one host"


def test_patience_skips_the_warm_up() -> None:
    util = [0.0] * 1000 + [90.0] * 600  # idle only while warming up
    assert not _fired(gpu_host(util, [80.0] * N, [50.0] * N), "LowGPUUtilization")
    assert _fired(gpu_host(util, [80.0] * N, [50.0] * N), "LowGPUUtilization", patience=0)


def test_thresholds_are_configurable_and_errors_name_the_parameter() -> None:
    assert parse_overrides(["LowGPUUtilization.threshold_p95=60"]) == {"LowGPUUtilization": {"threshold_p95": 60.0}}
    with pytest.raises(ValueError, match="'Nope.x=1': unknown rule parameter"):
        parse_overrides(["Nope.x=1"])
    with pytest.raises(ValueError, match="'abc' is not a number"):
        parse_overrides(["BatchSize.window=abc"])
    assert set(DEFAULTS) >= {"LowGPUUtilization", "CPUBottleneck", "BatchSize", "GPUMemoryIncrease"}


def test_cpu_bottleneck_says_why_it_could_not_judge() -> None:
    """Seen on a real H100 (a 42 s job, 214 samples): it said 'no GPU samples' although there were."""
    from smtrain.profiler.rules import DEFAULTS, cpu_bottleneck

    short = gpu_host([100.0] * 200, [5.0] * 200, [50.0] * 200)
    assert cpu_bottleneck(short, DEFAULTS["CPUBottleneck"]) == (None, "not judged: no more datapoints than the patience (1000)")


def test_low_gpu_utilization_says_when_a_job_was_too_short_to_judge() -> None:
    """Seen on an H200: a 27-s job's 138 samples, none past the patience, were called 'busy and steady'."""
    results = {r.rule: r for r in evaluate(gpu_host([0.0] * 138, [5.0] * 138, [2.0] * 138))}
    assert results["LowGPUUtilization"].reason == "not judged: no more datapoints than the patience (1000)"
    results = {r.rule: r for r in evaluate(_series(algo_1__cpu_total__CPUUtilization=[50.0] * 10))}
    assert results["LowGPUUtilization"].reason == "not judged: no GPU samples"


@pytest.mark.parametrize("job", ["gpu", "cpu"])
def test_every_rule_that_saw_nothing_past_its_patience_says_it_judged_nothing(job: str) -> None:
    """A rule's verdict is true to what it looked at: on a job shorter than the patience no rule is "ok"
    (the 2-host demo's UnevenLoad said "ok - one host"), nor is a GPU rule on a host without GPUs."""
    short = gpu_host([0.0] * 300, [5.0] * 300, [2.0] * 300) if job == "gpu" else \
        _series(**{"algo-1__cpu_total__CPUUtilization": [5.0] * 300, "algo-1__cpu_iowait__I_SLASH_OWaitPercentage": [90.0] * 300,
                   "algo-2__cpu_total__CPUUtilization": [90.0] * 300})
    results = evaluate(short)
    assert results and all(not r.triggered and not r.judged and r.reason.startswith("not judged: ") for r in results), \
        [(r.rule, r.reason) for r in results]
    # and the report's table says so in its verdict column, not "ok" beside the reason
    from smtrain.profiler.report_html import render_html

    page = render_html({"rules": [r.to_json() for r in results], "hosts": {}}, [])
    assert page.count("<td>not judged</td>") == len(results) and "<td>ok</td>" not in page, page
