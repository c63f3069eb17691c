"""The asynchronous checkpoint writer: one save in flight at a time, made durable in a thread that is
not a daemon (exit waits for it), its failure handed to the next `save()` or `wait()` - or, where none
raises it, ending the program with status 1 at exit. Also TensorFlow's own asynchronous write of a
`tf.train.Checkpoint`, which the thread waits for."""
from __future__ import annotations

import atexit
import os
import sys
import threading
import traceback
from typing import Any, Callable, Optional

from ..data.checkpoint_write import CheckpointWriteError

__all__ = ["BackgroundSave", "async_options", "is_tf_checkpoint", "tf_sync"]


def is_tf_checkpoint(state: Any) -> bool:
    """Whether `state` is TensorFlow's (a tf.train.Checkpoint), whose write can be asynchronous."""
    return type(state).__module__.startswith("tensorflow") and hasattr(state, "sync")


def tf_sync(state: Any) -> None:
    """Until TensorFlow's asynchronous write of `state` has ended, raising what it failed with:
    TensorFlow's own sync() keeps its writer thread's error for the next write to raise (2.18-2.21)."""
    state.sync()
    check = getattr(getattr(state, "_async_checkpointer_impl", None), "_check_async_thread_error", None)
    if check is not None:
        check()


def async_options() -> Any:
    """TensorFlow's options for an asynchronous write (TensorFlow imported on first use)."""
    import tensorflow as tf

    return tf.train.CheckpointOptions(enable_async=True)


# Background saves that failed and that no save() or wait() has raised yet (see _exit_if_unreported).
_UNREPORTED: list[CheckpointWriteError] = []
_EXIT_WATCHED = threading.Event()
_exit_watch_lock = threading.Lock()


def _exit_if_unreported() -> None:
    """At interpreter exit (after non-daemon threads, so after the last background save): a failed
    background save nobody raised ends the program with status 1 and its traceback, as an uncaught
    exception would, rather than letting a job whose last checkpoint was lost succeed."""
    if _UNREPORTED:
        traceback.print_exception(_UNREPORTED[0])
        for stream in (sys.stdout, sys.stderr):  # os._exit does not flush what the program printed
            stream.flush()
        os._exit(1)


def _watch_exit() -> None:
    with _exit_watch_lock:
        if not _EXIT_WATCHED.is_set():
            atexit.register(_exit_if_unreported)
            _EXIT_WATCHED.set()


class BackgroundSave:
    """The save in flight of one store, and what it failed with until someone raises it."""

    def __init__(self) -> None:
        self._in_flight: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None

    def start(self, name: str, make_durable: Callable[[], None]) -> None:
        """Run `make_durable` in a thread of its own (`wait()` first: one save at a time)."""
        _watch_exit()
        self._in_flight = threading.Thread(target=self._run, args=(make_durable,), name=name)  # not a daemon
        self._in_flight.start()

    def _run(self, make_durable: Callable[[], None]) -> None:
        try:
            make_durable()
        except BaseException as e:  # handed to the next save() or wait(), else reported at exit
            self._error = e
            if isinstance(e, CheckpointWriteError):
                _UNREPORTED.append(e)

    def wait(self) -> None:
        """Until the save in flight is durable; raises what it failed with."""
        thread, self._in_flight = self._in_flight, None
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        if error is not None:
            if error in _UNREPORTED:
                _UNREPORTED.remove(error)
            raise error
