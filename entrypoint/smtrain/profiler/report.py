"""`train report DIR [DIR ...] [--out OUT] [--param Rule.key=value ...]`: an HTML report with plots
and a JSON summary of the system monitor's files from one or many hosts (each DIR is searched at
any depth, e.g. every host's `output/profiler`, or a folder holding them all).

OUT (default ./profiler-report) gets report.html, summary.json and the plots as PNG files:
utilisation over time per host (CPU, each GPU), memory, and a heat map of the CPU cores per host;
plus the rule verdicts with their reasons and recommendations (smtrain.profiler.rules).
"""
from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from .monitor import percentile
from .rules import RuleResult, Series, evaluate, gpus, hosts, load_series, parse_overrides

__all__ = ["main", "plot", "render_html", "summarise"]


def summarise(series: Series, results: list[RuleResult]) -> dict[str, Any]:
    summary: dict[str, Any] = {"hosts": {}, "rules": [r.to_json() for r in results]}
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
    return summary


def plot(series: Series, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    start = min((values[0][0] for values in series.values() if values), default=0.0)
    figure, axes = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for host in hosts(series):
        cpu = series.get((host, "cpu_total", "CPUUtilization"), [])
        axes[0].plot([t - start for t, _ in cpu], [v for _, v in cpu], label=f"{host} CPU")
        for gpu in gpus(series, host):
            values = series[(host, gpu, "GPUUtilization")]
            axes[0].plot([t - start for t, _ in values], [v for _, v in values], label=f"{host} {gpu}")
        memory = series.get((host, "MemoryUsedPercent", "Memory"), [])
        axes[1].plot([t - start for t, _ in memory], [v for _, v in memory], label=f"{host} memory")
        for gpu in gpus(series, host):
            values = series.get((host, gpu, "GPUMemoryUtilization"), [])
            axes[1].plot([t - start for t, _ in values], [v for _, v in values], label=f"{host} {gpu} memory")
    axes[0].set_ylabel("utilisation %")
    axes[1].set_ylabel("memory used %")
    axes[1].set_xlabel("seconds since the first sample")
    for ax in axes:
        ax.set_ylim(0, 105)
        ax.legend(loc="upper right", fontsize="small")
        ax.grid(alpha=0.3)
    files.append(_save(figure, out / "utilisation.png"))
    for host in hosts(series):
        cores = sorted((n for h, n, d in series if h == host and d == "CPUUtilization" and n[3:].isdigit()),
                       key=lambda n: int(n[3:]))
        if not cores:
            continue
        rows = [[v for _, v in series[(host, c, "CPUUtilization")]] for c in cores]
        width = min(len(r) for r in rows)
        figure, ax = plt.subplots(figsize=(10, 1 + 0.3 * len(cores)))
        image = ax.imshow([r[:width] for r in rows], aspect="auto", cmap="viridis", vmin=0, vmax=100,
                          interpolation="nearest")
        ax.set_yticks(range(len(cores)), cores)
        ax.set_xlabel("sample")
        ax.set_title(f"{host}: CPU utilisation per core (%)")
        figure.colorbar(image, ax=ax)
        files.append(_save(figure, out / f"cores-{host}.png"))
    return files


def _save(figure: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def render_html(summary: dict[str, Any], images: list[Path]) -> str:
    rows = "".join(
        f"<tr class='{'fired' if r['triggered'] else 'ok'}'><td>{html.escape(r['rule'])}</td>"
        f"<td>{'TRIGGERED' if r['triggered'] else 'ok'}</td><td>{html.escape(r['reason'])}</td>"
        f"<td>{html.escape(r['recommendation'])}</td></tr>"
        for r in summary["rules"]
    )
    host_rows = "".join(
        f"<tr><td>{html.escape(h)}</td><td>{e.get('samples', 0)}</td><td>{e.get('duration_s', 0):.0f} s</td>"
        f"<td>{_pct(e.get('cpu'))}</td><td>{_pct(e.get('memory'))}</td>"
        f"<td>{html.escape(', '.join(f'{k}: {_pct(v)}' for k, v in e.items() if k.startswith('gpu')) or '-')}</td></tr>"
        for h, e in summary["hosts"].items()
    )
    pictures = "".join(f"<p><img src='{html.escape(p.name)}' alt='{html.escape(p.stem)}'></p>" for p in images)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>System utilisation report</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:4px 8px;text-align:left}}tr.fired td{{background:#fde2e2}}img{{max-width:100%}}</style></head><body>
<h1>System utilisation report</h1>
<h2>Hosts</h2><table><tr><th>host</th><th>samples</th><th>span</th><th>CPU p50/p95</th><th>memory p50/p95</th>
<th>GPUs p50/p95</th></tr>{host_rows}</table>
<h2>Rules</h2><table><tr><th>rule</th><th>verdict</th><th>reason</th><th>recommendation</th></tr>{rows}</table>
<h2>Plots</h2>{pictures}</body></html>"""


def _pct(stats: Optional[dict[str, Any]]) -> str:
    return f"{stats['p50']:.0f}% / {stats['p95']:.0f}%" if stats else "-"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="train report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("profiler-report"))
    parser.add_argument("--param", action="append", default=[], metavar="Rule.key=value")
    args = parser.parse_args(argv)
    try:
        overrides = parse_overrides(args.param)
    except ValueError as e:
        parser.error(str(e))
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing:
        parser.error(f"no such folder: {', '.join(missing)}")
    series = load_series(args.folders)
    if not series:
        sys.stderr.write(f"train report: no system-monitor samples under {', '.join(map(str, args.folders))}\n")
        return 1
    results = evaluate(series, overrides)
    summary = summarise(series, results)
    args.out.mkdir(parents=True, exist_ok=True)
    images = plot(series, args.out)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    (args.out / "report.html").write_text(render_html(summary, images))
    fired = [r.rule for r in results if r.triggered]
    print(f"report: {args.out / 'report.html'} ({len(hosts(series))} host(s); rules triggered: {', '.join(fired) or 'none'})")
    return 0
