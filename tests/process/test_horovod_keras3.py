"""Horovod's Keras API on Keras 3 models and optimizers (`import keras`), side by side with tf_keras in the
same environment, through the real `train` with single-host MPI (2 ranks), each rank its own data: the
weights every rank ends with are one process's on the union of the ranks' batches - the average is exact
and never silently local - with `fit` and a custom loop, `backward_passes_per_step` and fp16 compression;
Horovod's callbacks broadcast, average metrics and set the warmup and schedule's learning rates. The
program: tests/programs/hvd_keras3.py; what serves Keras 3: smtrain.horovod_keras, handed Keras 3 objects by
the image's patch of Horovod (scripts/patch-horovod.py)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support import make_tree, run_train

PROGRAMS = Path(__file__).parent.parent / "programs"
IMAGE_ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"}  # as the image sets them


def run_keras3(tmp_path: Path, port: int, **hyperparameters: str) -> list[dict]:
    tree = make_tree(tmp_path / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2", **hyperparameters})
    shutil.copy(PROGRAMS / "hvd_keras3.py", tree.code_dir / "train.py")
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", SM_CONTROL_PORT=str(port)), timeout=240)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return [json.loads((tree.base / "output" / "data" / f"keras3-{r}.json").read_text()) for r in (0, 1)]


def assert_averaged_exactly(found: list[dict], atol: float) -> None:
    for ours, theirs, union in zip(found[0]["weights"], found[1]["weights"], found[0]["union"]):
        np.testing.assert_array_equal(np.array(ours), np.array(theirs))  # every rank the same weights
        np.testing.assert_allclose(np.array(ours), np.array(union), rtol=0, atol=atol)  # those of the union


@pytest.mark.parametrize("mode,extra,atol", [
    ("fit", {}, 2e-5),
    ("loop", {}, 2e-5),
    ("fit", {"passes": "2"}, 2e-5),
    ("fit", {"compression": "fp16"}, 5e-3),
    ("fit", {"model": "embedding"}, 2e-5),
    ("loop", {"model": "embedding", "sparse-as-dense": "true", "passes": "2"}, 2e-5),
    ("tape", {}, 2e-5),
], ids=["fit", "custom-loop", "backward-passes", "fp16-compression", "sparse-gradients",
        "sparse-as-dense-backward-passes", "distributed-gradient-tape"])
def test_a_keras_3_model_trains_as_one_process_on_the_union_of_the_ranks_batches(tmp_path: Path, mode: str,
                                                                                 extra: dict, atol: float) -> None:
    port = 17320 + 2 * len(extra) + (mode == "loop") + ("compression" in extra) + 8 * (mode == "tape")
    found = run_keras3(tmp_path, port, mode=mode, **extra)
    assert found[0]["optimizer"] == "keras.src.optimizers.sgd.SGD"  # its own class's name: loads without Horovod
    assert not found[0]["optimizer_tracks_model"]  # the optimizer's variables are its own, as saved
    assert_averaged_exactly(found, atol)


@pytest.mark.parametrize("api", ["horovod.tensorflow.keras", "horovod.keras"])
def test_horovods_callbacks_on_a_keras_3_model(tmp_path: Path, api: str) -> None:
    """Different first weights made equal by the broadcast, the same averaged losses on every rank, the warmup's
    and the schedule's learning rates."""
    found = run_keras3(tmp_path, 17330 + (api == "horovod.keras"), mode="callbacks", api=api)
    assert [f["api"] for f in found] == [api, api]
    assert found[0]["weights"] == found[1]["weights"]
    assert len({tuple(r["losses"]) for r in found}) == 1 and found[0]["losses"][-1] < found[0]["losses"][0]
    for r in found:  # Horovod's warmup from initial/size over epoch 0, then the schedule: initial, then half
        size, initial, steps = r["size"], r["initial_lr"], len(r["warmup"])
        warmup = [initial / size * ((b + 1) / steps * (size - 1) + 1) for b in range(steps)]
        assert r["warmup"] == pytest.approx(warmup, rel=1e-6) and r["lr"][1:] == pytest.approx([initial, initial / 2])
    if api == "horovod.tensorflow.keras":  # BestModelCheckpoint's model, loaded by hvd.load_model with its state
        loaded = found[0]["loaded"]
        assert loaded["optimizer"] == "SGD" and loaded["distributed"] and loaded["iterations"] == 3 * 8
        assert loaded["weights"] == found[0]["weights"]


