"""The job's one profiler report as clusters grow: `train report --job` over H hosts x R ranks.

Its data is real: one job of the real `train` on this host (2 ranks of benchmarks/programs/timed_rank.py,
each taking --steps steps through smtrain.progress.step(), the system monitor sampling every 500 ms
for --seconds) writes its profiler folder; each simulated host's folder is that one with the host's
and the ranks' names changed (as a worker ships it to the master), so H x R ranks' step events and H
hosts' samples are read, judged and drawn. Timed two ways, median of --repeat each:

  at a job's end  as the master's `train` runs it: started with the job (`--wait`: interpreter,
                  matplotlib and fonts loaded), from its arguments handed over to its exit; every
                  rank digested (smtrain.profiler.digests), as each rank does at its exit
  by hand         `train report DIR` over the same folders without digests (ranks that were killed
                  leave none): the whole process, every rank's events parsed

    /opt/smtrain/venv/bin/python benchmarks/bench_report.py [--hosts 2 8 32 64] [--ranks 8] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

from smtrain.profiler.digest_files import DIGEST_DIR

PROGRAM = Path(__file__).resolve().parent / "programs" / "timed_rank.py"
VENV = Path(sys.executable).parent
TEMPLATE_HOST = "algo-1"
WARM_S = 8.0  # how long a warm report waits before it is told to go (its loading done by then)


def template(base: Path, steps: int, seconds: float) -> Path:
    """One real job's profiler folder: 2 ranks on host algo-1."""
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": TEMPLATE_HOST, "hosts": [TEMPLATE_HOST]}))
    (config / "hyperparameters.json").write_text(json.dumps({
        "sagemaker_program": json.dumps(PROGRAM.name), "sagemaker_mpi_enabled": "true",
        "sagemaker_mpi_num_of_processes_per_host": "2", "run-for": json.dumps(str(seconds)), "steps": str(steps)}))
    (config / "inputdataconfig.json").write_text("{}")
    (base / "code").mkdir()
    shutil.copy(PROGRAM, base / "code" / PROGRAM.name)
    env = {**os.environ, "SAGEMAKER_BASE_DIR": str(base), "SM_CONTROL_PORT": "7391"}
    subprocess.run([str(VENV / "train")], env=env, check=True, capture_output=True, timeout=300)
    return base / "output" / "profiler"


def clone(folder: Path, into: Path, hosts: int, ranks: int) -> None:
    """`hosts` hosts' folders of `ranks` ranks each, from the template's 2 ranks on algo-1."""
    # the ranks' own digests are made again below; the live scalars (TensorBoard's event files) are not the report's
    files = [(p.relative_to(folder), p.read_text()) for p in folder.rglob("*")
             if p.is_file() and p.parent.name != DIGEST_DIR.name and "tensorboard" not in p.relative_to(folder).parts]
    for h in range(hosts):
        host = f"algo-{h + 1}"
        for relative, text in files:
            if "framework" in relative.parts:  # a rank's events: <rank>-algo-1 in its name and its lines
                source_rank = 0 if "/0-algo-1" in f"/{relative.name}" or "_0-algo-1" in relative.name else 1
                for r in range(source_rank, ranks, 2):
                    node = f"{h * ranks + r}-{host}"
                    name = relative.name.replace(f"{source_rank}-{TEMPLATE_HOST}", node)
                    target = into / host / relative.parent / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(text.replace(f"{source_rank}-{TEMPLATE_HOST}", node))
            else:  # system samples: algo-1 in the file's name and its lines
                target = into / host / relative.parent / relative.name.replace(TEMPLATE_HOST, host)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text.replace(f'"{TEMPLATE_HOST}"', f'"{host}"'))


def time_report(folder: Path, out: Path, warm: bool, since: float) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "smtrain.profiler.job_report", str(folder), "--out", str(out), "--job"]
    if not warm:
        started = time.monotonic()
        subprocess.run(argv, check=True, capture_output=True, timeout=600)
    else:
        process = subprocess.Popen([*argv, "--wait"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        time.sleep(WARM_S)  # the job runs
        started = time.monotonic()
        process.communicate(json.dumps(["--since", f"{since:.3f}"]).encode() + b"\n", timeout=600)  # as train does
        assert process.returncode == 0
    elapsed = time.monotonic() - started
    return elapsed, json.loads((out / "summary.json").read_text())


def digest_ranks(folder: Path) -> Path:
    """A copy of `folder` with every rank's digest, as each rank writes its own at its exit."""
    from smtrain.profiler import digests
    from smtrain.profiler.events import read_folder

    copy = folder.with_name(folder.name + "-digested")
    shutil.copytree(folder, copy)
    for host in sorted(copy.iterdir()):
        digests.write(host, digests.digest(read_folder([host])))
    return copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[2, 8, 32, 64])
    parser.add_argument("--ranks", type=int, default=8, help="ranks per host")
    parser.add_argument("--steps", type=int, default=10000, help="steps per rank")
    parser.add_argument("--seconds", type=float, default=30.0, help="the template job's length (its samples)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parse(parser, quick=dict(hosts=[2], ranks=2, steps=100, seconds=3, repeat=1))
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        since = time.time() - 1.0  # the template job's start, as train hands it to the report at the job's end
        folder = template(Path(tmp) / "job", args.steps, args.seconds)
        for hosts in args.hosts:
            data = Path(tmp) / f"h{hosts}"
            clone(folder, data, hosts, args.ranks)
            digested = digest_ranks(data)
            got = {}
            for way, where, warm in (("job_end", digested, True), ("by_hand", data, False)):
                times = []
                for i in range(args.repeat):
                    elapsed, summary = time_report(where, Path(tmp) / f"out{hosts}-{way}-{i}", warm, since)
                    times.append(elapsed)
                    counted = (len(summary["hosts"]), len(summary.get("ranks", {})))
                    assert counted == (hosts, hosts * args.ranks), f"the report counts {counted}"
                got[way] = statistics.median(times)
                figures[f"report_{way}_s_{hosts}_hosts"] = got[way]
            size = (Path(tmp) / f"out{hosts}-job_end-0" / "profiler-report.html").stat().st_size
            print(f"{hosts} hosts x {args.ranks} ranks: at a job's end {got['job_end']:.2f} s, by hand "
                  f"{got['by_hand']:.2f} s; HTML {size / 1e6:.1f} MB", flush=True)
            shutil.rmtree(data)
            shutil.rmtree(digested)
    print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
