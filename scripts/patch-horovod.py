"""Make Horovod's TensorFlow Keras API work with the pinned TF 2.21, for tf_keras and Keras 3 alike.

Horovod 0.28.1 imports `from keras import backend as K` for TF >= 2.6. On TF 2.16+ the `keras`
package is Keras 3 whatever TF_USE_LEGACY_KERAS says, and Keras 3's backend has no `constant`,
`get_value` or `set_value`, so MetricAverageCallback and the learning-rate callbacks crash. With
this patch they use `tf.keras.backend`, which is tf_keras's under TF_USE_LEGACY_KERAS=1 (the
image's setting), i.e. the same Keras the user's model is built with.

Second, the learning-rate callbacks' momentum correction calls `set_value` on `optimizer.momentum`,
which Keras 2.11+ optimizers keep as a Python float traced into the train step: it crashed, and
changing it could not take effect anyway. The patch applies the correction only where momentum is
a variable (the legacy optimizers), as for optimizers without momentum.

Third, `horovod.keras` (the API of Horovod's Keras docs and of AWS's Horovod examples) imports the
standalone `keras` package, Keras 3, for its optimizer wrapper and its callbacks, so they failed on
tf_keras models (`'BroadcastGlobalVariablesCallback' object has no attribute
'_implements_train_batch_hooks'`). The patch binds it to `tf.keras`, as `horovod.tensorflow.keras`.

Fourth, the wrapper averages gradients only where it computes them (`fit`, `minimize`,
`get_gradients`): a custom loop that computes them with its own tape and calls the wrapper's
`apply_gradients` updated each rank with its own gradients, silently (2 ranks with different data
ended with different weights). The patch averages such gradients in `apply_gradients` (those that
came through the wrapper's own computation are not averaged twice).

Fifth, Keras 3 (`import keras`, beside tf_keras): Horovod hands what it is given of Keras 3 to this
product's `smtrain.horovod_keras` - `DistributedOptimizer` a Keras 3 optimizer, `load_model` a file
Keras 3 saved - and its collectives, callbacks and elastic state read Keras 3 variables through the
tf.Variable each holds (`DistributedGradientTape`, `broadcast_variables`, the broadcast callback's local
variables) and Keras 3 learning rates and optimizer variables as Keras 3 keeps them. The edits are
hooks of a few lines each; what they hand over is a module of its own, tested as such. Where an earlier
version of this script patched a file differently, the newer edit replaces its own older one.

Sixth, the rest of Horovod's Keras API on Keras 3: the broadcast callback's `local_variables` and the
partial optimizer's and tape's `local_layers` take Keras 3 variables and layers (Horovod checked for
tf.Variable and tf.keras layers); a `DistributedGradientTape`'s gradients are marked as reduced, so that a
distributed optimizer - Keras 3's, or tf_keras's under the fourth edit - applies them without reducing
them again (Sum twice doubled each step); and `SyncBatchNormalization`, where `tf.keras` is Keras 3, is
this product's Keras 3 layer (Horovod's passes tf_keras's `fused=False` and overrides tf_keras's
`_moments`); on tf_keras, Horovod's layer takes Keras's own unique names (it named every instance
`sync_batch_normalization`, so a second one in a Sequential or functional model was refused).

Idempotent and quick: scripts/setup.sh and the image run it after the stack is built (a step of its
own, so that a change here does not rebuild Horovod); it fails loudly if Horovod's source is not
what it expects, and checks that the patched modules import and bind tf_keras.

    python scripts/patch-horovod.py
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
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
KERAS3_IMPORTS = """import keras
import keras.backend as K
"""
TF_KERAS_IMPORTS = """from tensorflow import keras  # smtrain: tf.keras (tf_keras under TF_USE_LEGACY_KERAS=1), as horovod.tensorflow.keras
K = keras.backend
"""
KERAS3_CALLBACK_IMPORTS = """import keras
import tensorflow as tf
import keras.backend as K
"""
TF_KERAS_CALLBACK_IMPORTS = """import tensorflow as tf
from tensorflow import keras  # smtrain: tf.keras (tf_keras under TF_USE_LEGACY_KERAS=1), as horovod.tensorflow.keras
K = keras.backend
"""
KERAS3_ELASTIC_IMPORT = """
import keras

