"""Pipe-mode throughput on real FIFOs, in one run (2-core VM: every figure shares the CPU with the feeder).

  cat              `cat FIFO > /dev/null` of the same bytes: the pipe's limit
  reader           smtrain.pipes.records (CRCs checked), counting records
  reader shuffled  the same for a channel with a ShuffleConfig: it also keeps each record's 64-bit
                   fingerprint (what a checkpoint stores to resume the epoch exactly once); the
                   fingerprint's own cost per record is timed apart (fingerprints.fingerprint on the
                   records' payloads: the difference of two stream timings is below this VM's noise)
  native dataset   smtrain.pipes.dataset (tf.data, smtrain's native op) iterated in batches of 256
  batched dataset  smtrain.pipes.dataset(batch_size=N): the native op frames whole batches in C++
  python dataset   the same through the Python fallback (SMTRAIN_NATIVE_PIPES=0)
  TFRecordDataset  tf.data.TFRecordDataset on a regular (cached) file, iterated in batches of 256
                   (N for the small records: TFRecordDataset(file).batch(N))
  demux P=n        feeder -> demultiplexer -> n reader processes; total, against one reader (for the
                   small records each reader reads batches: against one batched reader)
  parse pipe/file  the end-to-end figure for small records: DeepFM-shaped tf.train.Examples (39 int64
                   ids, 39 float values, a label) through batch -> tf.io.parse_example, from the Pipe
                   (batched dataset) and from a cached file (TFRecordDataset(file).batch(N))

Records of 100 KiB and 100 bytes get every method (streams of --mb each); 1 KiB the batched ones
(a fifth of that); N = --batch (1024). The demultiplexer frames records in native code
(smtrain.data.frames) whatever an earlier measure left in this process's environment.

    /opt/smtrain/venv/bin/python benchmarks/bench_pipes.py [--mb 512] [--repeat 5] [--batch 1024] [--demux-only | --job-dealing]

--demux-only measures the 100-byte records' cat, batched dataset and demux P=2 / P=4 alone (no other
method, no DeepFM), and prints each run's ratios too: the figures that depend most on how many cores
the feeder, the demultiplexer and the readers share (run it under `taskset -c 0,1` for two).

--job-dealing measures one host of a 2-host job whose FullyReplicated channel is dealt across the job's
hosts (`demux P=n, 2 hosts`: the stream dealt to the job's 2n ranks, this host's n ranks reading their
blocks, the other host's blocks spliced to /dev/null) against the same stream dealt to this host's n
ranks alone (`demux P=n`, SMTRAIN_PIPE_DEALING=host), P=2 and P=4, 100-KiB and 100-byte records: the
time this host takes to get through an epoch. The other host's demultiplexer runs on its own machine
in a job, so not here.

Each figure is the median of --repeat runs (this VM's throughput varies by up to 2x between runs).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from smtrain import pipes  # noqa: E402
from smtrain.data.demux import demux_epoch  # noqa: E402
from smtrain.data.job_dealing import JobDealt  # noqa: E402
from smtrain.data.fingerprints import fingerprint, to_bytes  # noqa: E402
from smtrain.data.record_reader import RecordFormat, encode_tfrecord  # noqa: E402
from smtrain.rank.launcher import cpu_share  # noqa: E402

READER = """
import sys, time
from smtrain import pipes
print("ready", flush=True)
n = sum(1 for _ in pipes.records("c", 0, environ={"SM_PIPE_C": sys.argv[1], "SM_PIPE_FORMAT_C": "tfrecord"}))
print(n, flush=True)
"""
BATCHED_READER = """
import os, sys
os.environ.update(TF_CPP_MIN_LOG_LEVEL="2", SM_PIPE_C=sys.argv[1], SM_PIPE_FORMAT_C="tfrecord")
from smtrain import pipes
from smtrain.data.record_reader import encode_tfrecord
import tensorflow as tf
# TensorFlow's first iterator in a process costs about a second of CPU (lazy symbol binding, thread
# pools, graph passes): spent here on a small file, before the clock, as the one reader's process did.
warm = sys.argv[1] + "-warm"
with open(warm + "_0", "wb") as f:
    f.write(encode_tfrecord(bytes(100)) * 5000)
