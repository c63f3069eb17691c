"""The demultiplexer's source FIFO read without copying what it deals: tee(2) to look, splice(2) to pass.

Read and written the plain way, every byte the demultiplexer deals is copied twice (out of the
source pipe, into a rank's) into fresh pipe pages. Here it tees what the source holds into a scratch
pipe and reads that - the one copy it needs to find the records - and splices each dealt block from
the source to its rank's FIFO: the pages move, not the bytes. The bytes of an unfinished round must
leave the source before the next tee (which would see them again, and would not wait for new data),
so they wait in a carry pipe, from which the round's first block is later spliced.

Invariant, between calls: the splitter's buffer from its first untaken record holds the carry pipe's
`carried` bytes, then the source's first `ahead` bytes. `release()` consumes both, leaving the
source as the plain reading path expects it (everything buffered already read), for the epoch's
last round, a corrupt stream, or a carry pipe too small for an unfinished round.
"""
from __future__ import annotations

import os
import stat
from typing import Optional

from ..common.linux import tee
from .fifo import set_pipe_size
from .record_reader import RecordSplitter

__all__ = ["SplicedSource"]


class SplicedSource:
    """A source FIFO whose dealt blocks go on to the ranks' FIFOs by splice (see the module's text)."""

    def __init__(self, source: int, pipe_size: int) -> None:
        self.source = source
        self.pipe_size = pipe_size
        self.carried = 0  # bytes in the carry pipe (the head of the splitter's untaken bytes)
        self.ahead = 0  # bytes at the source's head that the splitter has too (after the carried ones)
        self._fds: list[int] = []
        try:
            self.scratch_r, self.scratch_w = self._pipe()
            self.carry_r, self.carry_w = self._pipe()
            self.devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            self._fds.append(self.devnull)
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(cls, source: int, pipe_size: int) -> Optional["SplicedSource"]:
        """For a source that is a pipe; None otherwise (or where pipes cannot be made: the plain path)."""
        if not stat.S_ISFIFO(os.fstat(source).st_mode):
            return None
        try:
            spliced = cls(source, pipe_size)
        except OSError:
            return None
        try:
            tee(source, spliced.scratch_w, 0)  # a seccomp profile may refuse tee(2): the plain path then
        except OSError:
            spliced.close()
            return None
        return spliced

    def _pipe(self) -> tuple[int, int]:
        r, w = os.pipe2(os.O_CLOEXEC)
        self._fds += [r, w]
        set_pipe_size(w, self.pipe_size)  # at the default size, a round that outgrows it ends the splicing
        return r, w

    def fill(self, splitter: RecordSplitter) -> int:
        """Copy what the source holds into `splitter`, leaving it in the source (`ahead`); waits for
        data; 0 at the end of the stream (what is buffered then stays until release())."""
        assert self.ahead == 0, "hold() or release() the bytes of the last fill first"
        copied = tee(self.source, self.scratch_w, self.pipe_size)
        left = copied
        while left:
            left -= splitter.fill_from(self.scratch_r, left)
        self.ahead = copied
        return copied

    def move(self, target: int, length: int) -> int:
        """Pass the next `length` buffered bytes (carried ones first) to `target` (a pipe, or devnull);
        waits while it is full. Returns how many were left unmoved because its reader went away."""
        while length:
            carry = self.carried > 0
            try:
                moved = os.splice(self.carry_r if carry else self.source, target,
                                  min(length, self.carried) if carry else length)
            except BrokenPipeError:
                return length
            if not moved:  # cannot be: these bytes were in the pipe
                raise OSError(f"splice: the pipe ended with {length} buffered bytes left")
            if carry:
                self.carried -= moved
            else:
                self.ahead -= moved
            length -= moved
        return 0

    def hold(self) -> bool:
        """Move the source's `ahead` bytes (an unfinished round) to the carry pipe; False where it has
        no room for all of them (then release())."""
        while self.ahead:
            try:
                moved = os.splice(self.source, self.carry_w, self.ahead, flags=os.SPLICE_F_NONBLOCK)
            except BlockingIOError:
                return False
            self.carried += moved
            self.ahead -= moved
        return True

    def release(self) -> None:
        """Consume every buffered byte (carried and ahead): the source is then where a plain read
        of it would be. Closes the pipes."""
        self.move(self.devnull, self.carried + self.ahead)
        self.close()

    def close(self) -> None:
        """Closes every descriptor it opened (the carry pipe, /dev/null)."""
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
