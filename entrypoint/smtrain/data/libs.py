"""Where smtrain's native libraries live: `<venv>/lib/smtrain-native/`, built by scripts/build-native.sh
(the TensorFlow op of smtrain.data.native and the record framer of smtrain.data.frames)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..config.settings import NATIVE_PIPES

__all__ = ["LIBRARY_DIR_ENV", "NATIVE_ENV", "library_dir", "native_wanted"]

NATIVE_ENV = NATIVE_PIPES.variable  # "0": Python only (the reader and the demultiplexer's framing)
LIBRARY_DIR_ENV = "SMTRAIN_NATIVE_DIR"  # another folder than <venv>/lib/smtrain-native (tests)


def library_dir() -> Path:
    """Where the native libraries are: <venv>/lib/smtrain-native, or $SMTRAIN_NATIVE_DIR."""
    return Path(os.environ.get(LIBRARY_DIR_ENV) or Path(sys.prefix) / "lib" / "smtrain-native")


def native_wanted() -> bool:
    """False when SMTRAIN_NATIVE_PIPES=0 asks for the Python reader."""
    return os.environ.get(NATIVE_ENV, NATIVE_PIPES.default) != "0"
