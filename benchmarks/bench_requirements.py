"""A warm pool's second job against its first: the set-up of a job whose requirements.txt needs packages the
image lacks, through the real `train` and pip, with SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY set as SageMaker
sets it on a warm pool. The first job installs from the package index (this machine's, as pip is configured
here) and keeps the wheels in the cache; the second - a new container: the packages gone, the cache kept -
installs with the index unreachable. Each job's environment is a new one for it (a virtual environment that
sees the toolkit's packages), so nothing stays installed. Median of the rounds; the program does nothing, so
a job's time is its set-up.

    /opt/smtrain/venv/bin/python benchmarks/bench_requirements.py [--rounds 3] [--requirement scikit-learn==1.5.2]

Figures: `warmpool_second_over_first`: the second job's time over the first's; `warmpool_first_job_s`,
`warmpool_second_job_s`."""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

UNREACHABLE = "http://127.0.0.1:9/simple/"


def new_environment(folder: Path) -> Path:
    """A virtual environment whose Python sees the toolkit's packages (a .pth), and installs into its own."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300)
    site = next((folder / "lib").glob("python3.*/site-packages"))
    (site / "smtrain-toolkit.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin" / "python"


def job(base: Path, python: Path, cache: Path, requirement: str, index: str = "") -> float:
    """One job's time through `train` (`python -m smtrain`), its set-up installing `requirement`."""
    shutil.rmtree(base, ignore_errors=True)
    (base / "input" / "config").mkdir(parents=True)
    (base / "code").mkdir()
    (base / "code" / "train.py").write_text("print('ready')\n")
    (base / "code" / "requirements.txt").write_text(requirement + "\n")
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps({"sagemaker_program": '"train.py"'}))
    env = {"PATH": "/usr/bin:/bin", "SAGEMAKER_BASE_DIR": str(base), "SM_SYSTEM_MONITOR": "off",
           "SM_FRAMEWORK_METRICS": "off", "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": str(cache),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1", "HOME": str(base)}
    if index:
        env.update(PIP_INDEX_URL=index, PIP_RETRIES="0", PIP_TIMEOUT="3")
    started = time.monotonic()
    done = subprocess.run([str(python), "-m", "smtrain"], env=env, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    if done.returncode != 0 or "ready" not in done.stdout:
        raise RuntimeError(f"the job failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requirement", default="scikit-learn==1.5.2")
    args = parse(parser, quick=dict(rounds=1, requirement="tomli-w==1.0.0"))
    first, second = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(args.rounds):
            cache = Path(tmp) / f"warmpoolcache-{round_number}"
            first.append(job(Path(tmp) / "ml", new_environment(Path(tmp) / f"env-{round_number}-1"), cache,
                             args.requirement))
            second.append(job(Path(tmp) / "ml", new_environment(Path(tmp) / f"env-{round_number}-2"), cache,
                              args.requirement, UNREACHABLE))
            print(f"round {round_number}: first job {first[-1]:.1f} s, second (index unreachable) {second[-1]:.1f} s",
                  flush=True)
    one, two = statistics.median(first), statistics.median(second)
    print_figures({"warmpool_second_over_first": two / one, "warmpool_first_job_s": one, "warmpool_second_job_s": two})


if __name__ == "__main__":
    main()
