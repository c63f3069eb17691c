"""`hvd.DistributedOptimizer` for a Keras 3 optimizer: every update averages the gradients across ranks
first, wherever Keras 3 applies them - `model.fit`, `optimizer.apply` and `apply_gradients` in a custom
loop. Horovod 0.28.1 averages where tf_keras's optimizers compute gradients; Keras 3's trainer computes
them with its own tape and hands them to `apply`, so a Horovod wrapper of a Keras 3 optimizer would
update each rank on its own gradients.

The wrapper is a subclass of the optimizer's own class (the same name, so a saved model loads without
Horovod), made from the optimizer's config as Horovod makes its own. The average is taken where Keras 3
is about to use the gradients (`_clip_gradients`, reached once per update): after Keras' own gradient
accumulation - Horovod's `backward_passes_per_step` is Keras' `gradient_accumulation_steps`, so ranks
exchange gradients once per update, not per pass - and before clipping, so a clip norm sees the
averaged gradient. A `LossScaleOptimizer` checks the gradients for inf/NaN before its inner optimizer
runs: wrapped here, it averages first, so that every rank takes the same branch. Gradients a
`DistributedGradientTape` returned are reduced already and are applied as they are
(smtrain.horovod_keras.reduced)."""
from __future__ import annotations

import sys
from typing import Any, Optional

from .keras3 import is_keras3, tf_variables
from .reduced import marked

__all__ = ["DEFAULTS", "distributed_class", "distributed_optimizer"]

ORDER_HINT = ("wrap the other way: hvd.DistributedOptimizer(keras.optimizers.LossScaleOptimizer(optimizer)) - or, "
              "with model.compile under the mixed_float16 policy, create hvd.DistributedOptimizer(...) after setting "
              "the policy, which wraps the loss scaling inside")


def _horovod():  # type: ignore[no-untyped-def]
    import horovod.tensorflow as hvd

    return hvd


def _in_xla() -> bool:
    """Whether the code being traced is compiled by XLA (`jit_compile=True`)."""
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _key(variable: Any) -> str:
    """How the wrapper names a variable it is told to keep local (Keras 3's unique path, else its name)."""
    return variable.path if hasattr(variable, "path") else variable.name


class _Averaging:
    """The Horovod side of the wrapper: its collective, its options, the variables it keeps local."""

    def __init__(self, name: str, options: dict[str, Any]) -> None:
        hvd = _horovod()
        self.process_set = options["process_set"] or hvd.global_process_set
        self.allreduce = hvd._make_allreduce_grads_fn(
            name, options["device_dense"], options["device_sparse"], options["compression"] or hvd.Compression.none,
            options["sparse_as_dense"], hvd.Average if options["op"] is None else options["op"],
            options["gradient_predivide_factor"], options["groups"], self.process_set)
        self.scale_local = options["scale_local_gradients"]
        self.sum_passes = options["backward_passes_per_step"] if not options["average_aggregated_gradients"] else 1
        self.local: set = set()
        self.reduced: set = set()  # the variables of the update being traced whose gradients a tape reduced
        self.variables: Optional[list] = None  # those of the update being traced

    def note_reduced(self, grads: Any, variables: list) -> None:
        """Before an update: which of its variables' gradients a distributed tape has reduced already."""
        self.reduced = {_key(v) for g, v in zip(grads, variables) if marked(g)}

    def average(self, grads: list, variables: Optional[list]) -> list:
        """`grads` averaged over the ranks; those of variables registered as local scaled only, those a
        distributed tape reduced (`note_reduced`) as they are."""
        if _in_xla():
            raise ValueError("hvd.DistributedOptimizer on Keras 3: Horovod's collectives cannot run inside an XLA "
                             "compiled step in this image: compile the model with jit_compile=False (Keras 3 turns "
                             "XLA on by itself where a GPU is present)")
        if self.sum_passes > 1:  # Horovod's default: the passes' gradients summed, where Keras 3 averages them
            grads = [g if g is None else g * self.sum_passes for g in grads]
        if variables is None:
            return list(self.allreduce(grads, None))
        keys = [_key(v) for v in variables]
        variables = tf_variables(variables)  # Horovod's collective is a tf.function: TensorFlow's variables for it
        if not self.local and not self.reduced:
            return list(self.allreduce(grads, variables))
        shared = [i for i, k in enumerate(keys) if k not in self.local and k not in self.reduced]
        averaged = list(grads)
        reduced = self.allreduce([grads[i] for i in shared], [variables[i] for i in shared]) if shared else []
        for i, g in zip(shared, reduced):
            averaged[i] = g
        if self.scale_local:
            size = self.process_set.size()
            averaged = [g / size if keys[i] in self.local and keys[i] not in self.reduced and g is not None else g
                        for i, g in enumerate(averaged)]
        return averaged


def _wrapped_by_loss_scaling() -> bool:
    """Whether the update running now was called by a LossScaleOptimizer around the wrapper."""
    from keras.optimizers import LossScaleOptimizer

    frame = sys._getframe(2)  # the caller of the wrapper's apply
    for _ in range(4):
        if frame is None:
            return False
        if isinstance(frame.f_locals.get("self"), LossScaleOptimizer):
            return True
        frame = frame.f_back
    return False


