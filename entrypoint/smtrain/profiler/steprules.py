"""What the ranks' step events say about a job: per-rank statistics, the job's phases, and the
rules over them. Pure: events (smtrain.profiler.events) and the Horovod timeline's summary in,
numbers and verdicts out.

    StepOutlier          stddev=3 n_outliers=10 skip=2: on a rank, more than n_outliers training steps
                         longer than the mean plus stddev standard deviations (the first `skip` steps,
                         tracing and warm-up, left out), as SageMaker Debugger's StepOutlier
    RankImbalance        threshold=0.5 min_ms=10 min_steps=5: the ranks' median time between steps differs
                         by more than threshold of the median step cycle and by more than min_ms (the
                         others wait for the slow rank in their collectives), or, for ranks that do not
                         wait for each other, their median step cycles differ by that much
    SlowInitialization   threshold=0.5 min_seconds=120: the first training step starts after more than
                         min_seconds and more than threshold of the job's time
    InputBound           threshold=0.2 min_ms=2 min_steps=5: on a rank, the median time between training
                         steps (waiting for the next batch, or in callbacks) is more than threshold of the
                         median step cycle (step + time before it) and more than min_ms
    AllreduceBound       threshold=0.5: Horovod's collectives take more than threshold of the timeline
"""
from __future__ import annotations

import bisect
import math
import statistics
from typing import Iterable, Mapping, NamedTuple, Optional, Union

from .events import BETWEEN, STEP, StepEvent, StepSummary, rank_of
from .monitor import percentile
from .rules import RuleResult, run_rules
from .timeline import TimelineStats

__all__ = ["DEFAULTS", "RECOMMENDATIONS", "JobPhases", "RankStats", "StepContext", "Waited", "evaluate", "merged_bins",
           "outliers", "phases", "rank_stats", "waited_for", "weighted_percentile"]

DEFAULTS: dict[str, dict[str, float]] = {
    "StepOutlier": {"stddev": 3, "n_outliers": 10, "skip": 2},
    "RankImbalance": {"threshold": 0.5, "min_ms": 10, "min_steps": 5},
    "SlowInitialization": {"threshold": 0.5, "min_seconds": 120},
    "InputBound": {"threshold": 0.2, "min_ms": 2, "min_steps": 5},
    "AllreduceBound": {"threshold": 0.5},
}
RECOMMENDATIONS = {
    "StepOutlier": "some steps take far longer than the rest: look at what runs at those steps (checkpoints, "
                   "evaluation, garbage collection, a slow shard of data) and at the system plots at those times.",
    "RankImbalance": "the other ranks wait for the slow one at every step: give every rank the same work "
                     "(equal shards, batch sizes), move per-rank work (logging, checkpoints) off the step, and "
                     "check that rank's host (CPU, disk, network). Where InputBound fired too, every rank's input "
                     "may be slow: the rank whose wait shows is the one whose batch came last.",
    "SlowInitialization": "most of the job passes before the first step: check downloads, requirements, data "
                          "staging (Pipe mode or FastFile instead of File), and model building.",
    "InputBound": "steps wait for their input or callbacks: prefetch (`dataset.prefetch(tf.data.AUTOTUNE)`), "
                  "map in parallel (`num_parallel_calls`), cache, read with Pipe mode, or lighten per-batch callbacks.",
    "AllreduceBound": "collectives take most of the time: use a larger batch per rank, fp16 compression "
                      "(`hvd.Compression.fp16`), tune HOROVOD_FUSION_THRESHOLD / HOROVOD_CYCLE_TIME, or fewer, "
                      "faster-connected hosts.",
}


Bins = tuple[tuple[float, int], ...]  # (ms, count): steps kept as summaries (smtrain.profiler.events)


