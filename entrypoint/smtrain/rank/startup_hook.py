"""Where the program's start-up hook lives (startup/sitecustomize.py: it tells the stall watchdog when the rank
calls Horovod's init and returns from it, and starts the step profiler) and how a program's environment gets it;
apart from the rank launcher, so that a program on its own (run.single) gets it without loading the launcher."""
from __future__ import annotations

import os

__all__ = ["STARTUP_HOOK", "with_startup_hook"]

STARTUP_HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup")


def with_startup_hook(env: dict[str, str]) -> dict[str, str]:
    """`env` with the start-up hook on PYTHONPATH (once), right after the program's folder, which
    stays first as sagemaker-training has it; before every other entry, and so before any other
    sitecustomize the environment has (the hook loads that one in turn)."""
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != STARTUP_HOOK]
    env["PYTHONPATH"] = os.pathsep.join([*parts[:1], STARTUP_HOOK, *parts[1:]])
    return env
