"""Which distribution a job's hyperparameters ask for (which hosts take part: smtrain.plan.shape)."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from .model import Strategy

__all__ = ["strategy_of", "truthy"]

def truthy(value: Any) -> bool:
    """A flag as the SDK writes it: JSON true/false, or the strings 'true'/'false' in any case."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def strategy_of(decoded: Mapping[str, Any]) -> Optional[Strategy]:
    """The TensorFlow strategy the hyperparameters turn on, if any."""
    for strategy in Strategy:
        if truthy(decoded.get(strategy.hyperparameter, False)):
            return strategy
    return None
