"""A TF2 ParameterServerStrategy job on SageMaker's parameter-server TF_CONFIG: the `master` task is
the coordinator, `worker` tasks serve (their program only runs a server), and the toolkit runs the
`ps` tasks. The coordinator trains with Keras `fit` and writes `ps-<type><index>.json` with the loss
per epoch into SM_OUTPUT_DATA_DIR; --crash-after S makes worker --crash-worker's server (default 0) exit with an error after S s.
"""
import argparse
import json
import os
import time

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--crash-after", type=float, default=-1)
parser.add_argument("--crash-worker", type=int, default=0)
args, _ = parser.parse_known_args()
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
out = os.environ["SM_OUTPUT_DATA_DIR"]
# TF2's strategy calls the coordinator `chief`; SageMaker's TF_CONFIG calls it `master`.
cluster = {("chief" if job == "master" else job): hosts for job, hosts in config["cluster"].items()}
resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
    tf.train.ClusterSpec(cluster), task_type="chief" if task["type"] == "master" else task["type"],
    task_id=task["index"], rpc_layer="grpc")

if task["type"] == "worker":
    server = tf.distribute.Server(resolver.cluster_spec(), job_name="worker", task_index=task["index"], protocol="grpc")
    with open(os.path.join(out, f"running-worker{task['index']}"), "w") as f:
        f.write(str(os.getpid()))
    if args.crash_after >= 0 and task["index"] == args.crash_worker:
        time.sleep(args.crash_after)
        raise RuntimeError(f"worker {task['index']} failed on purpose")
    server.join()
else:
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"),
                                     tf.keras.layers.Dense(1)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse", steps_per_execution=5)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1024, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)

    def dataset_fn(context):
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).repeat().batch(32)

    history = model.fit(tf.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=args.epochs,
                        steps_per_epoch=20, verbose=0)
    losses = [float(v) for v in history.history["loss"]]
    for epoch, loss in enumerate(losses):
        print(f"epoch={epoch}; loss={loss:.6f};", flush=True)
    with open(os.path.join(out, "ps-master0.json"), "w") as f:
        json.dump({"losses": losses, "tf_config": config}, f)
