"""The demo job: Horovod data-parallel training reading its data through Pipe mode, with checkpoints.

Each rank reads its own FIFO (train's demultiplexer deals the host's channel to the local ranks),
trains a small model with a Horovod custom loop, prints metric lines, and rank 0 saves a checkpoint
at the end of every epoch (resumed from, if the job is restarted) and the model on the master.
"""
import argparse
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402

from smtrain import pipes  # noqa: E402
from smtrain.checkpoints import CheckpointStore, StopSignal, shared_restore  # noqa: E402
from smtrain.metrics import log_metrics  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--model_dir", help="SDK v2's TensorFlow estimator passes it; the model goes to SM_MODEL_DIR")
args = parser.parse_args()

hvd.init()
features = {"id": tf.io.FixedLenFeature([], tf.int64), "x": tf.io.FixedLenFeature([4], tf.float32),
            "y": tf.io.FixedLenFeature([1], tf.float32)}
model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu", input_shape=(4,)), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.01 * hvd.size())
state = tf.train.Checkpoint(model=model, optimizer=optimizer)
manager = CheckpointStore(keep=2)
restored = shared_restore(manager, state)  # rank 0 loads the variables; every rank learns the step
start = restored.step if restored else 0  # the step saved is the number of epochs done
stop = StopSignal()


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    tape = hvd.DistributedGradientTape(tape)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return hvd.allreduce(loss)


step = 0
# Summaries for TensorBoard where the job has a TensorBoardOutputConfig (SageMaker uploads the folder).
summaries = (tf.summary.create_file_writer(os.environ["SM_TENSORBOARD_DIR"])
             if hvd.rank() == 0 and os.environ.get("SM_TENSORBOARD_DIR") else None)
for fifo, epoch in enumerate(range(start, args.epochs)):
    batches = pipes.dataset("train", epochs=1, start=fifo).map(
        lambda r: tf.io.parse_single_example(r, features)).batch(args.batch_size, drop_remainder=True)
    for batch in batches:
        loss = train_step(batch["x"], batch["y"])
        if step == 0:  # once the optimizer's slots exist: every rank takes rank 0's (restored) state
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables(), root_rank=0)
        step += 1
    if hvd.rank() == 0:
        log_metrics(epoch=epoch, loss=float(loss))
    if summaries is not None:
        with summaries.as_default():
            tf.summary.scalar("loss", loss, step=epoch)
    manager.save(epoch + 1, state)
    if stop.agreed():
        sys.exit(0)
if hvd.rank() == 0:
    model.save(os.path.join(os.environ["SM_MODEL_DIR"], "model.keras"))
    print(f"saved the model after {args.epochs} epochs", flush=True)