for _ in pipes.epochs_dataset("w", [0], pipes.RecordFormat.TFRECORD, warm, batch_size=int(sys.argv[2])):
    pass
batches = iter(pipes.dataset("c", batch_size=int(sys.argv[2]), timeout=60))  # opens the FIFO at the first batch
print("ready", flush=True)
print(sum(int(b.shape[0]) for b in batches), flush=True)
"""


def make_file(path: Path, record_size: int, total_mb: int) -> int:
    record = encode_tfrecord(os.urandom(record_size))
    count = total_mb * (1 << 20) // len(record)
    with open(path, "wb") as f:
        block = record * max(1, (1 << 22) // len(record))
        per_block = len(block) // len(record)
        for _ in range(count // per_block):
            f.write(block)
        f.write(record * (count % per_block))
    return count


FEEDER = """
import sys
from pathlib import Path
from smtrain.data.feeder import feed_channel
from smtrain.data.fifo import WriterStop
feed_channel(Path(sys.argv[1]), "c", [Path(sys.argv[2])], None, 1, WriterStop())
"""


class FeederProcess:
    """SageMaker's writer is a process of its own: so is the feeder here (as a thread of this process
    it would share the GIL with the reading loop it is measured against). It has made FIFO 0 and waits
    for its reader once `fed` returns, so no clock counts its start."""

    def __init__(self, data: Path, source: Path) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", FEEDER, str(data), str(source)])
        deadline = time.monotonic() + 30
        while not (data / "c_0").exists():
            assert time.monotonic() < deadline and self.process.poll() is None, "the feeder did not start"
            time.sleep(0.001)

    def join(self, timeout: float) -> None:
        assert self.process.wait(timeout) == 0


def fed(data: Path, source: Path) -> FeederProcess:
    (data / "c_0").unlink(missing_ok=True)
    return FeederProcess(data, source)


def time_cat(data: Path, source: Path) -> float:
    feeder = fed(data, source)
    start = time.perf_counter()
    subprocess.run(f"cat {data / 'c_0'} > /dev/null", shell=True, check=True)
    elapsed = time.perf_counter() - start
    feeder.join(30)
    return elapsed


SHUFFLED = {"SM_PIPE_SHUFFLED_C": "1"}  # what train exports for a channel with a ShuffleConfig


def time_reader(data: Path, source: Path, count: int, shuffled: bool = False) -> float:
    feeder = fed(data, source)
    environ = {"SM_PIPE_C": str(data / "c"), "SM_PIPE_FORMAT_C": "tfrecord",
               **(SHUFFLED if shuffled else {})}
    start = time.perf_counter()
    n = sum(1 for _ in pipes.records("c", 0, environ=environ))
    elapsed = time.perf_counter() - start
    feeder.join(30)
    assert n == count, (n, count)
    if shuffled:
        kept = pipes.consumed_fingerprints("c", count)
        assert kept is not None and len(to_bytes(kept)) == 8 * count  # the checkpoint's state: 8 bytes a record
    return elapsed


def time_reader_dataset(data: Path, source: Path, count: int, native: bool, batch: int = 0) -> float:
    """`batch` > 0: the batched source (batches of `batch` framed by the native op)."""
    feeder = fed(data, source)
    os.environ.update(SM_PIPE_C=str(data / "c"), SM_PIPE_FORMAT_C="tfrecord", SMTRAIN_NATIVE_PIPES=str(int(native)))
    start = time.perf_counter()
    batches = pipes.dataset("c", batch_size=batch) if batch else pipes.dataset("c").batch(256)
    n = sum(int(b.shape[0]) for b in batches)
    elapsed = time.perf_counter() - start
    feeder.join(30)
    assert n == count
    return elapsed


def deepfm_examples(path: Path, count: int) -> None:
    """DeepFM-shaped tf.train.Examples: 39 int64 feature ids, 39 float values, a label."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=rng.integers(0, 1 << 20, 39))),
                "values": tf.train.Feature(float_list=tf.train.FloatList(value=rng.random(39))),
                "label": tf.train.Feature(float_list=tf.train.FloatList(value=[float(rng.integers(0, 2))])),
            })).SerializeToString())


