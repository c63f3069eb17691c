"""AWS's pattern for heterogeneous clusters, unmodified by this toolkit's API: the `data` instance group's
host serves the input pipeline with tf.data service (a dispatcher and a worker); the `train` group's
hosts train with Horovod on batches read from that service. The trainers tell the data host when they
are done: each rank holds a connection to it from the start and sends `stop` when training ended; the
data host ends when every rank's connection has closed (a rank that dies closes its own).

--ranks N          the training ranks (every one connects to the data host)
--steps N          training steps per rank
--fail-rank R      rank R raises at step 3
"""
import argparse
import json
import os
import socket
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--ranks", type=int, default=4)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--fail-rank", type=int, default=-1)
args = parser.parse_args()

DISPATCHER, WORKER, STOP = 6100, 6101, 6102
groups = json.loads(os.environ["SM_INSTANCE_GROUPS_DICT"])
data_host = groups["data"]["hosts"][0]
trainers = args.ranks
out = os.environ["SM_OUTPUT_DATA_DIR"]
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # as the image sets it: Horovod's gradients need tf_keras

import tensorflow as tf  # noqa: E402

service = tf.data.experimental.service
if os.environ["SM_CURRENT_INSTANCE_GROUP"] == "data":
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=DISPATCHER))
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{DISPATCHER}", port=WORKER,
                                                       worker_address=f"{data_host}:{WORKER}"))
    said = []
    with socket.create_server(("0.0.0.0", STOP), backlog=trainers) as server:
        server.settimeout(300)
        connections = [server.accept()[0] for _ in range(trainers)]
        print(f"data host: serving {trainers} trainers", flush=True)
        for connection in connections:
            with connection:
                connection.settimeout(300)
                said.append(connection.makefile("rb").read().decode())  # until the rank closes it
    stopped = said.count("stop")
    print(f"data host: {stopped} of {trainers} trainers said stop; ending", flush=True)
    with open(os.path.join(out, "data-host.json"), "w") as f:
        json.dump({"stopped": stopped}, f)
    sys.exit(0)

import horovod.tensorflow as hvd  # noqa: E402

hvd.init()
deadline = time.monotonic() + 120
while True:  # the data host may still be importing TensorFlow
    try:
        link = socket.create_connection((data_host, STOP), timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
dataset = tf.data.Dataset.range(10_000).map(lambda i: (tf.fill([4], tf.cast(i % 7, tf.float32)), tf.cast(i % 7, tf.float32)))
dataset = dataset.batch(16).apply(service.distribute("parallel_epochs", f"grpc://{data_host}:{DISPATCHER}"))
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.001)


@tf.function
def step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    tape = hvd.DistributedGradientTape(tape)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss


for n, (x, y) in enumerate(dataset.take(args.steps)):
    if n == 3 and hvd.rank() == args.fail_rank:
        raise RuntimeError(f"rank {hvd.rank()} fails on purpose")
    loss = step(x, y)
    if n == 0:
        hvd.broadcast_variables(model.variables, root_rank=0)
print(f"rank {hvd.rank()}: {args.steps} steps from the data host, loss={float(loss):.4f};", flush=True)
link.sendall(b"stop")
link.close()
