"""DeepFM click-through-rate model (the model of AWS's DeepFM Horovod sample) in TF2, written against
the original `sagemaker_tensorflow.PipeModeDataset` API: Pipe mode, Horovod, checkpoints, metric lines.

Unchanged from a TF-container script except what TF2 needs: PipeModeDataset reads this rank's own
FIFOs under `train` (no `.shard()`), a custom Horovod loop instead of Estimator, and checkpoints in
/opt/ml/checkpoints through tf.train.CheckpointManager (rank 0 saves; every rank restores).
"""
import argparse
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402
from sagemaker_tensorflow import PipeModeDataset  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--field-size", type=int, default=8)
parser.add_argument("--feature-size", type=int, default=1000)
parser.add_argument("--embedding-size", type=int, default=8)
parser.add_argument("--learning-rate", type=float, default=0.005)
parser.add_argument("--model_dir", default="")
args, _ = parser.parse_known_args()
hvd.init()


class DeepFM(tf.keras.Model):
    """First-order weights + factorisation machine (pairwise) + a deep part, on shared embeddings."""

    def __init__(self, features: int, embedding: int) -> None:
        super().__init__()
        self.first_order = tf.keras.layers.Embedding(features, 1)
        self.embeddings = tf.keras.layers.Embedding(features, embedding)
        self.deep = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu"),
                                         tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(1)])
        self.bias = tf.Variable(0.0)

    def call(self, ids, vals):
        vals = tf.expand_dims(vals, -1)
        first = tf.reduce_sum(self.first_order(ids) * vals, axis=[1, 2])
        embedded = self.embeddings(ids) * vals  # batch x fields x k
        summed = tf.reduce_sum(embedded, axis=1)
        pairwise = 0.5 * tf.reduce_sum(tf.square(summed) - tf.reduce_sum(tf.square(embedded), axis=1), axis=1)
        deep = tf.squeeze(self.deep(tf.reshape(embedded, [tf.shape(ids)[0], -1])), -1)
        return self.bias + first + pairwise + deep


spec = {"feat_ids": tf.io.FixedLenFeature([args.field_size], tf.int64),
        "feat_vals": tf.io.FixedLenFeature([args.field_size], tf.float32),
        "label": tf.io.FixedLenFeature([1], tf.float32)}
model = DeepFM(args.feature_size, args.embedding_size)
optimizer = tf.keras.optimizers.Adam(args.learning_rate * hvd.size())
epoch_done = tf.Variable(0, dtype=tf.int64)
checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch_done)
manager = tf.train.CheckpointManager(checkpoint, os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints"), 2)
model(tf.zeros([1, args.field_size], tf.int64), tf.zeros([1, args.field_size]))  # build the variables
if manager.latest_checkpoint:
    checkpoint.restore(manager.latest_checkpoint)
start = int(epoch_done.numpy())
if hvd.rank() == 0 and start:
    print(f"resumed from {manager.latest_checkpoint} at epoch {start}", flush=True)


@tf.function
def train_step(ids, vals, labels):
    with tf.GradientTape() as tape:
        logits = model(ids, vals)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels[:, 0], logits=logits))
    tape = hvd.DistributedGradientTape(tape)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return hvd.allreduce(loss), logits


def parse(records):
    parsed = tf.io.parse_example(records, spec)
    return parsed["feat_ids"], parsed["feat_vals"], parsed["label"]


# The TF container's script: PipeModeDataset(channel, record_format='TFRecord'); one iterator per
# epoch reads the channel's next FIFO. Here every rank reads its own FIFOs: no .shard(hvd.size(), ...).
dataset = PipeModeDataset(channel="train", record_format="TFRecord")
dataset = dataset.batch(args.batch_size, drop_remainder=True).map(parse).prefetch(2)
first = True
for epoch in range(start, args.epochs):
    auc = tf.keras.metrics.AUC()
    losses = []
    for ids, vals, labels in dataset:  # a new iterator: this epoch's FIFO
        if first:  # a restarted job reads from epoch 0's FIFO again, after the restored weights
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables, root_rank=0)
            first = False
        loss, logits = train_step(ids, vals, labels)
        losses.append(float(loss))
        auc.update_state(labels[:, 0], tf.sigmoid(logits))
    epoch_done.assign(epoch + 1)
    mean_auc = float(hvd.allreduce(tf.constant(auc.result().numpy())))
    if hvd.rank() == 0:
        manager.save(checkpoint_number=epoch + 1)
        print(f"epoch={epoch}; loss={sum(losses) / len(losses):.4f}; auc={mean_auc:.4f}; steps={len(losses)};",
              flush=True)
if hvd.rank() == 0:
    tf.saved_model.save(model, os.path.join(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"), "1"))
