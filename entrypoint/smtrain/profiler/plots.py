"""The report's pictures (matplotlib, Agg): each function returns (title, PNG bytes), or None when
there is nothing to draw. Times on the x axes are seconds since the job's start."""
from __future__ import annotations

import io
from typing import Any, Optional

from .events import BETWEEN, STEP, StepEvent, StepSummary
from .rules import Series, gpus, hosts
from .steprules import RankStats
from .timeline import TimelineStats

__all__ = ["Picture", "breakdown", "cores", "hosts_heatmap", "spread", "step_histograms", "step_times", "timeline_shares",
           "utilisation", "utilisation_against_steps", "warm"]

Picture = tuple[str, bytes]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    # Fixed margins (_png): a layout engine measures every label before drawing - tight_layout drew
    # each figure twice, constrained layout took half of a figure's time.
    matplotlib.rcParams["figure.constrained_layout.use"] = False
    matplotlib.rcParams["figure.subplot.wspace"] = 0.3
    matplotlib.rcParams["figure.subplot.hspace"] = 0.15
    matplotlib.rcParams["text.hinting"] = "no_hinting"  # a tenth of the text's time; the same look at 80 dpi
    import matplotlib.pyplot as plt

    return plt


def warm() -> None:
    """matplotlib, its Agg backend, numpy and the fonts loaded now (one small figure drawn), so that
    a report started before the job ends draws at once when it does."""
    plt = _pyplot()
    import numpy  # noqa: F401

    figure, axes = plt.subplots(1, 2, figsize=(3, 1))
    axes[0].plot([1, 2], [0.1, 100], linestyle="none", marker="o", label="warm")
    _log_scale(axes[0], "y", "log")
    axes[0].set_xlabel("seconds")
    axes[0].legend()
    figure.colorbar(axes[1].imshow([[0.0, 50.0]], vmin=0, vmax=100), ax=axes[1])
    _png(figure)


def _log_scale(ax: Any, which: str, scale: str, **kwargs: Any) -> None:
    """The x or y axis (`which`) of `ax` on a log (or symlog) scale whose tick labels are plain numbers
    ("0.01", "100") rather than matplotlib's mathtext ("10^2"), whose parser costs milliseconds a label
    (a tenth of such a plot's time); the minor ticks labelled too where the axis spans less than a decade."""
    from matplotlib.ticker import FuncFormatter

    getattr(ax, f"set_{which}scale")(scale, **kwargs)
    axis = ax.xaxis if which == "x" else ax.yaxis

    def minor(value: float, _: int) -> str:
        low, high = sorted(axis.get_view_interval())
        return f"{value:g}" if 0 < low and high < 10 * low else ""

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(FuncFormatter(minor))
    if scale == "log":  # minor ticks at 2 and 5 of each decade, not all eight: each tick costs matplotlib ~0.3 ms
        from matplotlib.ticker import LogLocator

        axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))


def _png(figure: Any) -> bytes:
    plt = _pyplot()
    from matplotlib.ticker import AutoLocator, MaxNLocator

    for ax in figure.axes:  # at most 6 intervals on a linear axis, not up to 10: each tick costs ~0.3 ms
        for axis in (ax.xaxis, ax.yaxis):
            if type(axis.get_major_locator()) is AutoLocator:
                axis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
    width, height = figure.get_size_inches()
    # room in inches for the labels: rank and host names at the left, a twin axis's or colour bar's at
    # the right, the x axis's below
    figure.subplots_adjust(left=min(0.3, 1.2 / width), right=1 - 0.8 / width, bottom=min(0.4, 0.55 / height),
                           top=1 - 0.25 / height)
    data = io.BytesIO()
    figure.savefig(data, format="png", dpi=80, pil_kwargs={"compress_level": 1})  # a tenth of a figure's time at 6
    plt.close(figure)
    return data.getvalue()


def utilisation(series: Series, start: float) -> Optional[Picture]:
    """CPU, GPU and memory utilisation over time, per host."""
    if not series:
        return None
    plt = _pyplot()
    figure, axes = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True)
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
    axes[1].set_xlabel("seconds since the job's start")
    for ax in axes:
        ax.set_ylim(0, 105)
        ax.legend(loc="upper right", fontsize="small")
        ax.grid(alpha=0.3)
    return "System utilisation per host", _png(figure)


