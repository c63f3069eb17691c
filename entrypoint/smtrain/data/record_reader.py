"""Record framing for Pipe-mode streams: TFRecord, RecordIO (MXNet/SageMaker) and text lines.

`RecordSplitter` is incremental: fill it from a file descriptor (`fill_from`, reading straight into
its buffer) or `feed` it bytes, then take whole records (`records`) or the spans of whole framed
records (`frame_spans`, for passing them on unchanged; `frames`, the same without checking CRCs and
walked in native code where smtrain.data.frames is built). Errors say what is wrong and at which byte
offset of the stream; the records before a corrupt one are still delivered first.

TFRecord: u64 length, u32 masked CRC32C of the length, data, u32 masked CRC32C of the data.
RecordIO: u32 magic 0xced7230a, u32 (continuation flag << 29 | length), data padded to 4 bytes;
a record containing the magic is split into parts (flags 1, 2, 3) joined by the magic on reading.
"""
from __future__ import annotations

import os
import struct
from typing import Any, Callable, Optional

from ..wire.record_format import RecordFormat
from .frames import Frames, native_framer

__all__ = ["CHUNK", "IOV_MAX", "CorruptRecord", "Frames", "RecordFormat", "RecordSplitter", "encode_recordio",
    "encode_tfrecord", "masked_crc", "payload", "write_pieces", "write_spans"]

_TFRECORD_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_RECORDIO_MAGIC = 0xCED7230A
_RECORDIO_MAGIC_BYTES = _U32.pack(_RECORDIO_MAGIC)
_RECORDIO_HEADER = struct.Struct("<II")
_LENGTH_MASK = (1 << 29) - 1
CHUNK = 1 << 20
IOV_MAX = 1024


class CorruptRecord(ValueError):
    """A record whose framing or CRC is wrong, with its byte offset in the stream."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"{reason} at byte offset {offset}")
        self.offset = offset
        self.reason = reason


_crc32c: Optional[Callable[[Any], int]] = None


def _crc_function() -> Callable[[Any], int]:
    """The `crc32c` package computes CRC32C in hardware and takes any buffer without a copy; it is
    loaded on first use because importing it costs ~40 ms of `train` start-up."""
    global _crc32c
    if _crc32c is None:
        from crc32c import crc32c as _crc32c
    return _crc32c


def masked_crc(data: bytes | bytearray | memoryview) -> int:
    """TFRecord's masked CRC32C."""
    return _mask(_crc_function()(data))


