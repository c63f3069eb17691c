"""Record streams for the framing tests: payloads that stress each format, encoded as writers do."""
from __future__ import annotations

import random

from smtrain.data.record_reader import RecordFormat, encode_recordio, encode_tfrecord

MAGIC = (0xCED7230A).to_bytes(4, "little")


def sample_payloads() -> list[bytes]:
    """Empty, tiny, non-UTF-8, RecordIO's magic inside, and random records."""
    rng = random.Random(7)
    found = [b"", b"a", b"x" * 3, b"\xff" * 5, MAGIC, b"pre" + MAGIC + b"post" + MAGIC, "héllo wörld".encode()]
    found += [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300))) for _ in range(20)]
    return found


def line_payloads() -> list[bytes]:
    return [p.replace(b"\n", b" ") for p in sample_payloads()]


def payloads_for(fmt: RecordFormat) -> list[bytes]:
    return line_payloads() if fmt is RecordFormat.LINES else sample_payloads()


def recordio(data: bytes) -> bytes:
    """MXNet's RecordIO: a record holding the magic is written as parts split at it (flags 1, 2, 3)."""
    parts = data.split(MAGIC)
    if len(parts) == 1:
        return encode_recordio(data)
    out = b""
    for i, part in enumerate(parts):
        flag = 1 if i == 0 else 3 if i == len(parts) - 1 else 2
        out += MAGIC + ((flag << 29) | len(part)).to_bytes(4, "little") + part + b"\0" * (-len(part) % 4)
    return out


def encode_stream(fmt: RecordFormat, payloads: list[bytes]) -> bytes:
    if fmt is RecordFormat.TFRECORD:
        return b"".join(map(encode_tfrecord, payloads))
    if fmt is RecordFormat.RECORDIO:
        return b"".join(map(recordio, payloads))
    return b"".join(p + b"\n" for p in payloads)
