"""`smtrain.pipes.dataset` on real FIFOs, through both readers: smtrain's native tf.data op
(native/pipe_dataset.cc, built by scripts/build-native.sh) and the Python fallback
(SMTRAIN_NATIVE_PIPES=0), and the native op's batched source (`batch_size`, batches framed in C++).
Every test runs against each; the writer cuts the stream into pieces of odd sizes so that records
straddle reads; batches of 7 straddle reads and epochs, and come back unbatched for comparison."""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

from smtrain import pipes, progress
from smtrain.data import native
from smtrain.data.record_reader import RecordFormat, encode_tfrecord
from tests.record_streams import encode_stream, payloads_for, recordio

tf = pytest.importorskip("tensorflow")
REPO = Path(__file__).resolve().parent.parent.parent


BATCH = 7  # the batched reader's batch size: records of a batch come from several reads and epochs


@pytest.fixture(params=["native", "python", "native-batched"])
def reader(request, monkeypatch) -> str:
    monkeypatch.setenv(native.NATIVE_ENV, "0" if request.param == "python" else "1")
    if request.param != "python":
        assert native.native_pipes() is not None, "the native op is not built: scripts/build-native.sh"
    return request.param


def _records(dataset, reader: str) -> Iterator[bytes]:
    """The records of a dataset made with `batch_size=BATCH` for the batched reader, one by one."""
    for element in dataset:
        if reader == "native-batched":
            assert 1 <= element.shape[0] <= BATCH
            yield from element.numpy().tolist()
        else:
            yield element.numpy()


class Writer:
    """Writes `stream` into a new FIFO `<prefix>_<epoch>` in pieces of 1 to `piece` bytes, then removes it."""

    def __init__(self, prefix: Path, epoch: int, stream: bytes, piece: int = 5000, seed: int = 0) -> None:
        self.path = Path(f"{prefix}_{epoch}")
        os.mkfifo(self.path)
        self.error: list[BaseException] = []
        self.thread = threading.Thread(target=self._write, args=(stream, piece, seed), daemon=True)
        self.thread.start()

    def _write(self, stream: bytes, piece: int, seed: int) -> None:
        rng = random.Random(seed)
        try:
            with open(self.path, "wb", buffering=0) as f:
                at = 0
                while at < len(stream):
                    size = rng.randint(1, piece)
                    f.write(stream[at:at + size])
                    at += size
        except BrokenPipeError:  # the reader stopped at an error: expected by those tests
            pass
        except BaseException as e:  # noqa: BLE001 - reported by join()
            self.error.append(e)
        finally:
            self.path.unlink(missing_ok=True)

    def join(self) -> None:
        self.thread.join(20)
        assert not self.thread.is_alive() and not self.error, self.error


def _read(prefix: Path, fmt: RecordFormat, reader: str, epochs: int = 1, start: int = 0,
          timeout: float = 10) -> Iterator[bytes]:
    os.environ["SM_PIPE_TRAIN"] = str(prefix)
    batch_size = BATCH if reader == "native-batched" else 0
    try:
        yield from _records(pipes.dataset("train", epochs=epochs, start=start, record_format=fmt.value, timeout=timeout,
                                          batch_size=batch_size), reader)
    finally:
        os.environ.pop("SM_PIPE_TRAIN", None)


