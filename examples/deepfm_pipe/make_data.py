"""Synthetic click-through-rate data for the DeepFM example, as AWS's DeepFM sample reads it:
tf.train.Example with `feat_ids` (int64 x FIELDS), `feat_vals` (float x FIELDS) and `label` (float).
Clicks follow a hidden pairwise-interaction rule, so the model has something to learn.

    python make_data.py OUT_FOLDER [--files 4] [--per-file 2048]
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

FIELDS, FEATURES = 8, 1000  # feature ids 0..FEATURES-1, FEATURES // FIELDS per field

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--files", type=int, default=4)
parser.add_argument("--per-file", type=int, default=2048)
args = parser.parse_args()
os.makedirs(args.out, exist_ok=True)
rng = np.random.default_rng(7)
weight = rng.normal(size=FEATURES)
per_field = FEATURES // FIELDS
for f in range(args.files):
    with tf.io.TFRecordWriter(os.path.join(args.out, f"part-{f}.tfrecord")) as writer:
        for _ in range(args.per_file):
            ids = np.arange(FIELDS) * per_field + rng.integers(0, per_field, FIELDS)
            vals = rng.uniform(0.5, 1.5, FIELDS)
            logit = (weight[ids] * vals).sum() + weight[ids[0]] * weight[ids[1]] * 2
            label = float(rng.uniform() < 1 / (1 + np.exp(-logit)))
            example = tf.train.Example(features=tf.train.Features(feature={
                "feat_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
                "feat_vals": tf.train.Feature(float_list=tf.train.FloatList(value=vals)),
                "label": tf.train.Feature(float_list=tf.train.FloatList(value=[label])),
            }))
            writer.write(example.SerializeToString())
print(f"wrote {args.files * args.per_file} examples to {args.out}")
