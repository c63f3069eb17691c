"""Rules over the system monitor's samples, computed locally, in the spirit of SageMaker Debugger's.

Pure: `evaluate(series, params)` takes the samples (as `load_series` reads them from the monitor's
files) and returns a verdict per rule, with the reason in numbers and a recommendation.

Defaults follow SageMaker Debugger's built-in rules (`patience`: datapoints skipped at the start,
while the job warms up; `window`: datapoints per evaluation):

    LowGPUUtilization   threshold_p95=70 threshold_p5=10 window=500 patience=1000
                        a GPU's p95 below threshold_p95 (idle), or p95 above it with p5 below
                        threshold_p5 (fluctuating)
    CPUBottleneck       threshold=50 cpu_threshold=90 gpu_threshold=10 patience=1000
                        more than threshold % of datapoints with CPU above cpu_threshold while every GPU
                        is below gpu_threshold
    BatchSize           cpu_threshold_p95=70 gpu_threshold_p95=70 gpu_memory_threshold_p95=70
                        window=500 patience=1000: CPU, GPU and GPU memory p95 all low
    GPUMemoryIncrease   increase=5 window=10 patience=1000: a GPU's memory (moving average over
                        window) rises by more than `increase` percentage points from one window to the next
and this toolkit's own:
    IOBottleneck        threshold=50 io_threshold=50 gpu_threshold=70 patience=1000: more than threshold
                        % of datapoints with I/O wait above io_threshold (and GPUs, if any, below gpu_threshold)
    LowCPUUtilization   threshold_p95=30 patience=1000: without GPUs, the CPU's p95 below threshold_p95
    UnevenLoad          threshold=0.5 patience=1000: hosts' median utilisation (GPU, else CPU) differs
                        by more than threshold of the busiest host's
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Optional

from .monitor import percentile

__all__ = ["DEFAULTS", "RECOMMENDATIONS", "RULES", "RuleResult", "Series", "batch_size", "cpu_bottleneck",
    "evaluate", "gpu_memory_increase", "gpus", "hosts", "io_bottleneck", "load_series", "low_cpu_utilization",
    "low_gpu_utilization", "parse_overrides", "run_rules", "uneven_load"]

DEFAULTS: dict[str, dict[str, float]] = {
    "LowGPUUtilization": {"threshold_p95": 70, "threshold_p5": 10, "window": 500, "patience": 1000},
    "CPUBottleneck": {"threshold": 50, "cpu_threshold": 90, "gpu_threshold": 10, "patience": 1000},
    "BatchSize": {"cpu_threshold_p95": 70, "gpu_threshold_p95": 70, "gpu_memory_threshold_p95": 70,
                  "window": 500, "patience": 1000},
    "GPUMemoryIncrease": {"increase": 5, "window": 10, "patience": 1000},
    "IOBottleneck": {"threshold": 50, "io_threshold": 50, "gpu_threshold": 70, "patience": 1000},
    "LowCPUUtilization": {"threshold_p95": 30, "patience": 1000},
    "UnevenLoad": {"threshold": 0.5, "patience": 1000},
}
RECOMMENDATIONS = {
    "LowGPUUtilization": "GPUs are idle or fluctuating: check for data-loading stalls or a small batch; "
                         "a smaller instance type may do.",
    "CPUBottleneck": "the CPU is saturated while GPUs wait: move preprocessing off the training path "
                     "(tf.data parallel map, prefetch, pre-processed data) or pick an instance with more CPUs.",
    "BatchSize": "CPU, GPU and GPU memory are all lightly used: increase the batch size, or use a smaller instance.",
    "GPUMemoryIncrease": "GPU memory keeps growing: look for tensors kept across steps; the job may run out of memory.",
    "IOBottleneck": "the CPUs wait on I/O: use Pipe mode or FastFile, cache, or larger sequential reads.",
    "LowCPUUtilization": "the CPUs are mostly idle: a smaller instance type would do the same work.",
    "UnevenLoad": "hosts are unevenly loaded: check data sharding (ShardedByS3Key) and per-rank batch sizes.",
}

# (host, name, dimension) -> [(timestamp, value), ...] in time order
Series = dict[tuple[str, str, str], list[tuple[float, float]]]


class RuleResult(NamedTuple):
    """A rule's verdict, with its reason and recommendation. A rule returns (True, reason) where it fires,
    (False, reason) where it judged and found nothing, (None, reason) where it could judge nothing."""
    rule: str
    triggered: bool
    reason: str
    recommendation: str
    params: Mapping[str, float]
    judged: bool = True

    @property
    def verdict(self) -> str:
        """As the report's table says it."""
        return "TRIGGERED" if self.triggered else "ok" if self.judged else "not judged"

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "triggered": self.triggered, "judged": self.judged, "verdict": self.verdict,
                "reason": self.reason, "recommendation": self.recommendation if self.triggered else "",
                "params": dict(self.params)}


