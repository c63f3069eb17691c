"""Horovod's Keras API name by name, on Keras 3 (`import keras`) and on tf_keras (`tf.keras` under the image's
TF_USE_LEGACY_KERAS=1) side by side, each rank its own data: the behaviours Horovod's own Keras tests
check (test/parallel/test_tensorflow2_keras.py, test_tensorflow2_keras_process_sets.py), written anew for
both Kerases. Each case runs once per Keras and records what it found (weights, learning rates, values, the
error a refusal raised) with, where a number can be compared, what one process computes on the union of the
ranks' batches; tests/process/test_horovod_keras_api.py judges them. The findings go to
`<SM_OUTPUT_DATA_DIR>/api-<rank>.json` after every case, so that one case that breaks leaves the others'.

--only NAME[,NAME]: run those cases alone (for a quick look at one)."""
import argparse
import json
import os
import time
import traceback

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # the image's setting: tf.keras is tf_keras, `keras` Keras 3
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import horovod.keras as hvd_k  # noqa: E402
import horovod.tensorflow as htf  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--only", default="")
args, _ = parser.parse_known_args()
hvd.init(process_sets="dynamic")
RANK, SIZE = hvd.rank(), hvd.size()
KERAS = {"keras3": keras, "tf_keras": tf.keras}
STEPS, BATCH, LR = 4, 8, 0.05
OUT = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"api-{RANK}.json")
CASES = {}
found: dict = {}


def case(*flavours):
    """A case, run once for each Keras named (both by default)."""
    def register(function):
        CASES[function.__name__.replace("_", "-")] = (function, flavours or tuple(KERAS))
        return function
    return register


# -- data, models and the one-process reference ---------------------------------------------------------
def data(rank, kind="dense", n=STEPS * BATCH):
    rng = np.random.default_rng(1000 + rank)
    if kind == "embedding":
        ids = rng.integers(0, 20, size=(n, 3))
        return ids, (ids.sum(axis=1, keepdims=True) / 30.0 + 0.25 * rank).astype("float32")
    x = rng.normal(size=(n, 4)).astype("float32")
    return x, (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32") + 0.25 * rank).astype("float32")


def union(kind="dense"):
    """Step i's batch of one process: every rank's batch i together."""
    parts = [data(r, kind) for r in range(SIZE)]
    x = np.concatenate([np.concatenate([p[0][i * BATCH:(i + 1) * BATCH] for p in parts]) for i in range(STEPS)])
    y = np.concatenate([np.concatenate([p[1][i * BATCH:(i + 1) * BATCH] for p in parts]) for i in range(STEPS)])
    return x, y


def new_model(K, kind="dense", norm=None):
    """Different first weights on every rank (until a broadcast makes them rank 0's)."""
    (keras.utils.set_random_seed if K is keras else tf.keras.utils.set_random_seed)(7 + RANK)
    if kind == "embedding":
        return K.Sequential([K.Input((3,), dtype="int32"), K.layers.Embedding(20, 4), K.layers.Flatten(),
                             K.layers.Dense(1)])
    # two normalisation layers, as real models have: each must take a name of its own and its own statistics
    middle = [norm(), K.layers.Dense(6, activation="tanh"), norm()] if norm is not None else []
    return K.Sequential([K.Input((4,)), K.layers.Dense(8, activation="tanh"), *middle, K.layers.Dense(1)])


def weights(model):
    return [np.asarray(w).tolist() for w in model.get_weights()]


def synced(K, kind="dense", norm=None):
    model = new_model(K, kind, norm)
    htf.broadcast_variables(model.variables, root_rank=0)
    return model, model.get_weights()


def batches(x, y):
    return [(x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]) for i in range(STEPS)]


def mse(model, xb, yb):
    return tf.reduce_mean(tf.square(model(xb, training=True) - yb))


