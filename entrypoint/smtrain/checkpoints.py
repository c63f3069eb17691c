"""Checkpoints that survive spot interruptions, and resume mid-epoch in Pipe mode.

    from smtrain.checkpoints import CheckpointStore, PipePosition, StopSignal, all_positions

    store = CheckpointStore(keep=3)                  # SM_CHECKPOINT_DIR; only rank 0 writes
    store = CheckpointStore(keep=3, asynchronous=True)   # save() returns once the state is in memory
    state = tf.train.Checkpoint(model=model, optimizer=optimizer)
    restored = store.restore(state)                  # the newest complete checkpoint, or None
    stop = StopSignal()                              # SIGTERM (spot interruption) sets it
    ...
    positions = all_positions({"train": PipePosition(epoch, consumed)})   # every rank's, in rank order
    store.save(step, state, pipe_positions=positions)
    if stop.agreed():                                # every rank stops at the same step
        store.save(step, state, pipe_positions=...); sys.exit(0)

(Named CheckpointStore, not CheckpointManager: its constructor is not tf.train.CheckpointManager's.)

Folder layout (SageMaker syncs it with S3, also on spot restarts):

    ckpt-000000001200/            a complete checkpoint, visible only once whole:
        MANIFEST.json             written last: step, every file's size and CRC32C, Pipe positions, extra
        state.index, state.data-00000-of-00001 ...    (what the saved object wrote)
    .incomplete-ckpt-000000001300-<pid>/   being written, or torn by a kill: ignored, later removed

A checkpoint is written aside and renamed into place (with fsyncs), so a kill at any moment leaves
either the old newest checkpoint or the new one. It is published only when its saver's every file is
there (for a tf.train.Checkpoint: the index and each data shard): a write that failed - a full disk,
an I/O error, TensorFlow's asynchronous writer failing in its own thread - raises
`CheckpointWriteError` from `save()` or `wait()` (naming the folder, the free space and the sizes),
and its folder is removed at once. Before writing, the store prunes what keep-last-N would prune after
it when the free space is short of the newest checkpoint's size, so a save that fits once the oldest
checkpoint goes does not fail; the newest is never removed to make room.

At start the newest checkpoint that loads is restored: one whose manifest, sizes or CRCs do not check
out (e.g. half-synced from S3), that lists no files, or whose restore raises is skipped with a
warning and the next older one tried; when none loads the job starts fresh and says so.
Anything else in the folder is not this manager's: it is reported and never touched (TensorFlow's own
`tf.train.CheckpointManager` files beside the store included).

Channels with a ShuffleConfig: `all_positions` also gathers each rank's fingerprints of the records
it consumed in its current epoch (smtrain.pipes keeps them), rank 0 stores them as
`pipes/<channel>.rank<r>.fp`, and restoring hands each rank its own, so that the restarted job's
`pipes.records(channel, 0, skip=n)` drops exactly those records whatever order FIFO 0 brings them in
(the host's demultiplexer does the same for all its ranks).

Asynchronous stores: `save()` returns once the state is copied to host memory (TensorFlow's
asynchronous checkpoint write, for a `tf.train.Checkpoint`); writing, fsyncs, CRCs, the manifest and
the rename happen in a background thread. At most one save is in flight: a second `save()` waits
until the first is durable (none is dropped). `wait()` waits for the one in flight and raises its
error; the thread is not a daemon, so a program that saves on SIGTERM and exits still completes it.
A background save that failed and was never raised by `save()` or `wait()` ends the program with
status 1 and its traceback when the interpreter exits, so the job's failure names it.
"""
from __future__ import annotations

import atexit
import errno as errnos
import json
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from array import array
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from . import pipes, progress
from .data.checkpoint_folder import (
    FORMAT, MANIFEST, STATE_PREFIX, Checkpoint, CheckpointFolder, PipePosition, file_crc, fingerprint_file,
)
from .data.checkpoint_write import CheckpointWriteError, folder_bytes, free_bytes, human_bytes, missing_state_files
from .data.fingerprints import to_bytes
from .data.journal import ReadJournal
from .common.frameworks import running_horovod

__all__ = [
    "AllPositions", "Checkpoint", "CheckpointStore", "CheckpointWriteError", "PipePosition", "StopSignal",
    "all_positions", "shared_restore",
]


