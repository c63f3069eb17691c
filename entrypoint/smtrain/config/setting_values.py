"""Values of settings that come as a variable or a hyperparameter (the variable wins), checked alike."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError

__all__ = ["whole_number"]


def whole_number(decoded: Mapping[str, Any], environ: Mapping[str, str], hp: str, env: str, default: int, where: str,
                 unit: str = "") -> int:
    """A whole number >= 0: the variable `env`, else the hyperparameter `hp`, else `default`;
    ConfigError naming both (and `unit`) for anything else."""
    raw = environ.get(env, decoded.get(hp))
    if raw is None:
        return default
    text = str(raw).strip()
    if not text.isdigit():
        raise ConfigError(f"{where}: {hp} (or {env}) must be a whole number{f' of {unit}' if unit else ''} >= 0, "
                          f"got {raw!r}")
    return int(text)