def reference(K, first, kind="dense", lr=LR, passes=1, average_passes=False, norm=None, batch=BATCH * SIZE):
    """One process on the union of the ranks' batches: SGD, the passes' gradients summed (Horovod's
    default) or averaged, applied every `passes` batches."""
    model = new_model(K, kind, norm)
    model.set_weights(first)
    optimizer, pending = K.optimizers.SGD(lr), None
    x, y = union(kind)
    for i in range(len(x) // batch):
        with tf.GradientTape() as tape:
            loss = mse(model, x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch])
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]
        pending = grads if pending is None else [a + g for a, g in zip(pending, grads)]
        if (i + 1) % passes == 0:
            optimizer.apply_gradients(zip([g / passes if average_passes else g for g in pending],
                                          model.trainable_variables))
            pending = None
    return weights(model)


def train(K, model, optimizer, mode, kind="dense", tape_options=None):
    """This rank's batches through `optimizer`: model.fit, train_on_batch, or a custom loop in a tf.function
    ("loop") or eager ("eager"), with its own tape or Horovod's DistributedGradientTape (`tape_options`)."""
    x, y = data(RANK, kind)
    if mode == "fit":
        model.compile(loss="mse", optimizer=optimizer)
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    elif mode == "train_on_batch":
        model.compile(loss="mse", optimizer=optimizer)
        for xb, yb in batches(x, y):
            model.train_on_batch(xb, yb)
    else:
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = mse(model, xb, yb)
            if tape_options is not None:
                tape = htf.DistributedGradientTape(tape, **tape_options)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

        run = step if mode == "eager" else tf.function(step)
        for xb, yb in batches(x, y):
            run(xb, yb)
    return weights(model)


def error(function):
    """What `function` raised, as `Class: message`."""
    try:
        function()
    except Exception as e:  # noqa: BLE001 - the refusal is what the case records
        return f"{type(e).__name__}: {e}"
    return None


# -- hvd.DistributedOptimizer ----------------------------------------------------------------------------
def optimizer_case(flavour, mode="fit", kind="dense", passes=1, average_passes=False, scale=1.0, **options):
    K = KERAS[flavour]
    model, first = synced(K, kind)
    if passes > 1:
        options.update(backward_passes_per_step=passes, average_aggregated_gradients=average_passes)
    optimizer = hvd.DistributedOptimizer(K.optimizers.SGD(LR), **options)
    return {"weights": train(K, model, optimizer, mode, kind), "optimizer": type(optimizer).__name__,
            "expected": reference(K, first, kind, LR * scale, passes, average_passes)}


@case()
def optimizer_fit(flavour):
    return optimizer_case(flavour)


@case()
def optimizer_train_on_batch(flavour):
    return optimizer_case(flavour, mode="train_on_batch")


@case()
def optimizer_custom_loop(flavour):
    return optimizer_case(flavour, mode="loop")


@case()
def optimizer_eager_loop(flavour):
    return optimizer_case(flavour, mode="eager")


@case()
def optimizer_sum(flavour):
    return optimizer_case(flavour, op=hvd.Sum, scale=SIZE)


@case()
def optimizer_predivide(flavour):
    return optimizer_case(flavour, gradient_predivide_factor=2.0)


@case()
def optimizer_fp16_compression(flavour):
    return optimizer_case(flavour, compression=hvd.Compression.fp16)


@case()
def optimizer_backward_passes(flavour):
    return optimizer_case(flavour, passes=2)


@case()
def optimizer_backward_passes_averaged(flavour):
    return optimizer_case(flavour, passes=2, average_passes=True)


@case()
def optimizer_sparse(flavour):
    return optimizer_case(flavour, kind="embedding")


@case()
def optimizer_sparse_as_dense_with_passes(flavour):
    return optimizer_case(flavour, mode="loop", kind="embedding", passes=2, sparse_as_dense=True)


def recording(K, assign=False):
    """An optimizer whose update adds the gradient it is given to the variable (Horovod's tests' kind), or
    with `assign` makes the variable that gradient."""
    def update(variable, gradient):
        variable.assign(gradient) if assign else variable.assign_add(gradient)

    if K is keras:
        class Recording(keras.optimizers.Optimizer):
            def update_step(self, gradient, variable, learning_rate):
                update(variable, gradient)

        return Recording(learning_rate=0.1, name="recording")

    class TfKerasRecording(tf.keras.optimizers.Optimizer):
        def __init__(self, name="recording", **kwargs):  # as Horovod's own tests make theirs
            super().__init__(name=name, **kwargs)
            self._learning_rate = self._build_learning_rate(0.1)

        def update_step(self, gradient, variable):
            update(variable, gradient)

    return TfKerasRecording()


