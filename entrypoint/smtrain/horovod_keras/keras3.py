"""What is Keras 3 (the standalone `keras` package) and what is tf_keras, told apart by the objects
themselves: a script may use either, whatever TF_USE_LEGACY_KERAS says."""
from __future__ import annotations

from typing import Any, Iterable

__all__ = ["is_keras3", "local_layers", "local_variables", "tf_keras_is_keras3", "tf_variables"]


def is_keras3(thing: Any) -> bool:
    """Whether `thing` (an optimizer, a model, a variable) is of Keras 3: the first class of its type's
    ancestry that Keras or TensorFlow defines is Keras 3's (a script's own optimizer or layer class
    subclasses one)."""
    for cls in type(thing).__mro__:
        package = cls.__module__.split(".")[0]
        if package == "keras":
            return True
        if package in ("tf_keras", "tensorflow"):
            return False
    return False


def tf_keras_is_keras3() -> bool:
    """Whether `tf.keras` is Keras 3 (TF_USE_LEGACY_KERAS unset or 0), not tf_keras."""
    import tensorflow as tf

    return tf.keras.layers.Layer.__module__.split(".")[0] == "keras"


def tf_variables(variables: Iterable[Any]) -> list[Any]:
    """The TensorFlow variables behind `variables`: a Keras 3 variable holds one (`_value`; its `.value`
    may be a cast copy under mixed precision), which Horovod's collectives can assign to inside a
    `tf.function`, where the Keras variable itself is only a tensor; others are passed through."""
    return [getattr(v, "_value", v) if is_keras3(v) else v for v in variables]


def local_variables(variables: Any, what: str) -> list[Any]:
    """Horovod's `local_variables=` argument as a list: one variable or a collection of them, each a
    tf.Variable or a Keras 3 variable; ValueError naming `what` for anything else (Horovod's check
    took tf.Variable alone)."""
    import keras
    import tensorflow as tf

    kinds = (tf.Variable, keras.Variable)
    listed = [variables] if isinstance(variables, kinds) else list(variables)
    wrong = [type(v).__name__ for v in listed if not isinstance(v, kinds)]
    if wrong:
        raise ValueError(f"{what}: every local variable must be a tf.Variable or a keras.Variable, got {wrong[0]}")
    return listed


def local_layers(layers: Any, what: str) -> list[Any]:
    """Horovod's `local_layers=` argument as a list: one layer or a collection of them, each a tf.keras
    or a Keras 3 layer; ValueError naming `what` for anything else."""
    import keras
    import tensorflow as tf

    kinds = (tf.keras.layers.Layer, keras.layers.Layer)
    listed = [layers] if isinstance(layers, kinds) else list(layers)
    wrong = [type(layer).__name__ for layer in listed if not isinstance(layer, kinds)]
    if wrong:
        raise ValueError(f"{what}: every local layer must be a tf.keras or a Keras 3 layer, got {wrong[0]}")
    return listed
