"""The demo job: build (or reuse) the CPU image, then run a 2-host Horovod job in two containers
(`algo-1`, `algo-2`) on a private network, with bundled synthetic data read through Pipe mode and
checkpoints; prints the metric lines; exits with the job's status.

    /opt/smtrain/venv/bin/python scripts/demo.py      (scripts/demo.sh sets everything up first)
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.harness.docker_cluster import REPO, ContainerCluster, ensure_docker, ensure_image  # noqa: E402

EXAMPLE = REPO / "examples" / "pipe_horovod"


def main() -> int:
    ensure_docker()
    print(f"demo: image ready ({ensure_image():.0f} s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="smtrain-demo-") as tmp:
        data = Path(tmp) / "data"
        with ContainerCluster("smtrain-demo", 2, Path(tmp)) as cluster:
            cluster.run_once("python", "/example/make_data.py", "/data", mounts=[f"{EXAMPLE}:/example:ro", f"{data}:/data"])
            cluster.write_job({"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2,
                               "epochs": 2}, EXAMPLE / "train.py",
                              {"train": {"TrainingInputMode": "Pipe", "ContentType": "application/x-tfrecord"}})
            cluster.feed(data, "train", epochs=2)
            started = time.monotonic()
            cluster.start({"SM_PEER_WAIT_SECONDS": "120"})
            statuses = cluster.wait(600)
            print(cluster.logs("algo-1"), end="")
            print(f"demo: exit statuses {statuses} after {time.monotonic() - started:.0f} s; "
                  f"model files: {sorted(p.name for p in cluster.ml('algo-1').joinpath('model').iterdir())}")
            return 0 if all(s == 0 for s in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