def load_series(folders: Iterable[Path]) -> Series:
    """Every sample in the monitor's files under `folders` (any depth), by host, name and dimension."""
    series: Series = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.json")):
            if "incremental" not in path.parts:
                continue
            for line in path.read_text().splitlines():
                try:
                    e = json.loads(line)
                    key = (e["NodeId"], e.get("Name") or e["Type"], e["Dimension"])
                    series.setdefault(key, []).append((float(e["Timestamp"]), float(e["Value"])))
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a kill: skip it, as smdebug does
    for values in series.values():
        values.sort()
    return series


def hosts(series: Series) -> list[str]:
    """The hosts that have samples."""
    return sorted({h for h, _, _ in series})


def gpus(series: Series, host: str) -> list[str]:
    """A host's GPUs that have samples."""
    return sorted({n for h, n, d in series if h == host and d == "GPUUtilization"})


def _values(series: Series, host: str, name: str, dimension: str, patience: float) -> list[float]:
    return [v for _, v in series.get((host, name, dimension), [])][int(patience):]


def _windows(values: list[float], window: float) -> list[list[float]]:
    size = max(int(window), 1)
    return [values[i : i + size] for i in range(0, len(values), size) if values[i : i + size]]


def _unjudged(p: Mapping[str, float], seen: bool, what: str = "GPU samples") -> str:
    """Why a rule judged nothing: no `what` at all, or none past the patience (a job too short for it)."""
    return f"not judged: no more datapoints than the patience ({p['patience']:g})" if seen else f"not judged: no {what}"


def _aligned(series: Series, keys: list[tuple[str, str, str]], patience: float) -> list[list[float]]:
    """Rows of values at the timestamps every key has (the monitor writes them together)."""
    by_time: dict[float, dict[tuple[str, str, str], float]] = {}
    for key in keys:
        for t, v in series.get(key, []):
            by_time.setdefault(t, {})[key] = v
    rows = [[row[k] for k in keys] for t, row in sorted(by_time.items()) if len(row) == len(keys)]
    return rows[int(patience):]


