"""The demultiplexer's framing (RecordSplitter.frames): the native walk (native/record_frames.cc)
finds exactly the frames the Python walk finds - fed whole, byte by byte and in random pieces, every
format, multi-part RecordIO records as one frame - and reports a bad RecordIO header at its offset
after the records before it. The native library is built by scripts/setup.sh: its absence fails here."""
from __future__ import annotations

import random

import pytest

from smtrain.data import frames
from smtrain.data.libs import NATIVE_ENV
from smtrain.data.record_reader import CorruptRecord, RecordFormat, RecordSplitter
from tests.record_streams import encode_stream, payloads_for

PATHS = ["native", "python"]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setenv(NATIVE_ENV, "0")
        assert frames.native_framer() is None
    else:
        monkeypatch.delenv(NATIVE_ENV, raising=False)
        assert frames.native_framer() is not None, "the record framer is not built (scripts/build-native.sh)"
    return request.param


def _framed_in_pieces(fmt: RecordFormat, stream: bytes, sizes: list[int]) -> list[bytes]:
    """Every frame `frames()` gives while the stream arrives in pieces of `sizes` (cycled)."""
    splitter = RecordSplitter(fmt, check_crc=False)
    framed: list[bytes] = []
    at, i = 0, 0
    while at < len(stream):
        piece = stream[at:at + sizes[i % len(sizes)]]
        at, i = at + len(piece), i + 1
        splitter.feed(piece)
        found = splitter.frames()
        with splitter.view() as view:
            framed += [bytes(view[found.start_of(k):found.stops[k]]) for k in range(found.count)]
    splitter.end_last_line()
    found = splitter.frames()
    with splitter.view() as view:
        framed += [bytes(view[found.start_of(k):found.stops[k]]) for k in range(found.count)]
    splitter.finish()
    return framed


@pytest.mark.parametrize("fmt", list(RecordFormat))
def test_frames_cover_the_stream_exactly_however_it_arrives(fmt: RecordFormat, path: str) -> None:
    payloads = payloads_for(fmt)
    stream = encode_stream(fmt, payloads)
    rng = random.Random(3)
    for sizes in ([len(stream)], [1], [rng.randrange(1, 200) for _ in range(50)]):
        framed = _framed_in_pieces(fmt, stream, sizes)
        assert b"".join(framed) == stream
        assert len(framed) == len(payloads)  # a multi-part RecordIO record is one frame


@pytest.mark.parametrize("fmt", list(RecordFormat))
def test_native_and_python_frames_agree_on_many_records(fmt: RecordFormat, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    payloads = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 120))) for _ in range(3000)]
    if fmt is RecordFormat.LINES:
        payloads = [p.replace(b"\n", b"") for p in payloads]
    stream = encode_stream(fmt, payloads)
    sizes = [rng.randrange(1, 5000) for _ in range(40)]
    monkeypatch.delenv(NATIVE_ENV, raising=False)
    native = _framed_in_pieces(fmt, stream, sizes)
    monkeypatch.setenv(NATIVE_ENV, "0")
    assert native == _framed_in_pieces(fmt, stream, sizes)


def test_a_recordio_header_without_the_magic_is_reported_at_its_offset_after_the_good_records(path: str) -> None:
    good = encode_stream(RecordFormat.RECORDIO, [b"first", b"second"])
    splitter = RecordSplitter(RecordFormat.RECORDIO, check_crc=False)
    splitter.feed(good + b"\x01\x02\x03\x04" + bytes(12))
    found = splitter.frames()
    assert found.count == 2 and found.stops[1] == len(good)
    with pytest.raises(CorruptRecord) as error:
        splitter.frames()
    assert error.value.offset == len(good) and "0x04030201" in error.value.reason


def test_an_unfinished_tfrecord_waits_and_a_truncated_one_is_reported(path: str) -> None:
    stream = encode_stream(RecordFormat.TFRECORD, [b"whole", b"cut short"])
    splitter = RecordSplitter(RecordFormat.TFRECORD, check_crc=False)
    splitter.feed(stream[:-3])
    assert splitter.frames().count == 1
    assert splitter.frames().count == 0
    with pytest.raises(CorruptRecord, match="truncated"):
        splitter.finish()
