"""Loaded by Python at start-up in every rank's program (and a single host's program): `train` puts
this folder first on the program's PYTHONPATH. It
- tells the stall watchdog (smtrain.progress) when the rank calls Horovod's `init` and when it returns
  from it, so that a rank that never gets to `hvd.init()` while the others wait in it is named;
- when `train` asks for step profiling (SM_FRAMEWORK_PROFILER), starts the rank's step recorder and
  patches Keras, tf.function, GradientTape and Horovod's allreduce as each is imported
  (smtrain.profiler.hooks).
It imports nothing of the frameworks itself, and then loads the sitecustomize this one shadows, if
there is one."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
from typing import Any, Callable, Optional, Sequence

_HOROVOD_BASICS = "horovod.common.basics"


def _count_init(module: Any) -> None:
    basics_class = getattr(module, "HorovodBasics", None)
    if basics_class is None:
        return
    original = basics_class.init

    def init(self: Any, *args: Any, **kwargs: Any) -> Any:
        from smtrain import progress

        progress.framework_init(progress.InitPhase.WAITING)  # this rank reached its framework's init
        result = original(self, *args, **kwargs)
        progress.framework_init(progress.InitPhase.DONE)  # ... and every rank did
        return result

    init.__wrapped__ = original  # type: ignore[attr-defined]
    basics_class.init = init


class _ImportProbe(importlib.abc.MetaPathFinder):
    """Runs `after[name](module)` once a watched module has executed; leaves once all have."""

    def __init__(self, after: dict[str, Callable[[Any], None]]) -> None:
        self.after = after
        self.busy: set[str] = set()

    def find_spec(self, name: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if name not in self.after or name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = importlib.util.find_spec(name)  # the normal way
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        patch = self.after.pop(name)
        if not self.after and self in sys.meta_path:
            sys.meta_path.remove(self)
        run_module = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run_module(module)
            try:
                patch(module)
            except Exception as e:  # a framework version whose shape we do not know: measure less, never fail
                sys.stderr.write(f"[smtrain] cannot hook {name}: {type(e).__name__}: {e}\n")

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _step_profiler() -> dict[str, Callable[[Any], None]]:
    """The step profiler's patches, when `train` asked for it (else none, and nothing imported)."""
    if not os.environ.get("SM_FRAMEWORK_PROFILER"):
        return {}
    from smtrain.wire.profiling import ProfilerSettings

    settings = ProfilerSettings.from_environ(os.environ)
    if settings is None or not (settings.steps or settings.detailed or settings.python):
        return {}
    # mpirun gives every rank the master's settings: the host is the rank's own (the rank launcher's)
    settings = settings._replace(host=os.environ.get("SM_CURRENT_HOST") or settings.host)
    from smtrain.common import stephook
    from smtrain.profiler import hooks
    from smtrain.profiler.steps import StepRecorder

    rank = os.environ.get("SM_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or "0"
    recorder = StepRecorder(settings, int(rank) if rank.isdigit() else 0)
    recorder.register_exit()
    state = hooks.State(recorder)
    stephook.listener = hooks.helper_step(state)
    return {name: (lambda module, patch=patch: patch(module, state)) for name, patch in hooks.PATCHES.items()}


def _load_the_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    finally:
        sys.path[:] = saved


def _install() -> None:
    watched: dict[str, Callable[[Any], None]] = {_HOROVOD_BASICS: _count_init}
    try:
        watched.update(_step_profiler())
    except Exception as e:  # never fail the program for its profiling
        sys.stderr.write(f"[smtrain] step profiling is off: {type(e).__name__}: {e}\n")
    sys.meta_path.insert(0, _ImportProbe(watched))


_install()
_load_the_shadowed_sitecustomize()