def parse_deepfm(batch):
    import tensorflow as tf

    return tf.io.parse_example(batch, {"ids": tf.io.FixedLenFeature([39], tf.int64),
                                       "values": tf.io.FixedLenFeature([39], tf.float32),
                                       "label": tf.io.FixedLenFeature([1], tf.float32)})


def time_parse(data: Path, source: Path, count: int, batch: int, pipe: bool) -> float:
    """Records/s users feel: batch -> parse_example, from the Pipe or from a cached file."""
    import tensorflow as tf

    if pipe:
        feeder = fed(data, source)
        os.environ.update(SM_PIPE_C=str(data / "c"), SM_PIPE_FORMAT_C="tfrecord", SMTRAIN_NATIVE_PIPES="1")
        batches = pipes.dataset("c", batch_size=batch)
    else:
        batches = tf.data.TFRecordDataset(str(source)).batch(batch)
    start = time.perf_counter()
    n = sum(int(b["label"].shape[0]) for b in batches.map(parse_deepfm, num_parallel_calls=2).prefetch(2))
    elapsed = time.perf_counter() - start
    if pipe:
        feeder.join(30)
    assert n == count
    return elapsed


def fingerprint_seconds(record_size: int, count: int = 2000) -> float:
    """Seconds to fingerprint one record's payload (the median of five passes over `count` records)."""
    payloads = [os.urandom(record_size) for _ in range(16)]
    passes = []
    for _ in range(5):
        start = time.perf_counter()
        for i in range(count):
            fingerprint(payloads[i % 16])
        passes.append((time.perf_counter() - start) / count)
    return statistics.median(passes)


def time_tfrecorddataset(source: Path, count: int, batch: int = 256) -> float:
    import tensorflow as tf

    start = time.perf_counter()
    n = sum(int(b.shape[0]) for b in tf.data.TFRecordDataset(str(source)).batch(batch))
    elapsed = time.perf_counter() - start
    assert n == count
    return elapsed


def time_demux(data: Path, source: Path, ranks: int, count: int, batch: int = 0, hosts: int = 1) -> float:
    """`batch` > 0: each reader reads batches through the native op (else records through Python); `hosts` > 1:
    dealt across that many hosts' `ranks` ranks each, of which this host's are the first."""
    targets = {r: data / f"r{r}_0" for r in range(ranks)}
    for t in targets.values():
        t.unlink(missing_ok=True)
        os.mkfifo(t)
    # The feeder starts before the readers' seconds of imports, as train starts it before the ranks:
    # it opens FIFO 0 the moment the demultiplexer does (smtrain.data.fifo.WriterStop). A feeder that
    # polled for its reader, backing off to 100 ms, cost up to that much here (2026-11-25: P=2 / P=4
    # 0.88x / 0.76x of one batched reader with it, 1.05x / 0.91x without).
    feeder = fed(data, source)

    def argv(rank: int) -> list[str]:
        prefix = str(data / f"r{rank}")
        return [sys.executable, "-c", BATCHED_READER, prefix, str(batch)] if batch else [sys.executable, "-c", READER, prefix]

    # Each reader as `train` starts a rank on a host without GPUs: cores / P threads for TF and OpenMP
    # (smtrain.rank.launcher.cpu_share). With TF's defaults, P processes each spin a pool of one
    # thread per core on the cores the demultiplexer needs.
    # And the native op, whatever the last measure set in this process's environment (the Python
    # fallback's measure sets SMTRAIN_NATIVE_PIPES=0: earlier runs timed the fallback here).
    env = {**os.environ, **cpu_share({"SM_LOCAL_SIZE": str(ranks), "SM_NUM_GPUS": "0"}, os.cpu_count() or 1),
           "SMTRAIN_NATIVE_PIPES": "1"}
    os.environ["SMTRAIN_NATIVE_PIPES"] = "1"  # the demultiplexer (in this process) frames in native code, as in train
    readers = [subprocess.Popen(argv(r), stdout=subprocess.PIPE, text=True, env=env) for r in range(ranks)]
    for p in readers:  # started and imported before the clock starts, as the one reader's process was
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    start = time.perf_counter()
    job = JobDealt(tuple(range(ranks * hosts)), 0) if hosts > 1 else None
    result = demux_epoch(data / "c_0", targets, RecordFormat.TFRECORD, rank_wait_s=30, source_wait_s=30, job=job)
    # Each reader prints its count when it has read everything: the clock stops there, not when the
    # processes are gone (a process that ran TensorFlow takes about a second to exit here).
    got = sum(int(p.stdout.readline()) for p in readers)  # type: ignore[union-attr]
    elapsed = time.perf_counter() - start
    for p in readers:
        p.communicate()
    feeder.join(30)
    assert got == sum(result.records.values())
    assert (result.job_records == count) if job else (got == count - result.left_over)
    return elapsed


