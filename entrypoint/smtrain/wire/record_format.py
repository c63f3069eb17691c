"""The record formats of Pipe-mode streams, as the config names them and as they travel to the ranks
(the framing itself is smtrain.data.record_reader)."""
from __future__ import annotations

import enum
from typing import Optional

__all__ = ["RecordFormat"]


class RecordFormat(enum.Enum):
    """A Pipe channel's record format."""
    TFRECORD = "tfrecord"
    RECORDIO = "recordio"
    LINES = "lines"

    @classmethod
    def parse(cls, text: str) -> "RecordFormat":
        """The format a name stands for, in any case; ValueError naming the known ones."""
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
