"""In-place restarts of a program on its own (one host, no MPI), through the real `train`: a Keras fit
that raises once mid-epoch resumes from its BackupAndRestore backup and ends 0; a script reading a
shuffled Pipe channel that `train` streams from files (local mode's Pipe emulation) trains on every
record of every epoch exactly once across the two attempts, as one reading SageMaker's own FIFOs does;
without the setting a failure is final."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from smtrain.data.feeder import Feeder, channel_objects
from tests.support import make_tree, run_train

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"


def test_a_keras_fit_that_raises_once_resumes_from_its_backup(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={"sagemaker_max_restarts": "2", "fail-at": "25"},
                     program="keras_restart.py")
    shutil.copy(PROGRAMS / "keras_restart.py", tree.code_dir)
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=240)
    err = done.stderr.decode()
    assert done.returncode == 0, err[-3000:]
    out = tree.base / "output" / "data"
    assert (out / "starts.txt").read_text().split() == ["0", "2"]  # resumed at the epoch it failed in
    assert json.loads((out / "done.json").read_text())["epochs"] == 2  # epochs 2 and 3, not all four again
    assert "RuntimeError: fails once at batch 25" in err
    assert "restarting the job in place (restart 1 of 2)" in err and "the job succeeded after 1 restart(s) in place" in err
    assert not tree.failure.exists()


@pytest.mark.parametrize("source", ["emulated", "sagemaker"])
def test_a_shuffled_pipe_channel_is_read_from_fifo_0_again_and_every_record_trained_once(
        tmp_path: Path, source: str, capfd) -> None:
    """`emulated`: `train` streams the channel from files and starts it again; `sagemaker`: SageMaker's
    own FIFOs (a feeder plays its part), which `train` relays to the program: the interrupted epoch is
    read to its end and SageMaker's next epoch is the restarted program's FIFO 0."""
    sagemaker = source == "sagemaker"
    tree = make_tree(tmp_path / "ml", program="pipe_restart.py", channels={
        "train": {"TrainingInputMode": "Pipe" if sagemaker else "File", "ShuffleConfig": {"Seed": 5}}}, hyperparameters={
        "sagemaker_max_restarts": "1", "sagemaker_pipe_record_format": '"lines"', "fail-rank": "0", "fail-at": "60",
        "save-every": "10", **({} if sagemaker else {"sagemaker_pipe_emulation": '"on"'})})
    shutil.copy(PROGRAMS / "pipe_restart.py", tree.code_dir)
    records = []
    folder = tmp_path / "src" if sagemaker else tree.base / "input" / "data" / "train"
    folder.mkdir(parents=True, exist_ok=True)
    for part in "abcd":  # four objects, 20 lines each: epoch 1's order differs from FIFO 0's
        lines = [f"{part}/{i}" for i in range(20)]
        (folder / part).write_text("".join(line + "\n" for line in lines))
        records += [line.encode() for line in lines]
    feeder = None
    if sagemaker:
        (tree.base / "input" / "data").mkdir(parents=True, exist_ok=True)
        feeder = Feeder(tree.base / "input" / "data", {"train": channel_objects(str(folder))}, {"train": 5},
                        epochs=None).start()
    try:
        done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=120)
    finally:
        if feeder is not None:
            feeder.stop.set()
    err = done.stderr.decode()
    assert done.returncode == 0, err[-3000:]
    out = tree.base / "output" / "data"
    starts = [line.split() for line in (out / "starts-0").read_text().splitlines()]
    assert [s[0] for s in starts] == ["0", "60"], starts  # resumed at the checkpoint of the step it failed at
    by_epoch: dict[int, Counter] = {0: Counter(), 1: Counter()}
    for line in (out / "trained-0").read_text().splitlines():
        epoch, record = line.split()
        by_epoch[int(epoch)][bytes.fromhex(record)] += 1
    assert by_epoch == {0: Counter(records), 1: Counter(records)}
    assert "restarting the job in place (restart 1 of 1)" in err
    if sagemaker:
        # it failed in epoch 0, which the demultiplexer had read to its end (into the program's pipe): FIFO 0 is
        # SageMaker's next epoch
        assert "the next attempt's FIFO 0 is SageMaker's train_1" in err, err
        assert "closed the FIFO early" not in capfd.readouterr().err


def test_without_the_setting_a_program_on_its_own_fails_as_before(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={"fail-at": "3", "epochs": "1"}, program="keras_restart.py")
    shutil.copy(PROGRAMS / "keras_restart.py", tree.code_dir)
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=240)
    assert done.returncode == 1 and "restarting the job in place" not in done.stderr.decode()
    assert tree.failure.read_text().startswith("RuntimeError: ")
