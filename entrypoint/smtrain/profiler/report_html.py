"""The profiler report as one HTML file (smtrain.profiler.job_report makes its summary and plots):
tables of the phases, the rules with their verdicts, the ranks, the outlier steps and the hosts, and
the plots embedded - nothing fetched from a network."""
from __future__ import annotations

import base64
import html
from typing import Any, Optional, Sequence

from .plots import Picture

__all__ = ["render_html"]


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        f"<tr class='{classes[i] if i < len(classes) else ''}'>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row)
        + "</tr>" for i, row in enumerate(rows))
    return f"<table><tr>{head}</tr>{body}</table>"


def _pct(stats: Optional[dict[str, Any]]) -> str:
    return f"{stats['p50']:.0f}% / {stats['p95']:.0f}%" if stats else "-"


def render_html(summary: dict[str, Any], pictures: Sequence[Picture], title: str = "Profiler report") -> str:
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
        [[r["rule"], r["verdict"], r["reason"], r["recommendation"]] for r in summary["rules"]],
        ["fired" if r["triggered"] else "ok" if r["judged"] else "unjudged" for r in summary["rules"]]))
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
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}tr.fired td{{background:#fde2e2}}tr.unjudged td{{color:#777}}
img{{max-width:100%}}figure{{margin:1em 0}}figcaption{{color:#555}}p.verdict{{font-size:1.2em}}</style></head><body>
{"".join(sections)}</body></html>"""
