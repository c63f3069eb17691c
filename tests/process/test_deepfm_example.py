"""examples/deepfm_pipe: the DeepFM script written against the original PipeModeDataset API runs
through the real `train` as 2 Horovod ranks reading Pipe mode, learns, checkpoints, and a second
job resumes from the first's checkpoint (the way examples/deepfm_pipe/run.sh runs it, without setup)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from smtrain.data.feeder import Feeder, channel_objects
from tests.support import make_tree, run_train

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "deepfm_pipe"


def test_deepfm_learns_checkpoints_and_resumes(tmp_path: Path) -> None:
    source = tmp_path / "source"
    subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), str(source), "--files", "2", "--per-file", "1024"],
                   check=True, capture_output=True)
    checkpoints = tmp_path / "checkpoints"
    outputs = []
    for run, epochs in ((1, 2), (2, 3)):
        tree = make_tree(tmp_path / f"ml{run}", channels={"train": {"TrainingInputMode": "Pipe"}}, hyperparameters={
            "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
            "sagemaker_submit_directory": f'"{EXAMPLE}"', "epochs": str(epochs)})
        data = tree.base / "input" / "data"
        data.mkdir(parents=True)
        feeder = Feeder(data, {"train": channel_objects(str(source))}, {"train": None}, epochs=epochs).start()
        done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", SM_CHECKPOINT_DIR=str(checkpoints),
                                            SM_CONTROL_PORT=f"1733{run}"), timeout=240)
        feeder.join(10)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        outputs.append(done.stdout.decode())
    first = [float(v) for v in re.findall(r"auc=([0-9.]+);", outputs[0])]
    assert len(first) == 2 and first[1] > first[0], outputs[0]
    assert re.findall(r"steps=(\d+);", outputs[0]) == ["16", "16"]  # 2048 records / 2 ranks / batches of 64
    assert "resumed from" in outputs[1] and "at epoch 2" in outputs[1], outputs[1]
    assert re.findall(r"epoch=(\d+);", outputs[1]) == ["2"]  # only the epoch left
    assert (checkpoints / "ckpt-3.index").exists()
    assert (tmp_path / "ml2" / "model" / "1" / "saved_model.pb").exists()