class AllPositions(list):
    """Every rank's Pipe positions ({channel: PipePosition}, in rank order), as `all_positions` gives
    them, with the fingerprints of the records each rank consumed of its shuffled channels'
    current epochs (smtrain.data.fingerprints: {channel: little-endian u64s})."""

    def __init__(self, positions: Sequence[Mapping[str, PipePosition]], fingerprints: Sequence[Mapping[str, bytes]]):
        super().__init__(positions)
        self.fingerprints = list(fingerprints)


def _own_fingerprints(local: Mapping[str, PipePosition], journal: ReadJournal) -> dict[str, bytes]:
    """This rank's consumed fingerprints of its shuffled channels at `local` (from its reader's journal)."""
    return {c: to_bytes(f) for c, p in local.items() if (f := journal.consumed(c, p.consumed)) is not None}


def _resume_pipes(consumed: Mapping[str, "array[int]"], journal: ReadJournal) -> None:
    """Hand consumed fingerprints to the reader's journal, whose next read of each such channel's
    FIFO 0 drops those records (see smtrain.pipes.records)."""
    for channel, fingerprints in consumed.items():
        journal.resume_from(channel, fingerprints)


Writer = Union[Callable[[Path], None], Any]  # a function of the folder, or an object with .write(prefix)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_tf_checkpoint(state: Any) -> bool:
    return type(state).__module__.startswith("tensorflow") and hasattr(state, "sync")


def _tf_sync(state: Any) -> None:
    """Until TensorFlow's asynchronous write of `state` has ended, raising what it failed with:
    TensorFlow's own sync() keeps its writer thread's error for the next write to raise (2.18-2.21)."""
    state.sync()
    check = getattr(getattr(state, "_async_checkpointer_impl", None), "_check_async_thread_error", None)
    if check is not None:
        check()


def _async_options() -> Any:
    import tensorflow as tf

    return tf.train.CheckpointOptions(enable_async=True)


# A save prunes first when free space < ROOM_MARGIN x the newest checkpoint + ROOM_SLACK_BYTES.
ROOM_MARGIN = 1.25
ROOM_SLACK_BYTES = 1 << 20

# Background saves that failed and that no save() or wait() has raised yet (see _exit_if_unreported).
_UNREPORTED: list[CheckpointWriteError] = []
_EXIT_WATCHED = threading.Event()
_exit_watch_lock = threading.Lock()


def _exit_if_unreported() -> None:
    """At interpreter exit (after non-daemon threads, so after the last background save): a failed
    background save nobody raised ends the program with status 1 and its traceback, as an uncaught
    exception would, rather than letting a job whose last checkpoint was lost succeed."""
    if _UNREPORTED:
        traceback.print_exception(_UNREPORTED[0])
        for stream in (sys.stdout, sys.stderr):  # os._exit does not flush what the program printed
            stream.flush()
        os._exit(1)


def _watch_exit() -> None:
    with _exit_watch_lock:
        if not _EXIT_WATCHED.is_set():
            atexit.register(_exit_if_unreported)
            _EXIT_WATCHED.set()


def _cause_errno(error: BaseException) -> Optional[int]:
    """The errno behind `error`: an OSError's, or ENOSPC for TensorFlow's ResourceExhaustedError."""
    number = getattr(error, "errno", None)
    if isinstance(number, int):
        return number
    return errnos.ENOSPC if "No space left on device" in str(error) else None


