"""`train report DIR [DIR ...] [--out OUT] [--param Rule.key=value ...] [--horovod-timeline FILE]`:
one HTML file with its plots embedded (nothing fetched from a network) and a JSON summary, from
the system monitor's files and the ranks' step events of one or many hosts or jobs (each DIR is
searched at any depth: every host's `output/profiler`, or a folder holding them all).

OUT (default ./profiler-report) gets profiler-report.html and summary.json: the job's phases
(initialisation, training loop, finalisation), system utilisation per host, step durations over time
and their histogram per rank, where each rank's time went (train, eval, predict, between steps), the
outlier steps, the spread across ranks, utilisation against step times, Horovod's collectives where a
timeline is given, and the rules (smtrain.profiler.rules, smtrain.profiler.steprules) with their
numbers and recommendations.

`train` runs it on the master (or a single host) when a job ends, also a failed one, with `--job`
(what exists is reported, even nothing) and `--since` (the job's start: older files are left out),
into output/data/profiler-report/, which SageMaker packs into output.tar.gz; with `--no-plots` when
the job was being stopped (SIGTERM: the tables in a fraction of a second; `train report` draws the
plots later from output/profiler).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..common.console import exit_flushed
from . import digests, plots, steprules
from .events import StepEvent, host_of, rank_of, read_folder
from .monitor import percentile
from .report_html import render_html
from .rules import DEFAULTS, RuleResult, Series, evaluate, gpus, hosts, load_series, parse_overrides
from .timeline import read_timeline

__all__ = ["REPORT_FILE", "SHOWN", "Drawing", "draw", "main", "summarise", "telling_hosts", "telling_ranks"]

REPORT_FILE = "profiler-report.html"
TOP_OUTLIERS = 10
SHOWN = 4  # ranks, and hosts, drawn one by one at most; the tables and the heat map of hosts cover all
DRAWERS = 4  # processes drawing the plots at once, at most (one a core)


def summarise(series: Series, results: list[RuleResult], ctx: Optional[steprules.StepContext] = None,
              outliers: Sequence[dict[str, Any]] = (), notes: Sequence[str] = ()) -> dict[str, Any]:
    """The report's summary.json: per host utilisation, per rank steps, the rules, outliers and notes."""
    summary: dict[str, Any] = {"hosts": {}, "rules": [r.to_json() for r in results], "notes": list(notes)}
    for host in hosts(series):
        entry: dict[str, Any] = {}
        for label, name, dimension in [("cpu", "cpu_total", "CPUUtilization"), ("memory", "MemoryUsedPercent", "Memory"),
                                       ("io_wait", "cpu_iowait", "I/OWaitPercentage")]:
            values = [v for _, v in series.get((host, name, dimension), [])]
            if values:
                entry[label] = {"p50": percentile(values, 50), "p95": percentile(values, 95), "max": max(values)}
        for gpu in gpus(series, host):
            values = [v for _, v in series.get((host, gpu, "GPUUtilization"), [])]
            memory = [v for _, v in series.get((host, gpu, "GPUMemoryUtilization"), [])]
            entry[gpu] = {"p50": percentile(values, 50), "p95": percentile(values, 95),
                          "memory_max": max(memory) if memory else None}
        times = [t for (h, _, _), values in series.items() if h == host for t, _ in values]
        entry["samples"] = len(series.get((host, "cpu_total", "CPUUtilization"), []))
        entry["duration_s"] = (max(times) - min(times)) if times else 0.0
        summary["hosts"][host] = entry
    if ctx is not None:
        ph = ctx.phases
        summary["phases"] = {"job_s": ph.duration_s, "initialization_s": ph.initialization_s,
                             "training_loop_s": ph.training_s, "finalization_s": ph.finalization_s}
        summary["ranks"] = {
            node: {"steps": s.steps, "median_step_ms": s.median_step_ms,
                   "p95_step_ms": steprules.weighted_percentile(s.step_ms, s.step_bins, 95) if s.train_steps else None,
                   "median_between_ms": s.median_between_ms, "between_share": s.between_share,
                   "seconds": s.total_s}
            for node, s in ctx.ranks.items()}
        summary["outliers"] = list(outliers)
        if ctx.timeline is not None:
            t = ctx.timeline
            summary["horovod_timeline"] = {"path": t.path, "span_s": t.span_s, "collective_share": t.collective_share,
                                           "negotiate_share": t.negotiate_share, "tensors": t.tensors}
    return summary


