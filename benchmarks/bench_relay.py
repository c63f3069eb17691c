"""What the relay costs a channel read by one reader, where restarts in place are asked for: SageMaker's
FIFO read through a demultiplexer (`--restartable --ranks 1`, splice in the kernel) against the same
FIFO read directly, by smtrain.pipes.records (CRCs checked) in one process and the local feeder playing
SageMaker's part, in interleaved runs (2-core VM: the feeder, the relay and the reader share it).

  direct    feeder -> reader
  relayed   feeder -> demultiplexer (already started, as `train` starts it before the program) -> reader

    /opt/smtrain/venv/bin/python benchmarks/bench_relay.py [--mb 1024] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

from smtrain import pipes
from smtrain.data.feeder import Feeder
from smtrain.data.record_reader import encode_tfrecord
from smtrain.wire.pipe_assignment import demux_prefix

RECORD = b"x" * 100 * 1024


def one_run(folder: Path, source: Path, relayed: bool) -> float:
    """MB/s of one epoch read by smtrain.pipes.records."""
    data = Path(tempfile.mkdtemp(dir=folder))
    feeder = Feeder(data, {"c": [source]}, {"c": None}, epochs=1).start()
    relay = None
    prefix = data / "c"
    if relayed:
        relay = subprocess.Popen([sys.executable, "-m", "smtrain.data.demux", "--data", str(data), "--channel", "c",
                                  "--ranks", "1", "--format", "tfrecord", "--restartable"], stderr=subprocess.DEVNULL)
        prefix = demux_prefix(data, "c", 0)
        deadline = time.monotonic() + 30
        while not Path(f"{prefix}_0").exists():  # its FIFO made: it has started, as before any program
            if time.monotonic() > deadline:
                raise RuntimeError("the relay did not start")
            time.sleep(0.01)
    env = {"SM_PIPE_C": str(prefix), "SM_PIPE_FORMAT_C": "tfrecord"}
    started = time.perf_counter()
    read = sum(len(record) for record in pipes.records("c", 0, environ=env, timeout=30))
    took = time.perf_counter() - started
    if relay is not None:
        relay.terminate()
        relay.wait(30)
    feeder.stop.set()
    return read / took / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parse(parser, quick=dict(mb=4, repeat=1))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = folder / "object"
        with open(source, "wb") as f:
            for _ in range(args.mb * 1024 * 1024 // len(RECORD)):
                f.write(encode_tfrecord(RECORD))
        runs: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeat):
            for relayed in (False, True):
                runs[relayed].append(one_run(folder, source, relayed))
    direct, relayed = statistics.median(runs[False]), statistics.median(runs[True])
    print(f"{args.mb} MB of 100-KiB records, median of {args.repeat}: direct {direct:.0f} MB/s, "
          f"relayed {relayed:.0f} MB/s")
    print_figures({"relay_direct_mb_s": direct, "relay_relayed_mb_s": relayed, "relay_vs_direct": relayed / direct})


if __name__ == "__main__":
    main()
