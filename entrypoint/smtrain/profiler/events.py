"""smdebug's framework events: the trace-event files every rank's step recorder writes and the report
reads. Pure: text in, text out.

A file is a JSON array of Chrome trace events, as smdebug's `TimelineFileWriter` writes them:

    [{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1764..}},
     {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
     {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}}, ...,
     {"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X", "ts": 1234, "dur": 20000,
      "args": {"step_num": "7", "pid": 4242}}, ...]

`ts` counts microseconds from the start time. One event per step (`Step:ModeKeys.TRAIN`, `.EVAL`,
`.PREDICT`), per gap before a step (`Between:ModeKeys.<mode>`: the input pipeline and callbacks, not
named "Step" so that smdebug's pandas helpers do not count it as a training phase) and per epoch
(`Epoch:ModeKeys.<mode>`); each carries the step number it belongs to.

Past a rank's first `FULL_STEPS` steps of a mode (and outside the configured profiling windows), steps
are kept as summaries instead (smtrain.profiler.steps): one `Summary:ModeKeys.<mode>` (steps) or
`BetweenSummary:ModeKeys.<mode>` (gaps) event per interval spanning it, whose args hold the count,
the summed, shortest and longest durations and a histogram (`bins`: ms at a bin's centre -> count,
bins 2^(1/8) wide), while the interval's longest step stays a step event of its own. So a rank keeps
a bounded number of bytes per hour whatever its step rate.

Written as `<profiler>/framework/<node>_pythontimeline.json.tmp` while open (one line per event,
flushed every second), renamed to `<profiler>/framework/pevents/<YYYYMMDDHH>/<end_us>_<node>_pythontimeline.json`
when complete (a minute's events, or the program's end); `node` is `<rank>-<host>`, as smdebug names it.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional

__all__ = ["BETWEEN", "EPOCH", "FULL_STEPS", "MODES", "STEP", "StepEvent", "StepSummary", "as_read", "bin_centre_ms",
           "bin_of", "event_files", "file_end_us", "file_header", "final_path", "host_of", "node_id", "open_files", "parse", "rank_of",
           "read_folder", "stopped_path", "summary_lines", "temp_path", "to_lines", "trace_objects"]

STEP = "Step"
BETWEEN = "Between"
EPOCH = "Epoch"
MODES = ("TRAIN", "EVAL", "PREDICT")
SUFFIX = "pythontimeline.json"
# a summary's phase, by what it summarises; neither name holds "Step", which smdebug's pandas helpers
# take for a training phase (a summary spans its interval, the steps in it are counted already)
SUMMARY_PHASES = {STEP: "Summary", BETWEEN: "BetweenSummary"}
SUMMARISED = {phase: kind for kind, phase in SUMMARY_PHASES.items()}
FULL_STEPS = 2000  # steps of each mode that every rank keeps one by one
BINS_PER_OCTAVE = 8


def bin_of(ms: float) -> int:
    """A duration's histogram bin: bins 2^(1/8) wide (a centre is within 4.5 % of every value in its bin)."""
    return math.floor(math.log2(ms) * BINS_PER_OCTAVE) if ms > 0 else -10 * BINS_PER_OCTAVE


def bin_centre_ms(index: int) -> float:
    """The duration (ms) at the centre of a summary histogram's bin."""
    return 2.0 ** ((index + 0.5) / BINS_PER_OCTAVE)


class StepEvent(NamedTuple):
    """One step, gap between steps or epoch of one rank, as a framework event holds it."""
    node: str  # <rank>-<host>
    kind: str  # STEP, BETWEEN or EPOCH
    mode: str  # TRAIN, EVAL or PREDICT
    step: int
    start: float  # seconds since the epoch
    end: float

    @property
    def duration(self) -> float:
        """Seconds from its start to its end."""
        return self.end - self.start

    @property
    def rank(self) -> int:
        """The rank whose node wrote it."""
        return rank_of(self.node)


class StepSummary(NamedTuple):
    """`count` steps (or gaps before steps) of one rank and mode, numbered `step` to `last_step`, that
    ran between `start` and `end`, kept as a histogram: `bins` holds (ms at a bin's centre, count)."""

    node: str
    kind: str  # STEP or BETWEEN: what is summarised
    mode: str
    step: int
    last_step: int
    start: float
    end: float
    count: int
    total_s: float
    min_ms: float
    max_ms: float
    bins: tuple[tuple[float, int], ...]

    @property
    def rank(self) -> int:
        """The rank whose node wrote it."""
        return rank_of(self.node)


def rank_of(node: str) -> int:
    """The rank in a node id (`<rank>-<host>`); -1 where it holds none."""
    head = node.split("-", 1)[0]
    return int(head) if head.isdigit() else -1


