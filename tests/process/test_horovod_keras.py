"""Horovod's whole Keras API (horovod.tensorflow.keras) on the pinned TF 2.18 + tf_keras, through the
real `train` with single-host MPI: DistributedOptimizer and the broadcast, metric-average,
learning-rate warmup and schedule callbacks. (2 hosts x 2 ranks: tests/cluster/test_multihost.py.)
Horovod 0.28.1 binds these to Keras 3's backend; scripts/patch-horovod.py, run by the stack build,
fixes that in the image and in the local environment alike."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cluster.test_multihost import assert_keras_callbacks_worked
from tests.support import make_tree, run_train

PROGRAMS = Path(__file__).parent.parent / "programs"


def test_horovod_keras_callbacks_on_one_host_two_ranks(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"})
    shutil.copy(PROGRAMS / "hvd_keras_fit.py", tree.code_dir / "train.py")
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", SM_CONTROL_PORT="17310"), timeout=240)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    reports = [json.loads((tree.base / "output" / "data" / f"weights-{r}.json").read_text()) for r in (0, 1)]
    assert reports[0]["digest"] == reports[1]["digest"]
    assert_keras_callbacks_worked(reports)
    assert reports[0]["losses"][-1] < reports[0]["losses"][0]


def test_the_patch_is_in_the_installed_horovod() -> None:
    import horovod.tensorflow.keras.callbacks as callbacks

    assert "smtrain" in Path(callbacks.__file__).read_text()
