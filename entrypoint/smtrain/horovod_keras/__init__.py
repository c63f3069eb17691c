"""Horovod's Keras API on Keras 3 (TensorFlow backend). Horovod 0.28.1 serves tf_keras only; the image's
patch of Horovod (scripts/patch-horovod.py) hands what it is given of Keras 3 - an optimizer to wrap,
variables to broadcast, layers to keep local - to the modules here, so that `horovod.tensorflow.keras`
and `horovod.keras` take Keras 3 and tf_keras side by side with no setting to change.

Scripts import one name from here: `SyncBatchNormalization`, Horovod's synchronised batch
normalization as a Keras 3 layer (`from smtrain.horovod_keras import SyncBatchNormalization`)."""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["SyncBatchNormalization", "keras3", "learning_rate", "optimizer", "reduced", "saving", "sync_batch_norm"]


def __getattr__(name: str) -> Any:  # no work at import time: Keras 3 and Horovod load with the layer
    if name == "SyncBatchNormalization":
        return importlib.import_module(".sync_batch_norm", __name__).sync_batch_normalization_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