class RankStats(NamedTuple):
    """One rank's steps: the training steps kept one by one, and those kept as summaries' histograms."""

    node: str
    steps: dict[str, int]  # mode -> steps
    step_ms: list[float]  # training steps' durations, in order (those kept one by one)
    between_ms: list[float]  # the gaps before training steps (likewise)
    total_s: dict[str, float]  # "train", "eval", "predict", "between" -> seconds
    first_start: float
    last_end: float
    step_bins: Bins = ()  # training steps past those: (ms, count)
    between_bins: Bins = ()
    step_numbers: tuple[int, ...] = ()  # the numbers of the steps in step_ms

    @property
    def train_steps(self) -> int:
        """Training steps measured, one by one and summarised."""
        return len(self.step_ms) + sum(n for _, n in self.step_bins)

    @property
    def between_count(self) -> int:
        """Gaps before training steps measured, one by one and summarised."""
        return len(self.between_ms) + sum(n for _, n in self.between_bins)

    def weighted_steps(self, skip: int = 0) -> tuple[list[float], list[int]]:
        """Training step durations (ms) and their weights: each kept one by one (the first `skip` left
        out) once, each summary bin's centre as often as the bin counts."""
        values = self.step_ms[skip:]
        return values + [ms for ms, _ in self.step_bins], [1] * len(values) + [n for _, n in self.step_bins]

    @property
    def median_step_ms(self) -> float:
        return weighted_percentile(self.step_ms, self.step_bins, 50)

    @property
    def median_between_ms(self) -> float:
        return weighted_percentile(self.between_ms, self.between_bins, 50)

    def step_sample(self, cap: int = 5000) -> list[float]:
        """Training step durations to draw: every one kept one by one, and at most `cap` from the
        summaries' bins, each bin in proportion to its count."""
        total = sum(n for _, n in self.step_bins)
        if not total:
            return self.step_ms
        scale = min(1.0, cap / total)
        return self.step_ms + [ms for ms, n in self.step_bins for _ in range(max(1, round(n * scale)))]

    @property
    def between_share(self) -> float:
        """The median gap's share of the median step cycle (medians: the first steps' tracing and the
        callbacks' first runs do not count)."""
        cycle = self.median_step_ms + self.median_between_ms
        return self.median_between_ms / cycle if cycle else 0.0


class JobPhases(NamedTuple):
    """The job's start, its first and last training step, and its end."""
    start: float
    first_step: Optional[float]
    last_step: Optional[float]
    end: float

    @property
    def initialization_s(self) -> float:
        return (self.first_step - self.start) if self.first_step is not None else self.end - self.start

    @property
    def training_s(self) -> float:
        return (self.last_step - self.first_step) if self.first_step is not None and self.last_step else 0.0

    @property
    def finalization_s(self) -> float:
        return (self.end - self.last_step) if self.last_step is not None else 0.0

    @property
    def duration_s(self) -> float:
        return self.end - self.start


class StepContext(NamedTuple):
    """What the step rules judge: every rank's statistics, the phases, Horovod's timeline."""
    ranks: dict[str, RankStats]
    phases: JobPhases
    timeline: Optional[TimelineStats]


def weighted_percentile(values: list[float], bins: Bins, q: float) -> float:
    """The q-th percentile of `values` (each once) and `bins` ((value, count)); 0.0 when empty."""
    if not bins:
        return (statistics.median(values) if q == 50 else percentile(values, q)) if values else 0.0
    # The values and the bins merged in order, without building a pair per value (the report asks
    # this of every rank several times; 2,000 values a rank).
    ordered, counted = sorted(values), sorted(b for b in bins if b[1] > 0)
    total = len(ordered) + sum(n for _, n in counted)
    if not total:
        return 0.0
    wanted, seen, taken = q / 100 * total, 0, 0
    for value, n in counted:
        below = bisect.bisect_right(ordered, value)  # the values that come before this bin (ties too)
        if below > taken and seen + below - taken >= wanted:
            return ordered[taken + max(1, math.ceil(wanted - seen)) - 1]
        seen, taken = seen + below - taken + n, below
        if seen >= wanted:
            return value
    if taken < len(ordered):
        return ordered[min(len(ordered), taken + max(1, math.ceil(wanted - seen))) - 1]
    return counted[-1][0]


def merged_bins(histograms: Iterable[Bins]) -> Bins:
    """Histograms ((ms, count)) added bin by bin."""
    merged: dict[float, int] = {}
    for bins in histograms:
        for ms, n in bins:
            merged[ms] = merged.get(ms, 0) + n
    return tuple(sorted(merged.items()))