def hosts_heatmap(series: Series, start: float, columns: int = 60) -> Optional[Picture]:
    """Every host's utilisation over time in one heat map: its GPUs' mean where it has GPUs, else its
    CPU (each cell the mean of its samples in that stretch of the job); for two hosts or more."""
    names = hosts(series)
    if len(names) < 2:
        return None
    on_gpus = {h: gpus(series, h) for h in names}
    rows_of = {h: [series[(h, g, "GPUUtilization")] for g in on_gpus[h]] or
               [series.get((h, "cpu_total", "CPUUtilization"), [])] for h in names}
    times = [t for rows in rows_of.values() for row in rows for t, _ in row]
    if not times:
        return None
    end = max(max(times), start + 1e-6)
    width = (end - start) / columns
    grid = []
    for host in names:
        sums, counts = [0.0] * columns, [0] * columns
        for row in rows_of[host]:
            for t, v in row:
                cell = min(columns - 1, max(0, int((t - start) / width)))
                sums[cell], counts[cell] = sums[cell] + v, counts[cell] + 1
        grid.append([sums[i] / counts[i] if counts[i] else float("nan") for i in range(columns)])
    labels = [f"{h} ({'GPU' if on_gpus[h] else 'CPU'})" for h in names]
    return "Utilisation across hosts (%)", _heat_map(grid, labels, "seconds since the job's start",
                                                     extent=(0, end - start, len(names) - 0.5, -0.5))


def cores(series: Series, host: str) -> Optional[Picture]:
    """A host's CPU cores' utilisation over time (a heat map)."""
    names = sorted((n for h, n, d in series if h == host and d == "CPUUtilization" and n[3:].isdigit()),
                   key=lambda n: int(n[3:]))
    if not names:
        return None
    rows = [[v for _, v in series[(host, c, "CPUUtilization")]] for c in names]
    width = min(len(r) for r in rows)
    return f"{host}: CPU utilisation per core (%)", _heat_map([r[:width] for r in rows], names, "sample")


def _heat_map(grid: list[list[float]], labels: list[str], xlabel: str, extent: Any = None) -> bytes:
    """Rows of percentages (0-100) as a heat map, one labelled row each, with its colour bar."""
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(10, 1 + 0.3 * len(labels)))
    image = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=100, interpolation="nearest", extent=extent)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel(xlabel)
    figure.colorbar(image, ax=ax)
    return _png(figure)


def step_times(events: list[Any], start: float) -> Optional[Picture]:
    """Each step kept one by one; past a rank's first steps, each interval's mean (and its longest step)."""
    steps = [e for e in events if e.kind == STEP and not isinstance(e, StepSummary)]
    summaries = [e for e in events if e.kind == STEP and isinstance(e, StepSummary) and e.count]
    if not steps and not summaries:
        return None
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(10, 4))
    for node in sorted({e.node for e in steps}):
        for mode, marker in (("TRAIN", "o"), ("EVAL", "s"), ("PREDICT", "^")):
            mine = [e for e in steps if e.node == node and e.mode == mode]
            if mine:  # markers of a line, not a scatter: Agg stamps one marker many times, a scatter draws each
                ax.plot([e.start - start for e in mine], [e.duration * 1e3 for e in mine], linestyle="none",
                        marker=marker, markersize=2.5, label=f"rank {node} {mode.lower()}")
            means = sorted((s for s in summaries if s.node == node and s.mode == mode), key=lambda s: s.start)
            if means:
                ax.plot([(s.start + s.end) / 2 - start for s in means], [s.total_s / s.count * 1e3 for s in means],
                        label=f"rank {node} {mode.lower()}: mean per interval")
    ax.set_xlabel("seconds since the job's start")
    ax.set_ylabel("step duration (ms)")
    _log_scale(ax, "y", "log")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize="small", markerscale=2)
    return "Step duration over time, per rank", _png(figure)


def _with_steps(ranks: dict[str, RankStats]) -> dict[str, RankStats]:
    """The ranks that ran training steps (a rank that only evaluated has nothing to draw here)."""
    return {n: s for n, s in ranks.items() if s.train_steps}


def step_histograms(ranks: dict[str, RankStats]) -> Optional[Picture]:
    """Each rank's histogram of training step durations."""
    ranks = _with_steps(ranks)
    if not ranks:
        return None
    plt = _pyplot()
    import numpy

    figure, ax = plt.subplots(figsize=(10, 4))
    weighted = {node: stats.weighted_steps() for node, stats in ranks.items()}
    values = [v for steps, _ in weighted.values() for v in steps if v > 0]
    low, high = min(values, default=0.1), max(values, default=1.0)
    bins = numpy.geomspace(low, high * 1.0001, 40) if high > low else 40  # log bins: the first step's tracing is 1000x
    for node, (steps, weights) in weighted.items():  # arrays: matplotlib walks a list value by value
        ax.hist(numpy.asarray(steps, dtype=float), bins=bins, weights=numpy.asarray(weights, dtype=float), alpha=0.5,
                histtype="stepfilled",  # one patch a rank, not a bar a bin
                label=f"rank {node} ({ranks[node].train_steps} steps)")
    if high > low:
        _log_scale(ax, "x", "log")
    ax.set_xlabel("training step duration (ms)")
    ax.set_ylabel("steps")
    ax.legend(loc="upper right", fontsize="small")
    ax.grid(alpha=0.3)
    return "Histogram of training step durations, per rank", _png(figure)


