"""A host's log stream that a test can back up, as docker's does when what reads a container's
output falls behind (a busy docker-compose, a slow log driver): the pipe fills and every write to
it blocks until the reader catches up."""
from __future__ import annotations

import os
import threading
import time


class LogPipe:
    """A pipe read by a thread into `text()`, which `hold()` fills and stops reading until `release()`."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()  # write_fd: give it to the process as its stderr
        self._data = bytearray()
        self._lock = threading.Lock()
        self._reading = threading.Event()
        self._reading.set()
        self._parked = threading.Event()  # the reader waits for `release()`, no read pending
        self._thread = threading.Thread(target=self._read, name="log-pipe", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            if not self._reading.is_set():
                self._parked.set()
                self._reading.wait()
                self._parked.clear()
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                return
            with self._lock:
                self._data += chunk

    def text(self) -> str:
        with self._lock:
            return self._data.decode(errors="replace")

    def wait_for(self, needle: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def hold(self) -> int:
        """Stop reading and fill the pipe (with empty lines): the next write of the process blocks. Bytes written."""
        self._reading.clear()
        # a file description of our own, so O_NONBLOCK does not reach the process's
        filler = os.open(f"/proc/self/fd/{self.write_fd}", os.O_WRONLY | os.O_NONBLOCK)
        os.write(filler, b"\n")  # ends a read the reader may have pending
        if not self._parked.wait(10):
            os.close(filler)
            raise RuntimeError("the log pipe's reader did not stop")
        written = 0
        try:
            for piece in (b"\n" * 4096, b"\n"):  # pages, then the last page's room byte by byte
                for _ in range(1 << 16):  # bounded: the pipe holds 64 KiB
                    try:
                        written += os.write(filler, piece)
                    except BlockingIOError:
                        break
        finally:
            os.close(filler)
        return written

    def release(self) -> None:
        self._reading.set()

    def close(self, timeout: float = 10) -> None:
        """Once the process has ended: read to the end and close."""
        self.release()
        os.close(self.write_fd)
        self._thread.join(timeout)
        os.close(self.read_fd)
