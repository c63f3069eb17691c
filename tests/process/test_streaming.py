"""The program's output reaches train's stdout/stderr whole: no line split or merged, bounded memory."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from tests.support import TRAIN, make_tree

# Two threads flood stdout and stderr at once with long random lines that carry their own checksum;
# meanwhile the program's stderr is interleaved with train's own messages on the same stream.
FLOOD = r"""
import hashlib, os, random, sys, threading
def flood(fd, tag, n):
    rnd = random.Random(tag)
    for i in range(n):
        body = os.urandom(rnd.randint(1, 150_000) // 2).hex()
        line = f"{tag} {i} {hashlib.sha256(body.encode()).hexdigest()} {body}\n".encode()
        view = memoryview(line)
        while view:  # write in odd-sized pieces, as a program with small buffers would
            k = rnd.randint(1, 70_000)
            os.write(fd, view[:k]); view = view[k:]
threads = [threading.Thread(target=flood, args=(1, "out", 400)), threading.Thread(target=flood, args=(2, "err", 400))]
[t.start() for t in threads]; [t.join() for t in threads]
"""


def _check_lines(data: bytes, tag: str, expected: int) -> None:
    seen = []
    for line in data.split(b"\n"):
        if not line or line.startswith((b"[train] ", b"[monitor] ")):
            continue  # the toolkit's own lines, each whole on a line of its own
        name, index, digest, body = line.decode().split(" ")
        assert name == tag, line[:80]
        assert hashlib.sha256(body.encode()).hexdigest() == digest, f"line {index} of {tag} was split or merged"
        seen.append(int(index))
    assert seen == list(range(expected))


def test_two_concurrent_floods_of_long_lines_arrive_intact(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    tree.write_program("train.py", FLOOD)
    done = subprocess.run([TRAIN], env=tree.env(), capture_output=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    _check_lines(done.stdout, "out", 400)
    _check_lines(done.stderr, "err", 400)
    assert done.stderr.count(b"[train] ") >= 2  # train's own lines are there, each on a line of its own


def test_memory_stays_bounded_for_a_huge_line_without_newline(tmp_path: Path) -> None:
    """A 300 MB stderr 'line' passes through in pieces; train never holds it (rss well below it)."""
    tree = make_tree(tmp_path)
    tree.write_program("train.py", "import os\nchunk = b'x' * (1 << 20)\n"
                                   "for _ in range(300):\n    os.write(2, chunk)\nos.write(2, b'\\nend\\n')\n")
    # A fresh process runs train, so that its children's peak memory is train's (and the small program's).
    measure = (
        "import resource, subprocess, sys\n"
        f"p = subprocess.Popen([{TRAIN!r}], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)\n"
        "n = 0\n"
        "while chunk := p.stderr.read(1 << 20):\n    n += len(chunk)\n"
        "p.wait()\n"
        "print(p.returncode, n, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    done = subprocess.run([sys.executable, "-c", measure], env=tree.env(), capture_output=True, timeout=240)
    status, relayed, peak_kib = map(int, done.stdout.split())
    assert status == 0 and relayed >= 300 * (1 << 20)
    assert peak_kib < 100 * 1024, f"train peaked at {peak_kib} KiB while relaying a 300 MB line"
