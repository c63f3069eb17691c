"""Metric lines that SageMaker's metric definitions match: `name=value;` pairs on one line.

    from entrypoint.metrics import log_metrics, keras_metrics_callback
    log_metrics(epoch=3, loss=0.1234, accuracy=0.98)      # prints "epoch=3; loss=0.1234; accuracy=0.98;"
    model.fit(..., callbacks=[keras_metrics_callback()])    # one line per epoch (and every N batches)

Matching `metric_definitions` for the SageMaker SDK (`\\b` keeps `loss` from matching `val_loss`):

    [{"Name": "loss", "Regex": "\\\\bloss=([-+0-9.eE]+|nan|inf);"},
     {"Name": "val_loss", "Regex": "\\\\bval_loss=([-+0-9.eE]+|nan|inf);"}]
"""
from __future__ import annotations

import re
import sys
from typing import Any, Optional

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")


def metric_line(**values: Any) -> str:
    """`name=value;` for each value, in the order given; floats with up to 6 significant digits."""
    parts = []
    for name, value in values.items():
        if not _NAME.match(name):
            raise ValueError(f"metric name {name!r}: use letters, digits and _ . : / - (no spaces, '=' or ';')")
        text = f"{value:.6g}" if isinstance(value, float) else str(int(value) if isinstance(value, bool) else value)
        parts.append(f"{name}={text};")
    return " ".join(parts)


def log_metrics(**values: Any) -> None:
    sys.stdout.write(metric_line(**values) + "\n")
    sys.stdout.flush()


def keras_metrics_callback(every_n_batches: int = 0, rank: Optional[int] = None):
    """A tf_keras callback printing `epoch=E; loss=...;` after each epoch, and `step=S; loss=...;`
    every `every_n_batches` batches (0: never). Only rank 0 prints (SM_RANK, or `rank`)."""
    import os

    import tf_keras as keras

    printing = (int(os.environ.get("SM_RANK", "0")) if rank is None else rank) == 0

    class MetricsCallback(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.step = 0

        def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
            self.step += 1
            if printing and every_n_batches and self.step % every_n_batches == 0:
                log_metrics(step=self.step, **{k: float(v) for k, v in (logs or {}).items()})

        def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
            if printing:
                log_metrics(epoch=epoch, **{k: float(v) for k, v in (logs or {}).items()})

    return MetricsCallback()
