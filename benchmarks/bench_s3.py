"""s3:// through the image's TensorFlow plugin against boto3, both against the same S3 server: moto's
server mode on loopback (tests/s3/requirements-moto.txt, /opt/smtrain/moto), started here.

- write: 256 MB through `tf.io.gfile.GFile(..., "wb")` (a multipart upload, 8 MB parts, 8 at a time)
  against boto3's `put_object`; read: the same object through `tf.io.read_file` (the op tf.data input
  pipelines use) against `get_object()["Body"].read()`. Also `GFile(...).read()` of it, and of the same
  bytes on local disk: TensorFlow's Python file object costs the same on both.
- TFRecordDataset over s3:// shards against the same shards read from local disk: 4 x 32 MB of 100 KB
  records, iterated in graph mode (`Dataset.reduce`), as a training input pipeline consumes them.

Alternating rounds (the order rotating), median of each; the server is the same for both sides.

    /opt/smtrain/venv/bin/python benchmarks/bench_s3.py [--rounds 3] [--megabytes 256]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from figures import parse, print_figures  # benchmarks/figures.py  # noqa: E402
from tests.harness.moto import KEYS, start_moto  # noqa: E402


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=256)
    args = parse(parser, quick=dict(rounds=1, megabytes=4))
    work = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    process, url = start_moto(work / "moto.log")
    os.environ.update(KEYS, AWS_ENDPOINT_URL=url, AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    import boto3
    import tensorflow as tf

    try:
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
        s3.create_bucket(Bucket="bench")
        data = os.urandom(args.megabytes << 20)

        def plugin_write() -> None:
            with tf.io.gfile.GFile("s3://bench/plugin.bin", "wb") as f:
                f.write(data)

        def plugin_read() -> None:
            assert int(tf.strings.length(tf.io.read_file("s3://bench/plugin.bin"))) == len(data)

        local_copy = work / "plugin.bin"
        local_copy.write_bytes(data)

        def gfile_read() -> None:
            assert len(tf.io.gfile.GFile("s3://bench/plugin.bin", "rb").read()) == len(data)

        def gfile_local_read() -> None:
            assert len(tf.io.gfile.GFile(str(local_copy), "rb").read()) == len(data)

        def boto3_write() -> None:
            s3.put_object(Bucket="bench", Key="boto3.bin", Body=data)

        def boto3_read() -> None:
            assert len(s3.get_object(Bucket="bench", Key="boto3.bin")["Body"].read()) == len(data)

        local = work / "records"
        local.mkdir()
        record = os.urandom(100 << 10)
        for shard in range(4):
            with tf.io.TFRecordWriter(str(local / f"part-{shard}.tfrecord")) as w:
                for _ in range(320):
                    w.write(record)
            s3.upload_file(str(local / f"part-{shard}.tfrecord"), "bench", f"records/part-{shard}.tfrecord")

        def records(pattern: str):
            files = tf.data.Dataset.list_files(pattern, shuffle=False)
            ds = tf.data.TFRecordDataset(files, num_parallel_reads=4).batch(32).prefetch(2)
            return lambda: ds.reduce(tf.constant(0, tf.int64), lambda n, b: n + tf.size(b, out_type=tf.int64)).numpy()

        sides = {"plugin_write": plugin_write, "boto3_write": boto3_write, "plugin_read": plugin_read,
                 "boto3_read": boto3_read, "tfrecord_s3": records("s3://bench/records/*.tfrecord"),
                 "tfrecord_local": records(str(local / "*.tfrecord")), "gfile_read": gfile_read,
                 "gfile_local_read": gfile_local_read}
        boto3_write()
        plugin_write()
        times: dict[str, list[float]] = {name: [] for name in sides}
        names = list(sides)
        for r in range(args.rounds):
            for pair in range(0, len(names), 2):  # each pair in turn, who goes first alternating
                order = names[pair:pair + 2] if r % 2 == 0 else names[pair:pair + 2][::-1]
                for name in order:
                    times[name].append(_timed(sides[name]))
            print(f"round {r + 1}: " + ", ".join(f"{n} {times[n][-1]:.2f} s" for n in names), flush=True)
        median = {name: statistics.median(t) for name, t in times.items()}
        mb = args.megabytes
        print_figures({
            "s3_plugin_write_mb_s": mb / median["plugin_write"],
            "s3_boto3_write_mb_s": mb / median["boto3_write"],
            "s3_plugin_vs_boto3_write": median["boto3_write"] / median["plugin_write"],
            "s3_plugin_read_mb_s": mb / median["plugin_read"],
            "s3_boto3_read_mb_s": mb / median["boto3_read"],
            "s3_plugin_vs_boto3_read": median["boto3_read"] / median["plugin_read"],
            "s3_gfile_read_mb_s": mb / median["gfile_read"],
            "s3_gfile_read_vs_local": median["gfile_local_read"] / median["gfile_read"],
            "s3_tfrecord_mb_s": 128 * 1.0002 / median["tfrecord_s3"],
            "s3_tfrecord_vs_local": median["tfrecord_local"] / median["tfrecord_s3"],
        })
    finally:
        process.kill()
        process.wait()


if __name__ == "__main__":
    main()
