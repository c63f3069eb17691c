"""Every file system operation TensorFlow asks of s3://, through tf.io.gfile and tf.data, in a plain
program (no smtrain import): prints one JSON object of what it saw. argv: s3://bucket/prefix"""
import json
import os
import sys

import tensorflow as tf

root = sys.argv[1]
g = tf.io.gfile
seen = {}
g.makedirs(f"{root}/a/b")
seen["empty_dir"] = [g.isdir(f"{root}/a/b"), g.listdir(f"{root}/a/b")]
with g.GFile(f"{root}/a/b/x.txt", "w") as f:
    f.write("hello")
with g.GFile(f"{root}/a/b/x.txt", "a") as f:
    f.write(" world")
seen["text"] = g.GFile(f"{root}/a/b/x.txt").read()
seen["listdir"] = sorted(g.listdir(f"{root}/a"))
seen["stat"] = [g.stat(f"{root}/a/b/x.txt").length, g.stat(f"{root}/a").is_directory]
seen["exists"] = [g.exists(f"{root}/a/b/x.txt"), g.exists(f"{root}/a/nothing"), g.isdir(f"{root}/a/b/x.txt")]
g.copy(f"{root}/a/b/x.txt", f"{root}/a/copy.txt")
g.rename(f"{root}/a/copy.txt", f"{root}/a/renamed.txt")
seen["glob"] = sorted(g.glob(f"{root}/a/*.txt"))
g.rename(f"{root}/a/b", f"{root}/moved")
seen["renamed_dir"] = [g.exists(f"{root}/a/b"), sorted(g.listdir(f"{root}/moved"))]
big = os.urandom(12 << 20)  # over SMTRAIN_S3_PART_BYTES: a multipart upload
with g.GFile(f"{root}/big.bin", "wb") as f:
    for i in range(0, len(big), 1 << 20):
        f.write(big[i:i + (1 << 20)])
with g.GFile(f"{root}/big.bin", "rb") as f:
    f.seek(5 << 20)
    middle = f.read(3 << 20)
seen["big"] = [g.stat(f"{root}/big.bin").length == len(big), g.GFile(f"{root}/big.bin", "rb").read() == big,
               middle == big[5 << 20:8 << 20]]
for shard in range(3):
    with tf.io.TFRecordWriter(f"{root}/records/part-{shard}.tfrecord") as w:
        for i in range(1000):
            w.write(f"{shard}:{i}".encode() * 50)
files = tf.data.Dataset.list_files(f"{root}/records/*.tfrecord", shuffle=False)
records = list(tf.data.TFRecordDataset(files, num_parallel_reads=2).as_numpy_iterator())
seen["tfrecords"] = [len(records), len(set(records))]
g.remove(f"{root}/a/renamed.txt")
try:
    g.rmtree(f"{root}/a")
    g.remove(f"{root}/a/renamed.txt")
except tf.errors.NotFoundError as error:
    seen["removed"] = str(error)
seen["after_rmtree"] = g.exists(f"{root}/a")
errors = {}
for name, path in (("missing_key", f"{root}/no/such.txt"), ("missing_bucket", "s3://no-such-bucket-smtrain/x.txt")):
    try:
        g.GFile(path).read()
    except tf.errors.OpError as error:
        errors[name] = [type(error).__name__, error.message]
seen["errors"] = errors
print(json.dumps(seen))