def rank_stats(events: Iterable[Union[StepEvent, StepSummary]]) -> dict[str, RankStats]:
    """Per rank (node), from its step events and the summaries of its steps past the full ones."""
    by_node: dict[str, list[StepEvent]] = {}
    summaries: dict[str, list[StepSummary]] = {}
    for e in events:
        (summaries if isinstance(e, StepSummary) else by_node).setdefault(e.node, []).append(e)
    result = {}
    for node in sorted(set(by_node) | set(summaries), key=lambda n: (rank_of(n), n)):
        evs = sorted(by_node.get(node, []), key=lambda e: (e.start, e.kind != BETWEEN))
        sums = summaries.get(node, [])
        steps = [e for e in evs if e.kind == STEP]
        train = [e for e in steps if e.mode == "TRAIN"]
        between = [e for e in evs if e.kind == BETWEEN and e.mode == "TRAIN"]
        step_sums = [s for s in sums if s.kind == STEP]
        counts = {m: sum(1 for e in steps if e.mode == m) + sum(s.count for s in step_sums if s.mode == m)
                  for m in ("TRAIN", "EVAL", "PREDICT")}
        totals = {m.lower(): sum(e.duration for e in steps if e.mode == m)
                  + sum(s.total_s for s in step_sums if s.mode == m) for m in ("TRAIN", "EVAL", "PREDICT")}
        totals["between"] = (sum(e.duration for e in evs if e.kind == BETWEEN)
                             + sum(s.total_s for s in sums if s.kind == BETWEEN))
        spans = steps + step_sums
        # durations to the microsecond, the events' own resolution (without the float noise of end - start)
        result[node] = RankStats(node, counts, [round(e.duration * 1e3, 3) for e in train],
                                 [round(e.duration * 1e3, 3) for e in between],
                                 totals, min((e.start for e in spans), default=0.0),
                                 max((e.end for e in spans), default=0.0),
                                 merged_bins(s.bins for s in step_sums if s.mode == "TRAIN"),
                                 merged_bins(s.bins for s in sums if s.kind == BETWEEN and s.mode == "TRAIN"),
                                 tuple(e.step for e in train))
    return result


def phases(events: Iterable[Union[StepEvent, StepSummary]], start: float, end: float) -> JobPhases:
    """The job's phases from its step events: start-up, training loop, finalisation."""
    steps = [e for e in events if e.kind == STEP]
    train = [e.start for e in steps if e.mode == "TRAIN"]
    first = min(train) if train else (min(e.start for e in steps) if steps else None)
    last = max((e.end for e in steps), default=None)
    return JobPhases(start, first, last, max(end, last or end))


def outliers(stats: RankStats, stddev: float, skip: int) -> tuple[list[tuple[int, float]], float, float]:
    """The training steps (number, ms) beyond mean + stddev * sd on one rank; with the mean and sd.
    Steps kept only in summaries count with step number -1 and their bin's duration."""
    values = stats.step_ms[int(skip):]
    pool, weights = stats.weighted_steps(int(skip))
    count = sum(weights)
    if count < 3:
        return [], 0.0, 0.0
    mean = sum(v * w for v, w in zip(pool, weights)) / count
    sd = math.sqrt(max(0.0, sum(w * (v - mean) ** 2 for v, w in zip(pool, weights)) / count))
    limit = mean + stddev * sd
    if sd <= 0:
        return [], mean, sd
    numbers = stats.step_numbers[int(skip):] or range(int(skip), int(skip) + len(values))
    found = [(n, v) for n, v in zip(numbers, values) if v > limit]
    found += [(-1, ms) for ms, n in stats.step_bins if ms > limit for _ in range(n)]
    return found, mean, sd


def _verdict(findings: list[str], judged: bool, healthy: str) -> tuple[Optional[bool], str]:
    """A per-rank rule's verdict: its findings, or what a healthy job shows, or that nothing could be judged."""
    if not judged:
        return None, "too few training steps to judge"
    return bool(findings), "; ".join(findings) or healthy