from horovod._keras import elastic as _impl
"""
TF_KERAS_ELASTIC_IMPORT = """
from tensorflow import keras  # smtrain: tf.keras, as horovod.tensorflow.keras

from horovod._keras import elastic as _impl
"""
OPTIMIZER_WRAPPER = """                                 scale_local_gradients=True):
    class _DistributedOptimizer(*optimizer.__class__.__bases__):
"""
OPTIMIZER_WRAPPER_REFUSING_KERAS3 = """                                 scale_local_gradients=True):
    if type(optimizer).__module__.split(".")[0] == "keras":  # smtrain: Keras 3 is not served
        raise ValueError(
            f"Horovod's Keras API in this image works with tf.keras (tf_keras), but the optimizer is a Keras 3 "
            f"{type(optimizer).__name__} (module {type(optimizer).__module__}): set TF_USE_LEGACY_KERAS=1 before "
            "TensorFlow is imported and build the model and optimizer with tf.keras, not `import keras`")
    class _DistributedOptimizer(*optimizer.__class__.__bases__):
"""
OPTIMIZER_WRAPPER_CHECKED_BY_MODULE = """                                 scale_local_gradients=True):
    if type(optimizer).__module__.split(".")[0] == "keras":  # smtrain: a Keras 3 optimizer, wrapped for Keras 3
        from smtrain.horovod_keras.optimizer import distributed_optimizer
        return distributed_optimizer(
            optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse, compression=compression,
            sparse_as_dense=sparse_as_dense, gradient_predivide_factor=gradient_predivide_factor, op=op,
            backward_passes_per_step=backward_passes_per_step,
            average_aggregated_gradients=average_aggregated_gradients, groups=groups, process_set=process_set,
            scale_local_gradients=scale_local_gradients)
    class _DistributedOptimizer(*optimizer.__class__.__bases__):
"""
OPTIMIZER_WRAPPER_CHECKED = """                                 scale_local_gradients=True):
    from smtrain.horovod_keras.keras3 import is_keras3  # smtrain: a Keras 3 optimizer (a script's own class too)
    if is_keras3(optimizer):
        from smtrain.horovod_keras.optimizer import distributed_optimizer
        return distributed_optimizer(
            optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse, compression=compression,
            sparse_as_dense=sparse_as_dense, gradient_predivide_factor=gradient_predivide_factor, op=op,
            backward_passes_per_step=backward_passes_per_step,
            average_aggregated_gradients=average_aggregated_gradients, groups=groups, process_set=process_set,
            scale_local_gradients=scale_local_gradients)
    class _DistributedOptimizer(*optimizer.__class__.__bases__):
"""
BROADCAST_VARIABLES = """        inplace: whether to perform in-place broadcasts
    \"\"\"
    if inplace:
"""
BROADCAST_VARIABLES_OF_KERAS3 = """        inplace: whether to perform in-place broadcasts
    \"\"\"
    from smtrain.horovod_keras.keras3 import tf_variables  # smtrain: a Keras 3 variable through its tf.Variable
    variables = tf_variables(variables)
    if inplace:
"""
LOCAL_VAR_OF_CALLBACK = """        self._local_vars.add(var.ref())

    def on_batch_end(self, batch, logs=None):
"""
LOCAL_VAR_OF_CALLBACK_KERAS3 = """        from smtrain.horovod_keras.keras3 import tf_variables  # smtrain: Keras 3 variables too
        self._local_vars.add(tf_variables([var])[0].ref())

    def on_batch_end(self, batch, logs=None):
"""
CALLBACK_BROADCAST = """                broadcast_vars = [var for var in self.model.variables if var.ref() not in self._local_vars]
                hvd.broadcast_variables(broadcast_vars,
                                        root_rank=self.root_rank)
                hvd.broadcast_variables(self.model.optimizer.variables(),
                                        root_rank=self.root_rank)
"""
CALLBACK_BROADCAST_KERAS3 = """                from smtrain.horovod_keras.keras3 import tf_variables  # smtrain: Keras 3 models too
                broadcast_vars = [var for var in tf_variables(self.model.variables) if var.ref() not in self._local_vars]
                hvd.broadcast_variables(broadcast_vars,
                                        root_rank=self.root_rank)
                optimizer_variables = self.model.optimizer.variables  # Keras 3: a list; tf_keras: a method
                hvd.broadcast_variables(optimizer_variables() if callable(optimizer_variables) else optimizer_variables,
                                        root_rank=self.root_rank)
