"""`from sagemaker_tensorflow import PipeModeDataset` (the drop-in): the original constructor and
semantics over real FIFOs fed as SageMaker feeds them (smtrain.data.feeder), with real TensorFlow."""
from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path

import pytest

from smtrain.data.feeder import Feeder, channel_objects
from smtrain.data.record_reader import RecordFormat
from tests.harness.records import write_objects
from tests.support import make_tree, run_train

PROGRAMS = Path(__file__).parent.parent / "programs"


def _job(tmp_path: Path, fmt: RecordFormat, epochs: int, mode: str = "Pipe", corrupt_at: int = -1):
    """A config folder naming channel `train`, its FIFOs fed for `epochs`; the records of one epoch."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "inputdataconfig.json").write_text(json.dumps({"train": {"TrainingInputMode": mode},
                                                             "eval": {"TrainingInputMode": "File"}}))
    expected = write_objects(tmp_path / "src", ["a", "b"], 40, fmt)
    if corrupt_at >= 0:  # flip a byte inside record `corrupt_at`'s data: its data CRC fails, its length does not
        path = tmp_path / "src" / "a"
        raw = bytearray(path.read_bytes())
        pos = 0
        for _ in range(corrupt_at):
            pos += 16 + struct.unpack_from("<Q", raw, pos)[0]
        raw[pos + 12] ^= 0xFF
        path.write_bytes(bytes(raw))
    data = tmp_path / "data"
    data.mkdir()
    feeder = Feeder(data, {"train": channel_objects(str(tmp_path / "src"))}, {"train": None}, epochs=epochs).start()
    return config, data, expected, feeder


def _dataset(tmp_path: Path, config: Path, data: Path, fmt: str, **kwargs):
    from sagemaker_tensorflow import PipeModeDataset

    return PipeModeDataset("train", record_format=fmt, state_dir=str(tmp_path / "state"), pipe_dir=str(data),
                           config_dir=str(config), **kwargs)


@pytest.mark.parametrize("fmt,name", [(RecordFormat.TFRECORD, "TFRecord"), (RecordFormat.RECORDIO, "RecordIO"),
                                      (RecordFormat.LINES, "TextLine")])
def test_repeat_reads_the_next_fifo_each_epoch(tmp_path: Path, fmt: RecordFormat, name: str) -> None:
    config, data, expected, feeder = _job(tmp_path, fmt, epochs=3)
    dataset = _dataset(tmp_path, config, data, name)
    assert [r.numpy() for r in dataset.repeat(2)] == expected * 2  # FIFOs train_0, train_1
    assert [r.numpy() for r in dataset] == expected  # a new iterator: train_2, not train_0 again
    assert (tmp_path / "state" / ".train-pipe_mode-state").read_text() == "3"
    assert feeder.join(10)


def test_corrupt_records_are_an_error_naming_the_fifo_unless_skipping_is_allowed(tmp_path: Path) -> None:
    import tensorflow as tf

    config, data, expected, feeder = _job(tmp_path, RecordFormat.TFRECORD, epochs=2, corrupt_at=5)
    with pytest.raises(tf.errors.OpError) as failed:
        list(_dataset(tmp_path, config, data, "TFRecord"))
    message = str(failed.value)
    assert "channel 'train' epoch 0" in message and "train_0" in message and "data CRC mismatch" in message
    assert "at byte" in message or "offset" in message, message
    skipped = [r.numpy() for r in _dataset(tmp_path, config, data, "TFRecord", max_corrupted_records_to_skip=1)]
    assert skipped == expected[:5] + expected[6:]  # FIFO train_1, the corrupt record dropped
    feeder.join(10)


def test_the_channel_must_be_a_pipe_channel_of_the_config(tmp_path: Path) -> None:
    from sagemaker_tensorflow import PipeModeDataset, PipeModeDatasetException

    config, data, _, feeder = _job(tmp_path, RecordFormat.TFRECORD, epochs=0)
    with pytest.raises(PipeModeDatasetException, match="Channel eval is not a PipeMode channel"):
        PipeModeDataset("eval", config_dir=str(config), state_dir=str(tmp_path / "s"))
    with pytest.raises(PipeModeDatasetException, match="Channel test not found in Training Job InputDataConfig"):
        PipeModeDataset("test", config_dir=str(config), state_dir=str(tmp_path / "s"))
    with pytest.raises(PipeModeDatasetException, match="record_format 'Parquet'"):
        PipeModeDataset("train", record_format="Parquet", config_dir=str(config), state_dir=str(tmp_path / "s"))


def test_importing_it_loads_no_tensorflow() -> None:
    import subprocess

    code = "import sys, sagemaker_tensorflow; print('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_each_horovod_rank_reads_its_own_fifos_through_train(tmp_path: Path) -> None:
    """An unchanged TF-container script, 2 MPI ranks: the demultiplexer deals every record once."""
    tree = make_tree(tmp_path / "ml", channels={"train": {"TrainingInputMode": "Pipe"}}, program="reader.py",
                     hyperparameters={"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
                                      "epochs": "2"})
    tree.write_program("reader.py", (PROGRAMS / "pipemode_reader.py").read_text())
    expected = write_objects(tmp_path / "src", ["a", "b", "c"], 30)
    data = tree.base / "input" / "data"
    data.mkdir(parents=True)
    feeder = Feeder(data, {"train": channel_objects(str(tmp_path / "src"))}, {"train": None}, epochs=2).start()
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", SM_CONTROL_PORT="17320"), timeout=180)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert feeder.join(10)
    got = {r: [bytes.fromhex(x) for x in (tree.base / "output" / "data" / f"pmd-{r}").read_text().split()]
           for r in (0, 1)}
    assert len(got[0]) == len(got[1]) == len(expected)  # 45 a rank an epoch, 2 epochs
    assert sorted(got[0] + got[1]) == sorted(expected * 2)
    assert os.environ.get("SM_PIPE_TRAIN") is None  # nothing leaked into the test process


@pytest.mark.parametrize("dealt,asked,applied", [
    ("job", (4, 1), False),  # AWS's .shard(hvd.size(), hvd.rank()): this rank's share, dealt already
    ("job", (2, 1), False),  # by host (the README's rule before the job's dealing): dealt already
    ("host", (4, 1), False),  # a host's ranks share its stream (ShardedByS3Key): the rank's share, dealt already
    ("host", (2, 1), True),  # SMTRAIN_PIPE_DEALING=host: each host has the whole channel, the host shard is the user's
    ("job", (3, 1), True),  # any other shard is the script's own (a validation split, say)
    ("none", (4, 1), True),  # read whole (one rank a host, no dealing): as TensorFlow does it
])
def test_a_shard_that_train_deals_already_is_ignored_and_said(tmp_path: Path, monkeypatch, capfd, dealt: str,
                                                               asked: tuple, applied: bool) -> None:
    """Rank 1 of 4, on algo-2 of 2 hosts: `.shard(n, i)` on a PipeModeDataset of a channel that train deals to the
    ranks is ignored where it asks for the share the demultiplexers deal (the rank's; the host's where dealt across
    the job's hosts), and the log says so; any other is applied."""
    config, data, expected, feeder = _job(tmp_path, RecordFormat.TFRECORD, epochs=1)
    monkeypatch.setenv("SM_PIPE_DEALT_TRAIN", dealt)
    monkeypatch.setenv("SM_SIZE", "4")
    monkeypatch.setenv("SM_RANK", "1")
    monkeypatch.setenv("SM_HOSTS", '["algo-1", "algo-2"]')
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-2")
    got = [r.numpy() for r in _dataset(tmp_path, config, data, "TFRecord").shard(*asked)]
    assert got == (expected[asked[1]::asked[0]] if applied else expected)
    said = capfd.readouterr().err
    assert (f"PipeModeDataset train: .shard({asked[0]}, {asked[1]}) ignored" in said) == (not applied), said
    assert feeder.join(10)
