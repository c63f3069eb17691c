"""The checkpoint folder as a store: atomic saves (written aside, fsynced, CRC-checked, renamed into
place), the newest complete checkpoint restored, keep-last-N pruning and room made before a save.
The asynchronous writer it may hand a save to is `background`; nothing here is a collective or a
signal."""
from __future__ import annotations

import errno as errnos
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from .. import pipes, progress
from ..config.settings import CHECKPOINT_DIR
from ..data.checkpoint_folder import (
    FORMAT, MANIFEST, STATE_PREFIX, Checkpoint, CheckpointFolder, PipePosition, file_crc, fingerprint_file,
)
from ..data.checkpoint_write import CheckpointWriteError, folder_bytes, free_bytes, human_bytes, missing_state_files
from ..data.journal import ReadJournal
from .background import BackgroundSave, async_options, is_tf_checkpoint, tf_sync
from .positions import own_fingerprints, resume_pipes

__all__ = ["ROOM_MARGIN", "ROOM_SLACK_BYTES", "CheckpointStore", "Writer"]

Writer = Union[Callable[[Path], None], Any]  # a function of the folder, or an object with .write(prefix)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# A save prunes first when free space < ROOM_MARGIN x the newest checkpoint + ROOM_SLACK_BYTES.
ROOM_MARGIN = 1.25
ROOM_SLACK_BYTES = 1 << 20


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
        directory = Path(directory or os.environ.get(CHECKPOINT_DIR.variable) or CHECKPOINT_DIR.default)
        super().__init__(directory, *([] if log is None else [log]))
        self.keep = keep
        self.rank = int(os.environ.get("SM_RANK", "0")) if rank is None else rank
        self.journal = pipes.JOURNAL if journal is None else journal
        # save() returns once the state is in host memory; a thread makes it durable (see wait())
        self.asynchronous = asynchronous
        self._background = BackgroundSave()

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
        tf_async = background and is_tf_checkpoint(state)
        writes_state = hasattr(state, "write")

        def write() -> None:
            if writes_state and tf_async:
                # TensorFlow copies every variable to host memory, then writes in its own thread
                state.write(str(tmp / STATE_PREFIX), options=async_options())
            elif writes_state:
                state.write(str(tmp / STATE_PREFIX))
            else:
                state(tmp)
            self._write_fingerprints(tmp, pipe_positions)

        ranks = [dict(r) for r in pipe_positions] or [{}]
        self._attempt(step, tmp, write)

        def make_durable() -> None:
            if tf_async:
                tf_sync(state)
            self._finish(step, tmp, final, ranks, dict(extra or {}), writes_state)

        if not background:
            self._attempt(step, tmp, make_durable)
            return final
        self._background.start(f"checkpoint-{step}", lambda: self._attempt(step, tmp, make_durable))
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
            gathered = [own_fingerprints(pipe_positions[0] if pipe_positions else {}, self.journal)]
        for rank, channels in enumerate(gathered):
            for channel, data in channels.items():
                path = folder / fingerprint_file(channel, rank)
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(data)

    def wait(self) -> None:
        """Until the save in flight (asynchronous stores) is durable; raises what it failed with
        (a CheckpointWriteError, its cause chained)."""
        self._background.wait()

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
            resume_pipes(checkpoint.consumed(self.rank), self.journal)
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
