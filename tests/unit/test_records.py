"""The record framer (smtrain.data.records.RecordSplitter) fed one byte at a time: the same records,
in order, as when fed whole; frame spans cover the stream exactly; corruption found at the right offset."""
from __future__ import annotations

import random

import pytest

from smtrain.data.records import CorruptRecord, RecordFormat, RecordSplitter, encode_recordio, encode_tfrecord

MAGIC = (0xCED7230A).to_bytes(4, "little")


def _payloads() -> list[bytes]:
    rng = random.Random(7)
    found = [b"", b"a", b"x" * 3, b"\xff" * 5, MAGIC, b"pre" + MAGIC + b"post" + MAGIC, "héllo wörld".encode()]
    found += [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300))) for _ in range(20)]
    return found


def _recordio(data: bytes) -> bytes:
    """MXNet's RecordIO: a record holding the magic is written as parts split at it (flags 1, 2, 3)."""
    parts = data.split(MAGIC)
    if len(parts) == 1:
        return encode_recordio(data)
    out = b""
    for i, part in enumerate(parts):
        flag = 1 if i == 0 else 3 if i == len(parts) - 1 else 2
        out += MAGIC + ((flag << 29) | len(part)).to_bytes(4, "little") + part + b"\0" * (-len(part) % 4)
    return out


def _encode(fmt: RecordFormat, payloads: list[bytes]) -> bytes:
    if fmt is RecordFormat.TFRECORD:
        return b"".join(map(encode_tfrecord, payloads))
    if fmt is RecordFormat.RECORDIO:
        return b"".join(map(_recordio, payloads))
    return b"".join(p + b"\n" for p in payloads)


def _line_payloads() -> list[bytes]:
    return [p.replace(b"\n", b" ") for p in _payloads()]


def _one_byte_at_a_time(fmt: RecordFormat, stream: bytes) -> list[bytes]:
    splitter = RecordSplitter(fmt)
    got: list[bytes] = []
    for i in range(len(stream)):
        splitter.feed(stream[i:i + 1])
        got += splitter.records()
    last = splitter.finish()
    return got + ([last] if last is not None else [])


@pytest.mark.parametrize("fmt", list(RecordFormat))
def test_byte_by_byte_gives_every_record_intact_and_in_order(fmt: RecordFormat) -> None:
    payloads = _line_payloads() if fmt is RecordFormat.LINES else _payloads()
    assert _one_byte_at_a_time(fmt, _encode(fmt, payloads)) == payloads


@pytest.mark.parametrize("fmt", list(RecordFormat))
def test_byte_by_byte_frame_spans_cover_the_stream_exactly(fmt: RecordFormat) -> None:
    payloads = _line_payloads() if fmt is RecordFormat.LINES else _payloads()
    stream = _encode(fmt, payloads)
    splitter = RecordSplitter(fmt)
    framed: list[bytes] = []
    for i in range(len(stream)):
        splitter.feed(stream[i:i + 1])
        with splitter.view() as view:
            framed += [bytes(view[a:b]) for a, b in splitter.frame_spans()]
    assert b"".join(framed) == stream
    assert len(framed) == len(payloads)  # a multi-part RecordIO record is one frame


def test_a_last_line_without_newline_is_a_record() -> None:
    assert _one_byte_at_a_time(RecordFormat.LINES, b"one\ntwo") == [b"one", b"two"]


def test_byte_by_byte_corruption_is_found_at_its_offset_after_the_good_records() -> None:
    good = [encode_tfrecord(b"first"), encode_tfrecord(b"second")]
    bad = bytearray(encode_tfrecord(b"third"))
    bad[-1] ^= 0xFF  # the data CRC
    stream = b"".join(good) + bytes(bad)
    splitter = RecordSplitter(RecordFormat.TFRECORD)
    got: list[bytes] = []
    with pytest.raises(CorruptRecord) as error:
        for i in range(len(stream)):
            splitter.feed(stream[i:i + 1])
            got += splitter.records()
        splitter.finish()
    assert got == [b"first", b"second"]
    assert error.value.offset == sum(map(len, good)) and "data CRC" in error.value.reason


@pytest.mark.parametrize("fmt", [RecordFormat.TFRECORD, RecordFormat.RECORDIO])
def test_byte_by_byte_truncation_is_reported(fmt: RecordFormat) -> None:
    stream = _encode(fmt, [b"whole", b"cut short"])[:-3]
    with pytest.raises(CorruptRecord, match="truncated"):
        _one_byte_at_a_time(fmt, stream)
