"""tf_keras callbacks (importable classes, like `horovod.tensorflow.keras.callbacks`):

    from smtrain.callbacks import CheckpointCallback, MetricsCallback
    model.fit(ds, callbacks=[MetricsCallback(), CheckpointCallback(CheckpointStore(), state)])

Importing this module imports tf_keras (TF_USE_LEGACY_KERAS=1 is the image's setting).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional

import tf_keras as keras

from . import progress
from .checkpoints import CheckpointStore, PipePosition, StopSignal, all_positions
from .metrics import log_metrics

__all__ = ["CheckpointCallback", "MetricsCallback"]


class MetricsCallback(keras.callbacks.Callback):
    """Prints `epoch=E; loss=...;` after each epoch, and `step=S; loss=...;` every `every_n_batches`
    batches (0: never). Only rank 0 prints (SM_RANK, or `rank`). Every rank counts its batches as
    steps for the stall watchdog (smtrain.progress)."""

    def __init__(self, every_n_batches: int = 0, rank: Optional[int] = None) -> None:
        super().__init__()
        self.every_n_batches = every_n_batches
        self.printing = (int(os.environ.get("SM_RANK", "0")) if rank is None else rank) == 0
        self.step = 0

    def on_train_batch_begin(self, batch: int, logs: Optional[dict] = None) -> None:
        """A sign of progress for the stall watchdog (smtrain.progress)."""
        progress.step()

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        """Counts the step; every `every_n_batches` steps, a metric line of the batch's logs."""
        self.step += 1
        if self.printing and self.every_n_batches and self.step % self.every_n_batches == 0:
            log_metrics(step=self.step, **{k: float(v) for k, v in (logs or {}).items()})

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        """A metric line of the epoch's logs."""
        if self.printing:
            log_metrics(epoch=epoch, **{k: float(v) for k, v in (logs or {}).items()})


class CheckpointCallback(keras.callbacks.Callback):
    """Saves every `every_n_batches` (0: never mid-epoch), at each epoch end, and on SIGTERM at the
    next batch end, after which training stops (`fit` returns; exit 0 then). `pipe_positions()`
    gives this rank's positions at that moment, if the data comes through Pipe mode;
    `initial_step` is the restored checkpoint's step, so step numbers go on from it."""

    def __init__(self, store: CheckpointStore, state: Any, every_n_batches: int = 0,
                 stop: Optional[StopSignal] = None,
                 pipe_positions: Optional[Callable[[], Mapping[str, PipePosition]]] = None,
                 initial_step: int = 0) -> None:
        super().__init__()
        self.store, self.state, self.every_n_batches = store, state, every_n_batches
        self.stop = stop or StopSignal()
        self.pipe_positions = pipe_positions
        self.step = initial_step

    def _save(self) -> None:
        mine = self.pipe_positions() if self.pipe_positions else {}
        self.store.save(self.step, self.state, pipe_positions=all_positions(mine))

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        """Counts the step; when every rank agrees to stop (SIGTERM), saves and stops training."""
        self.step += 1
        progress.alive()
        if self.stop.agreed():
            self._save()
            self.model.stop_training = True
        elif self.every_n_batches and self.step % self.every_n_batches == 0:
            self._save()

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        """Saves at each epoch's end."""
        self._save()