def test_tfrecordwriter_files_come_back_byte_exact_over_two_epochs(tmp_path: Path, reader: str) -> None:
    """Records of 0 bytes to 2.5 MiB (larger than a read, so the buffer grows), from TensorFlow's own writer."""
    written = [os.urandom(size) for size in [0, 1, 11, 12, 13, 100, 65536, 100 * 1024, (5 << 20) // 2, 7]]
    written += [os.urandom(random.Random(i).randrange(0, 4000)) for i in range(300)]
    with tf.io.TFRecordWriter(str(tmp_path / "file.tfrecord")) as out:
        for record in written:
            out.write(record)
    stream = (tmp_path / "file.tfrecord").read_bytes()
    writers = [Writer(tmp_path / "train", epoch, stream, seed=epoch) for epoch in range(2)]
    assert list(_read(tmp_path / "train", RecordFormat.TFRECORD, reader, epochs=2)) == written + written
    for w in writers:
        w.join()


@pytest.mark.parametrize("fmt", [RecordFormat.RECORDIO, RecordFormat.LINES])
def test_recordio_and_lines_come_back_byte_exact(tmp_path: Path, reader: str, fmt: RecordFormat) -> None:
    """RecordIO with padding and multi-part records (the magic inside a record); lines of any bytes."""
    payloads = payloads_for(fmt) * 20
    w = Writer(tmp_path / "train", 3, encode_stream(fmt, payloads), piece=37)
    assert list(_read(tmp_path / "train", fmt, reader, start=3)) == payloads
    w.join()


def test_a_last_line_without_a_newline_is_a_record(tmp_path: Path, reader: str) -> None:
    w = Writer(tmp_path / "train", 0, b"one\n\nthree\nfour", piece=3)
    assert list(_read(tmp_path / "train", RecordFormat.LINES, reader)) == [b"one", b"", b"three", b"four"]
    w.join()


def _corrupt_length(stream: bytes, at: int) -> bytes:
    return stream[:at + 8] + bytes([stream[at + 8] ^ 1]) + stream[at + 9:]


def _corrupt_last_byte(stream: bytes, at: int) -> bytes:
    return stream[:-1] + bytes([stream[-1] ^ 1])


@pytest.mark.parametrize("fmt,damage,reason", [
    (RecordFormat.TFRECORD, _corrupt_length, "TFRecord length CRC mismatch"),
    (RecordFormat.TFRECORD, _corrupt_last_byte, "TFRecord data CRC mismatch"),
    (RecordFormat.TFRECORD, lambda s, at: s[:-3], "truncated record ({left} bytes at the end)"),
    (RecordFormat.RECORDIO, lambda s, at: s[:at] + b"\0" + s[at + 1:], "RecordIO magic expected, found 0xced72300"),
    (RecordFormat.RECORDIO, lambda s, at: s[:-2], "truncated record ({left} bytes at the end)"),
])
def test_corruption_is_a_clear_error_after_the_good_records(tmp_path: Path, reader: str, fmt: RecordFormat,
                                                            damage, reason: str) -> None:
    """The error names the channel, the epoch, its FIFO and the byte offset of the bad record; every
    record before it is delivered first."""
    good = [f"record {i}".encode() * 7 for i in range(40)]
    last = b"the last one"
    head = encode_stream(fmt, good)
    stream = damage(head + encode_stream(fmt, [last]), len(head))
    w = Writer(tmp_path / "train", 0, stream, piece=50)
    got: list[bytes] = []
    with pytest.raises(tf.errors.OpError) as error:
        for record in _read(tmp_path / "train", fmt, reader):
            got.append(record)
    assert got == good
    reason = reason.format(left=len(stream) - len(head))  # the bytes of the cut-short last record
    expected = f"channel 'train' epoch 0 ({tmp_path / 'train'}_0): {reason} at byte offset {len(head)}"
    assert expected in str(error.value), str(error.value)
    w.join()


def test_up_to_skip_corrupt_records_with_a_bad_data_crc_are_dropped(tmp_path: Path, reader: str) -> None:
    """PipeModeDataset's max_corrupted_records_to_skip, through pipes.epochs_dataset."""
    def bad(data: bytes) -> bytes:
        encoded = encode_tfrecord(data)
        return encoded[:-1] + bytes([encoded[-1] ^ 1])
    stream = encode_tfrecord(b"a") + bad(b"b") + encode_tfrecord(b"c") + bad(b"d") + encode_tfrecord(b"e")
    for epoch, skip_corrupt in enumerate([2, 1]):
        w = Writer(tmp_path / "train", epoch, stream, piece=3)
        ds = pipes.epochs_dataset("train", [epoch], RecordFormat.TFRECORD, str(tmp_path / "train"), timeout=10,
                                  skip_corrupt=skip_corrupt, batch_size=BATCH if reader == "native-batched" else 0)
        if skip_corrupt == 2:
            assert list(_records(ds, reader)) == [b"a", b"c", b"e"]
        else:
            with pytest.raises(tf.errors.OpError, match="data CRC mismatch at byte offset 51"):
                list(_records(ds, reader))
        w.join()


def test_epochs_given_by_a_function_are_asked_for_each_new_iterator(tmp_path: Path, reader: str) -> None:
    """PipeModeDataset's way: each iterator reads the epoch the function gives it then."""
    taken = iter(range(5, 10))
    ds = pipes.epochs_dataset("train", lambda: [next(taken)], RecordFormat.LINES, str(tmp_path / "train"), timeout=10)
    for epoch in (5, 6):
        w = Writer(tmp_path / "train", epoch, f"epoch {epoch}\n".encode())
        assert [r.numpy() for r in ds] == [f"epoch {epoch}".encode()]
        w.join()


def test_a_missing_fifo_and_a_silent_writer_fail_after_the_wait(tmp_path: Path, reader: str) -> None:
    with pytest.raises(tf.errors.OpError, match=f"{tmp_path / 'train'}_0: no such FIFO after 0.5 s"):
        list(_read(tmp_path / "train", RecordFormat.TFRECORD, reader, timeout=0.5))
    os.mkfifo(tmp_path / "train_0")
    with pytest.raises(tf.errors.OpError, match=f"{tmp_path / 'train'}_0: nobody wrote to the FIFO within 0.5 s"):
        list(_read(tmp_path / "train", RecordFormat.TFRECORD, reader, timeout=0.5))


@pytest.mark.parametrize("drop_remainder", [False, True])
def test_batches_run_on_across_epochs_and_drop_remainder_both_ways(tmp_path: Path, drop_remainder: bool) -> None:
    """Batched native source against the unbatched reader's `.batch()` on the same stream: the same
    batches, the same order; 3 x 23 records in batches of 10: the last is 9 records, or dropped."""
    assert native.native_pipes() is not None, "the native op is not built: scripts/build-native.sh"
    payloads = [os.urandom(random.Random(i).randrange(0, 300)) for i in range(23)]
    stream = b"".join(encode_tfrecord(p) for p in payloads)
    got = {}
    for batched in (True, False):
        writers = [Writer(tmp_path / "train", epoch, stream, piece=61, seed=epoch) for epoch in range(3)]
        ds = pipes.epochs_dataset("train", [0, 1, 2], RecordFormat.TFRECORD, str(tmp_path / "train"), timeout=10,
                                  **({"batch_size": 10, "drop_remainder": drop_remainder} if batched else {}))
        if not batched:
            ds = ds.batch(10, drop_remainder=drop_remainder)
        else:
            assert ds.element_spec.shape.as_list() == [10 if drop_remainder else None]
        got[batched] = [b.numpy().tolist() for b in ds]
        for w in writers:
            w.join()
    assert got[True] == got[False]
    assert [len(b) for b in got[True]] == [10] * 6 + ([] if drop_remainder else [9])
    assert sum(got[True], []) == (payloads * 3)[:60 if drop_remainder else 69]


def test_a_corrupt_record_ends_a_batched_read_after_the_good_records_in_a_short_batch(tmp_path: Path) -> None:
    assert native.native_pipes() is not None
    good = [f"record {i}".encode() for i in range(12)]
    head = b"".join(encode_tfrecord(p) for p in good)
    bad = encode_tfrecord(b"bad")
    w = Writer(tmp_path / "train", 0, head + bad[:-1] + bytes([bad[-1] ^ 1]), piece=30)
    batches = []
    with pytest.raises(tf.errors.DataLossError, match=f"data CRC mismatch at byte offset {len(head)}"):
        for batch in pipes.epochs_dataset("train", [0], RecordFormat.TFRECORD, str(tmp_path / "train"), timeout=10,
                                          batch_size=5):
            batches.append(batch.numpy().tolist())
    assert batches == [good[0:5], good[5:10], good[10:12]]
    w.join()


READ_WITH_PROGRESS = """
import os, sys
from smtrain import pipes
os.environ["SM_PIPE_TRAIN"] = sys.argv[1]
print(sum(1 for _ in pipes.dataset("train", record_format="tfrecord", timeout=10)))
"""


def test_reading_is_a_sign_of_life_for_the_stall_watchdog(tmp_path: Path, reader: str) -> None:
    """The native reader counts its reads in the progress file's second record (atomically, from
    tf.data's threads); smtrain.progress.read adds them to the program's own."""
    progress_file = tmp_path / "progress"
    progress_file.write_bytes(b"\0" * progress.FILE_SIZE)
    w = Writer(tmp_path / "train", 0, b"".join(encode_tfrecord(os.urandom(1000)) for _ in range(3000)), piece=65536)
    env = {**os.environ, progress.PROGRESS_FILE_ENV: str(progress_file), "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, "-c", READ_WITH_PROGRESS, str(tmp_path / "train")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["3000"], done.stderr[-2000:]
    w.join()
    assert progress.read(str(progress_file))[1] > 0


def test_the_built_op_is_this_checkout_s_source() -> None:
    """The library in the environment was built from native/pipe_dataset.cc as checked out, for this
    TensorFlow (a stale build would test old code; scripts/setup.sh rebuilds it when the source changes)."""
    stamp = native.Stamp.read(native.library_dir() / "pipe_ops.stamp")
    assert stamp is not None, f"no stamp in {native.library_dir()}"
    assert stamp.source_sha256 == hashlib.sha256((REPO / "native" / "pipe_dataset.cc").read_bytes()).hexdigest()
    assert stamp.tensorflow == tf.__version__


CHOICE = """
from smtrain.data.native import native_pipes
print("native" if native_pipes() is not None else "python")
"""


def test_a_library_built_for_another_tensorflow_is_not_loaded(tmp_path: Path) -> None:
    """It falls back to the Python reader and says why, once."""
    folder = tmp_path / "native"
    shutil.copytree(native.library_dir(), folder)
    env = {**os.environ, "SMTRAIN_NATIVE_DIR": str(folder), "TF_CPP_MIN_LOG_LEVEL": "2"}
    run = lambda: subprocess.run([sys.executable, "-c", CHOICE], env=env, capture_output=True, text=True, timeout=120)
    assert run().stdout.split() == ["native"]
    stamp = (folder / "pipe_ops.stamp").read_text()
    (folder / "pipe_ops.stamp").write_text(stamp.replace(f"tensorflow={tf.__version__}", "tensorflow=2.0.0"))
    done = run()
    assert done.stdout.split() == ["python"]
    assert f"was built for TensorFlow 2.0.0, this is {tf.__version__}" in done.stderr
    (folder / "pipe_ops.so").unlink()
    assert "is not built (scripts/build-native.sh)" in run().stderr


def test_multi_part_recordio_helper_splits_at_the_magic() -> None:
    """The test streams above really hold multi-part records (else the RecordIO test proves less)."""
    stream = recordio(b"pre" + (0xCED7230A).to_bytes(4, "little") + b"post")
    assert stream.count((0xCED7230A).to_bytes(4, "little")) == 2 and (stream[7] >> 5) == 1
