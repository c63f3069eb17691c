"""What the ranks of a Horovod job agree on through its collectives: every rank's Pipe positions
gathered for rank 0's save, rank 0's restored checkpoint broadcast to every rank, and whether any
rank was asked to stop. Without Horovod, this rank's own."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

from .. import pipes
from ..common.frameworks import running_horovod
from ..data.checkpoint_folder import Checkpoint, PipePosition
from ..data.journal import ReadJournal
from .positions import AllPositions, own_fingerprints, resume_pipes
from .store import CheckpointStore

__all__ = ["all_positions", "any_rank", "shared_restore"]


def any_rank(flag: bool) -> bool:
    """Whether `flag` is set on any rank (an allreduce of it: every rank gets the same answer)."""
    hvd = running_horovod()
    if hvd is None:
        return flag
    import tensorflow as tf

    return bool(hvd.allreduce(tf.constant(int(flag)), op=hvd.Max, name="smtrain_stop").numpy())


def all_positions(local: Mapping[str, PipePosition], journal: Optional[ReadJournal] = None) -> AllPositions:
    """Every rank's Pipe positions, in rank order (for rank 0's save); this rank's alone without
    Horovod. For channels with a ShuffleConfig each rank's consumed fingerprints come along (from
    `journal`, by default this process's reader's)."""
    mine = own_fingerprints(local, pipes.JOURNAL if journal is None else journal)
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
        resume_pipes(consumed[hvd.rank()], store.journal)
    return restored
