"""Horovod's Keras API, every public name, on Keras 3 and on tf_keras side by side (the image's
TF_USE_LEGACY_KERAS=1), checked by the behaviours Horovod's own Keras tests check, written anew for both
Kerases: one run of tests/programs/hvd_keras_api.py through the real `train` with single-host MPI (2 ranks,
each its own data and first weights), whose findings each test here judges - against one process on the
union of the ranks' batches where a number can be compared. What serves Keras 3: smtrain.horovod_keras,
handed Keras 3 objects by the image's patch of Horovod (scripts/patch-horovod.py). docs/horovod-keras.md's Horovod
table lists every name with what it does on each Keras; `test_the_inventory_names_every_public_name_with_what_shows_it`
holds the table to Horovod's modules and to the cases here."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.harness import keras_api
from tests.harness.keras_api import FLAVOURS, assert_close, assert_same_on_every_rank, assert_trains_as_union
from tests.support import make_tree, run_train

REPO = Path(__file__).resolve().parent.parent.parent
IMAGE_ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"}  # as the image sets them
SIZE, STEPS, LR = 2, 4, 0.05
both = pytest.mark.parametrize("flavour", FLAVOURS)


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every case's findings on both ranks, from one job."""
    tree = make_tree(tmp_path_factory.mktemp("keras-api") / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"})
    shutil.copy(keras_api.PROGRAM, tree.code_dir / "train.py")
    env = tree.env(SM_SYSTEM_MONITOR="off", SM_FRAMEWORK_METRICS="off", SM_CONTROL_PORT="17320",
                   SM_STALL_TIMEOUT_SECONDS="240", HOROVOD_TIMELINE="DYNAMIC", **IMAGE_ENV)
    done = run_train(tree, env=env, timeout=900)
    files = sorted((tree.base / "output" / "data").glob("api-*.json"))
    assert done.returncode == 0 and len(files) == SIZE, done.stderr.decode()[-4000:]  # a rank failing late fails here
    return keras_api.read(files)


def case(found: list[dict[str, Any]], name: str, flavour: str) -> list[dict[str, Any]]:
    return keras_api.of(found, name, flavour)


# -- hvd.DistributedOptimizer ------------------------------------------------------------------------------
@both
@pytest.mark.parametrize("name,atol", [
    ("optimizer-fit", 2e-5), ("optimizer-train-on-batch", 2e-5), ("optimizer-custom-loop", 2e-5),
    ("optimizer-eager-loop", 2e-5),
    ("optimizer-sum", 2e-5), ("optimizer-predivide", 2e-5), ("optimizer-fp16-compression", 5e-3),
    ("optimizer-backward-passes", 2e-5), ("optimizer-backward-passes-averaged", 2e-5), ("optimizer-sparse", 2e-5),
    ("optimizer-sparse-as-dense-with-passes", 2e-5)])
def test_the_distributed_optimizer_trains_as_one_process_on_the_union_of_the_ranks_batches(
        found: list[dict[str, Any]], flavour: str, name: str, atol: float) -> None:
    """fit, train_on_batch and a custom loop (a tf.function, and eager); Sum (the union's learning rate times the ranks), a predivide
    factor, fp16 compression, backward passes summed (Horovod's default) and averaged, sparse gradients."""
    ranks = case(found, name, flavour)
    assert_trains_as_union(ranks, atol)
    if flavour == "keras3":
        assert ranks[0]["optimizer"] == "SGD"  # its own class's name: a saved model loads without Horovod


@both
def test_gradient_aggregation_with_local_variables_as_horovods_test_computes_it(
        found: list[dict[str, Any]], flavour: str) -> None:
    """8 pairs (x, y), the first 4 local, loss x - (rank+1) * y[0]; 4 backward passes, 10 steps: an update
    every 4th, the passes summed (or averaged), local gradients this rank's own over the ranks."""
    ranks = case(found, "optimizer-aggregation-with-local-variables", flavour)
    for rank, r in enumerate(ranks):
        for how, trail in r.items():
            if how == "seconds":
                continue
            for step, seen in enumerate(trail):
                updates = (step + 1) // 4
                passes = 1 if how == "averaged" else 4
                gx, gy = updates * passes * 1.0, updates * passes * -(SIZE + 1) / 2
                for i in range(8):
                    local = i < 4
                    assert seen["x"][i] == pytest.approx(gx / SIZE if local else gx), (rank, how, step, i)
                    own_y = gy / ((SIZE + 1) / 2) * (rank + 1) / SIZE
                    assert seen["y"][i] == pytest.approx([1.0 + (own_y if local else gy), 2.0]), (rank, how, step, i)
                # Keras 3 counts updates (its gradient accumulation's `iterations`), Horovod's tf_keras wrapper passes
                assert seen["iterations"] == (updates if flavour == "keras3" else step + 1)


@both
def test_an_infinite_gradient_in_one_aggregation_cycle_leaves_the_next_one_finite(
        found: list[dict[str, Any]], flavour: str) -> None:
    for r in case(found, "optimizer-infinite-gradient-in-aggregation", flavour):
        assert r["applied"][0] == 0.0 and math.isinf(r["applied"][1])  # the first update applies the infinity
        assert r["applied"][3] == 2.0  # the second: its 2 passes' gradients of 1, summed


@both
def test_a_process_set_reduces_over_its_members_alone(found: list[dict[str, Any]], flavour: str) -> None:
    """Each rank's gradient is its rank: over {0} rank 0 keeps its own, rank 1 (outside) its own; globally 0.5."""
    ranks = case(found, "optimizer-process-set", flavour)
    assert [(r["even"], r["global"], r["included"]) for r in ranks] == [(0.0, 0.5, True), (1.0, 0.5, False)]


@both
def test_the_distributed_optimizer_round_trips_through_its_config(found: list[dict[str, Any]], flavour: str) -> None:
    assert case(found, "optimizer-from-config", flavour)[0]["same"] == [True, True]


@both
def test_a_partial_distributed_optimizer_keeps_its_local_layers_gradients_on_each_rank(
        found: list[dict[str, Any]], flavour: str) -> None:
    """horovod.keras.PartialDistributedOptimizer, 0 to 2 local layers: those train on the rank's own gradient
    over the ranks, the rest on the average."""
    ranks = case(found, "partial-distributed-optimizer", flavour)
    for local in ("0", "1", "2"):
        runs = [r[local] for r in ranks]
        count = runs[0]["local"]
        assert count == 2 * int(local)  # a Dense layer's kernel and bias
        for rank, run in enumerate(runs):
            for i, (weight, first) in enumerate(zip(run["weights"], run["first"])):
                grads = [np.array(other["grads"][i]) for other in runs]
                grad = grads[rank] / SIZE if i < count else sum(grads) / SIZE
                np.testing.assert_allclose(weight, np.array(first) - LR * grad, rtol=0, atol=2e-6,
                                           err_msg=f"{local} local layer(s), rank {rank}, weight {i}")


# -- DistributedGradientTape beside the optimizer ------------------------------------------------------------
@both
@pytest.mark.parametrize("op", ["average", "sum", "predivide", "adasum"])
def test_a_distributed_tape_and_a_distributed_optimizer_together_reduce_once(
        found: list[dict[str, Any]], flavour: str, op: str) -> None:
    """Tape alone, optimizer alone, both: the same weights (Sum twice doubled each step); Average and Sum as
    one process on the union. Horovod's Keras optimizer refuses Adasum itself; beside an Adasum tape it
    applies the tape's reduction as it is."""
    ranks = [r[op] for r in case(found, "tape-and-optimizer", flavour)]
    assert_same_on_every_rank([r["both"] for r in ranks])
    assert_close(ranks[0]["both"], ranks[0]["tape"], 1e-6)
    if op == "adasum":
        assert "op currently only supports Average and Sum" in ranks[0]["optimizer"]
        return
    assert_close(ranks[0]["optimizer"], ranks[0]["tape"], 1e-6)
    assert_close(ranks[0]["both"], ranks[0]["union"], 2e-5)


def test_tf_keras_backward_passes_given_a_tapes_gradients_are_refused(found: list[dict[str, Any]]) -> None:
    error = case(found, "tape-and-optimizer-with-backward-passes", "tf_keras")[0]["error"]
    assert error.startswith("ValueError") and "DistributedGradientTape reduced already" in error, error


@both
def test_a_partial_distributed_tape_keeps_its_local_layers_gradients(found: list[dict[str, Any]], flavour: str) -> None:
    ranks = case(found, "partial-distributed-gradient-tape", flavour)
    count = ranks[0]["local"]
    for rank, r in enumerate(ranks):
        for i, grad in enumerate(r["grads"]):
            owns = [np.array(other["own"][i]) for other in ranks]
            expected = owns[rank] / SIZE if i < count else sum(owns) / SIZE
            np.testing.assert_allclose(grad, expected, rtol=0, atol=2e-6, err_msg=f"rank {rank}, gradient {i}")


# -- collectives, broadcasts, callbacks, loading ---------------------------------------------------------------
@both
def test_the_collectives_take_keras_variables_and_tensors(found: list[dict[str, Any]], flavour: str) -> None:
    """Rank r's value [[r, 1], [2, r]]: the average, both stacked, the last rank's, each rank its row of the sum."""
    ranks = case(found, "collectives", flavour)
    for rank, r in enumerate(ranks):
        for how in ("tensorflow.keras/variable", "tensorflow.keras/tensor", "keras/variable", "keras/tensor"):
            assert r[how] == {"allreduce": [[0.5, 1.0], [2.0, 0.5]],
                              "allgather": [[0.0, 1.0], [2.0, 0.0], [1.0, 1.0], [2.0, 1.0]],
                              "broadcast": [[1.0, 1.0], [2.0, 1.0]],
                              "reducescatter": [[[1.0, 2.0]], [[4.0, 1.0]]][rank]}, (rank, how)


@both
def test_broadcast_global_variables_is_refused_in_eager_tensorflow_with_the_way_instead(
        found: list[dict[str, Any]], flavour: str) -> None:
    for api, error in case(found, "broadcast-global-variables", flavour)[0].items():
        if api != "seconds":
            assert error.startswith("RuntimeError") and "hvd.broadcast_variables" in error, (api, error)


@both
def test_the_broadcast_callback_keeps_each_ranks_local_variables_and_broadcasts_the_rest(
        found: list[dict[str, Any]], flavour: str) -> None:
    """Horovod's: layers of each rank's own value, the first one's variables local, root the last rank."""
    ranks = case(found, "broadcast-callback-local-variables", flavour)
    for rank, r in enumerate(ranks):
        for api in ("tensorflow.keras", "keras"):
            assert {v for value in r[api]["local"] for v in np.ravel(value)} == {float(rank)}, (rank, api)
            assert {v for value in r[api]["rest"] for v in np.ravel(value)} == {float(SIZE - 1)}, (rank, api)
    assert "every local variable must be a tf.Variable or a keras.Variable, got str" in ranks[0]["refused"]


@both
def test_horovods_callbacks_broadcast_average_the_metrics_and_set_the_learning_rates(
        found: list[dict[str, Any]], flavour: str) -> None:
    """Different first weights made equal, the same averaged losses on every rank, the warmup's rate batch by
    batch from initial/size, then the schedule's; BestModelCheckpoint's model loaded by hvd.load_model."""
    ranks = case(found, "callbacks", flavour)
    for api in ("tensorflow.keras", "keras"):
        runs = [r[api] for r in ranks]
        assert_same_on_every_rank([r["weights"] for r in runs])
        assert len({tuple(r["losses"]) for r in runs}) == 1 and runs[0]["losses"][-1] < runs[0]["losses"][0]
        for r in runs:
            warmup = [LR / SIZE * ((b + 1) / STEPS * (SIZE - 1) + 1) for b in range(STEPS)]
            assert r["warmup"] == pytest.approx(warmup, rel=1e-6) and r["epochs"][1:] == pytest.approx([LR, LR / 2])
    loaded = ranks[0]["tensorflow.keras"]["loaded"]  # horovod.tensorflow.keras has BestModelCheckpoint
    assert loaded["optimizer"] == "SGD" and loaded["iterations"] == 3 * STEPS
    assert loaded["weights"] == ranks[0]["tensorflow.keras"]["weights"]


@both
def test_learning_rate_schedules_and_warmup_through_fit(found: list[dict[str, Any]], flavour: str) -> None:
    """Horovod's schedule test: warmup to initial over epochs 0-1, then a constant multiplier m from its start
    epoch s (initial * m ** (epoch - s): x0.1 from 2, x0.01 from 4) and a function of the epoch (x epoch)."""
    for r in case(found, "learning-rate-schedule-ranges", flavour):
        initial, rates = r["initial"], r["epochs"]
        assert len(rates) == 8 and all(rate <= initial * (1 + 1e-6) for rate in rates[:2])
        assert rates[2:] == pytest.approx([initial, initial * 0.1, initial, initial * 0.01, initial * 6, initial * 7],
                                          rel=1e-5)


@both
def test_load_model_gives_a_distributed_optimizer_with_its_state(found: list[dict[str, Any]], flavour: str) -> None:
    ranks = case(found, "load-model", flavour)
    for r in ranks:
        assert (r["optimizer"], r["iterations"], r["same_weights"]) == ("Adam", STEPS, True)
    assert_same_on_every_rank([r["after"] for r in ranks])  # trained on from there on different data: averaged


# -- elastic -----------------------------------------------------------------------------------------------
@both
def test_the_elastic_keras_state_syncs_restores_and_commits(found: list[dict[str, Any]], flavour: str) -> None:
    for r in case(found, "elastic-state", flavour):
        assert {v for w in r["synced"] for v in np.ravel(w)} == {1.0} and r["synced_counters"] == [20, 10]
        assert r["restored"] == r["synced"] and r["restored_counters"] == [20, 10]
        assert r["committed"] == [[[1.0, 2.0], [3.0, 4.0]], [0.0, 0.0]] and r["committed_counters"] == [21, 11]


@both
def test_the_elastic_callbacks_and_run(found: list[dict[str, Any]], flavour: str) -> None:
    """Epochs and batches counted into the state, a commit every 2 batches; under mpirun hvd.elastic.run runs
    the function once."""
    for r in case(found, "elastic-callbacks", flavour):
        assert (r["epoch"], r["batch"], r["restored"], r["run"]) == (2, 0, True, ["ran", 2])


# -- SyncBatchNormalization ------------------------------------------------------------------------------------
@both
def test_sync_batch_normalization_normalises_as_one_batch_of_every_ranks_batch(
        found: list[dict[str, Any]], flavour: str) -> None:
    """fit and a custom loop, a model with two of them: weights and moving statistics as one process with
    BatchNormalization on the union of the ranks' batches (float tolerance: E[x^2] - E[x]^2), equal on both
    ranks, and so is inference."""
    ranks = case(found, "sync-batch-normalization", flavour)
    for mode in ("fit", "loop"):
        runs = [r[mode] for r in ranks]
        (kind, first), (same_kind, second) = runs[0]["norms"]
        assert kind == same_kind == "SyncBatchNormalization" and first != second  # two in one model
        assert_same_on_every_rank([r["weights"] for r in runs])
        assert_close(runs[0]["weights"], runs[0]["expected"], 1e-4)
        assert_same_on_every_rank([[r["inference"]] for r in runs])
        assert_close(runs[0]["inference"], ranks[0]["expected_inference"], 1e-4)


def test_keras_3_sync_batch_normalization_weighs_ranks_by_their_batch_size(found: list[dict[str, Any]]) -> None:
    """Batches of 12 and 4 rows normalise as one of 16 (an average of the ranks' statistics would not)."""
    for r in case(found, "sync-batch-normalization-uneven-batches", "keras3"):
        assert_close(r["outputs"], r["expected"], 1e-4)
        assert_close(r["moving"], r["expected_moving"], 1e-5)
        assert r["saved"] == "horovod>SyncBatchNormalization"  # a saved model names it


def test_horovods_sync_batch_normalization_is_the_keras_3_layer_where_tf_keras_is_keras_3() -> None:
    """Without TF_USE_LEGACY_KERAS `tf.keras` is Keras 3, and `hvd.SyncBatchNormalization` goes into a Keras 3
    model (Horovod's own layer passes tf_keras's `fused=False`, which Keras 3 refuses)."""
    code = ("import horovod.tensorflow as hvd, keras, numpy as np\nhvd.init()\n"
            "m = keras.Sequential([keras.Input((3,)), hvd.SyncBatchNormalization()])\n"
            "print(type(m.layers[0]).__module__, np.asarray(m(np.ones((2, 3)), training=True)).shape)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**IMAGE_ENV, "TF_USE_LEGACY_KERAS": "0"})
    assert done.stdout.split() == ["smtrain.horovod_keras.sync_batch_norm", "(2,", "3)"], done.stderr[-2000:]


# -- Keras 3: loss scaling and XLA --------------------------------------------------------------------------------
def test_keras_3_loss_scaling_goes_inside_and_the_other_ways_are_refused_with_the_fix(found: list[dict[str, Any]]) -> None:
    r = case(found, "loss-scaling-and-xla", "keras3")[0]
    assert r["inside"] == {"optimizer": "LossScaleOptimizer", "same": True, "learned": True}
    assert "a LossScaleOptimizer around hvd.DistributedOptimizer checks each rank's gradients for inf/NaN before " \
           "they are averaged" in r["outside"]
    assert "wrap the other way: hvd.DistributedOptimizer(keras.optimizers.LossScaleOptimizer(optimizer))" in r["outside"]
    assert "cannot run inside an XLA compiled step in this image: compile the model with jit_compile=False" in r["xla"]


@both
def test_the_process_facts_and_the_timeline(found: list[dict[str, Any]], flavour: str) -> None:
    ranks = case(found, "facts", flavour)
    for rank, r in enumerate(ranks):
        assert (r["rank"], r["size"], r["local"], r["cross"], r["initialized"]) == (rank, SIZE, [rank, SIZE], [0, 1],
                                                                                      True)
    assert ranks[0]["timeline"]  # rank 0 writes it


# -- the inventory in docs/horovod-keras.md --------------------------------------------------------------------------------
# Each public name of Horovod's Keras APIs (and the horovod.tensorflow names Keras scripts use with them), and
# the cases above that show it; names that are modules Horovod imports for itself are not its API.
NOT_API = {"K", "keras", "tf", "inspect", "warnings", "version", "is_version_greater_equal_than", "callbacks",
           "elastic", "TensorFlowKerasState"}
SHOWN_BY = {
    "DistributedOptimizer": "optimizer-fit", "PartialDistributedOptimizer": "partial-distributed-optimizer",
    "broadcast_global_variables": "broadcast-global-variables", "allreduce": "collectives", "allgather": "collectives",
    "broadcast": "collectives", "reducescatter": "collectives", "load_model": "load-model",
    "BroadcastGlobalVariablesCallback": "broadcast-callback-local-variables", "MetricAverageCallback": "callbacks",
    "LearningRateWarmupCallback": "learning-rate-schedule-ranges",
    "LearningRateScheduleCallback": "learning-rate-schedule-ranges", "BestModelCheckpoint": "callbacks",
    "KerasState": "elastic-state", "CommitStateCallback": "elastic-callbacks",
    "UpdateBatchStateCallback": "elastic-callbacks", "UpdateEpochStateCallback": "elastic-callbacks",
    "run": "elastic-callbacks", "ProcessSet": "optimizer-process-set", "global_process_set": "optimizer-process-set",
    "add_process_set": "optimizer-process-set", "remove_process_set": "optimizer-process-set",
    "Average": "tape-and-optimizer", "Sum": "optimizer-sum", "Adasum": "tape-and-optimizer",
    "Compression": "optimizer-fp16-compression", "SyncBatchNormalization": "sync-batch-normalization",
    "DistributedGradientTape": "tape-and-optimizer", "PartialDistributedGradientTape": "partial-distributed-gradient-tape",
}
FACTS = {"init", "shutdown", "is_initialized", "start_timeline", "stop_timeline", "size", "local_size", "cross_size",
         "rank", "local_rank", "cross_rank", "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled",
         "gloo_built", "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built"}


def _public_names() -> set[str]:
    code = ("import horovod.keras as a, horovod.tensorflow.keras as b\n"
            "names = set()\n"
            "for m in (a, b, a.callbacks, b.callbacks, a.elastic, b.elastic):\n"
            "    names |= {n for n in dir(m) if not n.startswith('_')}\n"
            "print(' '.join(sorted(names)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=IMAGE_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split()) - NOT_API | {"SyncBatchNormalization", "DistributedGradientTape",
                                                 "PartialDistributedGradientTape"}


MODULES = {"horovod.keras", "horovod.tensorflow.keras", "horovod.tensorflow", "smtrain.horovod_keras"}


def _inventory() -> dict[str, str]:
    """The Horovod table of docs/horovod-keras.md: each name in its first column (the last part of a dotted one;
    the modules it names are not names), and that row."""
    lines = (REPO / "docs" / "horovod-keras.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Horovod's name"))
    table: dict[str, str] = {}
    for row in lines[start + 2:]:
        if not row.startswith("|"):
            break
        for quoted in re.findall(r"`([\w.]+)`", row.split("|")[1]):
            if quoted not in MODULES:
                table[quoted.rpartition(".")[2]] = row
    return table


def test_the_inventory_names_every_public_name_with_what_shows_it() -> None:
    public, table = _public_names(), _inventory()
    assert public - set(table) == set(), "public names the Horovod table does not list"
    assert set(table) - public - FACTS == set(), "names in the Horovod table that Horovod does not have"
    assert public - FACTS - set(SHOWN_BY) == set(), "public names no case here shows"
    cases = set(re.findall(r"def (\w+)\(flavour\)", keras_api.PROGRAM.read_text()))
    assert {c.replace("-", "_") for c in SHOWN_BY.values()} <= cases


def test_the_keras_3_example_trains_with_horovod_on_two_ranks(tmp_path: Path) -> None:
    """examples/keras3_horovod/train.py (Horovod's Keras MNIST example's shape, on Keras 3) as a user runs it:
    its metric lines, its checkpoints on rank 0, and a model that hvd.load_model loads with a distributed
    optimizer."""
    example = REPO / "examples" / "keras3_horovod" / "train.py"
    tree = make_tree(tmp_path / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2", "epochs": "2",
        "steps-per-epoch": "16"})
    shutil.copy(example, tree.code_dir / "train.py")
    done = run_train(tree, env={**tree.env(SM_SYSTEM_MONITOR="off", SM_CONTROL_PORT="17334"), **IMAGE_ENV}, timeout=240)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    lines = [line for line in done.stdout.decode().splitlines() if line.startswith("epoch=")]
    assert [line.split(";")[0] for line in lines] == ["epoch=0", "epoch=1"], done.stdout.decode()[-2000:]
    checkpoints = sorted(p.name for p in (tree.base / "checkpoints").glob("*.keras"))
    assert checkpoints == ["checkpoint-1.keras", "checkpoint-2.keras"]
    code = ("import horovod.tensorflow.keras as hvd\nhvd.init()\n"
            f"m = hvd.load_model({str(tree.base / 'model' / 'model.keras')!r})\n"
            "print(type(m.optimizer).__name__, getattr(m.optimizer, '_smtrain_distributed', False))\n")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=IMAGE_ENV)
    assert loaded.stdout.split() == ["Adam", "True"], loaded.stderr[-2000:]


def test_the_patch_is_in_the_installed_horovod() -> None:
    import horovod.keras.callbacks
    import horovod.tensorflow.keras.callbacks

    for callbacks in (horovod.keras.callbacks, horovod.tensorflow.keras.callbacks):
        assert "smtrain" in Path(callbacks.__file__).read_text()
