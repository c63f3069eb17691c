"""Values of settings that come as a variable or a hyperparameter (the variable wins), checked alike."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError

__all__ = ["tcp_port", "whole_number"]


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


def tcp_port(environ: Mapping[str, str], name: str, default: int) -> int:
    """The TCP port environment variable `name` gives, else `default`; ConfigError naming it when it is not 1-65535."""
    raw = environ.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"environment variable {name}: expected a TCP port 1-65535, got {raw!r}")
    return int(raw)