def _variable(K, value):
    return keras.Variable(value) if K is keras else tf.Variable(value)


@case()
def optimizer_aggregation_with_local_variables(flavour):
    """Horovod's gradient aggregation test with local variables: 8 pairs (x, y), the first 4 registered
    local, loss x - (rank+1) * y[0] (a gathered, sparse gradient for y), 4 backward passes, 10 steps."""
    K, out = KERAS[flavour], {}
    for averaged in (False, True):
        optimizer = hvd.DistributedOptimizer(recording(K), backward_passes_per_step=4,
                                             average_aggregated_gradients=averaged, sparse_as_dense=True)
        xs = [_variable(K, [0.0]) for _ in range(8)]
        ys = [_variable(K, [1.0, 2.0]) for _ in range(8)]
        for v in xs[:4] + ys[:4]:
            optimizer.register_local_var(v)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = tf.add_n([tf.reduce_sum(x - (RANK + 1.0) * tf.gather(y, [0])) for x, y in zip(xs, ys)])
            grads = tape.gradient(loss, xs + ys)
            optimizer.apply_gradients(zip(grads, xs + ys))

        trail = []
        for _ in range(10):
            step()
            trail.append({"x": [float(np.asarray(x)[0]) for x in xs], "y": [np.asarray(y).tolist() for y in ys],
                          "iterations": int(np.asarray(optimizer.iterations))})
        out["averaged" if averaged else "summed"] = trail
    return out


@case()
def optimizer_infinite_gradient_in_aggregation(flavour):
    """Horovod's: an infinite gradient in the first aggregation cycle (2 passes) leaves the second one finite.
    The optimizer makes the variable the gradient it applies."""
    K = KERAS[flavour]
    optimizer = hvd.DistributedOptimizer(recording(K, assign=True), backward_passes_per_step=2, sparse_as_dense=True)
    x, count = _variable(K, 0.0), tf.Variable(0)

    @tf.function
    def step():
        count.assign_add(1)
        with tf.GradientTape() as tape:
            loss = tf.cond(count > 2, lambda: x + 0.0, lambda: x * float("inf"))
        optimizer.apply_gradients(zip(tape.gradient(loss, [x]), [x]))

    applied = []
    for _ in range(4):
        step()
        applied.append(float(np.asarray(x)))
    return {"applied": applied}


@case()
def optimizer_process_set(flavour):
    """Horovod's process-set test: each rank's gradient is its rank; averaged over {0} alone, and over both."""
    K = KERAS[flavour]
    even = hvd.add_process_set([0])
    try:
        out = {}
        for name, process_set in (("even", even), ("global", hvd.global_process_set)):
            variable = _variable(K, [0.0])
            optimizer = hvd.DistributedOptimizer(recording(K), process_set=process_set)
            optimizer.apply_gradients([(tf.constant([float(RANK)]), variable)])
            out[name] = float(np.asarray(variable)[0])
        out["included"] = even.included()
        return out
    finally:
        hvd.remove_process_set(even)


@case()
def optimizer_from_config(flavour):
    """Horovod's: the wrapper's config makes the same wrapper, from the instance and from the class."""
    optimizer = hvd.DistributedOptimizer(KERAS[flavour].optimizers.Adam())
    config = optimizer.get_config()
    copies = [optimizer.from_config(config), optimizer.__class__.from_config(config)]
    return {"same": [c.get_config() == config for c in copies]}


@case()
def partial_distributed_optimizer(flavour):
    """horovod.keras.PartialDistributedOptimizer with 0, 1 and 2 local layers, one update of each rank's own
    gradients: a local layer's with its rank's own, scaled by 1/size (Horovod's default), the others' with
    their average (the test computes both from every rank's first weights and gradients)."""
    K, out = KERAS[flavour], {}
    for local in range(3):
        model, first = synced(K)
        optimizer = hvd_k.PartialDistributedOptimizer(K.optimizers.SGD(LR), local_layers=model.layers[:local])
        x, y = data(RANK)
        with tf.GradientTape() as tape:
            loss = mse(model, x[:BATCH], y[:BATCH])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        out[str(local)] = {"weights": weights(model), "first": [w.tolist() for w in first],
                           "grads": [np.asarray(g).tolist() for g in grads],
                           "local": sum(len(layer.trainable_weights) for layer in model.layers[:local])}
    return out


