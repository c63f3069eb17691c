"""Record framing for Pipe-mode streams: TFRecord, RecordIO (MXNet/SageMaker) and text lines.

`RecordSplitter` is pure and incremental: feed it bytes as they arrive, take whole records (or
whole framed records, for passing on unchanged) as soon as they are complete. Errors say what is
wrong and at which byte offset of the stream.

TFRecord: u64 length, u32 masked CRC32C of the length, data, u32 masked CRC32C of the data.
RecordIO: u32 magic 0xced7230a, u32 (continuation flag << 29 | length), data padded to 4 bytes;
a record containing the magic is split into parts (flags 1, 2, 3) joined by the magic on reading.
"""
from __future__ import annotations

import enum
import struct
from typing import Any, Callable, Iterator, Optional


_TFRECORD_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_RECORDIO_MAGIC = 0xCED7230A
_RECORDIO_MAGIC_BYTES = _U32.pack(_RECORDIO_MAGIC)
_RECORDIO_HEADER = struct.Struct("<II")
_LENGTH_MASK = (1 << 29) - 1


class RecordFormat(enum.Enum):
    TFRECORD = "tfrecord"
    RECORDIO = "recordio"
    LINES = "lines"

    @classmethod
    def parse(cls, text: str) -> "RecordFormat":
        try:
            return cls(text.lower())
        except ValueError:
            raise ValueError(f"unknown record format {text!r}; expected one of tfrecord, recordio, lines") from None

    @classmethod
    def from_content_type(cls, content_type: Optional[str]) -> Optional["RecordFormat"]:
        """A format implied by a channel's ContentType, if it names one."""
        ct = (content_type or "").lower()
        if "tfrecord" in ct or "tensorflow" in ct:
            return cls.TFRECORD
        if "recordio" in ct:
            return cls.RECORDIO
        if ct.startswith("text/") or "jsonlines" in ct or "csv" in ct:
            return cls.LINES
        return None


class CorruptRecord(ValueError):
    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"{reason} at byte offset {offset}")
        self.offset = offset
        self.reason = reason


_crc32c: Optional[Callable[[Any], int]] = None


def masked_crc(data: bytes | bytearray | memoryview) -> int:
    """TFRecord's masked CRC32C. The `crc32c` package computes it in hardware and takes any buffer
    without a copy; it is loaded on first use because importing it costs ~40 ms of `train` start-up."""
    global _crc32c
    if _crc32c is None:
        from crc32c import crc32c as _crc32c
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def encode_tfrecord(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + _U32.pack(masked_crc(length)) + data + _U32.pack(masked_crc(data))


def encode_recordio(data: bytes) -> bytes:
    """One RecordIO record (single part; used by tests and the feeder's samples)."""
    if _RECORDIO_MAGIC_BYTES in data:
        raise ValueError("data holding the RecordIO magic must be split into parts (not needed here)")
    pad = (-len(data)) % 4
    return _RECORDIO_HEADER.pack(_RECORDIO_MAGIC, len(data)) + data + b"\0" * pad


class RecordSplitter:
    """Splits a byte stream into records. `feed` bytes, then iterate `records()` (the payloads) or
    `frames()` (each record's bytes as framed in the stream); `finish()` at the end of the stream."""

    def __init__(self, fmt: RecordFormat, check_crc: bool = True) -> None:
        self.format = fmt
        self.check_crc = check_crc
        self._buffer = bytearray()
        self._start = 0  # where unparsed data begins in _buffer
        self.offset = 0  # stream offset of _buffer[0]
        self._parts: list[bytes] = []  # RecordIO parts of a record being assembled

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._start:
            del self._buffer[: self._start]
            self.offset += self._start
            self._start = 0
        self._buffer += data

    def buffered(self) -> int:
        return len(self._buffer) - self._start

    def _next(self) -> Optional[tuple[int, int, int, int]]:
        """(frame start, frame end, data start, data end) of the next whole record, or None."""
        buf, pos = self._buffer, self._start
        if self.format is RecordFormat.LINES:
            end = buf.find(b"\n", pos)
            return None if end < 0 else (pos, end + 1, pos, end)
        if self.format is RecordFormat.TFRECORD:
            if len(buf) - pos < 12:
                return None
            length, length_crc = _TFRECORD_HEADER.unpack_from(buf, pos)
            if self.check_crc and masked_crc(memoryview(buf)[pos : pos + 8]) != length_crc:
                raise CorruptRecord(self.offset + pos, "TFRecord length CRC mismatch")
            end = pos + 12 + length + 4
            if len(buf) < end:
                return None
            return pos, end, pos + 12, pos + 12 + length
        if len(buf) - pos < 8:
            return None
        magic, word = _RECORDIO_HEADER.unpack_from(buf, pos)
        if magic != _RECORDIO_MAGIC:
            raise CorruptRecord(self.offset + pos, f"RecordIO magic expected, found 0x{magic:08x}")
        length = word & _LENGTH_MASK
        end = pos + 8 + length + ((-length) % 4)
        if len(buf) < end:
            return None
        return pos, end, pos + 8, pos + 8 + length

    def _check(self, frame: tuple[int, int, int, int]) -> None:
        if self.format is RecordFormat.TFRECORD and self.check_crc:
            _, end, data_start, data_end = frame
            (data_crc,) = _U32.unpack_from(self._buffer, data_end)
            if masked_crc(memoryview(self._buffer)[data_start:data_end]) != data_crc:
                raise CorruptRecord(self.offset + frame[0], "TFRecord data CRC mismatch")

    def frames(self) -> Iterator[bytes]:
        """Whole framed records, unchanged (for passing on); RecordIO parts count as records of their own
        only when whole, so a multi-part record is never split between receivers."""
        group_start = None
        while (frame := self._next()) is not None:
            self._check(frame)
            if self.format is RecordFormat.RECORDIO:
                flag = self._buffer[frame[0] + 7] >> 5
                if flag == 1:
                    group_start = frame[0] if group_start is None else group_start
                    self._start = frame[1]
                    continue
                if flag == 2:
                    self._start = frame[1]
                    continue
                start = frame[0] if group_start is None or flag == 0 else group_start
                group_start = None
                self._start = frame[1]
                yield bytes(self._buffer[start : frame[1]])
                continue
            self._start = frame[1]
            yield bytes(self._buffer[frame[0] : frame[1]])
        if group_start is not None:  # an unfinished multi-part record: wait for its end
            self._start = group_start

    def records(self) -> Iterator[bytes]:
        """Whole record payloads."""
        while (frame := self._next()) is not None:
            self._check(frame)
            self._start = frame[1]
            data = bytes(self._buffer[frame[2] : frame[3]])
            if self.format is RecordFormat.RECORDIO:
                flag = self._buffer[frame[0] + 7] >> 5
                if flag in (1, 2):
                    self._parts.append(data)
                    continue
                if flag == 3:
                    data = _RECORDIO_MAGIC_BYTES.join([*self._parts, data])
                    self._parts = []
            yield data

    def finish(self) -> Optional[bytes]:
        """At the end of the stream. For LINES, a last line without a newline is returned as a record;
        for the framed formats anything left over is a truncated record."""
        if self.format is RecordFormat.LINES:
            if not self.buffered():
                return None
            data = bytes(self._buffer[self._start :])
            self._start = len(self._buffer)
            return data
        if self.buffered() or self._parts:
            raise CorruptRecord(self.offset + self._start, f"truncated record ({self.buffered()} bytes at the end)")
        return None
