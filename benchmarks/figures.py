"""What every benchmark shares: its arguments' `--quick` mode, and the one output format it ends with,
`figure <name> <value>`, one per line, last. Ratios are against a baseline measured in the same run, so
runs on different days compare."""
from __future__ import annotations

import argparse
import sys
from typing import Mapping

QUICK_HELP = ("the smallest run that still takes every path and prints every figure (the tests run each "
              "benchmark so, to keep it running); its figures mean nothing")


def parse(parser: argparse.ArgumentParser, quick: Mapping[str, object]) -> argparse.Namespace:
    """The benchmark's arguments; with `--quick`, `quick`'s values are its defaults (given arguments still win)."""
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    if "--quick" in sys.argv[1:]:
        parser.set_defaults(**quick)
    return parser.parse_args()


def print_figures(figures: Mapping[str, float]) -> None:
    for name, value in figures.items():
        print(f"figure {name} {value:.4g}", flush=True)