# -- Horovod's tapes beside its optimizer ----------------------------------------------------------------
@case()
def tape_and_optimizer(flavour):
    """The same first weights and batches through a DistributedGradientTape with a plain optimizer, a plain
    tape with hvd.DistributedOptimizer, and both: one reduction whatever the combination and its op.
    Horovod's Keras optimizer takes Average and Sum alone: beside an Adasum tape it averages."""
    K, out = KERAS[flavour], {}
    ops = {"average": {"op": htf.Average}, "sum": {"op": htf.Sum}, "adasum": {"op": htf.Adasum},
           "predivide": {"op": htf.Average, "gradient_predivide_factor": 2.0}}
    for name, options in ops.items():
        runs: dict = {}
        given = options if name != "adasum" else {"op": htf.Average}  # what the optimizer is given
        for how in ("tape", "optimizer", "both"):
            model, first = synced(K)
            optimizer = K.optimizers.SGD(LR)
            if how != "tape":
                try:
                    optimizer = hvd.DistributedOptimizer(optimizer, **(options if how == "optimizer" else given))
                except ValueError as e:  # Horovod's own refusal
                    runs[how] = f"ValueError: {e}"
                    continue
            runs[how] = train(K, model, optimizer, "loop", tape_options=options if how != "optimizer" else None)
        runs["union"] = reference(K, first, lr=LR * (SIZE if name == "sum" else 1))
        out[name] = runs
    return out


@case("tf_keras")
def tape_and_optimizer_with_backward_passes(flavour):
    """tf_keras: an optimizer that aggregates passes, given gradients a tape reduced: refused."""
    model, _ = synced(tf.keras)
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(LR), backward_passes_per_step=2)
    return {"error": error(lambda: train(tf.keras, model, optimizer, "loop", tape_options={}))}


@case()
def partial_distributed_gradient_tape(flavour):
    """horovod.tensorflow.PartialDistributedGradientTape with the first layer local."""
    K = KERAS[flavour]
    model, _ = synced(K)
    x, y = data(RANK)
    with tf.GradientTape() as plain:
        loss = mse(model, x[:BATCH], y[:BATCH])
    own = plain.gradient(loss, model.trainable_variables)
    with tf.GradientTape() as tape:
        loss = mse(model, x[:BATCH], y[:BATCH])
    grads = htf.PartialDistributedGradientTape(tape, local_layers=model.layers[:1]).gradient(
        loss, model.trainable_variables)
    return {"grads": [np.asarray(g).tolist() for g in grads], "own": [np.asarray(g).tolist() for g in own],
            "local": len(model.layers[0].trainable_weights)}


# -- collectives, broadcasts, loading --------------------------------------------------------------------
@case()
def collectives(flavour):
    """allreduce, allgather, broadcast and reducescatter of both APIs on a Keras variable and a Keras tensor."""
    K = KERAS[flavour]
    variable = _variable(K, [[float(RANK), 1.0], [2.0, float(RANK)]])
    tensor = keras.ops.convert_to_tensor(variable) if K is keras else tf.convert_to_tensor(variable)
    out = {}
    for name, api in (("tensorflow.keras", hvd), ("keras", hvd_k)):
        for what, value in (("variable", variable), ("tensor", tensor)):
            out[f"{name}/{what}"] = {
                "allreduce": np.asarray(api.allreduce(value)).tolist(),
                "allgather": np.asarray(api.allgather(value)).tolist(),
                "broadcast": np.asarray(api.broadcast(value, root_rank=1)).tolist(),
                "reducescatter": np.asarray(api.reducescatter(value, op=htf.Sum)).tolist()}
    return out


@case()
def broadcast_global_variables(flavour):
    """TensorFlow 2 is eager: Horovod refuses and names hvd.broadcast_variables (tf_keras and Keras 3 alike)."""
    new_model(KERAS[flavour])
    return {name: error(lambda api=api: api.broadcast_global_variables(0)) for name, api in
            (("tensorflow.keras", hvd), ("keras", hvd_k))}