def encode_tfrecord(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, the data and its masked CRC."""
    length = struct.pack("<Q", len(data))
    return length + _U32.pack(masked_crc(length)) + data + _U32.pack(masked_crc(data))


def encode_recordio(data: bytes) -> bytes:
    """One RecordIO record (single part; used by tests and benchmarks)."""
    if _RECORDIO_MAGIC_BYTES in data:
        raise ValueError("data holding the RecordIO magic must be split into parts (not needed here)")
    pad = (-len(data)) % 4
    return _RECORDIO_HEADER.pack(_RECORDIO_MAGIC, len(data)) + data + b"\0" * pad


class RecordSplitter:
    """Splits a byte stream into records, in a buffer that grows only to the largest record."""

    def __init__(self, fmt: RecordFormat, check_crc: bool = True, skip_corrupt: int = 0) -> None:
        self.format = fmt
        self.check_crc = check_crc
        # TFRecord records whose data CRC fails (their length is intact) dropped before one is an error
        self.skip_corrupt = skip_corrupt
        self.skipped_corrupt = 0
        self._buffer = bytearray(CHUNK)
        self._start = 0  # first unparsed byte
        self._end = 0  # end of valid data
        self.offset = 0  # stream offset of _buffer[0]
        self._parts: list[bytes] = []  # RecordIO parts of a record being assembled
        self._error: Optional[CorruptRecord] = None  # raised once the records before it are taken

    # -- input -------------------------------------------------------------------------------------
    def _make_room(self, size: int) -> None:
        if self._end + size <= len(self._buffer):
            return
        live = self._end - self._start
        if live + size <= len(self._buffer):
            self._buffer[:live] = self._buffer[self._start : self._end]
        else:
            grown = bytearray(max(2 * len(self._buffer), live + size))
            grown[:live] = self._buffer[self._start : self._end]
            self._buffer = grown
        self.offset += self._start
        self._start, self._end = 0, live

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append `data` to the buffer (copied)."""
        self._make_room(len(data))
        self._buffer[self._end : self._end + len(data)] = data
        self._end += len(data)

    def fill_from(self, fd: int, size: int = CHUNK) -> int:
        """Read up to `size` bytes from `fd` into the buffer; 0 at the end of the stream."""
        self._make_room(size)
        with memoryview(self._buffer) as view:
            n = os.readv(fd, [view[self._end : self._end + size]])
        self._end += n
        return n

    @property
    def failed(self) -> bool:
        """Corruption was found; it is raised once the records before it are taken."""
        return self._error is not None

    def buffered(self) -> int:
        """Bytes in the buffer not yet taken as records."""
        return self._end - self._start

    # -- parsing -----------------------------------------------------------------------------------
    def _raise_pending(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _tfrecords(self, copy: bool) -> list[Any]:
        """The tight loop for TFRecord: whole records (bytes) or their (start, stop) spans."""
        buf, pos, end = self._buffer, self._start, self._end
        unpack, u32, check = _TFRECORD_HEADER.unpack_from, _U32.unpack_from, self.check_crc
        crc = _crc_function() if check else None
        found: list[Any] = []
        with memoryview(buf) as view:
            while end - pos >= 12:
                length, length_crc = unpack(buf, pos)
                if check and _mask(crc(view[pos : pos + 8])) != length_crc:
                    self._error = CorruptRecord(self.offset + pos, "TFRecord length CRC mismatch")
                    break
                stop = pos + 16 + length
                if stop > end:
                    break
                if check and _mask(crc(view[pos + 12 : stop - 4])) != u32(buf, stop - 4)[0]:
                    if self.skipped_corrupt < self.skip_corrupt:
                        self.skipped_corrupt += 1
                        pos = stop
                        continue
                    self._error = CorruptRecord(self.offset + pos, "TFRecord data CRC mismatch")
                    break
                found.append(bytes(view[pos + 12 : stop - 4]) if copy else (pos, stop))
                pos = stop
        self._start = pos
        return found

    def _next(self) -> Optional[tuple[int, int, int, int]]:
        """(frame start, frame end, data start, data end) of the next whole line or RecordIO part."""
        buf, pos = self._buffer, self._start
        if self.format is RecordFormat.LINES:
            stop = buf.find(b"\n", pos, self._end)
            return None if stop < 0 else (pos, stop + 1, pos, stop)
        if self._end - pos < 8:
            return None
        magic, word = _RECORDIO_HEADER.unpack_from(buf, pos)
        if magic != _RECORDIO_MAGIC:  # raised once the records before it are taken
            self._error = CorruptRecord(self.offset + pos, f"RecordIO magic expected, found 0x{magic:08x}")
            return None
        length = word & _LENGTH_MASK
        stop = pos + 8 + length + ((-length) % 4)
        return None if stop > self._end else (pos, stop, pos + 8, pos + 8 + length)

    def records(self) -> list[bytes]:
        """The whole records now in the buffer (payloads)."""
        if self.format is RecordFormat.TFRECORD:
            found = self._tfrecords(copy=True)
            if not found:
                self._raise_pending()
            return found
        found = []
        while (frame := self._next()) is not None:
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
            found.append(data)
        if not found:
            self._raise_pending()
        return found

    def frame_spans(self) -> list[tuple[int, int]]:
        """(start, stop) in `view()` of each whole framed record now in the buffer; a multi-part
        RecordIO record is one span. Valid until the next fill."""
        if self.format is RecordFormat.TFRECORD:
            found = self._tfrecords(copy=False)
            if not found:
                self._raise_pending()
            return found
        spans, group_start = [], None
        while (frame := self._next()) is not None:
            self._start = frame[1]
            if self.format is RecordFormat.RECORDIO:
                flag = self._buffer[frame[0] + 7] >> 5
                if flag in (1, 2):
                    group_start = frame[0] if group_start is None else group_start
                    continue
                spans.append((frame[0] if group_start is None else group_start, frame[1]))
                group_start = None
                continue
            spans.append((frame[0], frame[1]))
        if group_start is not None:  # an unfinished multi-part record: wait for its end
            self._start = group_start
        if not spans:
            self._raise_pending()
        return spans

    def frames(self) -> Frames:
        """The whole framed records now in the buffer, as `frame_spans` finds them; for a splitter that
        checks no CRCs (the demultiplexer's: each rank's reader checks them) walked in native code where
        it is built. Valid until the next fill (and, native, the next call)."""
        framer = native_framer()
        if framer is None or self.check_crc:
            spans = self.frame_spans()
            return Frames(spans[0][0] if spans else self._start, [stop for _, stop in spans], len(spans))
        found, self._start, error = framer.frame(self.format, self._buffer, self._start, self._end)
        if error >= 0:  # raised once the records before it are taken
            magic = _U32.unpack_from(self._buffer, error)[0]
            self._error = CorruptRecord(self.offset + error, f"RecordIO magic expected, found 0x{magic:08x}")
        if not found.count:
            self._raise_pending()
        return found

    def rewind(self, start: int) -> None:
        """Put back the records from `start` (a span start from the last `frame_spans`) to be taken again."""
        self._start = start

    def skip(self, count: int) -> int:
        """Drop up to `count` whole records now in the buffer without checking or copying them (a
        resumed epoch skips what an earlier run consumed); returns how many were dropped."""
        buf, pos, end, dropped = self._buffer, self._start, self._end, 0
        if self.format is RecordFormat.TFRECORD:
            unpack = _TFRECORD_HEADER.unpack_from
            while dropped < count and end - pos >= 12:
                stop = pos + 16 + unpack(buf, pos)[0]
                if stop > end:
                    break
                pos, dropped = stop, dropped + 1
            self._start = pos
            return dropped
        while dropped < count and (frame := self._next()) is not None:
            self._start = frame[1]
            if self.format is not RecordFormat.RECORDIO or self._buffer[frame[0] + 7] >> 5 in (0, 3):
                dropped += 1
        return dropped

    def view(self) -> memoryview:
        """The buffer as a memoryview; no slice of it may outlive the next read into it."""
        return memoryview(self._buffer)

    def leftover_span(self) -> tuple[int, int]:
        """(start, stop) in `view()` of the bytes not yet taken as records."""
        return self._start, self._end

    def end_last_line(self) -> None:
        """At the end of a LINES stream: a last line without a newline gets one, so that it is framed
        like the others (every reader takes it as a record either way, without the newline)."""
        if self.format is RecordFormat.LINES and self.buffered() and self._buffer[self._end - 1] != 0x0A:
            self.feed(b"\n")

    def finish(self) -> Optional[bytes]:
        """At the end of the stream. For LINES, a last line without a newline is returned as a record;
        for the framed formats anything left over is a truncated record."""
        self._raise_pending()
        if self.format is RecordFormat.LINES:
            if not self.buffered():
                return None
            data = bytes(self._buffer[self._start : self._end])
            self._start = self._end
            return data
        if self.buffered() or self._parts:
            raise CorruptRecord(self.offset + self._start, f"truncated record ({self.buffered()} bytes at the end)")
        return None


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def payload(fmt: RecordFormat, view: memoryview, span: tuple[int, int]) -> bytes | memoryview:
    """The record a reader delivers for the framed record at `span` of `view` (from `frame_spans`)."""
    start, stop = span
    if fmt is RecordFormat.TFRECORD:
        return view[start + 12 : stop - 4]
    if fmt is RecordFormat.LINES:
        return view[start : stop - 1] if view[stop - 1] == 0x0A else view[start:stop]
    parts = []
    while start < stop:  # RecordIO: one part, or parts joined by the magic
        length = _U32.unpack_from(view, start + 4)[0] & _LENGTH_MASK
        parts.append(view[start + 8 : start + 8 + length])
        start += 8 + length + (-length) % 4
    return parts[0] if len(parts) == 1 else _RECORDIO_MAGIC_BYTES.join(parts)


def write_spans(fd: int, view: memoryview, spans: list[tuple[int, int]]) -> None:
    """Write the records at `spans` of `view` to `fd` without copying them (writev, every byte)."""
    write_pieces(fd, [view[a:b] for a, b in spans])


def write_pieces(fd: int, pieces: list) -> None:
    """Write the buffers `pieces` to `fd` in order (writev, every byte)."""
    for i in range(0, len(pieces), IOV_MAX):
        batch = pieces[i : i + IOV_MAX]
        while batch:
            written = os.writev(fd, batch)
            while batch and written >= len(batch[0]):
                written -= len(batch[0])
                batch.pop(0)
            if batch and written:
                batch[0] = batch[0][written:]