def step_outlier(ctx: StepContext, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    findings, judged = [], 0
    for node, stats in ctx.ranks.items():
        found, mean, sd = outliers(stats, p["stddev"], p["skip"])
        if mean:
            judged += 1
        if len(found) > p["n_outliers"]:
            worst = max(found, key=lambda s: (s[1], s[0] >= 0))
            findings.append(f"rank {node}: {len(found)} of {stats.train_steps} steps beyond {mean:.1f} + "
                            f"{p['stddev']:g} x {sd:.1f} ms (> {p['n_outliers']:g}); the longest, step {worst[0] if worst[0] >= 0 else '(summarised)'}, "
                            f"{worst[1]:.0f} ms")
    return _verdict(findings, bool(judged), f"no rank has more than {p['n_outliers']:g} outlier steps")


class Waited(NamedTuple):
    """RankImbalance's evidence: the judged ranks' median gaps between steps and step cycles (ms), the job's
    median cycle, and the ranks the others wait for (`slow`, slowest first)."""
    gaps: dict[str, float]
    cycles: dict[str, float]
    cycle: float
    slow: tuple[str, ...]


def waited_for(ranks: Mapping[str, RankStats], p: Mapping[str, float]) -> Optional[Waited]:
    """The ranks (nodes) whose median gap between steps exceeds the fastest's by more than `threshold` of the
    median step cycle and by more than `min_ms`: the others wait for them in their collectives. None with
    fewer than two ranks of `min_steps` training steps, or no step time. The report's RankImbalance rule and
    the live straggler verdict (smtrain.run.stragglers) both judge by it."""
    judged = [s for s in ranks.values() if s.train_steps >= p["min_steps"]]
    if len(judged) < 2:
        return None
    cycles = {s.node: s.median_step_ms + s.median_between_ms for s in judged}
    cycle = statistics.median(cycles.values())
    if cycle <= 0:
        return None
    gaps = {s.node: s.median_between_ms for s in judged}
    fastest = min(gaps.values())
    slow = tuple(sorted((n for n, g in gaps.items() if (g - fastest) / cycle > p["threshold"] and g - fastest > p["min_ms"]),
                        key=lambda n: -gaps[n]))
    return Waited(gaps, cycles, cycle, slow)


def rank_imbalance(ctx: StepContext, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    waited = waited_for(ctx.ranks, p)
    if waited is None:
        judged = sum(1 for s in ctx.ranks.values() if s.train_steps >= p["min_steps"])
        return None, "fewer than two ranks with enough training steps" if judged < 2 else "no step time"
    gaps, cycles, cycle = waited.gaps, waited.cycles, waited.cycle
    slow, fast = max(gaps, key=gaps.get), min(gaps, key=gaps.get)
    if waited.slow:
        return True, (f"rank {slow} spends {gaps[slow]:.1f} ms between steps, rank {fast} {gaps[fast]:.1f} ms, of a "
                      f"{cycle:.1f} ms step cycle ({(gaps[slow] - gaps[fast]) / cycle:.0%} > {p['threshold']:.0%}): "
                      f"the other ranks wait for rank {slow} in their collectives")
    longest, shortest = max(cycles, key=cycles.get), min(cycles, key=cycles.get)
    if (cycles[longest] - cycles[shortest]) / cycle > p["threshold"] and cycles[longest] - cycles[shortest] > p["min_ms"]:
        return True, (f"rank {longest}'s step cycle is {cycles[longest]:.1f} ms, rank {shortest}'s {cycles[shortest]:.1f} ms "
                      f"({(cycles[longest] - cycles[shortest]) / cycle:.0%} of the median > {p['threshold']:.0%})")
    spread = ", ".join(f"{n} {g:.1f}" for n, g in gaps.items())
    return False, f"ranks balanced: median ms between steps {spread} of a {cycle:.1f} ms cycle"


def slow_initialization(ctx: StepContext, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    ph = ctx.phases
    if ph.first_step is None:
        return None, "no training step recorded"
    share = ph.initialization_s / ph.duration_s if ph.duration_s > 0 else 0.0
    text = f"the first training step started {ph.initialization_s:.1f} s into the job ({share:.0%} of {ph.duration_s:.1f} s)"
    return ph.initialization_s > p["min_seconds"] and share > p["threshold"], text


def input_bound(ctx: StepContext, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    findings, judged = [], []
    for node, stats in ctx.ranks.items():
        if stats.between_count < p["min_steps"]:
            continue
        judged.append(f"{node} {stats.between_share:.0%}")
        if stats.between_share > p["threshold"] and stats.median_between_ms > p["min_ms"]:
            findings.append(f"rank {node}: {stats.between_share:.0%} of its step cycle between steps "
                            f"(median {stats.median_between_ms:.1f} ms before a {stats.median_step_ms:.1f} ms step; "
                            f"> {p['threshold']:.0%} and > {p['min_ms']:g} ms)")
    return _verdict(findings, bool(judged), f"time between steps: {', '.join(judged)} of the step cycle")


def allreduce_bound(ctx: StepContext, p: Mapping[str, float]) -> tuple[Optional[bool], str]:
    t = ctx.timeline
    if t is None:
        return None, "no Horovod timeline (HOROVOD_TIMELINE)"
    text = (f"collectives {t.collective_s:.1f} s ({t.collective_share:.0%}) and negotiation {t.negotiate_s:.1f} s "
            f"({t.negotiate_share:.0%}) of the timeline's {t.span_s:.1f} s, over {t.tensors} tensors")
    return t.collective_share > p["threshold"], text


RULES = {
    "StepOutlier": step_outlier,
    "RankImbalance": rank_imbalance,
    "SlowInitialization": slow_initialization,
    "InputBound": input_bound,
    "AllreduceBound": allreduce_bound,
}


def evaluate(ctx: StepContext, overrides: Optional[Mapping[str, Mapping[str, float]]] = None) -> list[RuleResult]:
    """Every step rule, with `overrides` of their parameters."""
    return run_rules(RULES, DEFAULTS, RECOMMENDATIONS, ctx, overrides)
