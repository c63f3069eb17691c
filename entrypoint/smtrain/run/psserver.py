"""A TensorFlow parameter server, as SageMaker's TensorFlow container starts one on every host of a
parameter-server job: TF_CONFIG's `ps` task, CPU only. `train` starts it under the rank launcher
(so a crash is reported to the master) and stops it when the job ends: SIGTERM or SIGINT end it
with status 0, since a parameter server has no end of its own.

    python -m smtrain.run.psserver      (TF_CONFIG in the environment)
"""
from __future__ import annotations

import json
import os
import signal
import threading


def main() -> int:
    """`python -m smtrain.run.psserver`: a TF parameter server, from TF_CONFIG, until stopped."""
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # before any thread starts: only sigwait takes them
    config = json.loads(os.environ["TF_CONFIG"])
    import tensorflow as tf

    server = tf.distribute.Server(
        tf.train.ClusterSpec(config["cluster"]), job_name="ps", task_index=int(config["task"]["index"]),
        config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}), protocol="grpc",
    )
    print(f"parameter server ps {config['task']['index']} serving at {server.target}", flush=True)
    threading.Thread(target=server.join, name="ps-join", daemon=True).start()
    signal.sigwait(stop)
    os._exit(0)  # the server's C++ threads do not stop on their own


if __name__ == "__main__":
    raise SystemExit(main())
