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
import base64
import html
import json
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from . import plots, steprules
from .events import StepEvent, host_of, read_folder
from .monitor import percentile
from .rules import DEFAULTS, RuleResult, Series, evaluate, gpus, hosts, load_series, parse_overrides
from .timeline import read_timeline

__all__ = ["REPORT_FILE", "main", "render_html", "summarise"]

REPORT_FILE = "profiler-report.html"
TOP_OUTLIERS = 10


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


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        f"<tr class='{classes[i] if i < len(classes) else ''}'>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row)
        + "</tr>" for i, row in enumerate(rows))
    return f"<table><tr>{head}</tr>{body}</table>"


def _pct(stats: Optional[dict[str, Any]]) -> str:
    return f"{stats['p50']:.0f}% / {stats['p95']:.0f}%" if stats else "-"


def render_html(summary: dict[str, Any], pictures: Sequence[plots.Picture], title: str = "Profiler report") -> str:
    """The report as one HTML file, the plots embedded."""
    sections = [f"<h1>{html.escape(title)}</h1>"]
    fired = [r for r in summary["rules"] if r["triggered"]]
    sections.append(f"<p class='verdict'>{len(fired)} of {len(summary['rules'])} rules triggered"
                    + (": " + html.escape(", ".join(r["rule"] for r in fired)) if fired else "") + "</p>")
    sections += [f"<p class='note'>{html.escape(note)}</p>" for note in summary.get("notes", [])]
    if "phases" in summary:
        ph = summary["phases"]
        job = ph["job_s"] or 1.0
        sections.append("<h2>Job summary</h2>" + _table(
            ["phase", "seconds", "share"],
            [[name, f"{ph[key]:.1f}", f"{ph[key] / job:.0%}"] for name, key in
             (("initialisation (start to the first training step)", "initialization_s"),
              ("training loop", "training_loop_s"), ("finalisation (the last step to the end)", "finalization_s"),
              ("the whole job", "job_s"))]))
    sections.append("<h2>Rules</h2>" + _table(
        ["rule", "verdict", "numbers", "recommendation"],
        [[r["rule"], "TRIGGERED" if r["triggered"] else "ok", r["reason"], r["recommendation"]] for r in summary["rules"]],
        ["fired" if r["triggered"] else "ok" for r in summary["rules"]]))
    if summary.get("ranks"):
        sections.append("<h2>Ranks</h2>" + _table(
            ["rank", "train / eval / predict steps", "median step", "p95 step", "median between steps",
             "between steps share"],
            [[node, f"{r['steps']['TRAIN']} / {r['steps']['EVAL']} / {r['steps']['PREDICT']}",
              f"{r['median_step_ms']:.1f} ms", f"{r['p95_step_ms']:.1f} ms" if r["p95_step_ms"] is not None else "-",
              f"{r['median_between_ms']:.1f} ms", f"{r['between_share']:.0%}"] for node, r in summary["ranks"].items()]))
    if summary.get("outliers"):
        sections.append("<h2>Outlier steps</h2>" + _table(
            ["rank", "step", "duration", "x the rank's median"],
            [[o["rank"], o["step"], f"{o['ms']:.1f} ms", f"{o['x_median']:.1f}"] for o in summary["outliers"]]))
    if summary["hosts"]:
        sections.append("<h2>Hosts</h2>" + _table(
            ["host", "samples", "span", "CPU p50/p95", "memory p50/p95", "GPUs p50/p95"],
            [[h, e.get("samples", 0), f"{e.get('duration_s', 0):.0f} s", _pct(e.get("cpu")), _pct(e.get("memory")),
              ", ".join(f"{k}: {_pct(v)}" for k, v in e.items() if k.startswith("gpu")) or "-"]
             for h, e in summary["hosts"].items()]))
    if "horovod_timeline" in summary:
        t = summary["horovod_timeline"]
        sections.append(f"<h2>Horovod timeline</h2><p>{html.escape(t['path'])}: collectives {t['collective_share']:.0%}, "
                        f"negotiation {t['negotiate_share']:.0%} of {t['span_s']:.1f} s, {t['tensors']} tensors</p>")
    sections.append("<h2>Plots</h2>" + "".join(
        f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
        f"<figcaption>{html.escape(caption)}</figcaption></figure>" for caption, png in pictures))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse;margin-bottom:1em}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}tr.fired td{{background:#fde2e2}}
img{{max-width:100%}}figure{{margin:1em 0}}figcaption{{color:#555}}p.verdict{{font-size:1.2em}}</style></head><body>
{"".join(sections)}</body></html>"""


def _pictures(series: Series, events: list[StepEvent], ctx: steprules.StepContext) -> list[plots.Picture]:
    start = ctx.phases.start
    made = [plots.step_times(events, start), plots.step_histograms(ctx.ranks),
            plots.breakdown(ctx.ranks, {"job": ctx.phases.duration_s}), plots.spread(ctx.ranks),
            plots.utilisation_against_steps(series, events, start), plots.utilisation(series, start),
            plots.hosts_heatmap(series, start), *(plots.cores(series, host) for host in hosts(series)),
            plots.timeline_shares(ctx.timeline) if ctx.timeline is not None else None]
    return [p for p in made if p is not None]


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


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`train report DIR... --out OUT` (and the report at a job's end)."""
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
    args = parser.parse_args(argv)
    try:
        overrides = parse_overrides(args.param, {**DEFAULTS, **steprules.DEFAULTS})
    except ValueError as e:
        parser.error(str(e))
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing and not args.job:
        parser.error(f"no such folder: {', '.join(missing)}")
    folders = [f for f in args.folders if f.is_dir()]
    series = _since(load_series(folders), args.since)
    events = [e for e in read_folder(folders) if e.end >= args.since]
    timelines = [t for t in (read_timeline(p) for p in args.horovod_timeline) if t is not None]
    if not series and not events and not args.job:
        sys.stderr.write(f"train report: no system-monitor samples or step events under "
                         f"{', '.join(map(str, args.folders))}\n")
        return 1
    times = [t for values in series.values() for t, _ in values] + [e.start for e in events] + [e.end for e in events]
    start = args.since if args.since else min(times, default=time.time())
    end = max(times, default=start)
    ctx = steprules.StepContext(steprules.rank_stats(events), steprules.phases(events, start, end),
                                max(timelines, key=lambda t: t.span_s) if timelines else None)
    results = evaluate(series, overrides) + steprules.evaluate(ctx, overrides)
    stopped = stopped_notes(folders)
    notes = [*args.note, *stopped]
    summary = summarise(series, results, ctx, top_outliers(ctx), notes)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    pictures = [] if args.no_plots else _pictures(series, events, ctx)
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
    sys.exit(main())
