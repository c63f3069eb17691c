"""The step recorder in every rank's program: step times from the hooks (smtrain.profiler.hooks)
into smdebug's framework-event files (smtrain.profiler.events), and the detailed (TensorFlow
profiler) and Python (cProfile) windows.

A step costs the program two clock reads and a deque append; a daemon thread writes the events
every FLUSH_S seconds and closes a file every ROTATE_S seconds; the program's exit closes the last.
Should the program be killed, the open file (`.tmp`) holds what was flushed, and the report reads it.

Bounded: each mode's first FULL_STEPS steps, and the steps of the profiling windows, are kept one by
one; past them each step is folded as it ends (about 2 us) into one summary per SUMMARY_S seconds and
kind (smtrain.profiler.events.StepSummary), which the writer writes, keeping each interval's longest
step and gap as events of their own; epochs past the first FULL_STEPS steps are not kept. A rank so
keeps about 0.5 MB for its first steps of a mode and then about 0.31 MB an hour for each mode it runs,
whatever its step rate (tests/unit/test_step_profiler.py). The writer also keeps `min_free_mb` free on
the profiler's volume (for checkpoints and the model): below that it stops writing, says so once on
stderr and leaves a note (`<node>_stopped.json`) for the report.
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from ..wire.profiler_settings import ProfilerSettings, Window
from .events import BETWEEN, EPOCH, FULL_STEPS, STEP, node_id, stopped_path
from .step_files import Interval, Record, TraceFile

__all__ = ["FLUSH_S", "ROTATE_S", "SUMMARY_S", "StepRecorder"]

FLUSH_S = 1.0
ROTATE_S = 60.0
SUMMARY_S = 10.0

class StepRecorder:
    """Steps by mode (TRAIN, EVAL, PREDICT), numbered from 0 per mode on this rank, as smdebug numbers them."""

    def __init__(self, settings: ProfilerSettings, rank: int, clock: Callable[[], float] = time.time) -> None:
        self.settings, self.clock = settings, clock
        self.node = node_id(rank, settings.host)
        self.out = Path(settings.out)
        self.queue: collections.deque = collections.deque()
        self.counts = {"TRAIN": 0, "EVAL": 0, "PREDICT": 0}
        self.started: dict[str, float] = {}
        self.last_end: dict[str, Optional[float]] = {}
        self.epochs: dict[str, tuple[int, float]] = {}
        self.pending: Optional[list] = None  # an eager step that a later collective may extend
        self.file = TraceFile(self.out, self.node)
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.closed = False
        self.intervals: dict[tuple[str, str], Interval] = {}  # (kind, mode) -> steps past the full ones
        self.fold_lock = threading.Lock()  # the program's thread folds into intervals, the writer closes them
        self.windows = tuple(w for w in (settings.detailed, settings.python) if w is not None)  # kept whole
        self.stopped: Optional[str] = None  # why the writer stopped (the volume ran short of free space)
        self.write_failed = False  # a write failed: the files may hold less than the recorder wrote
        self.tf_trace_on = False
        self.cprofile: Any = None

    # ---- what the hooks call -----------------------------------------------------------------

    def begin(self, mode: str) -> None:
        """A step of `mode` begins now."""
        now = self.clock()
        self.started[mode] = now
        if mode == "TRAIN":
            self._windows_at_begin(self.counts["TRAIN"])

    def end(self, mode: str) -> None:
        """The step of `mode` that began ends now; recorded."""
        start = self.started.pop(mode, None)
        if start is not None:
            self.add_step(mode, start, self.clock())

    def add_step(self, mode: str, start: float, end: float) -> None:
        """Records a step of `mode` from `start` to `end` (the next step number)."""
        step = self.counts[mode]
        self.counts[mode] = step + 1
        self._emit(mode, step, start, end)

    def _emit(self, mode: str, step: int, start: float, end: float) -> None:
        last = self.last_end.get(mode)
        if self.settings.steps:  # else only counted, for the windows
            if step < FULL_STEPS or (mode == "TRAIN" and self._in_window(step)):
                if last is not None and start >= last:
                    self.queue.append((BETWEEN, mode, step, last, start))
                self.queue.append((STEP, mode, step, start, end))
            else:  # folded here: a writer that fell behind a fast loop would leave the program's exit a backlog
                with self.fold_lock:
                    if last is not None and start >= last:
                        self._fold((BETWEEN, mode, step, last, start))
                    self._fold((STEP, mode, step, start, end))
        self.last_end[mode] = end
        if mode == "TRAIN":
            self._windows_at_end(step)
        self._ensure_writer()

    def run_begin(self, mode: str) -> None:
        """fit / evaluate / predict began: no gap is measured across runs."""
        self.last_end[mode] = None

    def epoch_begin(self, mode: str) -> None:
        """An epoch of `mode` begins now."""
        self.epochs[mode] = (self.counts[mode], self.clock())
        self.last_end[mode] = None

    def epoch_end(self, mode: str) -> None:
        """The epoch of `mode` ends now; recorded while the steps are still recorded one by one."""
        first = self.epochs.pop(mode, None)
        if first is not None and self.settings.steps and first[0] < FULL_STEPS:
            self.queue.append((EPOCH, mode, first[0], first[1], self.clock()))

    def boundary(self, start: float, end: float, extends: bool) -> None:
        """An eager step boundary (a step function's call, an eager collective): a new training step
        from `start` to `end`, or (`extends`: another collective of the same step) the pending one made
        longer. The newest step stays pending until the next begins or the program ends."""
        if extends and self.pending is not None:
            self.pending[2] = end
            return
        self.flush_pending()
        step = self.counts["TRAIN"]
        self.counts["TRAIN"] = step + 1
        self.pending = [step, start, end]

    def step_will_begin(self) -> None:
        """A training step is about to run outside Keras (the windows open before it)."""
        self._windows_at_begin(self.counts["TRAIN"])

    def flush_pending(self) -> None:
        """Records the step held back to learn where it ends."""
        if self.pending is not None:
            step, start, end = self.pending
            self.pending = None
            self._emit("TRAIN", step, start, end)

    def helper_step(self) -> None:
        """smtrain.progress.step(): one step from the previous call to this one."""
        now = self.clock()
        start = self.started.pop("TRAIN", None)
        if start is not None:
            self.add_step("TRAIN", start, now)
        self.begin("TRAIN")

    # ---- windows ---------------------------------------------------------------------------------

    def _windows_at_begin(self, step: int) -> None:
        detailed, python = self.settings.detailed, self.settings.python
        if detailed is not None and step == detailed.start_step and not self.tf_trace_on:
            self.tf_trace_on = self._tf_profiler(True, detailed)
        if python is not None and step == python.start_step and self.cprofile is None:
            import cProfile

            self.cprofile = cProfile.Profile()
            self.cprofile.enable()

    def _windows_at_end(self, step: int) -> None:
        detailed, python = self.settings.detailed, self.settings.python
        if self.tf_trace_on and detailed is not None and step >= detailed.last_step:
            self.tf_trace_on = not self._tf_profiler(False, detailed)
        if self.cprofile is not None and python is not None and step >= python.last_step:
            self._python_profile_done(python)

    def _tf_profiler(self, start: bool, window: Window) -> bool:
        try:
            import tensorflow as tf

            if start:
                logdir = self.out / "framework" / "tensorflow" / "detailed_profiling" / self.node
                tf.profiler.experimental.start(str(logdir))
            else:
                tf.profiler.experimental.stop()
            return True
        except Exception as e:  # the profiler is busy (the script profiles itself), or none
            _warn(f"the TensorFlow profiler for steps {window.start_step}-{window.last_step} "
                  f"could not {'start' if start else 'stop'}: {type(e).__name__}: {e}")
            return False

    def _python_profile_done(self, window: Window) -> None:
        import io
        import pstats

        profile, self.cprofile = self.cprofile, None
        profile.disable()
        folder = self.out / "framework" / "python_profile" / self.node
        folder.mkdir(parents=True, exist_ok=True)
        stem = folder / f"steps-{window.start_step}-{window.last_step}"
        profile.dump_stats(str(stem) + ".prof")
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(40)
        (Path(str(stem) + ".txt")).write_text(text.getvalue())

    # ---- writing ---------------------------------------------------------------------------------

    def _ensure_writer(self) -> None:
        if self.thread is None and not self.closed:
            self.thread = threading.Thread(target=self._write_loop, name="smtrain-steps", daemon=True)
            self.thread.start()

    def _write_loop(self) -> None:
        while not self.wake.wait(FLUSH_S):
            self.flush()

    def flush(self, final: bool = False) -> None:
        """Writes the queued records (and with `final`, the summaries still open) to the rank's file."""
        with self.lock:
            records = []
            while self.queue:
                records.append(self.queue.popleft())
            if self.stopped is not None:
                return
            now = self.clock()
            rotate = final or (self.file.handle is not None and now - self.file.opened_at >= ROTATE_S)
            longest, summaries = self._ended_intervals(rotate)
            kept = records + longest
            try:
                if (kept or summaries) and not self._room():
                    return
                self.file.write(kept, summaries, now)
                if rotate:
                    self.file.close()
            except OSError as e:
                self.write_failed = True
                _warn(f"cannot write step events under {self.out}: {e}")

    def _fold(self, record: Record) -> None:
        key = (record[0], record[1])
        interval = self.intervals.get(key)
        if interval is None:
            self.intervals[key] = Interval(record)
        else:
            interval.add(record)

    def _ended_intervals(self, close_all: bool) -> tuple[list[Record], list[tuple]]:
        """The intervals that ended (all, at `close_all`): their longest records and their summaries."""
        kept: list[Record] = []
        summaries = []
        with self.fold_lock:
            ended = [(key, interval) for key, interval in self.intervals.items()
                     if close_all or interval.end - interval.start >= SUMMARY_S]
            for key, _ in ended:
                del self.intervals[key]
        for key, interval in ended:
            kept.append(interval.longest)
            if interval.count:
                summaries.append(interval.summary(*key))
        return kept, summaries

    def _in_window(self, step: int) -> bool:
        for window in self.windows:
            if window.covers(step):
                return True
        return False

    def _room(self) -> bool:
        """Whether the volume keeps `min_free_mb` free; if not, stop writing for good, and say so once."""
        try:
            st = os.statvfs(self.out if self.out.exists() else self.out.parent)
        except OSError:
            return True
        free_mb = st.f_bavail * st.f_frsize / 2**20
        if free_mb >= self.settings.min_free_mb:
            return True
        self.stopped = (f"step events stopped at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: "
                        f"{free_mb:.0f} MiB free under {self.out}, below the {self.settings.min_free_mb} MiB kept "
                        f"for checkpoints and the model")
        _warn(self.stopped)
        self.file.close()
        try:
            path = stopped_path(self.out, self.node)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"node": self.node, "reason": self.stopped}))
        except OSError:
            pass
        return False

    def close(self) -> None:
        """At the program's end: the pending step, the open windows, the last file."""
        if self.closed:
            return
        self.flush_pending()
        if self.tf_trace_on and self.settings.detailed is not None:
            self.tf_trace_on = not self._tf_profiler(False, self.settings.detailed)
        if self.cprofile is not None and self.settings.python is not None:
            self._python_profile_done(self.settings.python)
        self.closed = True
        self.wake.set()
        self.flush(final=True)
        self._digest()

    def _digest(self) -> None:
        """This rank's digest (smtrain.profiler.digests) from what its files hold, so that neither its
        worker nor the report parses them at the job's end; none where the files may hold less (the
        writer stopped, or a write failed): those are read instead."""
        written = self.file.written
        if self.stopped is not None or self.write_failed or not written.events and not written.summaries:
            return
        try:
            from . import digests

            digests.write(self.out, digests.digest(written.all()))
        except Exception as e:  # the digest is a shortcut: the worker digests this rank's files instead
            _warn(f"could not write this rank's step digest under {self.out}: {type(e).__name__}: {e}")

    def register_exit(self) -> None:
        """Closes the recorder at exit; in a forked child it records nothing (the child is not this rank)."""
        atexit.register(self.close)
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """A forked child is not this rank: it records nothing and leaves the parent's file alone."""
        self.closed = True
        self.settings = self.settings._replace(steps=False)
        self.queue = collections.deque(maxlen=0)
        self.intervals, self.fold_lock = {}, threading.Lock()  # the parent's writer may have held it
        self.file = TraceFile(self.out, f"{self.node}-child{os.getpid()}")


def _warn(message: str) -> None:
    import sys

    sys.stderr.write(f"[smtrain profiler] {message}\n")
