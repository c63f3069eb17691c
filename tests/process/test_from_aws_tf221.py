"""docs/from-aws-tensorflow-containers.md: a Keras 3 script written for AWS's TensorFlow 2.21 container runs here
unchanged but for the one documented switch, TF_USE_LEGACY_KERAS=0 in the job's environment (`tf.keras` is then
Keras 3, as there); without it `tf.keras` is the image's tf_keras and Keras 3's API is not there."""
from __future__ import annotations

import shutil
from pathlib import Path

from tests.support import make_tree, run_train

PROGRAM = Path(__file__).resolve().parent.parent / "programs" / "aws_tf221_keras3.py"


def test_a_keras_3_script_from_aws_tf_2_21_container_runs_with_the_documented_switch(tmp_path: Path) -> None:
    runs = {}
    for switch in ("1", "0"):  # the image's setting, then the guide's switch
        tree = make_tree(tmp_path / switch, hyperparameters={"epochs": "2", "model_dir": "/opt/ml/model"})
        shutil.copy(PROGRAM, tree.code_dir / "train.py")
        runs[switch] = (tree, run_train(tree, env=tree.env(TF_USE_LEGACY_KERAS=switch), timeout=240))
    tree, done = runs["0"]
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"keras 3.15" in done.stdout and b"loss=" in done.stdout
    assert (tree.base / "model" / "model.keras").stat().st_size > 0
    tree, done = runs["1"]  # the image's default: tf.keras is tf_keras, which has no `ops`
    assert done.returncode == 1 and b"has no attribute 'ops'" in done.stderr, done.stderr.decode()[-2000:]
