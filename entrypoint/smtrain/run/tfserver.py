"""A TensorFlow server for TF_CONFIG's task (a parameter server, as SageMaker's TensorFlow container
starts one on every host of such a job), CPU only. `train` starts it under the rank launcher (so a
crash is reported to the master) and stops it when the job ends: SIGTERM or SIGINT end it with
status 0, since a server has no end of its own.

    python -m smtrain.run.tfserver      (TF_CONFIG in the environment)
"""
from __future__ import annotations

import json
import os
import signal
import threading


def main() -> int:
    """`python -m smtrain.run.tfserver`: TF_CONFIG's task as a TF server, until stopped."""
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # before any thread starts: only sigwait takes them
    config = json.loads(os.environ["TF_CONFIG"])
    import tensorflow as tf

    server = tf.distribute.Server(
        tf.train.ClusterSpec(config["cluster"]), job_name=config["task"]["type"], task_index=int(config["task"]["index"]),
        config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}), protocol="grpc",
    )
    print(f"TF server {config['task']['type']} {config['task']['index']} serving at {server.target}", flush=True)
    threading.Thread(target=server.join, name="server-join", daemon=True).start()
    signal.sigwait(stop)
    os._exit(0)  # the server's C++ threads do not stop on their own


if __name__ == "__main__":
    raise SystemExit(main())