@case()
def broadcast_callback_local_variables(flavour):
    """Horovod's: non-trainable layers of each rank's value; the first layer's variables local, the rest
    broadcast from the last rank by BroadcastGlobalVariablesCallback."""
    K, out = KERAS[flavour], {}
    for name, api in (("tensorflow.keras", hvd), ("keras", hvd_k)):
        constant = K.initializers.Constant(float(RANK))
        model = K.Sequential([K.Input((3,)), *[K.layers.Dense(3, kernel_initializer=constant,
                                                               bias_initializer=constant, trainable=False)
                                                for _ in range(3)]])
        model.compile(loss="mse", optimizer=K.optimizers.SGD(LR))
        local = list(model.layers[0].variables)
        callback = api.callbacks.BroadcastGlobalVariablesCallback(root_rank=SIZE - 1, local_variables=local)
        model.fit(np.ones((2, 3), "float32"), np.ones((2, 3), "float32"), callbacks=[callback], verbose=0)
        out[name] = {"local": [np.asarray(v).tolist() for v in local],
                     "rest": [np.asarray(v).tolist() for layer in model.layers[1:] for v in layer.variables]}
    out["refused"] = error(lambda: hvd.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=["kernel"]))
    return out


@case()
def callbacks(flavour):
    """Different first weights made equal by the broadcast callback, the averaged losses, the warmup's and the
    schedule's learning rates (batch by batch in epoch 0), BestModelCheckpoint's model and hvd.load_model."""
    K = KERAS[flavour]
    out = {}
    for name, api in (("tensorflow.keras", hvd), ("keras", hvd_k)):
        model = new_model(K)
        rates: dict = {"warmup": [], "epochs": []}

        class Rates(K.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if not rates["epochs"]:
                    rates["warmup"].append(_lr(self.model.optimizer))

            def on_epoch_end(self, epoch, logs=None):
                rates["epochs"].append(_lr(self.model.optimizer))

        best = os.path.join(os.environ["SM_MODEL_DIR"], f"best-{flavour}-{RANK}" + (".keras" if K is keras else ".h5"))
        checks = [api.callbacks.BroadcastGlobalVariablesCallback(0), api.callbacks.MetricAverageCallback(),
                  api.callbacks.LearningRateWarmupCallback(initial_lr=LR, warmup_epochs=1, steps_per_epoch=STEPS,
                                                           verbose=0),
                  api.callbacks.LearningRateScheduleCallback(initial_lr=LR, start_epoch=1, multiplier=0.5), Rates()]
        if hasattr(api.callbacks, "BestModelCheckpoint"):  # horovod.tensorflow.keras's alone
            checkpoint = api.callbacks.BestModelCheckpoint(monitor="loss")
            checkpoint.filepath = best
            checks.append(checkpoint)
        model.compile(loss="mse", optimizer=api.DistributedOptimizer(K.optimizers.SGD(LR)))
        x, y = data(RANK)
        history = model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0, shuffle=False, callbacks=checks)
        out[name] = {"weights": weights(model), "losses": [float(v) for v in history.history["loss"]], **rates}
        if os.path.exists(best):
            loaded = api.load_model(best)
            out[name]["loaded"] = {"optimizer": type(loaded.optimizer).__name__,
                                   "iterations": int(np.asarray(loaded.optimizer.iterations)),
                                   "weights": weights(loaded)}
    return out


def _lr(optimizer):
    rate = getattr(optimizer, "learning_rate", None)
    return float(np.asarray(rate if rate is not None else optimizer.lr))


@case()
def learning_rate_schedule_ranges(flavour):
    """Horovod's schedule test: warmup over epochs 0-1, x0.1 over 2-3, x0.01 over 4-5, x epoch over 6-7."""
    K = KERAS[flavour]
    initial = 0.1 * SIZE
    model = new_model(K)
    seen = []

    class Rates(K.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(_lr(self.model.optimizer))

    model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(K.optimizers.Adam()))
    x, y = data(RANK)
    model.fit(x, y, batch_size=BATCH, epochs=8, verbose=0, shuffle=False, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=initial, warmup_epochs=2, verbose=0),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial, multiplier=1e-1, start_epoch=2, end_epoch=4),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial, multiplier=1e-2, start_epoch=4, end_epoch=6),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial, multiplier=lambda epoch: epoch, start_epoch=6,
                                                   end_epoch=8),
        Rates()])
    return {"initial": initial, "epochs": seen}


