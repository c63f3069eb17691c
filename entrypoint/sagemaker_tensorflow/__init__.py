"""Drop-in for `sagemaker_tensorflow` (sagemaker-tensorflow-extensions, which ended with TF 2.14):
`from sagemaker_tensorflow import PipeModeDataset` works unchanged, reading through smtrain's
Pipe-mode reader. See docs/design.md, "Migrating from PipeModeDataset"."""
from __future__ import annotations

from typing import Any

__all__ = ["PipeModeDataset", "PipeModeDatasetException"]


def __getattr__(name: str) -> Any:  # no work at import time: TensorFlow loads with the first dataset
    if name in __all__:
        from . import pipemode

        return getattr(pipemode, name)
    raise AttributeError(f"module 'sagemaker_tensorflow' has no attribute {name!r}")
