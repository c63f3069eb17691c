"""Horovod's `SyncBatchNormalization` for Keras 3: in training, the batch's mean and variance over every
rank's batch, so that each rank normalises as one process would on the union of the ranks' batches, and
the moving statistics - updated from those - stay equal on every rank (inference uses them).

Horovod 0.28.1's layer is a tf_keras `BatchNormalization` (it passes `fused=False`, which Keras 3 refuses,
and overrides tf_keras's `_moments(inputs, reduction_axes, keep_dims)`). This one overrides Keras 3's
`_moments(inputs, mask)`: one allreduce (Sum) of each rank's element count, sum and sum of squares per
feature - exact for ranks whose batches differ in size, and with masks - from which the global mean and
variance follow. `hvd.SyncBatchNormalization` is this class where `tf.keras` is Keras 3; a Keras 3 model
built beside tf_keras (the image's TF_USE_LEGACY_KERAS=1) takes it as
`smtrain.horovod_keras.SyncBatchNormalization`."""
from __future__ import annotations

from typing import Any

__all__ = ["SyncBatchNormalization", "sync_batch_normalization_class"]

SyncBatchNormalization: type  # the layer class, made on first use (__getattr__): Keras 3 and Horovod load then
_CLASS: list[type] = []


def sync_batch_normalization_class() -> type:
    """The Keras 3 layer class (registered with Keras' serialization as `horovod>SyncBatchNormalization`)."""
    if _CLASS:
        return _CLASS[0]
    import keras
    import tensorflow as tf
    from horovod.tensorflow.mpi_ops import Sum, _allreduce, size

    from .optimizer import _in_xla

    @keras.saving.register_keras_serializable(package="horovod")
    class SyncBatchNormalization(keras.layers.BatchNormalization):
        """Batch normalization whose training statistics are those of every rank's batch together."""

        def __init__(self, **kwargs: Any) -> None:
            if kwargs.pop("fused", False):  # tf_keras's option, which Horovod's layer refused as True too
                raise ValueError("SyncBatchNormalization does not support fused=True")
            if kwargs.get("synchronized"):
                raise ValueError("SyncBatchNormalization synchronises through Horovod: leave synchronized=False "
                                 "(Keras 3's own synchronisation is tf.distribute's)")
            super().__init__(**kwargs)

        def _moments(self, inputs: Any, mask: Any) -> Any:
            if size() == 1:
                return super()._moments(inputs, mask)
            if _in_xla():
                raise ValueError("SyncBatchNormalization on Keras 3: Horovod's collectives cannot run inside an XLA "
                                 "compiled step in this image: compile the model with jit_compile=False")
            axes = list(self._reduction_axes)
            if mask is None:
                weights = tf.ones_like(inputs)
            else:
                weights = tf.broadcast_to(tf.cast(tf.expand_dims(mask, -1), inputs.dtype), tf.shape(inputs))
            count = tf.reduce_sum(weights, axes)
            total = tf.reduce_sum(inputs * weights, axes)
            squares = tf.reduce_sum(tf.square(inputs) * weights, axes)
            count, total, squares = tf.unstack(_allreduce(tf.stack([count, total, squares]), op=Sum))
            count = tf.maximum(count, 1.0)
            mean = total / count
            return mean, tf.maximum(squares / count - tf.square(mean), 0.0)

    _CLASS.append(SyncBatchNormalization)
    return SyncBatchNormalization


def __getattr__(name: str) -> Any:
    if name == "SyncBatchNormalization":
        return sync_batch_normalization_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
