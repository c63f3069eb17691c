"""Record files as a channel's S3 objects hold them, for the Pipe-mode tests."""
from __future__ import annotations

from pathlib import Path

from smtrain.data.record_reader import RecordFormat, encode_recordio, encode_tfrecord

ENCODE = {RecordFormat.TFRECORD: encode_tfrecord, RecordFormat.RECORDIO: encode_recordio,
           RecordFormat.LINES: lambda r: r + b"\n"}


def write_objects(folder: Path, names: list[str], per_object: int, fmt: RecordFormat = RecordFormat.TFRECORD) -> list[bytes]:
    """Objects of records `<object>:<index>:<padding>`; returns all records in object order."""
    folder.mkdir(parents=True, exist_ok=True)
    encode = ENCODE[fmt]
    records = []
    for name in names:
        recs = [f"{name}:{i}:".encode() + b"x" * (i * 13 % 3000) for i in range(per_object)]
        (folder / name).write_bytes(b"".join(encode(r) for r in recs))
        records += recs
    return records
