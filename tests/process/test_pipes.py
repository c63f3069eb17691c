"""Pipe mode with real FIFOs: feeder + reader, framing, corruption, demultiplexer and per-rank channels
through the real `train` (single-host MPI), and the rules that assign FIFOs to ranks."""
from __future__ import annotations

import fcntl
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Optional

import pytest

from smtrain import pipes
from smtrain.data import dealer, demux
from smtrain.data.demux import demux_epoch
from smtrain.data.feeder import Feeder, channel_objects, epoch_order
from smtrain.data.fifo import open_fifo
from smtrain.plan.fifo_plan import PipeChannel, assign_pipes
from smtrain.wire.pipe_assignment import PipeMode, demux_folder, demux_prefix, rank_ended_marker
from smtrain.data.frames import Frames
from smtrain.data.record_reader import CHUNK, RecordFormat, encode_tfrecord
from smtrain.data.spliced import SplicedSource
from tests.harness.records import ENCODE, write_objects
from tests.support import make_tree, run_train

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"


def _env(data: Path, channel: str, fmt: RecordFormat = RecordFormat.TFRECORD) -> dict[str, str]:
    return {f"SM_PIPE_{channel.upper()}": str(data / channel), f"SM_PIPE_FORMAT_{channel.upper()}": fmt.value}


