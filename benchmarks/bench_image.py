"""The image's size and build time, per flavour, as a user meets them: the shipped image's size
(`docker image inspect`) and, with --build, the wall time of `scripts/build-image.sh FLAVOUR` with
whatever base image and build cache Docker holds (from nothing on a fresh machine: the base from the
mirror and every stage).

    /opt/smtrain/venv/bin/python benchmarks/bench_image.py [--build] [--flavours cpu gpu]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.harness.docker_cluster import ensure_docker  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", action="store_true", help="build each flavour first, timed")
    parser.add_argument("--flavours", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    args = parse(parser, quick=dict())
    ensure_docker()
    figures: dict[str, float] = {}
    for flavour in args.flavours:
        if args.build:
            started = time.monotonic()
            subprocess.run([str(REPO / "scripts" / "build-image.sh"), flavour], check=True, stdout=subprocess.DEVNULL)
            figures[f"image_{flavour}_build_min"] = (time.monotonic() - started) / 60
        size = subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", f"smtrain:{flavour}"], check=True,
                              capture_output=True, text=True).stdout
        figures[f"image_{flavour}_gb"] = int(size) / 1e9
        print(f"smtrain:{flavour}: {int(size) / 1e9:.2f} GB", flush=True)
    print_figures(figures)


if __name__ == "__main__":
    main()
