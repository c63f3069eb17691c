"""Where an unmodified script's steps are seen: patches the rank's start-up hook installs as the
modules they patch are imported (nothing is imported for them).

- Keras (Keras 3's and tf_keras' `CallbackList`): a step runs from the end of `on_*_batch_begin` to
  the start of `on_*_batch_end` (the callbacks' own time counts between steps); fit / evaluate /
  predict and epochs are marked too. Inside them nothing else counts steps.
- Custom loops: a `tf.function` whose trace enters a `GradientTape` or calls one of Horovod's
  allreduces is a step function: each call from eager code is one training step. An eager Horovod
  allreduce is a step boundary too; one step runs from the first `GradientTape` entered after the
  previous step (else from the call itself) to the collective, and collectives with no tape entered
  between them (one allreduce per gradient, a metric averaged at the end) belong to the same step.
- `smtrain.progress.step()`, outside Keras: one step from one call to the next.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from .steps import StepRecorder

__all__ = ["PATCHES", "State"]


class State:
    """What the patches share (one per process; the patched calls run on the program's threads)."""

    def __init__(self, recorder: StepRecorder) -> None:
        self.recorder = recorder
        self.keras = 0  # inside fit / evaluate / predict
        self.current: Any = None  # the outermost tf.function being called
        self.helper_used = False
        self.tape_ever = False  # an eager GradientTape was entered
        self.tape_start: float = 0.0  # when the first tape since the last boundary was entered; 0: none

    def automatic(self) -> bool:
        """Whether steps are seen by the framework's hooks alone (no Keras callback, no progress.step())."""
        return not self.keras and not self.helper_used


def _wrap(cls: Any, name: str, before: Callable[[], None] = None, after: Callable[[], None] = None) -> None:
    original = getattr(cls, name, None)
    if original is None or getattr(original, "__smtrain_patched__", False):
        return

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if before is not None:
            before()
        try:
            return original(self, *args, **kwargs)
        finally:
            if after is not None:
                after()

    method.__wrapped__ = original  # type: ignore[attr-defined]
    method.__smtrain_patched__ = True  # type: ignore[attr-defined]
    method.__name__ = name
    setattr(cls, name, method)


def patch_callback_list(module: Any, state: State) -> None:
    cls = getattr(module, "CallbackList", None)
    if cls is None:
        return
    rec = state.recorder

    def enter(mode: str) -> Callable[[], None]:
        def call() -> None:
            state.keras += 1
            rec.run_begin(mode)
        return call

    def leave() -> None:
        state.keras = max(0, state.keras - 1)

    for mode, word in (("TRAIN", "train"), ("EVAL", "test"), ("PREDICT", "predict")):
        _wrap(cls, f"on_{word}_begin", before=enter(mode))
        _wrap(cls, f"on_{word}_end", after=leave)
        _wrap(cls, f"on_{word}_batch_begin", after=lambda m=mode: rec.begin(m))
        _wrap(cls, f"on_{word}_batch_end", before=lambda m=mode: rec.end(m))
    _wrap(cls, "on_epoch_begin", before=lambda: rec.epoch_begin("TRAIN"))
    _wrap(cls, "on_epoch_end", after=lambda: rec.epoch_end("TRAIN"))


def patch_function(module: Any, state: State) -> None:
    cls = getattr(module, "Function", None)
    original = getattr(cls, "__call__", None)
    if original is None or getattr(original, "__smtrain_patched__", False):
        return
    rec = state.recorder

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if state.current is not None or not state.automatic():
            return original(self, *args, **kwargs)
        state.current = self
        is_step = getattr(self, "_smtrain_step", False)
        if is_step:
            rec.step_will_begin()
        start = time.time()
        try:
            return original(self, *args, **kwargs)
        finally:
            state.current = None
            if is_step or getattr(self, "_smtrain_step", False):
                tape, state.tape_start = state.tape_start, 0.0
                rec.boundary(tape if 0 < tape <= start else start, time.time(), extends=False)

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    __call__.__smtrain_patched__ = True  # type: ignore[attr-defined]
    cls.__call__ = __call__


def _mark_step_function(state: State) -> bool:
    """Inside a tf.function's trace: that function is a step function. True when this was a trace."""
    if state.current is not None:
        if state.automatic():
            try:
                state.current._smtrain_step = True
            except AttributeError:
                pass
        return True
    return False


def patch_tape(module: Any, state: State) -> None:
    cls = getattr(module, "GradientTape", None)
    if cls is None:
        return
    from tensorflow.python.eager import context

    def entered() -> None:
        if _mark_step_function(state) or not state.automatic() or not context.executing_eagerly():
            return
        state.tape_ever = True
        if not state.tape_start:
            state.tape_start = time.time()
            state.recorder.step_will_begin()

    _wrap(cls, "__enter__", before=entered)


def patch_horovod(module: Any, state: State) -> None:
    from tensorflow.python.eager import context

    rec = state.recorder
    for name in ("allreduce", "grouped_allreduce"):
        original = getattr(module, name, None)
        if original is None or getattr(original, "__smtrain_patched__", False):
            continue

        def collective(*args: Any, __original: Callable = original, **kwargs: Any) -> Any:
            if _mark_step_function(state) or not state.automatic() or not context.executing_eagerly():
                return __original(*args, **kwargs)
            start = time.time()
            result = __original(*args, **kwargs)
            tape, state.tape_start = state.tape_start, 0.0
            rec.boundary(tape or start, time.time(), extends=state.tape_ever and not tape)
            return result

        collective.__wrapped__ = original  # type: ignore[attr-defined]
        collective.__smtrain_patched__ = True  # type: ignore[attr-defined]
        collective.__name__ = name
        setattr(module, name, collective)


def helper_step(state: State) -> Callable[[int], None]:
    """What smtrain.progress.step() calls: outside Keras, each call ends one step and begins the next."""

    def step(steps: int) -> None:
        if state.keras:
            return
        state.helper_used = True
        for _ in range(max(1, steps)):
            state.recorder.helper_step()

    return step


# module imported -> the patch it gets
PATCHES: dict[str, Callable[[Any, State], None]] = {
    "keras.src.callbacks.callback_list": patch_callback_list,
    "tf_keras.src.callbacks": patch_callback_list,
    "tensorflow.python.eager.polymorphic_function.polymorphic_function": patch_function,
    "tensorflow.python.eager.backprop": patch_tape,
    "horovod.tensorflow": patch_horovod,
}
