"""Record boundaries found in native code (native/record_frames.cc, through ctypes), for the
demultiplexer, which deals whole records without looking inside them.

`Frames` is what both paths give: whole framed records, adjacent in a buffer. `native_framer()` is
the loaded library, or None - and RecordSplitter walks the records in Python - where it is not built
or `SMTRAIN_NATIVE_PIPES=0`. With 100-byte records the demultiplexer deals about 14 M records/s
framing natively, 3.4 M walking in Python (to readers that only drain their FIFOs, 2-core VM). ctypes rather than a CPython
extension: the library is built beside the TensorFlow op by the same script, and one call frames a
whole read (up to 1 MiB), so ctypes' microsecond per call does not count.
"""
from __future__ import annotations

import array
import ctypes
import functools
from typing import NamedTuple, Optional, Sequence

from ..wire.record_format import RecordFormat
from .libs import library_dir, native_wanted

__all__ = ["FRAMES_LIBRARY", "Frames", "NativeFramer", "native_framer"]

FRAMES_LIBRARY = "record_frames.so"
_CODES = {RecordFormat.TFRECORD: 0, RecordFormat.RECORDIO: 1, RecordFormat.LINES: 2}
_SMALLEST_FRAME = {RecordFormat.TFRECORD: 16, RecordFormat.RECORDIO: 8, RecordFormat.LINES: 1}


class Frames(NamedTuple):
    """`count` whole framed records, adjacent in a buffer: record i spans [start_of(i), stops[i])."""

    start: int
    stops: Sequence[int]
    count: int

    def start_of(self, i: int) -> int:
        """Where record `i` starts in the buffer."""
        return self.stops[i - 1] if i else self.start

    def span(self, first: int, last: int) -> tuple[int, int]:
        """The bytes of records first..last (inclusive)."""
        return self.start_of(first), self.stops[last]


class NativeFramer:
    """smtrain_frame_stops from the loaded library, with a reusable array for the stops."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._frame = library.smtrain_frame_stops
        self._frame.restype = ctypes.c_int64
        i64, p64 = ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
        self._frame.argtypes = [ctypes.c_int32, ctypes.c_void_p, i64, i64, ctypes.c_void_p, i64, p64, p64]
        self._stops = array.array("q")
        self._next, self._error = ctypes.c_int64(), ctypes.c_int64()

    def frame(self, fmt: RecordFormat, buffer: bytearray, start: int, end: int) -> tuple[Frames, int, int]:
        """The whole records in buffer[start:end); the offset of the first byte not taken; the offset
        of a RecordIO header without the magic, or -1. The stops are valid until the next call."""
        room = (end - start) // _SMALLEST_FRAME[fmt] + 1
        if len(self._stops) < room:
            self._stops = array.array("q", bytes(8 * room))
        anchor = ctypes.c_char.from_buffer(buffer)  # the buffer's address; released right after the call
        try:
            count = self._frame(_CODES[fmt], ctypes.addressof(anchor), start, end, self._stops.buffer_info()[0],
                                len(self._stops), ctypes.byref(self._next), ctypes.byref(self._error))
        finally:
            del anchor
        return Frames(start, self._stops, count), self._next.value, self._error.value


@functools.lru_cache(maxsize=1)
def _load() -> Optional[NativeFramer]:
    try:
        return NativeFramer(ctypes.CDLL(str(library_dir() / FRAMES_LIBRARY)))
    except OSError:
        return None


def native_framer() -> Optional[NativeFramer]:
    """The native framer, or None where it is not built or native code is turned off."""
    return _load() if native_wanted() else None
