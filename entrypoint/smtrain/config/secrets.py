"""Keeping secrets out of the toolkit's own output.

A variable or hyperparameter whose name looks secret (it contains password, passwd, secret, token,
key or credential, in any case) has its value replaced by `****` in every toolkit log line, in the
dry-run plan and in `output/failure`. The program still receives every value unchanged.
Values shorter than MIN_MASKED characters are left alone: masking "1" or "no" everywhere would
garble every line and protect nothing.
"""
from __future__ import annotations

import re
from typing import Iterable, Mapping

SECRET_NAME = re.compile(r"pass(word|wd)?|secret|token|key|credential", re.IGNORECASE)
MASK = "****"
MIN_MASKED = 3

__all__ = ["MASK", "Redactor", "looks_secret"]


def looks_secret(name: str) -> bool:
    """A variable or hyperparameter name whose value must never be shown."""
    return bool(SECRET_NAME.search(name))


class Redactor:
    """Replaces known secret values in text (longest first, so a secret inside another is covered)."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        unique = {v for v in values if len(v) >= MIN_MASKED}
        self._values = tuple(sorted(unique, key=len, reverse=True))
        self._pattern = re.compile("|".join(re.escape(v) for v in self._values)) if self._values else None

    @classmethod
    def of(cls, named_values: Mapping[str, object]) -> "Redactor":
        """From names and values (an environment, decoded hyperparameters): the secret-looking ones."""
        return cls(str(v) for k, v in named_values.items() if looks_secret(str(k)) and v is not None)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        return self._pattern.sub(MASK, text) if self._pattern is not None else text

    def merged(self, other: "Redactor") -> "Redactor":
        """A redactor that masks both this one's values and `other`'s."""
        return Redactor((*self._values, *other._values))