def test_tfrecordwriter_records_come_back_byte_identical(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    src, data = tmp_path / "src", tmp_path / "data"
    src.mkdir(), data.mkdir()
    written = []
    for part in range(3):
        with tf.io.TFRecordWriter(str(src / f"part-{part}.tfrecord")) as writer:
            for i in range(500):
                record = os.urandom(1 + (i * 97) % 5000)
                writer.write(record)
                written.append(record)
    feeder = Feeder(data, {"train": channel_objects(str(src))}, {"train": None}, epochs=2).start()
    assert list(pipes.records("train", 0, environ=_env(data, "train"), timeout=10)) == written
    from_dataset = [r.numpy() for r in _dataset(data)]
    assert feeder.join(10)
    assert from_dataset == written
    on_file = [r.numpy() for r in tf.data.TFRecordDataset(sorted(str(p) for p in src.iterdir()))]
    assert on_file == written


def _dataset(data: Path):
    os.environ.update(_env(data, "train"))
    try:
        return list(pipes.dataset("train", epochs=1, start=1, timeout=10))
    finally:
        for name in _env(data, "train"):
            os.environ.pop(name)


@pytest.mark.parametrize("fmt", list(RecordFormat))
def test_formats_over_several_epochs_and_channels(tmp_path: Path, fmt: RecordFormat) -> None:
    data = tmp_path / "data"
    data.mkdir()
    a = write_objects(tmp_path / "a", ["a1", "a2"], 300, fmt)
    b = write_objects(tmp_path / "b", ["b1"], 200, fmt)
    sources = {"alpha": channel_objects(str(tmp_path / "a")), "beta": channel_objects(str(tmp_path / "b"))}
    feeder = Feeder(data, sources, {"alpha": None, "beta": None}, epochs=3).start()
    env = {**_env(data, "alpha", fmt), **_env(data, "beta", fmt)}
    for epoch in range(2):
        assert list(pipes.records("alpha", epoch, environ=env, timeout=10)) == a
        assert list(pipes.records("beta", epoch, environ=env, timeout=10)) == b
    assert list(pipes.read_epochs("alpha", 1, start=2, environ=env, timeout=10)) == a
    assert list(pipes.read_epochs("beta", 1, start=2, environ=env, timeout=10)) == b
    assert feeder.join(10) and feeder.fed == {"alpha": 3, "beta": 3}


def test_multi_part_recordio_record_is_joined(tmp_path: Path) -> None:
    import struct
    magic = struct.pack("<I", 0xCED7230A)
    part = lambda flag, data: struct.pack("<II", 0xCED7230A, flag << 29 | len(data)) + data + b"\0" * ((-len(data)) % 4)
    (tmp_path / "r").write_bytes(part(1, b"abc") + part(2, b"de") + part(3, b"f") + part(0, b"next"))
    data = tmp_path / "data"
    data.mkdir()
    Feeder(data, {"c": [tmp_path / "r"]}, {"c": None}, epochs=1).start()
    got = list(pipes.records("c", 0, environ=_env(data, "c", RecordFormat.RECORDIO), timeout=10))
    assert got == [b"abc" + magic + b"de" + magic + b"f", b"next"]


def test_shuffle_is_seeded_per_epoch_and_manifests_may_repeat_objects(tmp_path: Path) -> None:
    write_objects(tmp_path / "src", [f"o{i}" for i in range(20)], 1)
    objects = channel_objects(str(tmp_path / "src"))
    orders = [epoch_order(objects, 7, e) for e in range(3)]
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(objects)
    assert orders[0] == epoch_order(objects, 7, 0)  # reproducible
    assert epoch_order(objects, None, 5) == objects
    manifest = tmp_path / "m.manifest"
    manifest.write_text(f'[{{"prefix": "{tmp_path / "src"}/"}}, "o3", "o1", "o3"]')
    assert [p.name for p in channel_objects(str(manifest))] == ["o3", "o1", "o3"]


@pytest.mark.parametrize("damage,reason,offset", [
    (lambda s: s[:8] + bytes([s[8] ^ 1]) + s[9:], "length CRC mismatch", 0),
    (lambda s: s[:-1] + bytes([s[-1] ^ 1]), "data CRC mismatch", None),
    (lambda s: s[:-3], "truncated record", None),
])
def test_corrupt_input_names_channel_epoch_and_offset(tmp_path: Path, damage, reason: str, offset) -> None:
    stream = b"".join(encode_tfrecord(f"record {i}".encode() * 10) for i in range(5))
    (tmp_path / "obj").write_bytes(damage(stream))
    data = tmp_path / "data"
    data.mkdir()
    Feeder(data, {"train": [tmp_path / "obj"]}, {"train": None}, epochs=2).start()
    env = _env(data, "train")
    with pytest.raises(pipes.PipeError) as error:
        list(pipes.records("train", 0, environ=env, timeout=10))
    text = str(error.value)
    assert "channel 'train' epoch 0" in text and reason in text and "byte offset" in text
    if offset is not None:
        assert f"byte offset {offset}" in text


def test_missing_fifo_fails_after_a_bounded_wait(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(pipes.PipeError, match="no such FIFO after 0.5 s"):
        list(pipes.records("train", 0, environ=_env(tmp_path, "train"), timeout=0.5))
    assert time.monotonic() - started < 3


def test_fifo_without_a_writer_fails_after_a_bounded_wait(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "train_0")
    with pytest.raises(pipes.PipeError, match="nobody wrote"):
        list(pipes.records("train", 0, environ=_env(tmp_path, "train"), timeout=0.5))


def test_unknown_record_format_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown record format 'xml'"):
        RecordFormat.parse("xml")
    tree = make_tree(tmp_path, channels={"train": {"TrainingInputMode": "Pipe"}},
                     hyperparameters={"sagemaker_pipe_record_format": '"xml"'})
    tree.write_program("train.py", "print('must not run')\n")
    done = run_train(tree)
    assert done.returncode == 78
    assert b"sagemaker_pipe_record_format for channel 'train' is 'xml'" in done.stderr


@pytest.mark.parametrize("reader", ["records", "dataset"])
def test_readers_widen_the_fifo_to_their_reads(tmp_path: Path, monkeypatch, reader: str) -> None:
    """SageMaker's FIFO holds Linux's default 64 KiB: the Python reader and the native op both widen
    it to their 1-MiB reads from the reading end, so the writer is not held to 64 KiB at a time."""
    fifo = tmp_path / "train_0"
    os.mkfifo(fifo)
    first_taken, sizes = threading.Event(), []

    def write() -> None:
        with open(fifo, "wb", buffering=0) as f:
            sizes.append(fcntl.fcntl(f.fileno(), fcntl.F_GETPIPE_SZ))
            f.write(encode_tfrecord(b"first"))
            if first_taken.wait(30):  # the reader has opened and read: its widening is done
                sizes.append(fcntl.fcntl(f.fileno(), fcntl.F_GETPIPE_SZ))
            f.write(encode_tfrecord(b"second"))

    writer = threading.Thread(target=write)
    writer.start()
    for name, value in _env(tmp_path, "train").items():
        monkeypatch.setenv(name, value)
    if reader == "records":
        taken = pipes.records("train", 0, timeout=10)
    else:
        taken = (r.numpy() for r in pipes.dataset("train", timeout=10))
    got = [next(taken)]
    first_taken.set()
    got += list(taken)
    writer.join(30)
    assert got == [b"first", b"second"]
    assert sizes == [64 << 10, CHUNK]


def test_assignment_rules() -> None:
    tf, lines = RecordFormat.TFRECORD, RecordFormat.LINES
    chans = [PipeChannel("train", tf), PipeChannel("eval-0", lines), PipeChannel("eval-1", lines), PipeChannel("x-0", tf)]
    data = Path("/opt/ml/input/data")
    by = {a.channel: a for a in assign_pipes(chans, data, ranks_per_host=2, mpi=True)}
    assert by["eval"].mode is PipeMode.PER_RANK and by["eval"].for_rank(1) == "/opt/ml/input/data/eval-1"
    assert by["train"].mode is PipeMode.DEMUX and by["train"].for_rank(1) == "/opt/ml/input/data/.smtrain-pipes/train-1"
    assert by["x-0"].mode is PipeMode.DEMUX  # x-1 is missing: x-0 is a channel of its own
    assert by["eval-0"].mode is PipeMode.DIRECT and by["eval-0"].for_rank(1) == "/opt/ml/input/data/eval-0"
    assert all(a.mode is PipeMode.DIRECT for a in assign_pipes(chans, data, ranks_per_host=2, mpi=False))
    assert {a.mode for a in assign_pipes(chans, data, ranks_per_host=1, mpi=True)} == {PipeMode.PER_RANK, PipeMode.DIRECT}


def test_assignment_rules_for_aws_per_rank_channels_by_local_or_global_rank() -> None:
    """AWS's Horovod + Pipe-mode example: `train_<rank>`, `validation_<rank>`, an unread `validation`, `eval`."""
    tf = RecordFormat.TFRECORD
    data = Path("/opt/ml/input/data")
    names = ["train_0", "train_1", "validation_0", "validation_1", "validation", "eval"]
    by = {a.channel: a for a in assign_pipes([PipeChannel(n, tf) for n in names], data, ranks_per_host=2, mpi=True,
                                             world_size=2)}
    assert by["train"].mode is PipeMode.PER_RANK and by["train"].for_rank(1, 1) == "/opt/ml/input/data/train_1"
    assert by["validation"].mode is PipeMode.PER_RANK  # the group, not the channel of the same name
    assert by["train_1"].mode is PipeMode.DIRECT and by["train_1"].for_rank(0, 0) == "/opt/ml/input/data/train_1"
    assert by["eval"].mode is PipeMode.DEMUX  # who reads it, the demultiplexer learns from the ranks
    assert len(by) == 7
    # 2 hosts x 2 ranks, channels numbered by global rank: rank 3 (local rank 1 on the second host) reads train_3
    four = [PipeChannel(f"train_{r}", tf) for r in range(4)]
    glob = {a.channel: a for a in assign_pipes(four, data, ranks_per_host=2, mpi=True, world_size=4)}
    assert glob["train"].mode is PipeMode.PER_RANK and glob["train"].for_rank(1, 3) == "/opt/ml/input/data/train_3"
    # only as many as one host's ranks: numbered by local rank on every host
    two = [PipeChannel(f"train_{r}", tf) for r in range(2)]
    local = {a.channel: a for a in assign_pipes(two, data, ranks_per_host=2, mpi=True, world_size=4)}
    assert local["train"].for_rank(1, 3) == "/opt/ml/input/data/train_1"
    # numbers that are not ranks (a gap, a leading zero) make no group
    odd = [PipeChannel(n, tf) for n in ("a_0", "a_2", "b_00", "b_01")]
    assert {a.mode for a in assign_pipes(odd, data, ranks_per_host=2, mpi=True, world_size=2)} == {PipeMode.DEMUX}


@pytest.mark.parametrize("ranks", [1, 2, 4])
@pytest.mark.parametrize("per_rank_channels", [False, True])
def test_ranks_of_one_host_read_every_record_once_per_epoch(tmp_path: Path, ranks: int, per_rank_channels: bool) -> None:
    """Through the real train (single-host MPI): the demultiplexer, or one channel per rank."""
    epochs = 2
    names = [f"train-{r}" for r in range(ranks)] if per_rank_channels else ["train"]
    channels = {n: {"TrainingInputMode": "Pipe", "ContentType": "application/x-tfrecord"} for n in names}
    tree = make_tree(tmp_path / "ml", channels=channels, program="reader.py", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": str(ranks),
        "channels": '"train"', "epochs": str(epochs)})
    tree.write_program("reader.py", (PROGRAMS / "pipe_reader.py").read_text())
    expected: dict[str, list[bytes]] = {}
    sources = {}
    for n in names:
        expected[n] = write_objects(tmp_path / "src" / n, [f"{n}.{i}" for i in range(3)], 101)
        sources[n] = channel_objects(str(tmp_path / "src" / n))
    data = tree.base / "input" / "data"
    data.mkdir(parents=True)
    feeder = Feeder(data, sources, {n: None for n in names}, epochs=epochs).start()
    env = tree.env(SM_CONTROL_PORT=str(17000 + ranks))
    done = run_train(tree, env=env, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert feeder.join(10)
    out = tree.base / "output" / "data"
    everything = [r for n in names for r in expected[n]]
    for epoch in range(epochs):
        got = {r: [bytes.fromhex(line) for line in (out / f"got-{r}-train-{epoch}").read_text().split()]
               for r in range(ranks)}
        dealt = Counter(rec for recs in got.values() for rec in recs)
        if per_rank_channels:
            assert dealt == Counter(everything)  # each once
            assert all(got[r] == expected[f"train-{r}"] for r in range(ranks))
        else:
            # equal counts; the last len % ranks records (fewer than one round) are left over, reported
            left_over = len(everything) % ranks
            assert [len(v) for v in got.values()] == [len(everything) // ranks] * ranks
            assert dealt == Counter(everything[:len(everything) - left_over])
            if left_over:
                assert f"{left_over} left over at the end" in done.stderr.decode()


def _demux_fixture(tmp_path: Path, obj: Path, ranks: int = 2) -> tuple[Path, dict[int, Path]]:
    """A fed source FIFO `c_0` and the ranks' FIFOs `r<r>_0`, as the demultiplexer's run makes them."""
    data = tmp_path / "data"
    data.mkdir()
    targets = {r: data / f"r{r}_0" for r in range(ranks)}
    for t in targets.values():
        os.mkfifo(t)
    Feeder(data, {"c": [obj]}, {"c": None}, epochs=1).start()
    return data, targets


def _rank_reader(data: Path, rank: int, got: list[bytes], fmt: RecordFormat = RecordFormat.TFRECORD,
                 errors: Optional[list[str]] = None) -> threading.Thread:
    """A thread reading rank `rank`'s FIFO into `got`; a PipeError's text goes to `errors`."""
    env = {f"SM_PIPE_R{rank}": str(data / f"r{rank}"), f"SM_PIPE_FORMAT_R{rank}": fmt.value}

    def read() -> None:
        try:
            got.extend(pipes.records(f"r{rank}", 0, environ=env, timeout=10))
        except pipes.PipeError as e:
            if errors is None:
                raise
            errors.append(str(e))

    reader = threading.Thread(target=read)
    reader.start()
    return reader


def test_demultiplexer_drops_a_rank_that_never_reads(tmp_path: Path) -> None:
    records = write_objects(tmp_path / "src", ["o"], 50)
    data, targets = _demux_fixture(tmp_path, tmp_path / "src" / "o")
    got: list[bytes] = []
    reader = _rank_reader(data, 0, got)
    started = time.monotonic()
    result = demux_epoch(data / "c_0", targets, RecordFormat.TFRECORD, rank_wait_s=1.0, source_wait_s=10)
    reader.join(10)
    assert time.monotonic() - started < 5
    assert result.dropped == (1,) and got == records


def _demux_run(tmp_path: Path, epochs: int, per_object: int = 200) -> tuple[Path, list[bytes], Feeder, threading.Thread]:
    """The demultiplexer's whole run for 2 local ranks of channel `c`, fed for `epochs`, in a thread."""
    records = write_objects(tmp_path / "src", ["o"], per_object)
    data = tmp_path / "data"
    data.mkdir()
    feeder = Feeder(data, {"c": [tmp_path / "src" / "o"]}, {"c": None}, epochs=epochs).start()
    # a daemon: a failing test must not leave the suite waiting for it at exit
    runner = threading.Thread(target=demux.run, args=(data, "c", 2, RecordFormat.TFRECORD, 10.0, 30.0, epochs),
                              daemon=True)
    runner.start()
    # Ranks start after their demultiplexer, which first clears an earlier attempt's end marks: wait
    # until it has made its first FIFOs, or a rank's mark made here could be cleared as stale.
    deadline = time.monotonic() + 20
    while not all(Path(f"{demux_prefix(data, 'c', r)}_0").exists() for r in (0, 1)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return data, records, feeder, runner


def _mark_ended(data: Path, rank: int) -> None:
    """What the rank launcher does when its program ends (it makes the folder if need be, as here:
    the demultiplexer's thread may not have made it yet)."""
    marker = rank_ended_marker(demux_folder(data), rank)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def _read_as_rank(data: Path, rank: int, epochs: int, got: dict[int, list[bytes]], delay_s: float = 0) -> threading.Thread:
    env = {"SM_PIPE_C": str(demux_prefix(data, "c", rank)), "SM_PIPE_FORMAT_C": "tfrecord"}

    def read() -> None:
        time.sleep(delay_s)
        for epoch in range(epochs):
            got[epoch] = list(pipes.records("c", epoch, environ=env, timeout=20))
        _mark_ended(data, rank)

    reader = threading.Thread(target=read)
    reader.start()
    return reader


def test_a_channel_only_one_rank_reads_is_passed_to_it_whole_and_in_order(tmp_path: Path) -> None:
    """AWS's `eval`: rank 0 reads it; rank 1 ends without opening it, 2 s after rank 0 started
    reading: rank 0 is not cut off, and gets every record of both epochs, in order."""
    data, records, feeder, runner = _demux_run(tmp_path, epochs=2)
    got: dict[int, list[bytes]] = {}
    reader = _read_as_rank(data, 0, 2, got)
    time.sleep(2)
    _mark_ended(data, 1)
    reader.join(30)
    runner.join(30)
    assert got == {0: records, 1: records}
    assert feeder.join(10) and not runner.is_alive()


def test_a_rank_that_opens_late_is_waited_for_not_taken_for_one_that_never_reads(tmp_path: Path) -> None:
    data, records, feeder, runner = _demux_run(tmp_path, epochs=2)
    got = [{}, {}]
    readers = [_read_as_rank(data, 0, 2, got[0]), _read_as_rank(data, 1, 2, got[1], delay_s=3)]
    for reader in readers:
        reader.join(40)
    runner.join(30)
    for epoch in range(2):
        assert len(got[0][epoch]) == len(got[1][epoch]) == 100  # equal counts, dealt to both
        assert Counter(got[0][epoch] + got[1][epoch]) == Counter(records)
    assert feeder.join(10)


def test_a_channel_no_rank_reads_is_never_opened(tmp_path: Path) -> None:
    """AWS's unread `validation`: the source FIFO stays unopened (SageMaker's writer just waits)."""
    data, records, feeder, runner = _demux_run(tmp_path, epochs=1)
    for rank in (0, 1):
        _mark_ended(data, rank)
    runner.join(10)
    assert not runner.is_alive()
    assert not feeder.join(0.5)  # the writer still waits for a reader of c_0
    fd = os.open(data / "c_0", os.O_RDONLY)  # let the feeder finish: the epoch is all there
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)
    assert feeder.join(10)


@pytest.mark.parametrize("fmt", list(RecordFormat))
def test_demultiplexer_deals_equal_counts_and_reports_the_rest(tmp_path: Path, fmt: RecordFormat) -> None:
    records = write_objects(tmp_path / "src", ["o"], 31, fmt)
    data, targets = _demux_fixture(tmp_path, tmp_path / "src" / "o")
    got: list[list[bytes]] = [[], []]
    readers = [_rank_reader(data, rank, got[rank], fmt) for rank in (0, 1)]
    result = demux_epoch(data / "c_0", targets, fmt, rank_wait_s=5.0, source_wait_s=10)
    for reader in readers:
        reader.join(10)
    assert result.records == {0: 15, 1: 15} and result.left_over == 1
    assert got[0] == records[0:15] and got[1] == records[15:30]  # the last round in equal blocks, one left over


def test_demultiplexer_deals_a_last_line_without_a_newline_like_the_readers(tmp_path: Path) -> None:
    """The readers take a last line without a newline as a record; dealt, it must not be lost."""
    records = write_objects(tmp_path / "src", ["o"], 8, RecordFormat.LINES)
    obj = tmp_path / "src" / "o"
    obj.write_bytes(obj.read_bytes()[:-1])
    data, targets = _demux_fixture(tmp_path, obj)
    got: list[list[bytes]] = [[], []]
    readers = [_rank_reader(data, rank, got[rank], RecordFormat.LINES) for rank in (0, 1)]
    result = demux_epoch(data / "c_0", targets, RecordFormat.LINES, rank_wait_s=5.0, source_wait_s=10)
    for reader in readers:
        reader.join(10)
    assert result.records == {0: 4, 1: 4} and result.left_over == 0
    assert sorted(got[0] + got[1]) == sorted(records) and records[-1] in got[0] + got[1]


def _planned_deal(records: list[bytes], fmt: RecordFormat, ranks: int) -> list[list[bytes]]:
    """What each rank must get, from the dealing plan alone (block_for, whole rounds, the last round
    in equal blocks): the oracle for the bytes that the demultiplexer moves however it moves them."""
    stops = list(itertools.accumulate(len(ENCODE[fmt](r)) for r in records))
    block = dealer.block_for(Frames(0, stops, len(stops)), ranks)
    got: list[list[bytes]] = [[] for _ in range(ranks)]
    whole = len(records) - len(records) % (block * ranks)
    for start in range(0, whole, block * ranks):
        for r in range(ranks):
            got[r] += records[start + r * block:start + (r + 1) * block]
    share = (len(records) - whole) // ranks
    for r in range(ranks):
        got[r] += records[whole + r * share:whole + (r + 1) * share]
    return got


def _deal_stream(tmp_path: Path, stream: bytes, fmt: RecordFormat, ranks: int,
                 seed: int) -> tuple[list[list[bytes]], demux.EpochResult]:
    """`stream` written into the source FIFO in seeded random pieces of 1 byte to 300 KiB, some after a
    pause (so that records and rounds straddle what the demultiplexer sees at once), dealt to `ranks`
    reader threads: what each got, and the result."""
    data = tmp_path / "data"
    data.mkdir()
    targets = {r: data / f"r{r}_0" for r in range(ranks)}
    for t in [*targets.values(), data / "c_0"]:
        os.mkfifo(t)
    rng = random.Random(seed)

    def write() -> None:
        fd = os.open(data / "c_0", os.O_WRONLY)
        at = 0
        while at < len(stream):
            piece = rng.choice([1, 7, 100, 4096, 65536, 300 << 10, rng.randrange(1, 300 << 10)])
            if rng.random() < 0.05:
                time.sleep(0.002)
            at += os.write(fd, stream[at:at + piece])
        os.close(fd)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    got: list[list[bytes]] = [[] for _ in range(ranks)]
    readers = [_rank_reader(data, rank, got[rank], fmt) for rank in range(ranks)]
    result = demux_epoch(data / "c_0", targets, fmt, rank_wait_s=5.0, source_wait_s=10)
    for thread in [writer, *readers]:
        thread.join(30)
        assert not thread.is_alive()
    return got, result


@pytest.mark.parametrize("fmt", list(RecordFormat))
@pytest.mark.parametrize("ranks", [2, 3])
def test_demultiplexer_deals_by_plan_however_the_source_is_written(tmp_path: Path, fmt: RecordFormat,
                                                                  ranks: int) -> None:
    """Dealt blocks move from the source to the ranks in the kernel (tee, splice; an unfinished round
    waits in a carry pipe): each rank must still get exactly its planned records, in order."""
    rng = random.Random(ranks)
    records = [bytes(rng.choice(b"abcdefgh") for _ in range(rng.choice([0, 3, 90, 700, 5000, 40000])))
               for _ in range(1500)]
    got, result = _deal_stream(tmp_path, b"".join(ENCODE[fmt](r) for r in records), fmt, ranks, seed=ranks)
    planned = _planned_deal(records, fmt, ranks)
    assert [len(g) for g in got] == [len(p) for p in planned]
    assert got == planned
    assert result.records == {r: len(planned[r]) for r in range(ranks)} and result.left_over == len(records) % ranks


def test_demultiplexer_copies_once_an_unfinished_round_outgrows_its_carry_pipe(tmp_path: Path, capfd) -> None:
    """Rounds of 4 records of 900 KiB (3.6 MB) cannot wait in a 1-MiB carry pipe: the demultiplexer
    goes on reading and writing the bytes, and every rank still gets its planned records."""
    records = [bytes([65 + i]) * (900 << 10) for i in range(14)]
    stream = b"".join(encode_tfrecord(r) for r in records)
    got, result = _deal_stream(tmp_path, stream, RecordFormat.TFRECORD, 4, seed=1)
    assert got == _planned_deal(records, RecordFormat.TFRECORD, 4)
    assert result.records == {r: 3 for r in range(4)} and result.left_over == 2
    assert "larger than the carry pipe; copying from here on" in capfd.readouterr().err


def test_a_source_that_is_not_a_pipe_is_read_and_written(tmp_path: Path) -> None:
    """tee and splice need pipes: for anything else the demultiplexer keeps the plain path."""
    (tmp_path / "f").write_bytes(b"x")
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        assert SplicedSource.open(fd, dealer.PIPE_SIZE) is None
    finally:
        os.close(fd)
    r, w = os.pipe()
    spliced = SplicedSource.open(r, dealer.PIPE_SIZE)
    assert spliced is not None
    spliced.close()
    os.close(r)
    os.close(w)


def test_demultiplexer_survives_a_rank_that_goes_away(tmp_path: Path) -> None:
    write_objects(tmp_path / "src", ["o"], 4000)
    data, targets = _demux_fixture(tmp_path, tmp_path / "src" / "o")
    code = ("import os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\nos.read(fd, 1000)\nos._exit(0)\n")
    quitter = subprocess.Popen([sys.executable, "-c", code, str(targets[1])])
    got: list[bytes] = []
    reader = _rank_reader(data, 0, got)
    result = demux_epoch(data / "c_0", targets, RecordFormat.TFRECORD, rank_wait_s=5.0, source_wait_s=10)
    reader.join(20)
    quitter.wait(10)
    assert result.dropped == (1,)
    assert not reader.is_alive() and len(got) == result.records[0] and len(got) > 2000


@pytest.mark.parametrize("fmt,damage", [(RecordFormat.RECORDIO, lambda s: s[:12] + b"\xff\xff\xff\xff" + s[16:]),
                                         (RecordFormat.TFRECORD, lambda s: s[:-5])])
def test_demultiplexer_passes_corruption_on_to_a_rank(tmp_path: Path, fmt: RecordFormat, damage) -> None:
    """A rank must fail on corrupt or truncated input, not see a short epoch as a whole one."""
    write_objects(tmp_path / "src", ["o"], 40, fmt)
    obj = tmp_path / "src" / "o"
    obj.write_bytes(damage(obj.read_bytes()))
    data, targets = _demux_fixture(tmp_path, obj)
    errors: list[str] = []
    readers = [_rank_reader(data, rank, [], fmt, errors) for rank in range(2)]
    demux_epoch(data / "c_0", targets, fmt, rank_wait_s=5, source_wait_s=10)
    for r in readers:
        r.join(10)
    assert len(errors) == 1 and ("truncated record" in errors[0] or "magic expected" in errors[0]), errors


def test_dataset_reports_corruption_with_channel_and_epoch(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    stream = b"".join(encode_tfrecord(b"r" * 500) for _ in range(20))
    (tmp_path / "obj").write_bytes(stream[:-1] + bytes([stream[-1] ^ 1]))
    data = tmp_path / "data"
    data.mkdir()
    Feeder(data, {"train": [tmp_path / "obj"]}, {"train": None}, epochs=1).start()
    os.environ.update(_env(data, "train"))
    before = set(Path("/dev/shm").glob("smtrain-pipe-train-*"))
    try:
        with pytest.raises(tf.errors.OpError, match="channel 'train' epoch 0.*data CRC mismatch at byte offset"):
            list(pipes.dataset("train", timeout=10))
    finally:
        for name in _env(data, "train"):
            os.environ.pop(name)
    assert not set(Path("/dev/shm").glob("smtrain-pipe-train-*")) - before  # the spool folder is gone


def test_feeder_command_feeds_until_sigterm_then_exits_cleanly(tmp_path: Path) -> None:
    """`python -m smtrain.data.feeder` (SageMaker's side, for local runs) without --epochs feeds until
    SIGTERM, then ends with status 0 and leaves no FIFO behind."""
    tree = make_tree(tmp_path / "ml", channels={"train": {"TrainingInputMode": "Pipe"}})
    records = write_objects(tmp_path / "src", ["a", "b"], per_object=50)
    feeder = subprocess.Popen([sys.executable, "-m", "smtrain.data.feeder", "--base", str(tree.base),
                               "--source", f"train={tmp_path / 'src'}"], stderr=subprocess.PIPE)
    data = tree.base / "input" / "data"
    try:
        for epoch in range(3):  # an endless feeder: read three epochs, each complete
            got = list(pipes.records("train", epoch, environ=_env(data, "train"), timeout=30))
            assert sorted(got) == sorted(records)
        feeder.send_signal(signal.SIGTERM)
        _, stderr = feeder.communicate(timeout=20)
    finally:
        if feeder.poll() is None:
            feeder.kill()
    assert feeder.returncode == 0, stderr.decode()
    assert not list(data.glob("train_*")), "a FIFO was left behind"


def test_feeder_writes_the_moment_a_late_reader_opens(tmp_path: Path) -> None:
    """The feeder waits in a blocking open, not in a poll that backs off: a reader that comes long
    after the FIFO was made (a rank importing TensorFlow, an evaluation between epochs) gets data at
    once. A poll backing off to 100 ms, as the feeder's did, gives a median wait of about 50 ms here."""
    names = [f"c{i}" for i in range(5)]
    for name in names:
        write_objects(tmp_path / "src" / name, ["o"], 10)
    data = tmp_path / "data"
    data.mkdir()
    feeder = Feeder(data, {n: channel_objects(str(tmp_path / "src" / n)) for n in names}, {n: None for n in names},
                    epochs=1).start()
    time.sleep(2.0)  # long after every FIFO was made
    waits = []
    for name in names:
        started = time.monotonic()
        fd = open_fifo(str(data / f"{name}_0"), 10, CHUNK)  # returns once the writer has connected and written
        waits.append(time.monotonic() - started)
        while os.read(fd, 1 << 20):
            pass
        os.close(fd)
    assert feeder.join(10)
    assert sorted(waits)[len(waits) // 2] < 0.03, waits


def test_stopping_the_feeder_wakes_a_writer_waiting_for_its_reader(tmp_path: Path) -> None:
    """A channel nobody reads: its writer waits in `open`; stop ends it at once, also when it comes
    before or right as the writer starts to wait, and no FIFO is left behind."""
    write_objects(tmp_path / "src", ["o"], 10)
    fds_before = len(os.listdir("/proc/self/fd"))
    for pause in [0.3] + [0.0] * 20:
        data = tmp_path / f"data-{pause}"
        data.mkdir(exist_ok=True)
        feeder = Feeder(data, {"c": channel_objects(str(tmp_path / "src"))}, {"c": None}, epochs=2).start()
        time.sleep(pause)
        started = time.monotonic()
        feeder.stop.set()
        assert feeder.join(5)
        assert time.monotonic() - started < 2
        assert feeder.fed["c"] == 0
        assert not list(data.glob("c_*"))
    assert len(os.listdir("/proc/self/fd")) == fds_before  # the stop's own readers were closed


def test_uneven_records_never_leave_a_horovod_rank_waiting(tmp_path: Path) -> None:
    """31 records, 2 ranks, batches of 8 with drop_remainder: dealt 16/15 a rank would take 2 steps
    and the other 1, and the second allreduce would fail or hang. Dealt equally, both take 1."""
    tree = make_tree(tmp_path / "ml", channels={"train": {"TrainingInputMode": "Pipe"}}, program="steps.py",
                     hyperparameters={"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"})
    tree.write_program("steps.py", (PROGRAMS / "hvd_pipe_steps.py").read_text())
    write_objects(tmp_path / "src", ["o"], 31)
    data = tree.base / "input" / "data"
    data.mkdir(parents=True)
    feeder = Feeder(data, {"train": channel_objects(str(tmp_path / "src"))}, {"train": None}, epochs=1).start()
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=180)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert feeder.join(10)
    out = tree.base / "output" / "data"
    assert [(out / f"steps-{r}").read_text() for r in (0, 1)] == ["1", "1"]
    assert "dealt 30 records as [15, 15]; 1 left over at the end" in done.stderr.decode()


SHUFFLED = {"SM_PIPE_SHUFFLED_TRAIN": "1"}  # what train exports for a channel with a ShuffleConfig


def test_a_shuffled_channel_keeps_the_fingerprints_of_what_it_delivered_and_of_a_count_skip(tmp_path: Path) -> None:
    """The reader's journal (what a checkpoint stores): every delivered record's fingerprint in order;
    a skip without fingerprints to resume from (a checkpoint of an older version) counts the first
    records as consumed, so the next checkpoint still names every consumed record."""
    from smtrain.data.fingerprints import fingerprint

    records = write_objects(tmp_path / "src", ["a"], 30)
    data = tmp_path / "data"
    data.mkdir()
    Feeder(data, {"train": channel_objects(str(tmp_path / "src"))}, {"train": None}, epochs=3).start()
    env = {**_env(data, "train"), **SHUFFLED}
    assert pipes.shuffled("train", env) and not pipes.shuffled("train", _env(data, "train"))
    assert not pipes.shuffled("train", {**_env(data, "train"), "SM_PIPE_SHUFFLED_TRAIN": "0"})
    assert list(pipes.records("train", 0, environ=env, timeout=10)) == records
    assert list(pipes.consumed_fingerprints("train", 30)) == [fingerprint(r) for r in records]
    assert list(pipes.records("train", 1, environ=env, timeout=10, skip=10)) == records[10:]
    assert list(pipes.consumed_fingerprints("train", 12)) == [fingerprint(r) for r in records[:12]]
    with pytest.raises(pipes.PipeError, match="the epoch ended 5 records before the position to resume from"):
        list(pipes.records("train", 2, environ=env, timeout=10, skip=35))


def test_a_resumed_shuffled_channel_drops_the_restored_fingerprints_in_any_order(tmp_path: Path) -> None:
    from smtrain.data.fingerprints import fingerprint

    records = write_objects(tmp_path / "src", ["a"], 30)
    data = tmp_path / "data"
    data.mkdir()
    Feeder(data, {"train": channel_objects(str(tmp_path / "src"))}, {"train": None}, epochs=1).start()
    env = {**_env(data, "train"), **SHUFFLED}
    consumed = [records[i] for i in (29, 3, 17, 4)]  # consumed before the restart, in another order
    from array import array
    journal = pipes.ReadJournal()  # handed explicitly (a checkpoint store takes the same object)
    journal.resume_from("train", array("Q", [fingerprint(r) for r in consumed]))
    rest = list(pipes.records("train", 0, environ=env, timeout=10, skip=4, reader_journal=journal))
    assert rest == [r for r in records if r not in consumed]
    kept = list(journal.consumed("train", 4 + 2))  # the next checkpoint: old ones, then new
    assert kept == [fingerprint(r) for r in consumed + rest[:2]]


# -- AWS's per-rank channel layout through the real train, 1 host x 2 ranks --------------------------------
def _aws_layout_job(tmp_path: Path, names: list[str], epochs: int, **hyperparameters: str):
    channels = {n: {"TrainingInputMode": "Pipe", "ContentType": "application/x-tfrecord"} for n in names}
    tree = make_tree(tmp_path / "ml", channels=channels, program="train.py", hyperparameters={
        "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2", "epochs": str(epochs),
        **{k: json.dumps(v) for k, v in hyperparameters.items()}})
    tree.write_program("train.py", (PROGRAMS / "pipe_rank_channels.py").read_text())
    expected = {n: write_objects(tmp_path / "src" / n, [f"{n}.{i}" for i in range(2)], 37 + 11 * i)
                for i, n in enumerate(names)}
    data = tree.base / "input" / "data"
    data.mkdir(parents=True)
    feeder = Feeder(data, {n: channel_objects(str(tmp_path / "src" / n)) for n in names}, {n: None for n in names},
                    epochs=epochs).start()
    return tree, expected, feeder


def _got(tree, rank: int, channel: str, epoch: int) -> list[bytes]:
    path = tree.base / "output" / "data" / f"got-{rank}-{channel}-{epoch}"
    return [bytes.fromhex(line) for line in path.read_text().split()]


@pytest.mark.parametrize("sep", ["_", "-"])
def test_aws_per_rank_channels_each_rank_reads_its_own_and_nothing_waits_on_unread_ones(tmp_path: Path, sep: str) -> None:
    """Channels train_0, train_1, validation_0, validation_1, validation (read by no rank under
    Horovod), eval (rank 0 alone, after training), all fed at once: every rank gets exactly its
    channels' records, in order; the unread `validation` is never opened; the job ends 0."""
    names = [f"train{sep}0", f"train{sep}1", f"validation{sep}0", f"validation{sep}1", "validation", "eval"]
    tree, expected, feeder = _aws_layout_job(tmp_path, names, epochs=2, sep=sep)
    started = time.monotonic()
    done = run_train(tree, env=tree.env(SM_CONTROL_PORT="17320", SM_SYSTEM_MONITOR="off"), timeout=180)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr[-3000:]
    assert time.monotonic() - started < 120
    for rank in (0, 1):
        for epoch in (0, 1):
            assert _got(tree, rank, f"train{sep}{rank}", epoch) == expected[f"train{sep}{rank}"]
        assert _got(tree, rank, f"validation{sep}{rank}", 0) == expected[f"validation{sep}{rank}"]
    assert _got(tree, 0, "eval", 0) == expected["eval"]  # all of it, in order, to the one rank that reads it
    assert not (tree.base / "output" / "data" / "got-1-eval-0").exists()
    assert "[demux eval] eval: read by local rank 0" in stderr
    assert (tree.base / "input" / "data" / "validation_0").exists()  # SageMaker's writer still waits
    feeder.stop.set()
    feeder.join(10)
    assert feeder.fed["validation"] == 0 and feeder.fed["eval"] == 1


def test_a_channel_every_rank_reads_is_dealt_in_equal_counts(tmp_path: Path) -> None:
    tree, expected, feeder = _aws_layout_job(tmp_path, ["train"], epochs=2, shared="train")
    done = run_train(tree, env=tree.env(SM_CONTROL_PORT="17321", SM_SYSTEM_MONITOR="off"), timeout=180)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert feeder.join(10)
    for epoch in (0, 1):
        got = [_got(tree, rank, "train", epoch) for rank in (0, 1)]
        assert len(got[0]) == len(got[1]) == len(expected["train"]) // 2
        assert Counter(got[0] + got[1]) == Counter(expected["train"])