def host_of(node: str) -> str:
    """The host in a node id (`<rank>-<host>`); empty where it holds none."""
    return node.split("-", 1)[1] if "-" in node else ""


def node_id(rank: int, host: str) -> str:
    """smdebug's node id of a rank: `<rank>-<host>`."""
    return f"{rank}-{host}".replace("_", "-")


def open_files(out: Path) -> Path:
    """The folder of the event files the ranks are writing (`temp_path`)."""
    return out / "framework"


def temp_path(out: Path, node: str) -> Path:
    """The event file a rank is writing (renamed to its final path when closed)."""
    return open_files(out) / f"{node}_{SUFFIX}.tmp"


def stopped_path(out: Path, node: str) -> Path:
    """The note a rank leaves when its step events stopped (the volume ran short of free space)."""
    return out / "framework" / f"{node}_stopped.json"


def final_path(out: Path, node: str, end_us: int) -> Path:
    """smdebug's path of a closed event file: framework/pevents/<hour>/<end_us>_<node>_....json."""
    hour = time.strftime("%Y%m%d%H", time.gmtime(end_us / 1e6))
    return out / "framework" / "pevents" / hour / f"{end_us}_{node}_{SUFFIX}"


def phase_name(kind: str, mode: str) -> str:
    return f"{kind}:ModeKeys.{mode}"