@case()
def load_model(flavour):
    """A model rank 0 saved, loaded by hvd.load_model on every rank: its optimizer a distributed one with the
    saved state, and training on from there averages."""
    K = KERAS[flavour]
    model, _ = synced(K)
    model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(K.optimizers.Adam(LR)))
    x, y = data(RANK)
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    path = os.path.join(os.environ["SM_MODEL_DIR"], "saved" + (".keras" if K is keras else ".h5"))
    if RANK == 0:
        model.save(path)
    htf.allreduce(tf.constant(0.0), name=f"saved-{flavour}")  # every rank waits for the file
    loaded = hvd.load_model(path)
    state = {"optimizer": type(loaded.optimizer).__name__, "iterations": int(np.asarray(loaded.optimizer.iterations)),
             "same_weights": all(np.array_equal(a, b) for a, b in zip(loaded.get_weights(), model.get_weights()))}
    loaded.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    return {**state, "after": weights(loaded)}


# -- elastic ---------------------------------------------------------------------------------------------
@case()
def elastic_state(flavour):
    """Horovod's elastic state test: sync makes rank 0's weights, batch and epoch everyone's; restore goes
    back to them; commit makes the new ones the ones restore goes back to."""
    K = KERAS[flavour]
    v = 1.0 if RANK == 0 else 2.0
    model = K.Sequential([K.Input((2,)), K.layers.Dense(2, activation="softmax")])
    model.set_weights([np.full((2, 2), v, "float32"), np.full((2,), v, "float32")])
    other = [np.array([[1.0, 2.0], [3.0, 4.0]], "float32"), np.zeros(2, "float32")]
    state = hvd.elastic.KerasState(model, K.optimizers.Adam(0.001 * SIZE), batch=20 + RANK, epoch=10 + RANK)
    state.sync()
    out = {"synced": weights(model), "synced_counters": [state.batch, state.epoch]}
    model.set_weights(other)
    state.batch, state.epoch = 21, 11
    state.restore()
    out.update(restored=weights(model), restored_counters=[state.batch, state.epoch])
    model.set_weights(other)
    state.batch, state.epoch = 21, 11
    state.commit()
    state.restore()
    out.update(committed=weights(model), committed_counters=[state.batch, state.epoch])
    return out


@case()
def elastic_callbacks(flavour):
    """fit with CommitStateCallback, UpdateBatchStateCallback and UpdateEpochStateCallback, then hvd.elastic.run
    (under mpirun: the function runs once, after a sync)."""
    K = KERAS[flavour]
    model, _ = synced(K)
    model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(K.optimizers.SGD(LR)))
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    x, y = data(RANK)
    model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, shuffle=False, callbacks=[  # the commit last, as Horovod says
        hvd.elastic.UpdateEpochStateCallback(state), hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.CommitStateCallback(state, batches_per_commit=2)])
    trained = weights(model)
    model.set_weights([np.zeros_like(w) for w in model.get_weights()])
    state.epoch = state.batch = 99
    state.restore()
    ran = hvd.elastic.run(lambda s: ("ran", s.epoch))(state)
    return {"epoch": state.epoch, "batch": state.batch, "restored": weights(model) == trained, "run": list(ran)}


# -- SyncBatchNormalization ------------------------------------------------------------------------------
def _sync_norm(K):
    if K is keras:
        from smtrain.horovod_keras import SyncBatchNormalization
        return SyncBatchNormalization
    return htf.SyncBatchNormalization


