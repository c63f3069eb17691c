"""The record framer (smtrain.data.record_reader.RecordSplitter) fed one byte at a time: the same records,
in order, as when fed whole; frame spans cover the stream exactly; corruption found at the right offset."""
from __future__ import annotations

import pytest

from smtrain.data.record_reader import CorruptRecord, RecordFormat, RecordSplitter, encode_tfrecord, payload
from tests.record_streams import encode_stream, payloads_for

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
    payloads = payloads_for(fmt)
    assert _one_byte_at_a_time(fmt, encode_stream(fmt, payloads)) == payloads


@pytest.mark.parametrize("fmt", list(RecordFormat))
def test_byte_by_byte_frame_spans_cover_the_stream_exactly(fmt: RecordFormat) -> None:
    payloads = payloads_for(fmt)
    stream = encode_stream(fmt, payloads)
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
    stream = encode_stream(fmt, [b"whole", b"cut short"])[:-3]
    with pytest.raises(CorruptRecord, match="truncated"):
        _one_byte_at_a_time(fmt, stream)


@pytest.mark.parametrize("fmt", list(RecordFormat))
def test_payload_of_a_framed_span_is_the_record_a_reader_delivers(fmt: RecordFormat) -> None:
    """What the demultiplexer fingerprints (smtrain.data.record_reader.payload) is what the ranks' readers
    deliver, multi-part RecordIO records joined."""
    payloads = payloads_for(fmt)
    splitter = RecordSplitter(fmt)
    splitter.feed(encode_stream(fmt, payloads))
    with splitter.view() as view:
        assert [bytes(payload(fmt, view, span)) for span in splitter.frame_spans()] == payloads