def file_header(base_us: int) -> str:
    """The trace file's opening: smdebug's process metadata with the file's base time."""
    return ("[\n" + json.dumps({"name": "process_name", "ph": "M", "pid": 0,
                        "args": {"start_time_since_epoch_in_micros": base_us}}) + ",\n"
            + json.dumps({"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}) + ",\n")


def to_lines(records: Iterable[tuple[str, str, int, float, float]], base_us: int, pids: dict[str, int],
             os_pid: int) -> str:
    """Trace-event lines (each ending ",\\n") for (kind, mode, step, start_s, end_s) records; a phase
    seen for the first time in this file (`pids`, updated) gets its process_name line first."""
    lines: list[str] = []
    for kind, mode, step, start, end in records:
        lines += _event_lines(phase_name(kind, mode), pids, base_us, start, end, {"step_num": str(step), "pid": os_pid})
    return "".join(line + ",\n" for line in lines)


def summary_lines(summaries: Iterable[tuple[str, str, int, int, float, float, int, float, float, float,
                                            dict[int, int]]], base_us: int, pids: dict[str, int], os_pid: int) -> str:
    """Trace-event lines for (kind, mode, first step, last step, start_s, end_s, count, total_s, min_s,
    max_s, {bin: count}) summaries of steps past the first FULL_STEPS."""
    lines: list[str] = []
    for kind, mode, first, last, start, end, count, total, low, high, bins in summaries:
        args = _summary_args(first, last, count, total, low, high, bins, os_pid)
        lines += _event_lines(phase_name(SUMMARY_PHASES[kind], mode), pids, base_us, start, end, args)
    return "".join(line + ",\n" for line in lines)


def _summary_args(first: int, last: int, count: int, total: float, low: float, high: float, bins: dict[int, int],
                  os_pid: int) -> dict[str, Any]:
    return {"step_num": str(first), "last_step": last, "count": count, "sum_ms": round(total * 1e3, 3),
            "min_ms": round(low * 1e3, 4), "max_ms": round(high * 1e3, 4),
            "bins": {f"{bin_centre_ms(i):.4g}": n for i, n in sorted(bins.items())}, "pid": os_pid}


def as_read(records: Iterable[tuple[str, str, int, float, float]], summaries: Iterable[tuple], base_us: int,
            node: str) -> list[Any]:
    """What `parse` reads back of the lines `to_lines` and `summary_lines` write for these records and
    summaries into a file whose base is `base_us`, without writing or parsing them: a rank's own digest
    (smtrain.profiler.steps) so equals the one its files give."""
    read: list[Any] = []
    for kind, mode, step, start, end in records:
        ts, dur = _offsets(base_us, start, end)
        read.append(StepEvent(node, kind, mode, int(step), *_span(base_us, ts, dur)))
    for kind, mode, first, last, start, end, count, total, low, high, bins in summaries:
        ts, dur = _offsets(base_us, start, end)
        summary = _summary(node, kind, mode, *_span(base_us, ts, dur),
                           _summary_args(first, last, count, total, low, high, bins, 0))
        if summary is not None:
            read.append(summary)
    return read


def _offsets(base_us: int, start: float, end: float) -> tuple[int, int]:
    """An event's `ts` and `dur` (microseconds) in a file whose base is `base_us`."""
    start_us = round(start * 1e6)
    return start_us - base_us, max(0, round(end * 1e6) - start_us)


def _span(base_us: int, ts: int, dur: int) -> tuple[float, float]:
    """An event's start and end (seconds since the epoch) from its `ts` and `dur`."""
    start = (base_us + ts) / 1e6
    return start, start + dur / 1e6


def _event_lines(name: str, pids: dict[str, int], base_us: int, start: float, end: float, args: dict) -> list[str]:
    """One complete ("X") event, after its phase's metadata lines where the phase is new to this file
    (`pids`, updated)."""
    lines = []
    pid = pids.get(name)
    if pid is None:
        pid = pids[name] = len(pids) + 1
        lines.append(json.dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}))
        lines.append(json.dumps({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}))
    ts, dur = _offsets(base_us, start, end)
    lines.append(json.dumps({"name": name, "pid": pid, "ph": "X", "ts": ts, "dur": dur, "args": args}))
    return lines


def trace_objects(text: str) -> Iterator[dict]:
    """The objects of a trace-event array that may be unterminated or cut short, one or several to a
    line (the rank's open file, Horovod's timeline)."""
    if text.rstrip().endswith("]"):  # a complete file: one parse, several times faster than one per object
        try:
            whole = json.loads(text)
        except ValueError:
            whole = None
        if isinstance(whole, list):
            yield from (value for value in whole if isinstance(value, dict))
            return
    decoder = json.JSONDecoder()
    at = text.find("[") + 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= len(text) or text[at] == "]":
            return
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return  # the last event, cut short by the end of the program
        if isinstance(value, dict):
            yield value


def parse(text: str, node: str) -> list[Any]:
    """The step events and summaries of one file, complete or still open."""
    base, names, events = 0, {}, []
    for event in trace_objects(text):
        args = event.get("args") or {}
        if event.get("ph") == "M" and event.get("name") == "process_name":
            if "start_time_since_epoch_in_micros" in args:
                base = int(args["start_time_since_epoch_in_micros"])
            elif "name" in args:
                names[event.get("pid")] = str(args["name"])
        elif event.get("ph") == "X":
            kind, _, mode = names.get(event.get("pid"), str(event.get("name", ""))).partition(":ModeKeys.")
            if mode not in MODES:
                continue
            start, end = _span(base, int(event.get("ts", 0)), int(event.get("dur", 0)))
            if kind in (STEP, BETWEEN, EPOCH):
                events.append(StepEvent(node, kind, mode, int(args.get("step_num", -1)), start, end))
            elif kind in SUMMARISED:
                summary = _summary(node, SUMMARISED[kind], mode, start, end, args)
                if summary is not None:
                    events.append(summary)
    return events


def _summary(node: str, kind: str, mode: str, start: float, end: float, args: dict) -> Optional[StepSummary]:
    try:
        bins = tuple((float(ms), int(n)) for ms, n in (args.get("bins") or {}).items())
        return StepSummary(node, kind, mode, int(args.get("step_num", -1)), int(args.get("last_step", -1)), start,
                           end, int(args["count"]), float(args["sum_ms"]) / 1e3, float(args["min_ms"]),
                           float(args["max_ms"]), bins)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _node_of(path: Path) -> Optional[str]:
    name = path.name
    if name.endswith(f"_{SUFFIX}.tmp"):
        return name[: -len(f"_{SUFFIX}.tmp")]
    if name.endswith(f"_{SUFFIX}"):
        parts = name.split("_")
        return parts[1] if len(parts) >= 3 else None
    return None


def event_files(folders: Iterable[Path]) -> Iterator[tuple[Path, str]]:
    """Every event file under `folders` (any depth), complete or still open, and the rank (node) it is of."""
    for folder in folders:
        for path in sorted(Path(folder).rglob(f"*_{SUFFIX}*")):
            node = _node_of(path)
            if node is not None and path.is_file():
                yield path, node


def file_end_us(path: Path) -> Optional[int]:
    """A complete event file's last event's end (microseconds since the epoch), from its name; None for
    a file still open (or left open by a rank that was killed)."""
    head = path.name.split("_", 1)[0]
    return int(head) if path.name.endswith(f"_{SUFFIX}") and head.isdigit() else None


def read_folder(folders: Iterable[Path], nodes: Optional[Callable[[str], bool]] = None) -> Iterator[Any]:
    """Every step event and summary under `folders` (any depth), from complete and still-open files alike;
    those of the ranks (nodes) `nodes` takes alone where it is given."""
    for path, node in event_files(folders):
        if nodes is not None and not nodes(node):
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        yield from parse(text, node)