def _methods(averaging: _Averaging, base: type, loss_scaling: bool) -> dict[str, Any]:
    def register_local_var(self, var) -> None:  # type: ignore[no-untyped-def]
        """Horovod's: this variable's gradient is not averaged (scaled by 1/size where scale_local_gradients)."""
        averaging.local.add(_key(var))

    def variables_of(self, trainable_variables):  # type: ignore[no-untyped-def]
        if trainable_variables is not None:
            return list(trainable_variables)
        return list(getattr(self, "_trainable_variables", []))  # not built yet: Keras says so

    if loss_scaling:  # average before the inf/NaN check, so that every rank decides alike
        def apply(self, grads, trainable_variables=None):  # type: ignore[no-untyped-def]
            grads, variables = list(grads), variables_of(self, trainable_variables)
            averaging.note_reduced(grads, variables)
            return base.apply(self, averaging.average(grads, variables), trainable_variables)

        return {"apply": apply, "register_local_var": register_local_var}

    def apply(self, grads, trainable_variables=None):  # type: ignore[no-untyped-def]
        if _wrapped_by_loss_scaling():
            raise ValueError("a LossScaleOptimizer around hvd.DistributedOptimizer checks each rank's gradients for "
                             "inf/NaN before they are averaged, so ranks can disagree and wait for each other forever: "
                             + ORDER_HINT)
        grads = list(grads)
        averaging.note_reduced(grads, variables_of(self, trainable_variables))
        return base.apply(self, grads, trainable_variables)

    def _backend_apply_gradients(self, grads, trainable_variables):  # type: ignore[no-untyped-def]
        # which gradient is whose, for _clip_gradients (kept off the optimizer, which would track them as its own)
        averaging.variables = list(trainable_variables)
        return base._backend_apply_gradients(self, grads, trainable_variables)

    def _clip_gradients(self, grads):  # type: ignore[no-untyped-def]
        return base._clip_gradients(self, averaging.average(list(grads), averaging.variables))

    return {"apply": apply, "_backend_apply_gradients": _backend_apply_gradients, "_clip_gradients": _clip_gradients,
            "register_local_var": register_local_var}


# Horovod's options of hvd.DistributedOptimizer, with Horovod's defaults (None: Horovod's own default object)
DEFAULTS: dict[str, Any] = {
    "name": None, "device_dense": "", "device_sparse": "", "compression": None, "sparse_as_dense": False,
    "gradient_predivide_factor": 1.0, "op": None, "backward_passes_per_step": 1, "average_aggregated_gradients": False,
    "groups": None, "process_set": None, "scale_local_gradients": True}


def distributed_class(base: type, **options: Any) -> type:
    """A subclass of the Keras 3 optimizer class `base`, of the same name, whose updates average the gradients
    (`options`: DEFAULTS'); its `from_config` makes a distributed optimizer, as loading a saved model does."""
    import keras

    options = {**DEFAULTS, **options}
    averaging = _Averaging(options["name"] or f"Distributed{base.__name__}", options)
    loss_scaling = issubclass(base, keras.optimizers.LossScaleOptimizer)
    return type(base.__name__, (base,), {"__module__": base.__module__, "_smtrain_distributed": True,
                                         **_methods(averaging, base, loss_scaling)})


def distributed_optimizer(optimizer: Any, **options: Any) -> Any:
    """A Keras 3 `optimizer`, made anew from its config, whose updates average the gradients across the ranks
    of the process set (Horovod's options, DEFAULTS, as `hvd.DistributedOptimizer` documents them)."""
    import keras

    if not is_keras3(optimizer):
        raise TypeError(f"expected a Keras 3 optimizer, got {type(optimizer).__module__}.{type(optimizer).__name__}")
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"hvd.DistributedOptimizer on Keras 3: unknown options {sorted(unknown)}")
    passes = options.get("backward_passes_per_step", 1)
    if passes < 1:
        raise ValueError(f"backward_passes_per_step must be at least 1, got {passes}")
    loss_scaling = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    if not loss_scaling and keras.config.dtype_policy().name == "mixed_float16":
        # model.compile would wrap a LossScaleOptimizer around this one; it wraps none around a LossScaleOptimizer
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        loss_scaling = True
    config = optimizer.get_config()
    if passes > 1:
        if loss_scaling:
            raise ValueError("hvd.DistributedOptimizer on Keras 3: backward_passes_per_step with loss scaling is not "
                             "served; set gradient_accumulation_steps on the inner optimizer (Keras 3's own, which "
                             "averages the passes) and leave backward_passes_per_step at 1")
        if config.get("gradient_accumulation_steps"):
            raise ValueError("hvd.DistributedOptimizer on Keras 3: give either backward_passes_per_step or the "
                             "optimizer's gradient_accumulation_steps, not both")
        config["gradient_accumulation_steps"] = passes
    return distributed_class(type(optimizer), **options).from_config(config)