class CheckpointStore(CheckpointFolder):
    """The checkpoint folder of a job: atomic saves, newest-complete restore, keep-last-N pruning."""

    def __init__(self, directory: Optional[Union[str, Path]] = None, keep: int = 3, rank: Optional[int] = None,
                 log: Optional[Callable[[str], None]] = None, asynchronous: bool = False,
                 journal: Optional[ReadJournal] = None) -> None:
        """`journal`: the Pipe reader's journal whose consumed records a save stores and a restore
        hands back (by default this process's, `smtrain.pipes.JOURNAL`)."""
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        directory = Path(directory or os.environ.get("SM_CHECKPOINT_DIR") or "/opt/ml/checkpoints")
        super().__init__(directory, *([] if log is None else [log]))
        self.keep = keep
        self.rank = int(os.environ.get("SM_RANK", "0")) if rank is None else rank
        self.journal = pipes.JOURNAL if journal is None else journal
        # save() returns once the state is in host memory; a thread makes it durable (see wait())
        self.asynchronous = asynchronous
        self._in_flight: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None

    # -- writing -----------------------------------------------------------------------------------
    def save(self, step: int, state: Writer, pipe_positions: Sequence[Mapping[str, PipePosition]] = (),
             extra: Optional[Mapping[str, Any]] = None) -> Optional[Path]:
        """Write checkpoint `step` (rank 0 only; other ranks return None). `state` is an object with
        `.write(prefix)` such as `tf.train.Checkpoint`, or a function that writes into a folder.
        `pipe_positions`: every rank's Pipe positions {channel: PipePosition}, in rank order, as
        `all_positions(mine)` gives them (one rank: `[mine]`). Returns the checkpoint's folder (with
        `asynchronous=True`: the folder it will have once `wait()` returns)."""
        if isinstance(pipe_positions, Mapping):
            raise TypeError("pipe_positions is every rank's positions in rank order: pass all_positions(mine) or [mine]")
        if self.rank != 0:
            return None
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        self.wait()  # at most one save in flight: a second save waits for the first to be durable
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"ckpt-{step:012d}"
        self._make_room(replacing=final.is_dir())
        tmp = self.directory / f".incomplete-ckpt-{step:012d}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        background = self.asynchronous
        tf_async = background and _is_tf_checkpoint(state)
        writes_state = hasattr(state, "write")

        def write() -> None:
            if writes_state and tf_async:
                # TensorFlow copies every variable to host memory, then writes in its own thread
                state.write(str(tmp / STATE_PREFIX), options=_async_options())
            elif writes_state:
                state.write(str(tmp / STATE_PREFIX))
            else:
                state(tmp)
            self._write_fingerprints(tmp, pipe_positions)

        ranks = [dict(r) for r in pipe_positions] or [{}]
        self._attempt(step, tmp, write)

        def make_durable() -> None:
            if tf_async:
                _tf_sync(state)
            self._finish(step, tmp, final, ranks, dict(extra or {}), writes_state)

        if not background:
            self._attempt(step, tmp, make_durable)
            return final
        _watch_exit()
        self._in_flight = threading.Thread(target=self._run_in_background, args=(step, tmp, make_durable),
                                           name=f"checkpoint-{step}")  # not a daemon: exit waits for it
        self._in_flight.start()
        return final

    def _attempt(self, step: int, tmp: Path, action: Callable[[], None]) -> None:
        """Run a step of writing checkpoint `step`; on failure remove its folder and raise a
        CheckpointWriteError that says why and how much room there is."""
        try:
            action()
        except Exception as e:
            raise self._failed(step, tmp, e) from e
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _failed(self, step: int, tmp: Path, error: Exception) -> CheckpointWriteError:
        written = folder_bytes(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        free = free_bytes(self.directory)
        newest = self.checkpoints()[-1:]
        number = _cause_errno(error)
        # TensorFlow's text leads with op names and temporary paths: the errno says it plainly
        cause = os.strerror(number) if number is not None else next(iter(str(error).strip().splitlines()), "")
        facts = [f"{human_bytes(written)} written when it failed"]
        if free is not None:
            facts.insert(0, f"{human_bytes(free)} free there")
        if newest:
            facts.append(f"the newest checkpoint (step {newest[0].step}) holds {human_bytes(folder_bytes(newest[0].path))}")
        text = (f"checkpoint step {step} was not saved in {self.directory}: {type(error).__name__}"
                f"{': ' + cause[:300] if cause else ''} ({', '.join(facts)}); nothing was published, "
                + (f"step {newest[0].step} is still the newest" if newest else "there is no checkpoint yet"))
        self._log(text)
        return CheckpointWriteError(text, step, number)

    def _write_fingerprints(self, folder: Path, pipe_positions: Sequence[Mapping[str, PipePosition]]) -> None:
        """Each rank's consumed fingerprints of its shuffled channels, as files of the checkpoint
        (covered by the manifest's CRCs like the state): from `all_positions`, or for this process's
        own positions (index 0) from its reader."""
        gathered = getattr(pipe_positions, "fingerprints", None)
        if gathered is None:
            gathered = [_own_fingerprints(pipe_positions[0] if pipe_positions else {}, self.journal)]
        for rank, channels in enumerate(gathered):
            for channel, data in channels.items():
                path = folder / fingerprint_file(channel, rank)
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(data)

    def wait(self) -> None:
        """Until the save in flight (asynchronous stores) is durable; raises what it failed with
        (a CheckpointWriteError, its cause chained)."""
        thread, self._in_flight = self._in_flight, None
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        if error is not None:
            if error in _UNREPORTED:
                _UNREPORTED.remove(error)
            raise error

    def _run_in_background(self, step: int, tmp: Path, make_durable: Callable[[], None]) -> None:
        try:
            self._attempt(step, tmp, make_durable)
        except BaseException as e:  # handed to the next save() or wait(), else reported at exit
            self._error = e
            if isinstance(e, CheckpointWriteError):
                _UNREPORTED.append(e)

    def _finish(self, step: int, tmp: Path, final: Path, ranks: list[dict], extra: dict, writes_state: bool) -> None:
        """Check the saver wrote everything, fsync and CRC every file, write the manifest, rename into
        place, prune."""
        files = {}
        for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
            _fsync(path)
            files[path.relative_to(tmp).as_posix()] = {"size": path.stat().st_size, "crc32c": file_crc(path)}
        if not files:
            raise RuntimeError("the saver wrote no files")
        problem = missing_state_files(set(files), STATE_PREFIX) if writes_state else None
        if problem is not None:
            raise RuntimeError(problem)
        manifest = {
            "format": FORMAT,
            "step": step,
            "created": time.time(),
            "files": files,
            "state": STATE_PREFIX if writes_state else None,
            "pipes": [{c: list(p) for c, p in r.items()} for r in ranks],
            "extra": extra,
        }
        with open(tmp / MANIFEST, "w") as f:
            json.dump(manifest, f)
            f.flush()
            os.fsync(f.fileno())
        _fsync(tmp)
        if final.exists():  # the same step again: the old one goes out of sight first
            self._discard(step, final)
        os.rename(tmp, final)
        _fsync(self.directory)
        progress.alive()
        try:
            self._prune()
        except OSError as e:  # the checkpoint is published; an old one left over is no failure
            self._log(f"could not prune old checkpoints in {self.directory}: {e}")

    def _discard(self, step: int, path: Path) -> None:
        """Remove a complete checkpoint atomically: out of sight by a rename first, so a kill while
        deleting never leaves a visible, half-deleted checkpoint."""
        aside = self.directory / f".incomplete-ckpt-{step:012d}-{os.getpid()}-old"
        os.rename(path, aside)
        shutil.rmtree(aside, ignore_errors=True)

    def _prune(self, keep: Optional[int] = None) -> None:
        """Keep the newest `keep` checkpoints that check out; damaged ones are reported, not counted
        and not deleted (they may be what a user wants to look at)."""
        for checkpoint in self.checkpoints()[: -(keep or self.keep)]:
            self._discard(checkpoint.step, checkpoint.path)
        self.clean_incomplete()

    def _make_room(self, replacing: bool) -> None:
        """Before a save: when the free space is short of what the newest checkpoint holds (the next
        is about as large), remove what the prune after the save would remove anyway (the oldest
        beyond keep-1, or beyond keep when the save replaces a checkpoint of the same step), so that
        a disk with room for `keep` checkpoints takes the next; never the newest. Torn folders go
        always. With room to spare, pruning stays after the save (deleting fsynced files costs
        milliseconds, which an asynchronous save keeps off the training step)."""
        self.clean_incomplete()
        newest = self.checkpoints()[-1:]
        free = free_bytes(self.directory)
        if newest and (free is None or free < ROOM_MARGIN * folder_bytes(newest[0].path) + ROOM_SLACK_BYTES):
            self._prune(max(1, self.keep - (0 if replacing else 1)))

    def restore(self, state: Optional[Any] = None) -> Optional[Checkpoint]:
        """Load the newest checkpoint that loads into `state` (e.g. a tf.train.Checkpoint; its
        `.read(prefix)`) and return it; None when there is none. A checkpoint that does not check out,
        holds no state, or whose read raises is skipped with a warning for the next older one. Also
        removes torn checkpoints."""
        self.clean_incomplete()
        tried = 0
        for checkpoint in self.candidates():
            tried += 1
            problem = self._read_into(state, checkpoint) if state is not None else None
            if problem is not None:
                self._log(f"skipping checkpoint {checkpoint.path}: {problem}; trying the next older one")
                continue
            self._log(f"restored step {checkpoint.step} from {checkpoint.path}")
            _resume_pipes(checkpoint.consumed(self.rank), self.journal)
            return checkpoint
        self._log(f"no checkpoint in {self.directory} could be restored (of {tried} tried): starting fresh"
                  if tried else f"no checkpoint in {self.directory}: starting fresh")
        return None

    @staticmethod
    def _read_into(state: Any, checkpoint: Checkpoint) -> Optional[str]:
        """Read `checkpoint` into `state`; what went wrong, or None."""
        if f"{STATE_PREFIX}.index" not in checkpoint.files:
            return f"it holds no {STATE_PREFIX}.index (it was written by a function, not a saver like tf.train.Checkpoint)"
        try:
            status = state.read(checkpoint.state_prefix)
            if hasattr(status, "expect_partial"):
                status.expect_partial()  # optimizer slots are restored when they are created
        except Exception as e:
            return f"reading it raised {type(e).__name__}: {next(iter(str(e).strip().splitlines()), '')[:300]}"
        return None


class StopSignal:
    """Set by SIGTERM (a spot interruption, or `docker stop`): finish the step, save, exit 0.

    `agreed()` makes every Horovod rank stop at the same step (an allreduce of the flag), so the
    ranks' collective operations stay in step; without Horovod it is the local flag."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        self.requested = False
        for signum in signals:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.requested = True

    def agreed(self) -> bool:
        hvd = running_horovod()
        if hvd is None:
            return self.requested
        import tensorflow as tf

        return bool(hvd.allreduce(tf.constant(int(self.requested)), op=hvd.Max, name="smtrain_stop").numpy())


def all_positions(local: Mapping[str, PipePosition], journal: Optional[ReadJournal] = None) -> AllPositions:
    """Every rank's Pipe positions, in rank order (for rank 0's save); this rank's alone without
    Horovod. For channels with a ShuffleConfig each rank's consumed fingerprints come along (from
    `journal`, by default this process's reader's)."""
    mine = _own_fingerprints(local, pipes.JOURNAL if journal is None else journal)
    hvd = running_horovod()
    if hvd is None:
        return AllPositions([dict(local)], [mine])
    gathered = hvd.allgather_object(({c: tuple(p) for c, p in local.items()}, mine))
    return AllPositions([{c: PipePosition(*p) for c, p in r.items()} for r, _ in gathered], [f for _, f in gathered])


def shared_restore(store: CheckpointStore, state: Optional[Any] = None) -> Optional[Checkpoint]:
    """Rank 0 restores; every rank gets the same checkpoint (its step, positions, extra) and, with
    Horovod, rank 0's variables are broadcast by the caller as usual (hvd.broadcast_variables).
    Each rank's consumed fingerprints of shuffled channels go to its reader's journal (`store.journal`)."""
    hvd = running_horovod()
    checkpoint = store.restore(state) if hvd is None or hvd.rank() == 0 else None
    if hvd is None:
        return checkpoint
    shared = hvd.broadcast_object(checkpoint and (checkpoint.step, str(checkpoint.path),
                                                   [{c: tuple(p) for c, p in r.items()} for r in checkpoint.pipes],
                                                   dict(checkpoint.extra),
                                                   [checkpoint.consumed(r) for r in range(len(checkpoint.pipes))]),
                                  root_rank=0)
    if shared is None:
        return None
    step, path, positions, extra, consumed = shared
    restored = Checkpoint(step, Path(path), tuple({c: PipePosition(*p) for c, p in r.items()} for r in positions), extra)
    if hvd.rank() != 0 and hvd.rank() < len(consumed):  # rank 0's own restore handed it its own
        _resume_pipes(consumed[hvd.rank()], store.journal)
    return restored
