"""Synthetic TFRecord data for the demo job: tf.train.Example with id (int64), x (4 floats), y (float).

    python make_data.py OUT_FOLDER [--files 2] [--per-file 64]
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--files", type=int, default=2)
parser.add_argument("--per-file", type=int, default=64)
args = parser.parse_args()
os.makedirs(args.out, exist_ok=True)
for f in range(args.files):
    with tf.io.TFRecordWriter(os.path.join(args.out, f"part-{f}.tfrecord")) as writer:
        for i in range(f * args.per_file, (f + 1) * args.per_file):
            x = [float(i % 7), float(i % 5), float(i % 3), 1.0]
            example = tf.train.Example(features=tf.train.Features(feature={
                "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                "y": tf.train.Feature(float_list=tf.train.FloatList(value=[2 * x[0] - x[1] + 0.5 * x[2]])),
            }))
            writer.write(example.SerializeToString())
print(f"wrote {args.files * args.per_file} records to {args.out}")