@case()
def sync_batch_normalization(flavour):
    """A model with SyncBatchNormalization against one process with BatchNormalization on the union of the
    ranks' batches: its weights and moving statistics, and its inference on the same input, under fit and a
    custom loop."""
    K, out = KERAS[flavour], {}
    x, _ = data(0)
    for mode in ("fit", "loop"):
        model, first = synced(K, norm=_sync_norm(K))
        trained = train(K, model, hvd.DistributedOptimizer(K.optimizers.SGD(LR)), mode)
        out[mode] = {"weights": trained, "expected": reference(K, first, norm=K.layers.BatchNormalization),
                     "inference": np.asarray(model(x[:4], training=False)).tolist(),
                     "norms": [(type(layer).__name__, layer.name) for layer in model.layers[1::2]]}
    plain = new_model(K, norm=K.layers.BatchNormalization)
    plain.set_weights([np.array(w, "float32") for w in out["loop"]["expected"]])
    out["expected_inference"] = np.asarray(plain(x[:4], training=False)).tolist()
    return out


@case("keras3")
def sync_batch_normalization_uneven_batches(flavour):
    """Keras 3: ranks with batches of 12 and 4 rows normalise as one batch of all of them."""
    from smtrain.horovod_keras import SyncBatchNormalization

    rows = 12 if RANK == 0 else 4
    x = data(RANK, n=rows)[0]
    everyone = np.concatenate([data(r, n=12 if r == 0 else 4)[0] for r in range(SIZE)])
    layer, plain = SyncBatchNormalization(momentum=0.5), keras.layers.BatchNormalization(momentum=0.5)
    layer.build((None, 4))
    mine = np.asarray(tf.function(lambda t: layer(t, training=True))(x))
    theirs = np.asarray(plain(everyone, training=True))
    offset = 0 if RANK == 0 else 12
    return {"outputs": mine.tolist(), "expected": theirs[offset:offset + rows].tolist(),
            "moving": [np.asarray(w).tolist() for w in layer.weights[2:]],
            "expected_moving": [np.asarray(w).tolist() for w in plain.weights[2:]],
            "saved": keras.saving.serialize_keras_object(layer)["registered_name"]}


# -- Keras 3's loss scaling and XLA ------------------------------------------------------------------------
@case("keras3")
def loss_scaling_and_xla(flavour):
    """Loss scaling goes inside hvd.DistributedOptimizer (made so under mixed_float16) and trains; a
    LossScaleOptimizer around it, and jit_compile=True, are refused with the fix."""
    def fit(optimizer, **compile_options):
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(loss="mse", optimizer=optimizer, **compile_options)
        # long enough for the loss scale's first overflows, each of which skips a step
        return model, model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=30, verbose=0)

    out = {"outside": error(lambda: fit(keras.optimizers.LossScaleOptimizer(
        hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))))),
           "xla": error(lambda: fit(hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), jit_compile=True))}
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
        model, history = fit(optimizer)
        out["inside"] = {"optimizer": type(model.optimizer).__name__, "same": model.optimizer is optimizer,
                         "learned": history.history["loss"][-1] < history.history["loss"][0]}
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return out


@case()
def facts(flavour):
    """The process facts every Horovod API re-exports, and a timeline started and stopped (the job sets
    HOROVOD_TIMELINE=DYNAMIC, as Horovod asks)."""
    timeline = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"timeline-{flavour}.json")
    hvd.start_timeline(timeline)
    htf.allreduce(tf.constant(1.0), name=f"timeline-{flavour}")
    hvd.stop_timeline()
    return {"rank": hvd.rank(), "size": hvd.size(), "local": [hvd.local_rank(), hvd.local_size()],
            "cross": [hvd.cross_rank(), hvd.cross_size()], "initialized": hvd.is_initialized(),
            "mpi": [hvd.mpi_built(), hvd.mpi_enabled()], "timeline": os.path.exists(timeline)}


def main():
    chosen = [name for name in CASES if not args.only or name in args.only.split(",")]
    for name in chosen:
        function, flavours = CASES[name]
        for flavour in flavours:
            htf.allreduce(tf.constant(0.0), name=f"case-{name}-{flavour}")  # every rank at the same case
            started = time.monotonic()
            try:
                found[f"{name}/{flavour}"] = {**function(flavour), "seconds": round(time.monotonic() - started, 2)}
            except Exception as e:  # noqa: BLE001 - the test names the case and shows this
                found[f"{name}/{flavour}"] = {"failed": f"{type(e).__name__}: {e}",
                                              "traceback": traceback.format_exc()[-3000:]}
            with open(OUT + ".tmp", "w") as f:
                json.dump(found, f)
            os.replace(OUT + ".tmp", OUT)


main()