def breakdown(ranks: dict[str, RankStats], phases_s: dict[str, float]) -> Optional[Picture]:
    """Where each rank's time went: train, eval, predict, between steps; and the job's phases."""
    if not ranks:
        return None
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * len(ranks)))
    names = list(ranks)
    left = [0.0] * len(names)
    parts = [("train", "training steps"), ("eval", "evaluation steps"), ("predict", "prediction steps"),
             ("between", "between steps (input, callbacks)")]
    for key, label in parts:
        values = [ranks[n].total_s.get(key, 0.0) for n in names]
        ax.barh(names, values, left=left, label=label)
        left = [a + b for a, b in zip(left, values)]
    other = [max(0.0, phases_s.get("job", 0.0) - total) for total in left]
    ax.barh(names, other, left=left, label="other (start-up, epochs' ends, finalisation)", color="#cccccc")
    ax.set_xlabel("seconds")
    ax.set_ylabel("rank")
    ax.legend(loc="lower right", fontsize="small")
    return "Where each rank's time went", _png(figure)


def spread(ranks: dict[str, RankStats]) -> Optional[Picture]:
    """The spread of step durations across ranks (box plots)."""
    ranks = _with_steps(ranks)
    if not ranks:
        return None
    plt = _pyplot()
    import numpy

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, label, values in ((axes[0], "training step (ms)", [s.step_sample() for s in ranks.values()]),
                              (axes[1], "between steps (ms)", [s.between_ms or [0.0] for s in ranks.values()])):
        ax.boxplot([numpy.asarray(v, dtype=float) for v in values], showfliers=True)  # arrays: see step_histograms
        ax.set_xticks(range(1, len(ranks) + 1), list(ranks), fontsize="small")
        ax.set_ylabel(label)
        _log_scale(ax, "y", "symlog", linthresh=1.0)
        ax.grid(alpha=0.3)
    return "Spread of step times across ranks", _png(figure)


def utilisation_against_steps(series: Series, events: list[StepEvent], start: float) -> Optional[Picture]:
    """Utilisation and training steps on one time axis."""
    events = [e for e in events if not isinstance(e, StepSummary)]
    train = [e for e in events if e.kind == STEP and e.mode == "TRAIN"]
    if not train or not series:
        return None
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(10, 4))
    used = "CPU"
    for host in hosts(series):
        names = gpus(series, host)
        keys = [(host, g, "GPUUtilization") for g in names] or [(host, "cpu_total", "CPUUtilization")]
        used = "GPU" if names else used
        for key in keys:
            values = series.get(key, [])
            ax.plot([t - start for t, _ in values], [v for _, v in values], alpha=0.6, label=f"{key[0]} {key[1]}")
    ax.set_ylim(0, 105)
    ax.set_ylabel(f"{used} utilisation %")
    ax.set_xlabel("seconds since the job's start")
    twin = ax.twinx()
    twin.plot([e.start - start for e in train], [e.duration * 1e3 for e in train], linestyle="none", marker="o",
              markersize=2, color="black", label="training step (ms)")
    gaps = [e for e in events if e.kind == BETWEEN and e.mode == "TRAIN"]
    if gaps:
        twin.plot([e.start - start for e in gaps], [e.duration * 1e3 for e in gaps], linestyle="none", marker="x",
                  markersize=2.5, color="red", label="between steps (ms)")
    _log_scale(twin, "y", "log")
    twin.set_ylabel("ms")
    ax.legend(loc="upper left", fontsize="small")
    twin.legend(loc="upper right", fontsize="small")
    return f"{used} utilisation against step times", _png(figure)


def timeline_shares(timeline: TimelineStats) -> Optional[Picture]:
    """Horovod's timeline: the share of each collective activity."""
    if not timeline.by_activity:
        return None
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(10, 1.5 + 0.35 * len(timeline.by_activity)))
    names = list(timeline.by_activity)
    ax.barh(names, [timeline.by_activity[n] for n in names])
    ax.set_xlabel("seconds, summed over tensors")
    return (f"Horovod timeline: collectives {timeline.collective_share:.0%}, negotiation "
            f"{timeline.negotiate_share:.0%} of {timeline.span_s:.1f} s"), _png(figure)
