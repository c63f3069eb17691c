"""A stand-in for Horovod's `tensorflow2_synthetic_benchmark.py` (not in this repository: see
benchmarks/bench_hvd_synthetic.py) in that benchmark's quick mode: the same command line and the last line
the benchmark reads, from the first rank; nothing measured, nothing of TensorFlow loaded."""
import argparse
import os

parser = argparse.ArgumentParser()
for option in ("--model", "--batch-size", "--num-warmup-batches", "--num-batches-per-iter", "--num-iters"):
    parser.add_argument(option, required=True)
parser.parse_args()
if os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "0":
    print("Total img/sec on 2 CPU(s): 1.0", flush=True)
