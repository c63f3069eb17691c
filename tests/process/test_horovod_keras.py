"""Horovod's whole Keras API (horovod.tensorflow.keras) on the pinned TF 2.18 + tf_keras, through the
real `train` with single-host MPI: DistributedOptimizer and the broadcast, metric-average,
learning-rate warmup and schedule callbacks. (2 hosts x 2 ranks: tests/cluster/test_multihost.py.)
Horovod 0.28.1 binds these to Keras 3's backend; scripts/patch-horovod.py, run by the stack build,
fixes that in the image and in the local environment alike. (Keras 3 models: test_horovod_keras3.py.)"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cluster.test_multihost import assert_keras_callbacks_worked
from tests.process.test_horovod_keras3 import assert_averaged_exactly
from tests.support import make_tree, run_train

PROGRAMS = Path(__file__).parent.parent / "programs"


@pytest.mark.parametrize("api", ["horovod.tensorflow.keras", "horovod.keras"])
def test_horovod_keras_callbacks_on_one_host_two_ranks(tmp_path: Path, api: str) -> None:
    """Both of Horovod's Keras APIs: `horovod.keras` (AWS's examples import it) failed on tf_keras models."""
    extra = {"horovod-keras": "true"} if api == "horovod.keras" else {}
    tree = make_tree(tmp_path / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2", **extra})
    shutil.copy(PROGRAMS / "hvd_keras_fit.py", tree.code_dir / "train.py")
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", SM_CONTROL_PORT="17310"), timeout=240)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    reports = [json.loads((tree.base / "output" / "data" / f"weights-{r}.json").read_text()) for r in (0, 1)]
    assert [r["api"] for r in reports] == [api, api]
    assert reports[0]["digest"] == reports[1]["digest"]
    assert_keras_callbacks_worked(reports)
    assert reports[0]["losses"][-1] < reports[0]["losses"][0]
    if api == "horovod.keras":  # hvd.load_model wraps the loaded optimizer again (Horovod's class of that name)
        assert reports[0]["loaded_optimizer"] == "horovod._keras.SGD", reports[0]


def test_the_patch_is_in_the_installed_horovod() -> None:
    import horovod.keras.callbacks
    import horovod.tensorflow.keras.callbacks

    for callbacks in (horovod.keras.callbacks, horovod.tensorflow.keras.callbacks):
        assert "smtrain" in Path(callbacks.__file__).read_text()


@pytest.mark.parametrize("mode", ["function", "eager"])
def test_a_custom_loop_through_the_distributed_optimizer_averages_as_one_process_on_the_union(tmp_path: Path,
                                                                                               mode: str) -> None:
    """tf_keras: a custom loop's own tape and `hvd.DistributedOptimizer(...).apply_gradients`, 2 ranks with
    different data. Horovod 0.28.1 averaged only gradients it computed itself: each rank trained alone."""
    tree = make_tree(tmp_path / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2", "mode": mode})
    shutil.copy(PROGRAMS / "hvd_keras_custom_loop.py", tree.code_dir / "train.py")
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", SM_CONTROL_PORT="17311"),
                     timeout=240)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    found = [json.loads((tree.base / "output" / "data" / f"custom-loop-{r}.json").read_text()) for r in (0, 1)]
    assert_averaged_exactly(found, 2e-5)
