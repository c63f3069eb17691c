"""A plan's typed values as JSON for `train --dry-run`: named tuples as objects of their fields, enums as their
values, paths as strings, sequences as lists - one rule for every value, no hand-written field lists."""
from __future__ import annotations

import enum
from pathlib import PurePath
from typing import Any, Mapping

__all__ = ["plain"]


def plain(value: Any) -> Any:
    """`value` as JSON-ready data."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {name: plain(field) for name, field in value._asdict().items()}
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (tuple, list, set, frozenset)):
        return [plain(item) for item in value]
    return value
