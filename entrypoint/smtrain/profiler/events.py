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

Written as `<profiler>/framework/<node>_pythontimeline.json.tmp` while open (one line per event,
flushed every second), renamed to `<profiler>/framework/pevents/<YYYYMMDDHH>/<end_us>_<node>_pythontimeline.json`
when complete (a minute's events, or the program's end); `node` is `<rank>-<host>`, as smdebug names it.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, Optional

__all__ = ["BETWEEN", "EPOCH", "MODES", "STEP", "StepEvent", "file_header", "final_path", "node_id", "parse",
           "read_folder", "temp_path", "to_lines", "trace_objects"]

STEP = "Step"
BETWEEN = "Between"
EPOCH = "Epoch"
MODES = ("TRAIN", "EVAL", "PREDICT")
SUFFIX = "pythontimeline.json"


class StepEvent(NamedTuple):
    node: str  # <rank>-<host>
    kind: str  # STEP, BETWEEN or EPOCH
    mode: str  # TRAIN, EVAL or PREDICT
    step: int
    start: float  # seconds since the epoch
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def rank(self) -> int:
        head = self.node.split("-", 1)[0]
        return int(head) if head.isdigit() else -1


def node_id(rank: int, host: str) -> str:
    return f"{rank}-{host}".replace("_", "-")


def temp_path(out: Path, node: str) -> Path:
    return out / "framework" / f"{node}_{SUFFIX}.tmp"


def final_path(out: Path, node: str, end_us: int) -> Path:
    hour = time.strftime("%Y%m%d%H", time.gmtime(end_us / 1e6))
    return out / "framework" / "pevents" / hour / f"{end_us}_{node}_{SUFFIX}"


def phase_name(kind: str, mode: str) -> str:
    return f"{kind}:ModeKeys.{mode}"


def file_header(base_us: int) -> str:
    return ("[\n" + json.dumps({"name": "process_name", "ph": "M", "pid": 0,
                        "args": {"start_time_since_epoch_in_micros": base_us}}) + ",\n"
            + json.dumps({"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}) + ",\n")


def to_lines(records: Iterable[tuple[str, str, int, float, float]], base_us: int, pids: dict[str, int],
             os_pid: int) -> str:
    """Trace-event lines (each ending ",\\n") for (kind, mode, step, start_s, end_s) records; a phase
    seen for the first time in this file (`pids`, updated) gets its process_name line first."""
    lines = []
    for kind, mode, step, start, end in records:
        name = phase_name(kind, mode)
        pid = pids.get(name)
        if pid is None:
            pid = pids[name] = len(pids) + 1
            lines.append(json.dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}))
            lines.append(json.dumps({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}))
        start_us = round(start * 1e6)
        lines.append(json.dumps({"name": name, "pid": pid, "ph": "X", "ts": start_us - base_us,
                                 "dur": max(0, round(end * 1e6) - start_us),
                                 "args": {"step_num": str(step), "pid": os_pid}}))
    return "".join(line + ",\n" for line in lines)


def trace_objects(text: str) -> Iterator[dict]:
    """The objects of a trace-event array that may be unterminated or cut short, one or several to a
    line (the rank's open file, Horovod's timeline)."""
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


def parse(text: str, node: str) -> list[StepEvent]:
    """The events of one file, complete or still open."""
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
            if kind in (STEP, BETWEEN, EPOCH) and mode in MODES:
                start = (base + int(event.get("ts", 0))) / 1e6
                events.append(StepEvent(node, kind, mode, int(args.get("step_num", -1)), start,
                                        start + int(event.get("dur", 0)) / 1e6))
    return events


def _node_of(path: Path) -> Optional[str]:
    name = path.name
    if name.endswith(f"_{SUFFIX}.tmp"):
        return name[: -len(f"_{SUFFIX}.tmp")]
    if name.endswith(f"_{SUFFIX}"):
        parts = name.split("_")
        return parts[1] if len(parts) >= 3 else None
    return None


def read_folder(folders: Iterable[Path]) -> Iterator[StepEvent]:
    """Every step event under `folders` (any depth), from complete and still-open files alike."""
    for folder in folders:
        for path in sorted(Path(folder).rglob(f"*_{SUFFIX}*")):
            node = _node_of(path)
            if node is None or not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            yield from parse(text, node)