def test_horovods_elastic_keras_state_on_a_keras_3_model(tmp_path: Path) -> None:
    """sync gives every rank rank 0's weights and state, restore brings back the committed ones."""
    found = run_keras3(tmp_path, 17333, mode="elastic")
    assert found[0]["synced"] == found[1]["synced"] and [f["epoch"] for f in found] == [0, 0]
    assert [f["restored"] for f in found] == [True, True]


def _refused(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=IMAGE_ENV)
    assert done.returncode == 1, done.stderr[-2000:]
    return done.stderr


def test_loss_scaling_around_the_distributed_optimizer_is_refused_before_any_rank_can_wait_forever() -> None:
    """A LossScaleOptimizer outside would check each rank's own gradients for inf/NaN before the average."""
    said = _refused(
        "import keras, numpy as np, horovod.tensorflow.keras as hvd\nhvd.init()\n"
        "m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])\n"
        "opt = keras.optimizers.LossScaleOptimizer(hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)))\n"
        "m.compile(loss='mse', optimizer=opt)\nm.fit(np.ones((4, 2)), np.ones((4, 1)), verbose=0)\n")
    assert "ValueError" in said and ("a LossScaleOptimizer around hvd.DistributedOptimizer checks each rank's gradients "
                                     "for inf/NaN before they are averaged") in said, said[-2000:]
    assert "wrap the other way: hvd.DistributedOptimizer(keras.optimizers.LossScaleOptimizer(optimizer))" in said


def test_jit_compile_gets_an_error_that_names_the_fix() -> None:
    said = _refused(
        "import keras, numpy as np, horovod.tensorflow.keras as hvd\nhvd.init()\n"
        "m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])\n"
        "m.compile(loss='mse', optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), jit_compile=True)\n"
        "m.fit(np.ones((4, 2)), np.ones((4, 1)), verbose=0)\n")
    assert "cannot run inside an XLA compiled step in this image: compile the model with jit_compile=False" in said, \
        said[-2000:]


def test_mixed_precision_loss_scaling_goes_inside_and_trains() -> None:
    """Under the mixed_float16 policy, model.compile would wrap loss scaling around the optimizer it is given;
    hvd.DistributedOptimizer puts it inside, so compile wraps nothing."""
    code = ("import keras, numpy as np, horovod.tensorflow.keras as hvd\nhvd.init()\n"
            "keras.mixed_precision.set_global_policy('mixed_float16')\nkeras.utils.set_random_seed(1)\n"
            "m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])\n"
            "opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))\n"
            "m.compile(loss='mse', optimizer=opt)\nh = m.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=10, verbose=0)\n"
            "print(type(m.optimizer).__name__, m.optimizer is opt, h.history['loss'][-1] < h.history['loss'][0])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=IMAGE_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["LossScaleOptimizer", "True", "True"], done.stdout


def test_the_keras_3_example_trains_with_horovod_on_two_ranks(tmp_path: Path) -> None:
    """examples/keras3_horovod/train.py (Horovod's Keras MNIST example's shape, on Keras 3) as a user runs it:
    its metric lines, its checkpoints on rank 0, and a model that hvd.load_model loads with a distributed
    optimizer."""
    example = PROGRAMS.parent.parent / "examples" / "keras3_horovod" / "train.py"
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


def test_a_variable_registered_local_keeps_its_ranks_own_gradient(tmp_path: Path) -> None:
    """Horovod's register_local_var: the last layer's bias trains on each rank's own (scaled) gradient, the
    rest on the average."""
    found = run_keras3(tmp_path, 17335, mode="fit", **{"local-bias": "true"})
    *shared, bias = range(len(found[0]["weights"]))
    assert all(found[0]["weights"][i] == found[1]["weights"][i] for i in shared)
    assert found[0]["weights"][bias] != found[1]["weights"][bias]


def test_the_distributed_optimizer_round_trips_through_its_config() -> None:
    """As Horovod's own test_from_config: the wrapper's config makes the same wrapper, from the instance and the class."""
    code = ("import keras, horovod.tensorflow.keras as hvd\nhvd.init()\n"
            "opt = hvd.DistributedOptimizer(keras.optimizers.Adam())\ncfg = opt.get_config()\n"
            "copies = [opt.from_config(cfg), opt.__class__.from_config(cfg)]\n"
            "print(all(c.get_config() == cfg and c._smtrain_distributed for c in copies))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=IMAGE_ENV)
    assert done.stdout.strip() == "True", done.stderr[-2000:]