"""
LOAD_MODEL = """    def wrap_optimizer(cls):
        return lambda **kwargs: DistributedOptimizer(cls(**kwargs), compression=compression)
    return _impl.load_model(keras, wrap_optimizer, filepath, custom_optimizers, custom_objects, legacy_opts)
"""
LOAD_MODEL_OF_KERAS3 = """    def wrap_optimizer(cls):
        return lambda **kwargs: DistributedOptimizer(cls(**kwargs), compression=compression)
    from smtrain.horovod_keras.saving import is_keras3_file  # smtrain: a model that Keras 3 saved
    if is_keras3_file(filepath):
        from smtrain.horovod_keras.saving import load_model as load_keras3_model
        return load_keras3_model(filepath, custom_optimizers, custom_objects, compression)
    return _impl.load_model(keras, wrap_optimizer, filepath, custom_optimizers, custom_objects, legacy_opts)
"""
ELASTIC_BROADCAST = """def _broadcast_model(model, optimizer, backend):
"""
ELASTIC_BROADCAST_WITH_HELPER = """def _smtrain_optimizer_variables(optimizer):  # smtrain: Keras 3 keeps them in a list, tf_keras behind a method
    variables = optimizer.variables
    return variables() if callable(variables) else variables


def _broadcast_model(model, optimizer, backend):
"""
ELASTIC_OPTIMIZER_VARIABLES = (  # horovod/tensorflow/elastic.py's four reads of them
    ("        broadcast_variables(optimizer.variables(), root_rank=0)\n",
     "        broadcast_variables(_smtrain_optimizer_variables(optimizer), root_rank=0)\n"),
    ("            self._saved_optimizer_state = [tf.identity(var) for var in self.optimizer.variables()]\n",
     "            self._saved_optimizer_state = [tf.identity(var) for var in _smtrain_optimizer_variables(self.optimizer)]\n"),
    ("[var.numpy() for var in self.optimizer.variables()] if _IS_TF2",
     "[var.numpy() for var in _smtrain_optimizer_variables(self.optimizer)] if _IS_TF2"),
    ("            for var, saved_var in zip(self.optimizer.variables(), self._saved_optimizer_state):\n",
     "            for var, saved_var in zip(_smtrain_optimizer_variables(self.optimizer), self._saved_optimizer_state):\n"),
)
TAPE_GRADIENT = """            gradients = super(self.__class__, self).gradient(target, sources, output_gradients)
"""
TAPE_GRADIENT_OF_KERAS3 = """            gradients = super(self.__class__, self).gradient(target, sources, output_gradients)
            from smtrain.horovod_keras.keras3 import tf_variables  # smtrain: Keras 3 variables, by their tf.Variable
            sources = tf_variables(sources)
"""
TAPE_LOCAL_SOURCE = """                self._local_sources.add(source.ref())
"""
TAPE_LOCAL_SOURCE_OF_KERAS3 = """                from smtrain.horovod_keras.keras3 import tf_variables  # smtrain: Keras 3 variables too
                self._local_sources.add(tf_variables([source])[0].ref())
"""
CALLBACK_LOCAL_VARIABLES = """        if local_variables is None:
            local_variables = []
        elif isinstance(local_variables, tf.Variable):
            local_variables = [local_variables]
        elif not all(isinstance(var, tf.Variable) for var in local_variables):
            raise ValueError("All local variables must be of tf.Variable type.")
"""
CALLBACK_LOCAL_VARIABLES_OF_KERAS3 = """        if local_variables is None:
            local_variables = []
        else:  # smtrain: tf.Variable and Keras 3 variables
            from smtrain.horovod_keras.keras3 import local_variables as _smtrain_local_variables
            local_variables = _smtrain_local_variables(local_variables, "BroadcastGlobalVariablesCallback")
"""
PARTIAL_LOCAL_LAYERS = """    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, tf.keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, tf.keras.layers.Layer) for layer in local_layers):
        raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
"""
PARTIAL_LOCAL_LAYERS_OF_KERAS3 = """    if local_layers is None:
        local_layers = []
    else:  # smtrain: tf.keras and Keras 3 layers
        from smtrain.horovod_keras.keras3 import local_layers as _smtrain_local_layers
        local_layers = _smtrain_local_layers(local_layers, "PartialDistributedOptimizer")
