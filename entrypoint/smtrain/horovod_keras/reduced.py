"""Which gradients Horovod's `DistributedGradientTape` has already reduced, so that a distributed optimizer
they are then handed to applies them as they are: one reduction whatever the combination of tape and
optimizer and their ops (Sum twice would double every step). This is Horovod's documented tf_keras
behaviour - its optimizer reduces only the gradients it computes itself - kept where the optimizer
also reduces a custom loop's gradients (Keras 3, and tf_keras under the image's patch).

A gradient is known by the object itself (the tensor the tape returned: eager, or symbolic in the
graph being traced), held weakly; a gradient the script transforms on its way to the optimizer is a
new tensor, and is reduced again."""
from __future__ import annotations

import weakref
from typing import Any, Sequence, TypeVar

__all__ = ["mark", "marked"]

_MARKED: dict[int, "weakref.ref[Any]"] = {}
Grads = TypeVar("Grads", bound=Sequence[Any])


def _forget(key: int) -> None:
    _MARKED.pop(key, None)


def mark(grads: Grads) -> Grads:
    """Record `grads` (a tape's result: tensors, IndexedSlices or None) as reduced; returns them."""
    for grad in grads:
        if grad is not None:
            key = id(grad)
            _MARKED[key] = weakref.ref(grad, lambda _, key=key: _forget(key))
    return grads


def marked(grad: Any) -> bool:
    """Whether `grad` is one a distributed tape returned (and so is reduced already)."""
    ref = _MARKED.get(id(grad)) if grad is not None else None
    return ref is not None and ref() is grad
