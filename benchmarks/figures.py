"""The one output format every benchmark ends with: `figure <name> <value>`, one per line, last.
Ratios are against a baseline measured in the same run, so runs on different days compare."""
from __future__ import annotations

from typing import Mapping


def print_figures(figures: Mapping[str, float]) -> None:
    for name, value in figures.items():
        print(f"figure {name} {value:.4g}", flush=True)
