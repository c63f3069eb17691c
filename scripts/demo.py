"""The demo job: build (or reuse) the CPU image, then run a 2-host Horovod job in two containers
(`algo-1`, `algo-2`) on a private network, with bundled synthetic data read through Pipe mode and
checkpoints; prints the metric lines, then where the job's profiler report and model are; exits with
the job's status. Each host's /opt/ml and `train` log stay in the output folder (default
/tmp/smtrain-demo, emptied of an earlier demo's files first).

    /opt/smtrain/venv/bin/python scripts/demo.py [--out DIR] [--image TAG]   (scripts/demo.sh sets everything up first)
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.harness.docker_cluster import IMAGE_TAG, ContainerCluster, ensure_docker, ensure_image  # noqa: E402

MARK = ".smtrain-demo"  # names a folder this script made, which it may empty


def _fresh(out: Path) -> None:
    """An empty output folder: a new one, or one an earlier demo left (never a folder of someone else's)."""
    if out.exists() and any(out.iterdir()) and not (out / MARK).exists():
        raise SystemExit(f"demo: {out} holds files of its own; name an empty or new folder with --out")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARK).touch()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/smtrain-demo"), help="where the job's folders stay")
    parser.add_argument("--image", help=f"an image already built (default: build or reuse {IMAGE_TAG})")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    ensure_docker()
    image = args.image or IMAGE_TAG
    if not args.image:
        print(f"demo: image {image} ready ({ensure_image():.0f} s)", flush=True)
    _fresh(out)
    with ContainerCluster("smtrain-demo", 2, out, image) as cluster:
        started = time.monotonic()
        cluster.start_demo_job(out / "data")
        statuses = cluster.wait(600)
        for host in cluster.hosts:
            (out / host / "train.log").write_text(cluster.logs(host))
    print((out / "algo-1" / "train.log").read_text(), end="")
    ml = cluster.ml("algo-1")
    print(f"demo: exit statuses {statuses} after {time.monotonic() - started:.0f} s")
    print(f"demo: each host's /opt/ml and train.log: {out}/algo-1, {out}/algo-2")
    for what, path in (("profiler report", ml / "output" / "data" / "profiler-report" / "profiler-report.html"),
                       ("model", ml / "model" / "model.keras")):
        print(f"demo: {what}: {path}" if path.exists() else f"demo: no {what} ({path} is missing)")
    return 0 if all(s == 0 for s in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