def low_gpu_utilization(series: Series, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    findings, judged, seen = [], 0, 0
    for host in hosts(series):
        for gpu in gpus(series, host):
            seen += 1
            windows = _windows(_values(series, host, gpu, "GPUUtilization", p["patience"]), p["window"])
            judged += bool(windows)
            for w in windows:
                p95, p5 = percentile(w, 95), percentile(w, 5)
                if p95 < p["threshold_p95"]:
                    findings.append(f"{host} {gpu}: p95 {p95:.0f}% < {p['threshold_p95']:g}% (underused)")
                    break
                if p5 < p["threshold_p5"]:
                    findings.append(f"{host} {gpu}: p95 {p95:.0f}% but p5 {p5:.0f}% < {p['threshold_p5']:g}% (fluctuating)")
                    break
    if findings:
        return True, "; ".join(findings)
    if not judged:  # a short job: nothing past the patience, so nothing is known (not "busy")
        return None, _unjudged(p, bool(seen))
    return False, "every GPU busy and steady"


def cpu_bottleneck(series: Series, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    findings, checked, with_gpus = [], 0, 0
    for host in hosts(series):
        gpu_keys = [(host, g, "GPUUtilization") for g in gpus(series, host)]
        if not gpu_keys:
            continue
        with_gpus += 1
        rows = _aligned(series, [(host, "cpu_total", "CPUUtilization"), *gpu_keys], p["patience"])
        if not rows:
            continue
        checked += 1
        bottlenecks = sum(1 for cpu, *gpu in rows if cpu > p["cpu_threshold"] and max(gpu) < p["gpu_threshold"])
        share = 100.0 * bottlenecks / len(rows)
        if share > p["threshold"]:
            findings.append(f"{host}: CPU > {p['cpu_threshold']:g}% with GPUs < {p['gpu_threshold']:g}% in "
                            f"{share:.0f}% of datapoints (> {p['threshold']:g}%)")
    if findings or checked:
        return bool(findings), "; ".join(findings) or "no CPU bottleneck"
    return None, _unjudged(p, bool(with_gpus))


def batch_size(series: Series, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    findings, seen, judged = [], False, False
    for host in hosts(series):
        cpu = _values(series, host, "cpu_total", "CPUUtilization", p["patience"])
        for gpu in gpus(series, host):
            seen = True
            util = _values(series, host, gpu, "GPUUtilization", p["patience"])
            memory = _values(series, host, gpu, "GPUMemoryUtilization", p["patience"])
            for c, u, m in zip(_windows(cpu, p["window"]), _windows(util, p["window"]), _windows(memory, p["window"])):
                judged = True
                pc, pu, pm = percentile(c, 95), percentile(u, 95), percentile(m, 95)
                if pc < p["cpu_threshold_p95"] and pu < p["gpu_threshold_p95"] and pm < p["gpu_memory_threshold_p95"]:
                    findings.append(f"{host} {gpu}: p95 CPU {pc:.0f}%, GPU {pu:.0f}%, GPU memory {pm:.0f}% all below "
                                    f"{p['cpu_threshold_p95']:g}/{p['gpu_threshold_p95']:g}/{p['gpu_memory_threshold_p95']:g}%")
                    break
    if findings or judged:
        return bool(findings), "; ".join(findings) or "no sign of a too small batch"
    return None, _unjudged(p, seen)


def gpu_memory_increase(series: Series, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    findings, seen, judged = [], False, False
    for host in hosts(series):
        for gpu in gpus(series, host):
            seen = True
            means = [sum(w) / len(w) for w in _windows(_values(series, host, gpu, "GPUMemoryUtilization", p["patience"]),
                                                      p["window"])]
            judged = judged or len(means) > 1
            for before, after in zip(means, means[1:]):
                if after - before > p["increase"]:
                    findings.append(f"{host} {gpu}: memory rose from {before:.1f}% to {after:.1f}% "
                                    f"(> {p['increase']:g} points) within {p['window']:g} datapoints")
                    break
    if findings or judged:
        return bool(findings), "; ".join(findings) or "GPU memory steady"
    return None, _unjudged(p, seen)


def io_bottleneck(series: Series, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    findings, judged = [], False
    for host in hosts(series):
        gpu_keys = [(host, g, "GPUUtilization") for g in gpus(series, host)]
        rows = _aligned(series, [(host, "cpu_iowait", "I/OWaitPercentage"), *gpu_keys], p["patience"])
        if not rows:
            continue
        judged = True
        waiting = sum(1 for io, *gpu in rows if io > p["io_threshold"] and (not gpu or max(gpu) < p["gpu_threshold"]))
        share = 100.0 * waiting / len(rows)
        if share > p["threshold"]:
            findings.append(f"{host}: I/O wait > {p['io_threshold']:g}% in {share:.0f}% of datapoints (> {p['threshold']:g}%)")
    if findings or judged:
        return bool(findings), "; ".join(findings) or "no I/O bottleneck"
    return None, _unjudged(p, bool(hosts(series)), "samples")


def low_cpu_utilization(series: Series, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    findings, seen, judged = [], False, False
    for host in hosts(series):
        if gpus(series, host):
            continue
        seen = True
        values = _values(series, host, "cpu_total", "CPUUtilization", p["patience"])
        judged = judged or bool(values)
        if values and percentile(values, 95) < p["threshold_p95"]:
            findings.append(f"{host}: CPU p95 {percentile(values, 95):.0f}% < {p['threshold_p95']:g}%")
    if findings or judged:
        return bool(findings), "; ".join(findings) or "CPUs used"
    return None, _unjudged(p, seen, "host without GPUs")


def uneven_load(series: Series, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    medians = {}
    seen = hosts(series)
    for host in seen:
        names = gpus(series, host)
        values = [v for g in names for v in _values(series, host, g, "GPUUtilization", p["patience"])] if names else \
            _values(series, host, "cpu_total", "CPUUtilization", p["patience"])
        if values:
            medians[host] = percentile(values, 50)
    if len(seen) < 2:
        return None, "not judged: one host"
    if len(medians) < 2:  # a short job: too few hosts with samples past the patience to compare
        return None, (f"not judged: {len(medians)} of {len(seen)} hosts have more datapoints than the patience "
                       f"({p['patience']:g})")
    busiest, idlest = max(medians.values()), min(medians.values())
    if busiest > 0 and (busiest - idlest) / busiest > p["threshold"]:
        detail = ", ".join(f"{h} {m:.0f}%" for h, m in sorted(medians.items()))
        return True, f"median utilisation differs by {(busiest - idlest) / busiest:.0%} (> {p['threshold']:.0%}): {detail}"
    return False, "hosts evenly loaded"


RULES = {
    "LowGPUUtilization": low_gpu_utilization,
    "CPUBottleneck": cpu_bottleneck,
    "BatchSize": batch_size,
    "GPUMemoryIncrease": gpu_memory_increase,
    "IOBottleneck": io_bottleneck,
    "LowCPUUtilization": low_cpu_utilization,
    "UnevenLoad": uneven_load,
}


def parse_overrides(items: Iterable[str], defaults: Optional[Mapping[str, Mapping[str, float]]] = None
                    ) -> dict[str, dict[str, float]]:
    """`Rule.param=value` strings (e.g. from `train report --param`) -> overrides; errors name the item.
    `defaults`: the rules and parameters there are (these system rules' by default)."""
    defaults = DEFAULTS if defaults is None else defaults
    overrides: dict[str, dict[str, float]] = {}
    for item in items:
        name, _, value = item.partition("=")
        rule, _, param = name.partition(".")
        if rule not in defaults or param not in defaults[rule]:
            known = ", ".join(f"{r}.{k}" for r in defaults for k in defaults[r])
            raise ValueError(f"--param {item!r}: unknown rule parameter; known: {known}")
        try:
            overrides.setdefault(rule, {})[param] = float(value)
        except ValueError:
            raise ValueError(f"--param {item!r}: {value!r} is not a number") from None
    return overrides


def run_rules(rules: Mapping[str, Any], defaults: Mapping[str, Mapping[str, float]], recommendations: Mapping[str, str],
              subject: Any, overrides: Optional[Mapping[str, Mapping[str, float]]] = None) -> list[RuleResult]:
    """Each rule over `subject` with its defaults, as `overrides` change them."""
    results = []
    for name, rule in rules.items():
        params = {**defaults[name], **(overrides or {}).get(name, {})}
        verdict, reason = rule(subject, params)
        results.append(RuleResult(name, verdict is True, reason, recommendations[name], params, verdict is not None))
    return results


def evaluate(series: Series, overrides: Optional[Mapping[str, Mapping[str, float]]] = None) -> list[RuleResult]:
    """Every system rule over the samples, with `overrides` of their parameters."""
    return run_rules(RULES, DEFAULTS, RECOMMENDATIONS, series, overrides)
