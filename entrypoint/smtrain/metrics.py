"""Metric lines that SageMaker's metric definitions match: `name=value;` pairs on one line.

    from smtrain.metrics import log_metrics
    log_metrics(epoch=3, loss=0.1234, accuracy=0.98)      # prints "epoch=3; loss=0.1234; accuracy=0.98;"
    model.fit(..., callbacks=[smtrain.callbacks.MetricsCallback()])   # one line per epoch (and every N batches)

Matching `metric_definitions` for the SageMaker SDK (`\\b` keeps `loss` from matching `val_loss`):

    [{"Name": "loss", "Regex": "\\\\bloss=([-+0-9.eE]+|nan|inf);"},
     {"Name": "val_loss", "Regex": "\\\\bval_loss=([-+0-9.eE]+|nan|inf);"}]
"""
from __future__ import annotations

import re
import sys
from typing import Any

__all__ = ["log_metrics", "metric_line"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")


def metric_line(**values: Any) -> str:
    """`name=value;` for each value, in the order given; floats with up to 6 significant digits."""
    parts = []
    for name, value in values.items():
        if not _NAME.match(name):
            raise ValueError(f"metric name {name!r}: use letters, digits and _ . : / - (no spaces, '=' or ';')")
        text = f"{value:.6g}" if isinstance(value, float) else str(int(value) if isinstance(value, bool) else value)
        parts.append(f"{name}={text};")
    return " ".join(parts)


def log_metrics(**values: Any) -> None:
    """Print one metric line (it also counts as a sign of life for the stall watchdog)."""
    from . import progress

    progress.alive()
    sys.stdout.write(metric_line(**values) + "\n")
    sys.stdout.flush()
