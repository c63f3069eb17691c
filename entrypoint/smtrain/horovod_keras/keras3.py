"""What is Keras 3 (the standalone `keras` package) and what is tf_keras, told apart by the objects
themselves: a script may use either, whatever TF_USE_LEGACY_KERAS says."""
from __future__ import annotations

from typing import Any, Iterable

__all__ = ["is_keras3", "tf_variables"]


def is_keras3(thing: Any) -> bool:
    """Whether `thing` (an optimizer, a model, a variable) is of Keras 3."""
    return type(thing).__module__.split(".")[0] == "keras"


def tf_variables(variables: Iterable[Any]) -> list[Any]:
    """The TensorFlow variables behind `variables`: a Keras 3 variable holds one (`_value`; its `.value`
    may be a cast copy under mixed precision), which Horovod's collectives can assign to inside a
    `tf.function`, where the Keras variable itself is only a tensor; others are passed through."""
    return [getattr(v, "_value", v) if is_keras3(v) else v for v in variables]
