"""Loaded by Python at start-up in every rank's program: the rank launcher puts this folder first on
the program's PYTHONPATH. It tells the stall watchdog (smtrain.progress) when the rank calls Horovod's
`init` and when it returns from it, so that a rank that never gets to `hvd.init()` while the others
wait in it is named. It patches nothing else, imports nothing until Horovod is imported, and
then loads the sitecustomize this one shadows, if there is one."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
from typing import Any, Optional, Sequence

_HOROVOD_BASICS = "horovod.common.basics"


def _count_init(basics_class: Any) -> None:
    original = basics_class.init

    def init(self: Any, *args: Any, **kwargs: Any) -> Any:
        from smtrain import progress

        progress.framework_init(progress.InitPhase.WAITING)  # this rank reached its framework's init
        result = original(self, *args, **kwargs)
        progress.framework_init(progress.InitPhase.DONE)  # ... and every rank did
        return result

    init.__wrapped__ = original  # type: ignore[attr-defined]
    basics_class.init = init


class _InitProbe(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if name != _HOROVOD_BASICS:
            return None
        sys.meta_path.remove(self)  # one module to watch: find it the normal way, once
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run_module(module)
            if hasattr(module, "HorovodBasics"):
                _count_init(module.HorovodBasics)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


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


sys.meta_path.insert(0, _InitProbe())
_load_the_shadowed_sitecustomize()
