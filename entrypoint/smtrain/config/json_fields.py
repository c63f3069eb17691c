"""Reading SageMaker's JSON config files: a file's object, a field of an expected type, errors that name the
file, the field and what was expected."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError

__all__ = ["expect_object", "field", "kind_name", "read_json", "type_name"]


def read_json(path: Path, missing: Callable[[], Any]) -> Any:
    """The JSON in `path` (`missing()` where there is no such file); ConfigError naming the file otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return missing()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


def expect_object(value: Any, where: str) -> dict:
    """`value` when it is a JSON object; ConfigError naming `where` otherwise."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type_name(value)}")
    return value


def type_name(value: Any) -> str:
    """How an error names the JSON type of `value`."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def field(obj: dict, name: str, kind: type, where: str, required: bool = True) -> Any:
    """`obj[name]` when it is a `kind`; None where it is absent and not `required`; ConfigError otherwise."""
    if name not in obj:
        if required:
            raise ConfigError(f"{where}: missing field '{name}' (expected {kind_name(kind)})")
        return None
    value = obj[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(
            f"{where}: field '{name}' must be {kind_name(kind)}, got {type_name(value)} {json.dumps(value)[:80]}"
        )
    return value


def kind_name(kind: type) -> str:
    """How an error names an expected type."""
    return {str: "a string", list: "a list", dict: "an object", int: "an integer"}[kind]
