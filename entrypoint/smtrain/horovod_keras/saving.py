"""`hvd.load_model` for a model Keras 3 saved (`.keras`): loaded by Keras 3, its optimizer made of a
distributed subclass of the saved optimizer's class, so that the saved optimizer state loads into the
optimizer that averages (Horovod's own load_model does the same for tf_keras, through tf_keras)."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from .optimizer import distributed_class

__all__ = ["is_keras3_file", "load_model"]


def is_keras3_file(filepath: Any) -> bool:
    """Whether `filepath` is a `.keras` archive that Keras 3 wrote (its metadata's `keras_version`)."""
    try:
        with zipfile.ZipFile(Path(filepath)) as archive:
            metadata = json.loads(archive.read("metadata.json"))
    except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile):
        return False
    return str(metadata.get("keras_version", "")).startswith("3.")


def _optimizer_classes(extra: Iterable[type]) -> list[type]:
    import keras

    found, pending = [], [keras.optimizers.Optimizer, *extra]
    while pending:
        cls = pending.pop()
        if cls not in found:
            found.append(cls)
            pending += cls.__subclasses__()
    return [cls for cls in found if cls is not keras.optimizers.Optimizer and not getattr(cls, "_smtrain_distributed", False)]


def load_model(filepath: Any, custom_optimizers: Optional[Iterable[type]] = None,
               custom_objects: Optional[Mapping[str, Any]] = None, compression: Any = None) -> Any:
    """The Keras 3 model saved at `filepath`, compiled with a distributed version of its optimizer."""
    import keras

    objects: dict[str, Any] = {cls.__name__: distributed_class(cls, compression=compression)
                               for cls in _optimizer_classes(custom_optimizers or ())}
    objects.update(custom_objects or {})
    return keras.saving.load_model(filepath, custom_objects=objects)
