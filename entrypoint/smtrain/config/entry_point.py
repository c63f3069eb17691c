"""The program's name as sagemaker-training 5.1.4 admits it (`process.validate_entry_point`): a plain
relative path inside the code folder - not empty, not starting with `-` (an option to the interpreter)
or `/` (an absolute path), no `.` or `..` segment, only letters, digits and `. _ + - /`. Anything else
cannot name a file of the job's code, so refusing it loses no working job; the same rule serves the
program given by `sagemaker_program`/`SAGEMAKER_PROGRAM` and by SDK v3's `SourceCode(entry_script=...)`."""
from __future__ import annotations

import re

from ..errors import ConfigError

__all__ = ["check_entry_point", "check_code_path"]

_SAFE = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._+-]*(/[A-Za-z0-9._+-]+)*$")
_SAFE_CHARACTER = re.compile(r"[A-Za-z0-9._+/-]")
RULE = ("a path inside the code folder: letters, digits, '.', '_', '+', '-' and '/', not starting with '-' "
        "or '/', without '.' or '..' segments (e.g. train.py or bin/train.sh)")


def check_entry_point(name: str, where: str) -> str:
    """`name` when it is a safe relative path; ConfigError naming it, `where` it came from and the rule."""
    return check_code_path(name, where, "the program")


def check_code_path(name: str, where: str, what: str) -> str:
    """`name` (`what` it names: "the program", "the requirements file") when it is a safe relative path in the
    code folder; ConfigError naming it, `where` it came from and the rule."""
    if not name:
        raise ConfigError(f"{where}: the name of {what} is empty; expected {RULE}")
    if not _SAFE.match(name):
        unsupported = sorted({c for c in name if not _SAFE_CHARACTER.match(c)})
        if unsupported:
            why = "the character(s) " + ", ".join(repr(c) for c in unsupported)
        elif name.startswith("-"):
            why = "a leading '-', which is read as an option"
        elif name.startswith("/"):
            why = "a leading '/', which makes it an absolute path"
        else:
            why = "an unsupported character at the start"
        raise ConfigError(f"{where}: {what} {name!r} has {why}; expected {RULE}")
    if any(segment in (".", "..") for segment in name.split("/")):
        raise ConfigError(f"{where}: {what} {name!r} has a '.' or '..' segment; expected {RULE}")
    return name