"""
PARTIAL_TAPE_LOCAL_LAYERS = PARTIAL_LOCAL_LAYERS.replace("\n    ", "\n        ").replace("    if local_layers", "        if local_layers", 1)
PARTIAL_TAPE_LOCAL_LAYERS_OF_KERAS3 = (PARTIAL_LOCAL_LAYERS_OF_KERAS3.replace("\n    ", "\n        ")
                                       .replace("    if local_layers", "        if local_layers", 1)
                                       .replace("PartialDistributedOptimizer", "PartialDistributedGradientTape"))
TAPE_RESULT = """                return [s2g[s.ref()] for s in sources]
"""
TAPE_RESULT_MARKED = """                from smtrain.horovod_keras.reduced import mark  # smtrain: reduced once, never again by an optimizer
                return mark([s2g[s.ref()] for s in sources])
"""
SYNC_BATCH_NORM_END = """    except AttributeError:
      pass
    return outputs
"""
SYNC_BATCH_NORM_END_AT_IMPORT = """    except AttributeError:
      pass
    return outputs


from smtrain.horovod_keras.keras3 import tf_keras_is_keras3 as _smtrain_tf_keras_is_keras3  # noqa: E402
if _smtrain_tf_keras_is_keras3():  # smtrain: tf.keras is Keras 3 (TF_USE_LEGACY_KERAS unset): Keras 3's layer
    from smtrain.horovod_keras.sync_batch_norm import sync_batch_normalization_class as _smtrain_sync_bn
    SyncBatchNormalization = _smtrain_sync_bn()  # noqa: F811
"""
SYNC_BATCH_NORM_END_OF_KERAS3 = """    except AttributeError:
      pass
    return outputs


def _smtrain_keras3_layer():
    \"\"\"smtrain: where tf.keras is Keras 3 (TF_USE_LEGACY_KERAS unset), Keras 3's layer; else None (and where
    smtrain is not there yet: the image's build patches Horovod before it installs smtrain).\"\"\"
    try:
        from smtrain.horovod_keras.keras3 import tf_keras_is_keras3
    except ImportError:
        return None
    if not tf_keras_is_keras3():
        return None
    from smtrain.horovod_keras.sync_batch_norm import sync_batch_normalization_class
    return sync_batch_normalization_class()


SyncBatchNormalization = _smtrain_keras3_layer() or SyncBatchNormalization  # noqa: F811
"""
SYNC_BATCH_NORM_NAME = """    if not kwargs.get('name', None):
      kwargs['name'] = 'sync_batch_normalization'
