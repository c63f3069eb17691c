"""Make Horovod's TensorFlow Keras API work with the pinned TF 2.18 and tf_keras.

Horovod 0.28.1 imports `from keras import backend as K` for TF >= 2.6. On TF 2.16+ the `keras`
package is Keras 3 whatever TF_USE_LEGACY_KERAS says, and Keras 3's backend has no `constant`,
`get_value` or `set_value`, so MetricAverageCallback and the learning-rate callbacks crash. With
this patch they use `tf.keras.backend`, which is tf_keras's under TF_USE_LEGACY_KERAS=1 (the
image's setting), i.e. the same Keras the user's model is built with.

Second, the learning-rate callbacks' momentum correction calls `set_value` on `optimizer.momentum`,
which Keras 2.11+ optimizers keep as a Python float traced into the train step: it crashed, and
changing it could not take effect anyway. The patch applies the correction only where momentum is
a variable (the legacy optimizers), as for optimizers without momentum.

Run by scripts/build-stack.sh
right after Horovod is installed; it fails loudly if Horovod's source is not what it expects.

    python scripts/patch-horovod.py
"""
from __future__ import annotations

import importlib.util
import pathlib
import sys
from typing import NamedTuple

BACKEND_IMPORT = """if is_version_greater_equal_than(tf.__version__, "2.6.0"):
    from keras import backend as K
else:
    from tensorflow.python.keras import backend as K
"""
BACKEND_OF_TF_KERAS = """K = keras.backend  # smtrain: the backend of tf.keras (tf_keras under TF_USE_LEGACY_KERAS=1)
"""
MOMENTUM_TEST = """        if hasattr(self.model.optimizer, 'momentum') and self.momentum_correction:
"""
MOMENTUM_VARIABLE_TEST = """        if self.momentum_correction and hasattr(getattr(self.model.optimizer, 'momentum', None), 'dtype'):  # smtrain
"""


class Edit(NamedTuple):
    file: str
    original: str
    patched: str


EDITS = (
    Edit("tensorflow/keras/__init__.py", BACKEND_IMPORT, BACKEND_OF_TF_KERAS),
    Edit("tensorflow/keras/callbacks.py", BACKEND_IMPORT, BACKEND_OF_TF_KERAS),
    Edit("_keras/callbacks.py", MOMENTUM_TEST, MOMENTUM_VARIABLE_TEST),
)


def patch(root: pathlib.Path) -> list[str]:
    """Applies EDITS to Horovod's source under `root`; returns what it did to each file."""
    done = []
    for edit in EDITS:
        path = root / edit.file
        text = path.read_text()
        if edit.patched in text:
            done.append(f"{edit.file}: already patched")
            continue
        if text.count(edit.original) != 1:
            raise SystemExit(f"patch-horovod: {path} does not contain the Horovod 0.28.1 code it patches")
        path.write_text(text.replace(edit.original, edit.patched))
        done.append(f"{edit.file}: patched")
    return done


def main() -> None:
    spec = importlib.util.find_spec("horovod")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("patch-horovod: horovod is not installed in this Python")
    for line in patch(pathlib.Path(list(spec.submodule_search_locations)[0])):
        print(f"patch-horovod: {line}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