def job_dealing(data: Path, mb: int, repeat: int, batch: int, readers: tuple[int, ...]) -> dict[str, float]:
    """`--job-dealing`: per record size and P, this host's epoch through the job's dealing against its own."""
    figures = {}
    print(f"{'records':<10}{'method':<24}{'MB/s':>9}{'vs this host alone':>20}", flush=True)
    for size in (100 * 1024, 100):
        source = data / f"src-{size}"
        count = make_file(source, size, mb)
        subprocess.run(["cat", str(source)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
        label = {100 * 1024: "100 KiB", 100: "100 B"}[size]
        small = size < 100 * 1024
        for ranks in readers:
            measures = {f"demux P={ranks}": lambda: time_demux(data, source, ranks, count, batch if small else 0),
                        f"demux P={ranks}, 2 hosts": lambda: time_demux(data, source, ranks, count,
                                                                         batch if small else 0, hosts=2)}
            samples: dict[str, list[float]] = {name: [] for name in measures}
            for _ in range(repeat):  # interleaved, so slow spells hit both alike
                for name, measure in measures.items():
                    samples[name].append(measure())
            alone, job = (statistics.median(samples[name]) for name in measures)
            for name, seconds in zip(measures, (alone, job)):
                print(f"{label:<10}{name:<24}{source.stat().st_size / seconds / 1e6:>9.0f}{alone / seconds:>20.2f}",
                      flush=True)
            figures[f"job_dealing_p{ranks}_vs_host_{label.replace(' ', '')}"] = alone / job
        source.unlink()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=512, help="stream size for 100-KiB and 100-byte records (1-KiB: a fifth)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1024, help="records per batch of the batched source (small records)")
    parser.add_argument("--demux-only", action="store_true",
                        help="100-byte records only: cat, one batched reader, demux P=2 and P=4 (see above)")
    parser.add_argument("--job-dealing", action="store_true",
                        help="demux P=2 and P=4 on one host of 2 against this host alone (see above)")
    parser.add_argument("--readers", type=int, nargs="+", default=[2, 4], help="--job-dealing's P (readers a host)")
    args = parse(parser, quick=dict(mb=2, repeat=1, batch=64, readers=[2]))
    import tensorflow as tf

    tf.data.Dataset.range(1).reduce(0, lambda a, b: a)  # TensorFlow's start-up is not what is measured
    from smtrain.data.native import native_pipes

    if native_pipes() is None:
        sys.exit("bench_pipes: the native op is not built (scripts/build-native.sh); nothing to compare")
    n = args.batch
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        if args.job_dealing:
            print_figures(job_dealing(data, args.mb, args.repeat, n, tuple(args.readers)))
            return
        print(f"{'records':<10}{'method':<20}{'MB/s':>9}{'records/s':>12}{'vs cat':>8}"
              + ("" if args.demux_only else f"{'vs TFRecordDataset':>20}"), flush=True)
        figures = {}
        # 100-byte records as many MB as the large ones: a stream one reader drains in 50 ms (a fifth)
        # measures mostly the fixed cost of an epoch (opening FIFOs, waking processes, its end)
        sizes = ((100, args.mb),) if args.demux_only else ((100 * 1024, args.mb), (100, args.mb), (1024, args.mb // 5))
        for size, mb in sizes:
            source = data / f"src-{size}"
            count = make_file(source, size, mb)
            nbytes = source.stat().st_size
            subprocess.run(["cat", str(source)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
            small = size < 100 * 1024
            measures = {
                "cat": lambda: time_cat(data, source),
                "batched dataset": lambda: time_reader_dataset(data, source, count, native=True, batch=n if small else 256),
                "TFRecordDataset": lambda: time_tfrecorddataset(source, count, n if small else 256),
            }
            if args.demux_only:
                measures = {"cat": measures["cat"], "batched dataset": measures["batched dataset"],
                            "demux P=2": lambda: time_demux(data, source, 2, count, n),
                            "demux P=4": lambda: time_demux(data, source, 4, count, n)}
            elif size != 1024:
                measures.update({
                    "reader": lambda: time_reader(data, source, count),
                    "reader shuffled": lambda: time_reader(data, source, count, shuffled=True),
                    "native dataset": lambda: time_reader_dataset(data, source, count, native=True),
                    "python dataset": lambda: time_reader_dataset(data, source, count, native=False),
                    "demux P=2": lambda: time_demux(data, source, 2, count, n if small else 0),
                    "demux P=4": lambda: time_demux(data, source, 4, count, n if small else 0),
                })
            samples: dict[str, list[float]] = {name: [] for name in measures}
            for _ in range(args.repeat):  # interleaved, so slow spells hit every method alike
                for name, measure in measures.items():
                    samples[name].append(measure())
                if args.demux_only:
                    one = samples["batched dataset"][-1]
                    print(f"run: batched dataset {one:.3f} s, demux P=2 {samples['demux P=2'][-1]:.3f} s "
                          f"({one / samples['demux P=2'][-1]:.2f}x), P=4 {samples['demux P=4'][-1]:.3f} s "
                          f"({one / samples['demux P=4'][-1]:.2f}x)", flush=True)
            times = {name: statistics.median(values) for name, values in samples.items()}
            label = {100 * 1024: "100 KiB", 100: "100 B", 1024: "1 KiB"}[size]
            for method, seconds in times.items():
                against_file = f"{times['TFRecordDataset'] / seconds:>20.2f}" if "TFRecordDataset" in times else ""
                print(f"{label:<10}{method:<20}{nbytes / seconds / 1e6:>9.0f}{count / seconds:>12.0f}"
                      f"{times['cat'] / seconds:>8.2f}{against_file}")
            tag = label.replace(" ", "")
            if "TFRecordDataset" in times:
                figures[f"batched_vs_tfrecorddataset_{tag}"] = times["TFRecordDataset"] / times["batched dataset"]
            figures[f"batched_vs_cat_{tag}"] = times["cat"] / times["batched dataset"]
            if "reader" in times:
                figures[f"batched_vs_native_dataset_{tag}"] = times["native dataset"] / times["batched dataset"]
                figures[f"reader_vs_tfrecorddataset_{tag}"] = times["TFRecordDataset"] / times["reader"]
                figures[f"fingerprint_us_per_record_{tag}"] = fingerprint_seconds(size) * 1e6
                figures[f"dataset_vs_tfrecorddataset_{tag}"] = times["TFRecordDataset"] / times["native dataset"]
                figures[f"python_dataset_vs_tfrecorddataset_{tag}"] = times["TFRecordDataset"] / times["python dataset"]
            if "demux P=2" in times:
                one = times["batched dataset"] if small else times["reader"]
                for ranks in (2, 4):
                    figures[f"demux_p{ranks}_vs_{'batched' if small else 'reader'}_{tag}"] = one / times[f"demux P={ranks}"]
            source.unlink()
        if args.demux_only:
            print_figures(figures)
            return
        source = data / "deepfm"
        count = 200_000 * args.mb // 512
        deepfm_examples(source, count)
        subprocess.run(["cat", str(source)], stdout=subprocess.DEVNULL, check=True)
        parsing = {"parse pipe": lambda: time_parse(data, source, count, n, pipe=True),
                   "parse file": lambda: time_parse(data, source, count, n, pipe=False)}
        samples = {name: [] for name in parsing}
        for _ in range(args.repeat):
            for name, measure in parsing.items():
                samples[name].append(measure())
        for name, values in samples.items():
            print(f"{'DeepFM':<10}{name:<20}{source.stat().st_size / statistics.median(values) / 1e6:>9.0f}"
                  f"{count / statistics.median(values):>12.0f}")
        figures["parse_example_records_per_s_pipe"] = count / statistics.median(samples["parse pipe"])
        figures["parse_example_pipe_vs_file"] = statistics.median(samples["parse file"]) / statistics.median(samples["parse pipe"])
    print_figures(figures)


if __name__ == "__main__":
    main()