def top_outliers(ctx: steprules.StepContext) -> list[dict[str, Any]]:
    p = steprules.DEFAULTS["StepOutlier"]
    found = []
    for node, stats in ctx.ranks.items():
        steps, _, _ = steprules.outliers(stats, p["stddev"], p["skip"])
        median = stats.median_step_ms or 1.0
        found += [{"rank": node, "step": step, "ms": ms, "x_median": ms / median} for step, ms in steps if step >= 0]
    return sorted(found, key=lambda o: -o["ms"])[:TOP_OUTLIERS]


def telling_ranks(ranks: dict[str, steprules.RankStats], most: int = SHOWN) -> list[str]:
    """The ranks whose detail the plots draw: every one where there are at most `most`; else the first,
    the slowest and the fastest by median training step, and the median one (in rank order)."""
    if len(ranks) <= most:
        return list(ranks)
    timed = sorted((n for n, s in ranks.items() if s.train_steps), key=lambda n: ranks[n].median_step_ms)
    chosen = {next(iter(ranks)), *([timed[-1], timed[0], timed[len(timed) // 2]] if timed else [])}
    return [n for n in ranks if n in chosen]


def _load(series: Series, host: str) -> float:
    """A host's mean utilisation: its GPUs' where it has GPUs, else its CPU's."""
    keys = [(host, g, "GPUUtilization") for g in gpus(series, host)] or [(host, "cpu_total", "CPUUtilization")]
    values = [v for key in keys for _, v in series.get(key, [])]
    return sum(values) / len(values) if values else 0.0


def telling_hosts(series: Series, most: int = SHOWN) -> list[str]:
    """The hosts whose detail the plots draw: every one where there are at most `most`; else the first,
    the busiest and the idlest by mean utilisation, and the median one (the heat map of hosts and the
    hosts' table cover every host)."""
    names = hosts(series)
    if len(names) <= most:
        return names
    by_load = sorted(names, key=lambda h: _load(series, h))
    chosen = {names[0], by_load[-1], by_load[0], by_load[len(by_load) // 2]}
    return [h for h in names if h in chosen]


def _noted(picture: Optional[plots.Picture], note: str) -> Optional[plots.Picture]:
    """`picture` with `note` (which ranks or hosts it draws) after its title, where there is one."""
    return picture if picture is None or not note else (f"{picture[0]} ({note})", picture[1])


def _drawn_hosts(series: Series) -> tuple[list[str], Series, str]:
    """The hosts drawn one by one (`telling_hosts`), their samples, and the note saying which they are
    (empty where every host is drawn)."""
    names = telling_hosts(series)
    drawn = set(names)
    of_hosts = f"hosts {', '.join(names)} of {len(hosts(series))}: the first, the busiest, the idlest, the median" \
        if len(names) < len(hosts(series)) else ""
    return names, {k: v for k, v in series.items() if k[0] in drawn}, of_hosts


def _host_tasks(series: Series, start: float) -> list[Callable[[], Optional[plots.Picture]]]:
    """The plots of the hosts' samples alone (the report can draw them before it has read the ranks');
    each host drawn one by one only where there are few, else those that tell something (`telling_hosts`)."""
    names, few, of_hosts = _drawn_hosts(series)
    by_load = sorted(names, key=lambda h: _load(series, h))
    cores_of = names if len(names) <= 2 else [by_load[-1], by_load[0]]  # the busiest and the idlest
    return [
        lambda: _noted(plots.utilisation(few, start), of_hosts),
        lambda: plots.hosts_heatmap(series, start),
        *((lambda host=host: plots.cores(series, host)) for host in cores_of),
    ]


def _pictures(series: Series, events: list[StepEvent], ctx: steprules.StepContext,
              events_of: Callable[[set[str]], list[StepEvent]], hosts_drawing: Optional["Drawing"] = None
              ) -> list[plots.Picture]:
    """The report's plots; their cost bounded whatever the cluster's size: each rank and host drawn one
    by one only where there are few, else those that tell something (`telling_ranks`, `telling_hosts`).
    `events_of`: the events of ranks known by their digests alone (read now: only those drawn);
    `hosts_drawing`: the hosts' plots (`_host_tasks`), started before the ranks were read."""
    start = ctx.phases.start
    shown = telling_ranks(ctx.ranks)
    unread = set(shown) - {e.node for e in events}
    if unread:
        events = events + events_of(unread)
    ranks = {n: ctx.ranks[n] for n in shown}
    if len(shown) < len(ctx.ranks):
        picked = set(shown)
        events = [e for e in events if e.node in picked]
        of_ranks = f"ranks {', '.join(shown)} of {len(ctx.ranks)}: the first, the slowest, the fastest, the median"
    else:
        of_ranks = ""
    _, few, of_hosts = _drawn_hosts(series)
    timeline = ctx.timeline
    tasks: list[Callable[[], Optional[plots.Picture]]] = [
        lambda: _noted(plots.step_times(events, start), of_ranks),
        lambda: _noted(plots.step_histograms(ranks), of_ranks),
        lambda: _noted(plots.breakdown(ranks, {"job": ctx.phases.duration_s}), of_ranks),
        lambda: _noted(plots.spread(ranks), of_ranks),
        lambda: _noted(plots.utilisation_against_steps(few, events, start), "; ".join(n for n in (of_hosts, of_ranks) if n)),
    ]
    rank_plots = len(tasks)  # the hosts' plots follow the ranks'
    if hosts_drawing is None:
        tasks += _host_tasks(series, start)
    tasks += [lambda: plots.timeline_shares(timeline)] if timeline is not None else []
    drawn = draw(tasks)
    if hosts_drawing is not None:
        drawn[rank_plots:rank_plots] = hosts_drawing.collect()
    return [p for p in drawn if p is not None]


class Drawing:
    """Tasks' pictures being drawn by forked processes (`start`), collected in order (`collect`)."""

    def __init__(self, tasks: Sequence[Callable[[], Optional[plots.Picture]]], workers: int) -> None:
        self.tasks, self.workers = tasks, workers  # workers 0: `collect` draws them in this process
        self.children: list[tuple[int, int]] = []

    def start(self) -> "Drawing":
        """Forks the drawers, each taking every n-th task."""
        for i in range(self.workers):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # a drawer: its share, pickled to the parent, then gone without running atexit hooks
                os.close(read_fd)
                status = 1
                try:
                    with os.fdopen(write_fd, "wb") as out:
                        tasks = self.tasks
                        pickle.dump([(k, tasks[k]()) for k in range(i, len(tasks), self.workers)], out)
                    status = 0
                finally:
                    os._exit(status)
            os.close(write_fd)
            self.children.append((pid, read_fd))
        return self

    def collect(self) -> list[Optional[plots.Picture]]:
        """Each task's picture, in order; a drawer that failed leaves its tasks to this process."""
        drawn: dict[int, Optional[plots.Picture]] = {}
        for pid, read_fd in self.children:
            with os.fdopen(read_fd, "rb") as source:
                data = source.read()
            _, status = os.waitpid(pid, 0)
            if status == 0 and data:
                drawn.update(pickle.loads(data))
        self.children = []
        return [drawn[k] if k in drawn else self.tasks[k]() for k in range(len(self.tasks))]


def draw(tasks: Sequence[Callable[[], Optional[plots.Picture]]], workers: int = 0) -> list[Optional[plots.Picture]]:
    """Each task's picture, in order; drawn by forked processes, one a core up to DRAWERS (`workers`:
    that many instead): matplotlib draws on one core."""
    workers = workers or min(DRAWERS, len(os.sched_getaffinity(0)), len(tasks))
    return Drawing(tasks, workers if workers > 1 else 0).start().collect()


def stopped_notes(folders: Sequence[Path]) -> list[str]:
    """What ranks said when their step events stopped (smtrain.profiler.steps: the volume ran short)."""
    notes = []
    for folder in folders:
        for path in sorted(folder.rglob("*_stopped.json")):
            try:
                raw = json.loads(path.read_text())
                notes.append(f"rank {raw['node']}: {raw['reason']}")
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return notes


def _since(series: Series, since: float) -> Series:
    return {k: [(t, v) for t, v in values if t >= since] for k, values in series.items()
            if any(t >= since for t, _ in values)}


def _when_told(argv: list[str]) -> Optional[list[str]]:
    """`--wait` (train, at a job's start): matplotlib and the fonts loaded now, then the rest of the
    arguments read from stdin (one JSON list) when the job ends; None when train went away first."""
    plots.warm()
    line = sys.stdin.readline()
    if not line:
        return None
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)  # started niced beside the job's start-up; the job is over now
    except OSError:
        pass
    return [a for a in argv if a != "--wait"] + [str(a) for a in json.loads(line)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`train report DIR... --out OUT` (and the report at a job's end)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--wait" in argv:
        told = _when_told(argv)
        if told is None:
            return 0
        argv = told
    parser = argparse.ArgumentParser(prog="train report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("profiler-report"))
    parser.add_argument("--param", action="append", default=[], metavar="Rule.key=value")
    parser.add_argument("--horovod-timeline", action="append", default=[], type=Path, metavar="FILE")
    parser.add_argument("--since", type=float, default=0.0, help="leave out what came before (seconds since the epoch)")
    parser.add_argument("--job", action="store_true", help="written by train at a job's end: report what exists")
    parser.add_argument("--note", action="append", default=[], help="a line for the report's top (train: hosts missing from it)")
    parser.add_argument("--no-plots", action="store_true", help="tables and rules only (train, when the job is being stopped)")
    parser.add_argument("--wait", action="store_true", help="load the plotting libraries, then read more arguments "
                        "from stdin (train starts the report so with the job)")
    args = parser.parse_args(argv)
    try:
        overrides = parse_overrides(args.param, {**DEFAULTS, **steprules.DEFAULTS})
    except ValueError as e:
        parser.error(str(e))
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing and not args.job:
        parser.error(f"no such folder: {', '.join(missing)}")
    folders = [f for f in args.folders if f.is_dir()]
    gc.disable()  # a million small objects, none in a cycle: the collector's passes over them cost more than reading
    hosts_drawing = None
    try:
        series = _since(load_series(folders), args.since)
        if args.since and not args.no_plots and len(os.sched_getaffinity(0)) > 1:
            # the hosts' plots need nothing more: one drawer draws them on another core while the ranks are read
            hosts_drawing = Drawing(_host_tasks(series, args.since), 1).start()
        digested = digests.read(folders, args.since)  # the ranks' digests
        events = [e for e in read_folder(folders, lambda node: node not in digested) if e.end >= args.since]
    finally:
        gc.freeze()  # what was read stays: later collections need not walk it
        gc.enable()
    timelines = [t for t in (read_timeline(p) for p in args.horovod_timeline) if t is not None]
    if not series and not events and not digested and not args.job:
        sys.stderr.write(f"train report: no system-monitor samples or step events under "
                         f"{', '.join(map(str, args.folders))}\n")
        return 1
    times = [t for values in series.values() for t, _ in values] + [e.start for e in events] + [e.end for e in events]
    times += [t for d in digested.values() for t in (d.first_event, d.last_event)]
    start = args.since if args.since else min(times, default=time.time())
    end = max(times, default=start)
    stats = {**{node: d.stats for node, d in digested.items()}, **steprules.rank_stats(events)}
    ctx = steprules.StepContext(dict(sorted(stats.items(), key=lambda kv: (rank_of(kv[0]), kv[0]))),
                                steprules.phases(events + digests.phase_marks(digested.values()), start, end),
                                max(timelines, key=lambda t: t.span_s) if timelines else None)
    results = evaluate(series, overrides) + steprules.evaluate(ctx, overrides)
    stopped = stopped_notes(folders)
    notes = [*args.note, *stopped]
    summary = summarise(series, results, ctx, top_outliers(ctx), notes)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    pictures = [] if args.no_plots else _pictures(series, events, ctx, lambda nodes: [
        e for e in read_folder(folders, lambda node: node in nodes) if e.end >= args.since], hosts_drawing)
    (args.out / REPORT_FILE).write_text(render_html(summary, pictures))
    fired = [r.rule for r in results if r.triggered]
    measured = set(hosts(series)) | {host_of(node) for node in ctx.ranks if host_of(node)}
    line = (f"report: {args.out / REPORT_FILE} ({len(measured)} host(s), {len(ctx.ranks)} rank(s) with steps; "
            f"rules triggered: {', '.join(fired) or 'none'}"
            + (f"; step events stopped early on {len(stopped)} rank(s)" if stopped else "")
            + "".join(f"; {note}" for note in args.note) + ")")
    if args.job:  # one of train's own lines in the job's log, whole and marked as such
        sys.stderr.write(f"[train] profiler {line}\n")
        sys.stderr.flush()
    else:
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    # Everything is written: no teardown of matplotlib's and numpy's modules, a tenth of a second
    # more of the job's end.
    exit_flushed(main())