"""
SYNC_BATCH_NORM_NAME_OF_KERAS = """    # smtrain: Keras names it (sync_batch_normalization, then _1, _2 ...): one fixed name failed a second layer
"""
# (Horovod's line, the patched line, what an earlier version of this patch made of it)
LR_READS = (
    ("        old_lr = self.backend.get_value(self.model.optimizer.lr)\n",
     "        old_lr = _smtrain_lr().learning_rate(self.model.optimizer, self.backend)  # smtrain: Keras 3 too\n",
     "        old_lr = _smtrain_lr.learning_rate(self.model.optimizer, self.backend)  # smtrain: Keras 3 too\n"),
    ("        self.backend.set_value(self.model.optimizer.lr, new_lr)\n",
     "        _smtrain_lr().set_learning_rate(self.model.optimizer, self.backend, new_lr)  # smtrain: Keras 3 too\n",
     "        _smtrain_lr.set_learning_rate(self.model.optimizer, self.backend, new_lr)  # smtrain: Keras 3 too\n"),
    ("            self.initial_lr = self.backend.get_value(self.model.optimizer.lr)\n",
     "            self.initial_lr = _smtrain_lr().learning_rate(self.model.optimizer, self.backend)  # smtrain\n",
     "            self.initial_lr = _smtrain_lr.learning_rate(self.model.optimizer, self.backend)  # smtrain\n"),
    ("            logs['lr'] = self.backend.get_value(self.model.optimizer.lr)\n",
     "            logs['lr'] = _smtrain_lr().learning_rate(self.model.optimizer, self.backend)  # smtrain\n",
     "            logs['lr'] = _smtrain_lr.learning_rate(self.model.optimizer, self.backend)  # smtrain\n"),
    ("import horovod.tensorflow as hvd\nimport tensorflow as tf\n",
     "import horovod.tensorflow as hvd\nimport tensorflow as tf\n\n\n"
     "def _smtrain_lr():  # smtrain: Keras 3's and tf_keras's learning rates alike (imported when first used)\n"
     "    from smtrain.horovod_keras import learning_rate\n    return learning_rate\n",
     "import horovod.tensorflow as hvd\nimport tensorflow as tf\nfrom smtrain.horovod_keras import learning_rate as _smtrain_lr\n"),
)
DISTRIBUTED_OPTIMIZER_FACTORY = """def create_distributed_optimizer(keras, optimizer, name, device_dense, device_sparse,
"""
DISTRIBUTED_OPTIMIZER_FACTORY_WITH_EARLIER_HELPER = """def _smtrain_allreduced(optimizer, args, kwargs):
    \"\"\"smtrain: `apply_gradients`'s (args, kwargs) with the gradients averaged, as the optimizer's own
    compute_gradients would have (for a custom loop that computed them with its own tape).\"\"\"
    args, kwargs = list(args), dict(kwargs)
    pairs = list(args[0] if args else kwargs.pop("grads_and_vars"))
    if pairs:
        grads, weights = zip(*pairs)
        pairs = list(zip(optimizer._allreduce(grads, weights), weights))
    return tuple([pairs, *args[1:]]), kwargs


def create_distributed_optimizer(keras, optimizer, name, device_dense, device_sparse,
"""
DISTRIBUTED_OPTIMIZER_FACTORY_WITH_HELPER = """def _smtrain_allreduced(optimizer, args, kwargs):
    \"\"\"smtrain: `apply_gradients`'s (args, kwargs) with the gradients averaged, as the optimizer's own
    compute_gradients would have (for a custom loop that computed them with its own tape); those a
    DistributedGradientTape returned are reduced already and pass as they are.\"\"\"
    from smtrain.horovod_keras.reduced import marked
    args, kwargs = list(args), dict(kwargs)
    pairs = list(args[0] if args else kwargs.pop("grads_and_vars"))
    todo = [i for i, (grad, _) in enumerate(pairs) if not marked(grad)]
    if optimizer._agg_helper and len(todo) < len(pairs):
        raise ValueError("hvd.DistributedOptimizer(backward_passes_per_step>1) was given gradients that a "
                         "DistributedGradientTape reduced already: aggregate with one of them only - a plain "
                         "tf.GradientTape with this optimizer, or the tape with an optimizer that is not distributed")
    if todo:
        reduced = optimizer._allreduce([pairs[i][0] for i in todo], [pairs[i][1] for i in todo])
        for i, grad in zip(todo, reduced):
            pairs[i] = (grad, pairs[i][1])
    return tuple([pairs, *args[1:]]), kwargs


def create_distributed_optimizer(keras, optimizer, name, device_dense, device_sparse,
"""
APPLY_GRADIENTS = """        def apply_gradients(self, *args, **kwargs):
            if self._agg_helper:
"""
APPLY_GRADIENTS_AVERAGED = """        def apply_gradients(self, *args, **kwargs):
            if not self._aggregated_gradients:  # smtrain: a custom loop's own gradients are averaged here
                args, kwargs = _smtrain_allreduced(self, args, kwargs)
            self._aggregated_gradients = False  # smtrain: the next step brings new gradients
            if self._agg_helper:
"""


class Edit(NamedTuple):
    file: str
    original: str
    patched: str
    superseded: tuple[str, ...] = ()  # what an earlier version of this patch made of `original`


EDITS = (
    Edit("tensorflow/keras/__init__.py", BACKEND_IMPORT, BACKEND_OF_TF_KERAS),
    Edit("tensorflow/keras/callbacks.py", BACKEND_IMPORT, BACKEND_OF_TF_KERAS),
    Edit("_keras/callbacks.py", MOMENTUM_TEST, MOMENTUM_VARIABLE_TEST),
    Edit("keras/__init__.py", KERAS3_IMPORTS, TF_KERAS_IMPORTS),
    Edit("keras/callbacks.py", KERAS3_CALLBACK_IMPORTS, TF_KERAS_CALLBACK_IMPORTS),
    Edit("keras/elastic.py", KERAS3_ELASTIC_IMPORT, TF_KERAS_ELASTIC_IMPORT),
    Edit("_keras/__init__.py", OPTIMIZER_WRAPPER, OPTIMIZER_WRAPPER_CHECKED,
         (OPTIMIZER_WRAPPER_REFUSING_KERAS3, OPTIMIZER_WRAPPER_CHECKED_BY_MODULE)),
    Edit("_keras/__init__.py", DISTRIBUTED_OPTIMIZER_FACTORY, DISTRIBUTED_OPTIMIZER_FACTORY_WITH_HELPER,
         (DISTRIBUTED_OPTIMIZER_FACTORY_WITH_EARLIER_HELPER,)),
    Edit("_keras/__init__.py", APPLY_GRADIENTS, APPLY_GRADIENTS_AVERAGED),
    Edit("tensorflow/functions.py", BROADCAST_VARIABLES, BROADCAST_VARIABLES_OF_KERAS3),
    Edit("tensorflow/keras/__init__.py", LOAD_MODEL, LOAD_MODEL_OF_KERAS3),
    Edit("keras/__init__.py", LOAD_MODEL, LOAD_MODEL_OF_KERAS3),
    Edit("tensorflow/__init__.py", TAPE_GRADIENT, TAPE_GRADIENT_OF_KERAS3),
    Edit("tensorflow/__init__.py", TAPE_LOCAL_SOURCE, TAPE_LOCAL_SOURCE_OF_KERAS3),
    Edit("tensorflow/elastic.py", ELASTIC_BROADCAST, ELASTIC_BROADCAST_WITH_HELPER),
    *(Edit("tensorflow/elastic.py", original, patched) for original, patched in ELASTIC_OPTIMIZER_VARIABLES),
    Edit("_keras/callbacks.py", LOCAL_VAR_OF_CALLBACK, LOCAL_VAR_OF_CALLBACK_KERAS3),
    Edit("_keras/callbacks.py", CALLBACK_BROADCAST, CALLBACK_BROADCAST_KERAS3),
    *(Edit("_keras/callbacks.py", original, patched, (earlier,)) for original, patched, earlier in LR_READS),
    Edit("tensorflow/keras/callbacks.py", CALLBACK_LOCAL_VARIABLES, CALLBACK_LOCAL_VARIABLES_OF_KERAS3),
    Edit("keras/callbacks.py", CALLBACK_LOCAL_VARIABLES, CALLBACK_LOCAL_VARIABLES_OF_KERAS3),
    Edit("keras/__init__.py", PARTIAL_LOCAL_LAYERS, PARTIAL_LOCAL_LAYERS_OF_KERAS3),
    Edit("tensorflow/__init__.py", PARTIAL_TAPE_LOCAL_LAYERS, PARTIAL_TAPE_LOCAL_LAYERS_OF_KERAS3),
    Edit("tensorflow/__init__.py", TAPE_RESULT, TAPE_RESULT_MARKED),
    Edit("tensorflow/sync_batch_norm.py", SYNC_BATCH_NORM_END, SYNC_BATCH_NORM_END_OF_KERAS3,
         (SYNC_BATCH_NORM_END_AT_IMPORT,)),
    Edit("tensorflow/sync_batch_norm.py", SYNC_BATCH_NORM_NAME, SYNC_BATCH_NORM_NAME_OF_KERAS),
)

CHECK = """
import horovod.keras.callbacks
import horovod.tensorflow.keras.callbacks
for api in (horovod.keras.callbacks, horovod.tensorflow.keras.callbacks):
    assert api.K.__name__.startswith("tf_keras"), (api.__name__, api.K)
    assert api.keras.callbacks.Callback.__module__.startswith("tf_keras"), api.keras.callbacks.Callback
"""


def patch(root: pathlib.Path) -> list[str]:
    """Applies EDITS to Horovod's source under `root`; returns what it did to each file."""
    done = []
    for edit in EDITS:
        path = root / edit.file
        text = path.read_text()
        if edit.patched in text:
            done.append(f"{edit.file}: already patched")
            continue
        earlier = [old for old in edit.superseded if text.count(old) == 1]
        if earlier:  # patched by an earlier version of this script: brought up to date
            path.write_text(text.replace(earlier[0], edit.patched))
            done.append(f"{edit.file}: patched (replacing an earlier patch)")
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
    # In a fresh interpreter with the image's setting: the patched modules import and bind tf_keras.
    subprocess.run([sys.executable, "-c", CHECK], check=True,
                   env={**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})


if __name__ == "__main__":
    main()
