"""smtrain's native tf.data source for Pipe-mode FIFOs (native/pipe_dataset.cc), where it is built.

`scripts/build-native.sh` compiles it against the installed TensorFlow when the stack is built (the
image and scripts/setup.sh), into `<venv>/lib/smtrain-native/` with a stamp naming its source and the
TensorFlow it was built for. `native_pipes()` loads it once per process; it is None - and
smtrain.pipes reads through Python instead - where the library is missing, was built for another
TensorFlow, does not load, or `SMTRAIN_NATIVE_PIPES=0` asks for the Python reader. Why it was not
loaded is said once on stderr (except when asked for).
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from .libs import NATIVE_ENV, library_dir, native_wanted
from .record_reader import RecordFormat

__all__ = ["NATIVE_ENV", "NativePipes", "Stamp", "library_dir", "native_pipes"]


@dataclass(frozen=True)
class Stamp:
    """What a built library was built from (its `pipe_ops.stamp`)."""

    source_sha256: str
    tensorflow: str

    @classmethod
    def read(cls, path: Path) -> Optional["Stamp"]:
        """The stamp in `path`; None when it is missing or malformed (the library is then rebuilt)."""
        try:
            fields = dict(part.split("=", 1) for part in path.read_text().split())
            return cls(fields["source"], fields["tensorflow"])
        except (OSError, ValueError, KeyError):
            return None


class NativePipes:
    """The loaded op library."""

    def __init__(self, ops: Any) -> None:
        self._ops = ops

    def dataset(self, prefix: str, channel: str, epochs: Any, fmt: RecordFormat, timeout: float,
                skip: int = 0, skip_corrupt: int = 0, batch_size: int = 0,
                drop_remainder: bool = False):  # -> tf.data.Dataset
        """The records of the FIFOs `<prefix>_<epoch>` for `epochs` (a list, or an int64 tensor of
        shape [n]), one epoch after the other; `skip` records of the first are dropped unchecked.
        `batch_size` N > 0: vectors of up to N records (of N exactly with `drop_remainder`), framed
        in C++, as `.batch(N, drop_remainder)` would make them."""
        return _dataset_class()(self._ops, prefix, channel, epochs, fmt.value, timeout, skip, skip_corrupt,
                                batch_size, drop_remainder)


@functools.lru_cache(maxsize=None)
def _dataset_class():
    """tf.data's base for source datasets made by an op (as tensorflow-io's); defined on first use,
    since importing TensorFlow is not done at import time."""
    import tensorflow as tf
    from tensorflow.python.data.ops import dataset_ops

    class PipeDataset(dataset_ops.DatasetSource):
        def __init__(self, ops: Any, prefix: str, channel: str, epochs: Sequence[int], fmt: str, timeout: float,
                     skip: int, skip_corrupt: int, batch_size: int, drop_remainder: bool) -> None:
            self._shape = [] if not batch_size else [batch_size if drop_remainder else None]
            variant = ops.smtrain_pipe_dataset(
                prefix=tf.constant(prefix, tf.string), channel=tf.constant(channel, tf.string),
                epochs=tf.cast(epochs, tf.int64), skip=tf.constant(skip, tf.int64),
                skip_corrupt=tf.constant(skip_corrupt, tf.int64), timeout_s=tf.constant(timeout, tf.float32),
                batch_size=tf.constant(batch_size, tf.int64), drop_remainder=tf.constant(drop_remainder, tf.bool),
                record_format=fmt)
            super().__init__(variant)

        @property
        def element_spec(self):
            return tf.TensorSpec(self._shape, tf.string)

    return PipeDataset


@functools.lru_cache(maxsize=1)
def _load() -> Optional[NativePipes]:
    folder = library_dir()
    library, stamp = folder / "pipe_ops.so", Stamp.read(folder / "pipe_ops.stamp")
    if not library.exists() or stamp is None:
        return _unavailable(f"{library} is not built (scripts/build-native.sh)")
    import tensorflow as tf

    if stamp.tensorflow != tf.__version__:
        return _unavailable(f"{library} was built for TensorFlow {stamp.tensorflow}, this is {tf.__version__}")
    try:
        return NativePipes(tf.load_op_library(str(library)))
    except (tf.errors.OpError, OSError) as e:
        return _unavailable(f"{library} does not load: {e}")


def _unavailable(why: str) -> None:
    sys.stderr.write(f"[smtrain.pipes] reading Pipe mode through Python, slower: {why}\n")
    return None


def native_pipes() -> Optional[NativePipes]:
    """The native reader, or None for the Python one (see the module's docstring)."""
    return _load() if native_wanted() else None
