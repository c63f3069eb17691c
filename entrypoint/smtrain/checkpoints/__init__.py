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

The package's modules, one job each: `store` (the folder: atomic saves, restore, pruning), `background`
(the asynchronous writer and its report at exit), `positions` (Pipe positions and consumed
fingerprints, from and to the reader's journal), `shared` (what the ranks agree on through Horovod's
collectives), `stop` (the SIGTERM flag).
"""
from __future__ import annotations

from ..data.checkpoint_folder import Checkpoint, PipePosition
from ..data.checkpoint_write import CheckpointWriteError
from .positions import AllPositions
from .shared import all_positions, shared_restore
from .stop import StopSignal
from .store import CheckpointStore

__all__ = [
    "AllPositions", "Checkpoint", "CheckpointStore", "CheckpointWriteError", "PipePosition", "StopSignal",
    "all_positions", "shared_restore",
]
