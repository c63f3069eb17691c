"""Step profiling of scripts that never import smtrain, through the real `train`: Keras fit with
validation (tf_keras with Horovod, Keras 3), custom loops with Horovod (a tf.function step,
eager DistributedGradientTape, an allreduce per gradient). The events load with smdebug's own
readers; each rank's step counts match what the script ran; the report the master writes names a
slow rank and an input-bound loop and nothing in a healthy job; HOROVOD_TIMELINE works as Horovod
documents it and the report reads it; profilerconfig.json from the real SDK gives a TensorFlow
profiler trace and a cProfile of its steps; the report renders offline in headless Chromium."""
from __future__ import annotations

import json
import os
import pstats
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import SMDEBUG_READ, Tree, make_tree, run_train, which

PROGRAMS = Path(__file__).parent.parent / "programs"
REPO = Path(__file__).resolve().parent.parent.parent
ARTEFACTS = REPO / "build" / "test-artefacts"
SDK2_PYTHON = "/opt/smtrain/sdk2/bin/python"
STEP_RULES = {"StepOutlier", "RankImbalance", "SlowInitialization", "InputBound", "AllreduceBound"}
MODES = {"train": "TRAIN", "eval": "EVAL", "predict": "PREDICT"}


def run_steps(base: Path, loop: str, port: int, ranks: int = 2, **hps: str) -> Tree:
    mpi = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": str(ranks)} if ranks > 1 else {}
    tree = make_tree(base, hyperparameters={**mpi, "loop": loop, **hps})
    shutil.copy(PROGRAMS / "hvd_steps.py", tree.code_dir / "train.py")
    done = run_train(tree, env=tree.env(SM_CONTROL_PORT=str(port)), timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert b"[train] profiler report: " in done.stderr
    return tree


def ran(tree: Tree, rank: int) -> dict[str, int]:
    return json.loads((tree.base / "output" / "data" / f"steps-{rank}.json").read_text())


def summary(tree: Tree) -> dict[str, Any]:
    return json.loads((tree.base / "output" / "data" / "profiler-report" / "summary.json").read_text())


def fired(tree: Tree) -> dict[str, str]:
    return {r["rule"]: r["reason"] for r in summary(tree)["rules"] if r["triggered"]}


def smdebug_framework(tree: Tree, tmp: Path) -> dict[str, Any]:
    out = tmp / "framework.json"
    done = subprocess.run([*SMDEBUG_READ, str(out), "framework", str(tree.base / "output" / "profiler"), "0",
                           str(int(time.time() * 1e6) + 10**7)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return json.loads(out.read_text())


def counts_by_node(rows: list[list[Any]], name_at: int = 0, node_at: int = 1) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        name, node = row[name_at], row[node_at]
        if name.startswith("Step:ModeKeys."):
            key = (node, name.split(".")[-1])
            counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.fixture(scope="module")
def keras_job(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    """tf_keras fit with validation, evaluate and predict on 2 ranks; Horovod's timeline asked for as
    SageMaker's Horovod notebooks ask for it."""
    return run_steps(tmp_path_factory.mktemp("keras") / "ml", "keras", 17320,
                     sagemaker_mpi_custom_mpi_options="-x HOROVOD_TIMELINE=./hvd_timeline.json")


def test_keras_steps_load_with_smdebug_and_match_what_each_rank_ran(keras_job: Tree, tmp_path: Path) -> None:
    loaded = smdebug_framework(keras_job, tmp_path)
    for rank in (0, 1):
        expected = {MODES[k]: v for k, v in ran(keras_job, rank).items()}
        assert expected == {"TRAIN": 24, "EVAL": 9, "PREDICT": 2}
        node = f"algo-1-{rank}"  # smdebug turns <rank>-algo-1 into algo-1-<rank>
        for rows in (loaded["events"], [[m, n] for m, _, n in loaded["pandas"]]):
            got = {mode: n for (who, mode), n in counts_by_node(rows).items() if who == node}
            assert got == expected, (rank, got)
    steps = sorted(int(s) for name, node, s, _, _ in loaded["events"] if name == "Step:ModeKeys.TRAIN" and node == "algo-1-0")
    assert steps == list(range(24))
    epochs = [row for row in loaded["events"] if row[0] == "Epoch:ModeKeys.TRAIN" and row[1] == "algo-1-0"]
    assert [int(row[2]) for row in epochs] == [0, 12]  # each epoch carries its first step


def test_a_healthy_keras_job_trips_no_step_rule_and_reads_the_horovod_timeline(keras_job: Tree) -> None:
    assert (keras_job.code_dir / "hvd_timeline.json").stat().st_size > 1000  # where Horovod documents it
    s = summary(keras_job)
    assert not STEP_RULES & set(fired(keras_job)), fired(keras_job)
    assert s["horovod_timeline"]["tensors"] >= 2 and 0 < s["horovod_timeline"]["collective_share"] < 1
    allreduce = next(r for r in s["rules"] if r["rule"] == "AllreduceBound")
    assert allreduce["reason"].startswith("collectives "), allreduce
    ph = s["phases"]
    assert ph["initialization_s"] > 0 and ph["training_loop_s"] > 0
    assert abs(ph["initialization_s"] + ph["training_loop_s"] + ph["finalization_s"] - ph["job_s"]) < 0.01
    assert s["ranks"]["0-algo-1"]["steps"] == {"TRAIN": 24, "EVAL": 9, "PREDICT": 2}


@pytest.mark.parametrize("loop", ["function", "eager"])
def test_custom_loop_steps_are_counted_on_every_rank(tmp_path: Path, loop: str) -> None:
    """tf.function with DistributedGradientTape inside; eager DistributedGradientTape, then an eager
    allreduce per gradient and a final metric allreduce (which joins the last step)."""
    tree = run_steps(tmp_path / "ml", loop, 17321 if loop == "function" else 17322)
    s = summary(tree)
    for rank in (0, 1):
        assert s["ranks"][f"{rank}-algo-1"]["steps"] == {"TRAIN": ran(tree, rank)["train"], "EVAL": 0, "PREDICT": 0}
    assert ran(tree, 0)["train"] == 24
    if loop == "function":
        assert not STEP_RULES & set(fired(tree)), fired(tree)


def test_keras_3_fit_on_one_process(tmp_path: Path) -> None:
    tree = run_steps(tmp_path / "ml", "keras3", 17323, ranks=1)
    assert summary(tree)["ranks"]["0-algo-1"]["steps"] == {"TRAIN": 24, "EVAL": 9, "PREDICT": 2}


def test_a_slow_rank_trips_the_imbalance_rule(tmp_path: Path) -> None:
    tree = run_steps(tmp_path / "ml", "function", 17324, **{"slow-rank": "1", "slow-ms": "40"})
    reasons = fired(tree)
    assert reasons.get("RankImbalance", "").startswith("rank 1-algo-1 spends "), reasons


def test_an_input_bound_loop_trips_the_input_rule(tmp_path: Path) -> None:
    """Every rank's batches take 25 ms to make. Which ranks show the wait varies: with prefetching, a
    rank that waits in the allreduce meanwhile gets its next batch ready, so under load the wait may
    settle on one rank (and RankImbalance may then name it, as it does a rank slow by itself)."""
    tree = run_steps(tmp_path / "ml", "function", 17325, **{"input-ms": "25"})
    reasons = fired(tree)
    assert re.match(r"rank [01]-algo-1: \d+% of its step cycle between steps", reasons.get("InputBound", "")), reasons


def sdk_profiler_config(start_step: int, num_steps: int, out: Path) -> dict[str, Any]:
    """profilerconfig.json's content as the real SDK v2 asks SageMaker for it (into a file: the SDK logs to stdout)."""
    code = ("import json, sys\nfrom sagemaker.debugger import ProfilerConfig, FrameworkProfile\n"
            f"c = ProfilerConfig(framework_profile_params=FrameworkProfile(start_step={start_step}, num_steps={num_steps}))\n"
            "open(sys.argv[1], 'w').write(json.dumps(c._to_request_dict()))\n")
    done = subprocess.run([SDK2_PYTHON, "-c", code, str(out)], capture_output=True, timeout=120,
                          env={**os.environ, "SAGEMAKER_SUPPRESS_V2_WARNING": "1"})
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return json.loads(out.read_text())


def test_profilerconfig_windows_give_a_tensorflow_trace_and_a_cprofile(tmp_path: Path) -> None:
    base = tmp_path / "ml"
    make_tree(base).write_config("profilerconfig.json", sdk_profiler_config(3, 2, tmp_path / "request.json"))
    tree = run_steps(base, "keras3", 17326, ranks=1)
    framework = tree.base / "output" / "profiler" / "framework"
    traces = list((framework / "tensorflow" / "detailed_profiling" / "0-algo-1").glob("plugins/profile/*/*.xplane.pb"))
    assert traces and traces[0].stat().st_size > 1000, list(framework.rglob("*"))
    stats = pstats.Stats(str(framework / "python_profile" / "0-algo-1" / "steps-3-4.prof"))
    assert stats.total_calls > 100  # Keras' Python between and around its steps 3 and 4
    assert "function calls" in (framework / "python_profile" / "0-algo-1" / "steps-3-4.txt").read_text()


def test_step_metrics_switched_off(tmp_path: Path) -> None:
    tree = run_steps(tmp_path / "ml", "keras3", 17327, ranks=1, sagemaker_framework_metrics="off")
    assert not (tree.base / "output" / "profiler" / "framework").exists()
    assert summary(tree)["ranks"] == {}


KILLED = """
import os, signal, time
import tensorflow as tf
v = tf.Variable(1.0)
@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = v * v
    v.assign_sub(0.01 * tape.gradient(loss, v))
end = time.monotonic() + 3
while time.monotonic() < end:
    step()
    time.sleep(0.01)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_program_still_gets_its_report_from_what_was_flushed(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml")
    tree.write_program("train.py", KILLED)
    done = run_train(tree, env=tree.env(SM_CONTROL_PORT="17328"), timeout=240)
    assert done.returncode != 0
    assert list((tree.base / "output" / "profiler" / "framework").glob("*.tmp"))  # never closed
    steps = summary(tree)["ranks"]["0-algo-1"]["steps"]["TRAIN"]
    assert steps >= 50, steps  # ~3 s of 10 ms steps, flushed every second


def test_the_report_renders_offline_in_headless_chromium(keras_job: Tree, tmp_path: Path) -> None:
    """Debian's chromium, in a network namespace of its own (nothing to fetch from), screenshots the
    report; the screenshot is kept in build/test-artefacts/."""
    chromium = which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed (scripts/setup.sh installs Debian's package)")
    report = keras_job.base / "output" / "data" / "profiler-report" / "profiler-report.html"
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTEFACTS / "profiler-report.png"
    shot.unlink(missing_ok=True)
    common = ["unshare", "--net", chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              f"--user-data-dir={tmp_path / 'profile'}"]
    done = subprocess.run([*common, "--window-size=1200,4000", f"--screenshot={shot}", report.as_uri()],
                          capture_output=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr.decode()[-2000:]
    dom = subprocess.run([*common, "--dump-dom", report.as_uri()], capture_output=True, timeout=120).stdout.decode()
    sources = re.findall(r"<img [^>]*src=[\"']([^\"']+)", dom)
    assert len(sources) >= 6 and all(s.startswith("data:image/png;base64,") for s in sources), [s[:40] for s in sources]
    assert "RankImbalance" in dom and "Step duration over time, per rank" in dom
    import matplotlib.image

    image = matplotlib.image.imread(shot)
    assert image.shape[0] >= 3000 and image.shape[1] >= 1000
    coloured = ((image[..., :3].max(axis=2) - image[..., :3].min(axis=2)) > 0.2).mean()
    assert coloured > 0.01, f"only {coloured:.2%} of the screenshot is in colour: no plots drawn"


MILLION = """
import sys, time
from smtrain import progress
for _ in range(1_000_001):  # a step runs from one call to the next
    progress.step()
print(f"ended {time.time():.3f}", flush=True)
"""


def test_a_million_steps_keep_a_bounded_file_and_a_report_in_time(tmp_path: Path) -> None:
    """A million synthetic steps on one rank through the real `train`: at most the documented bound on
    disk (the first 2,000 steps one by one, then summaries: ~0.5 MB, then ~0.31 MB an hour), every step
    counted in the report, written within 2 s of the program's end, and smdebug's readers load it."""
    tree = make_tree(tmp_path / "ml")
    tree.write_program("train.py", MILLION)
    done = run_train(tree, env=tree.env(SM_CONTROL_PORT="17329"), timeout=300)
    exited = time.time()
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    ended = float(re.search(rb"ended (\d+\.\d+)", done.stdout).group(1))
    framework = tree.base / "output" / "profiler" / "framework"
    kept = sum(p.stat().st_size for p in framework.rglob("*") if p.is_file())
    assert kept <= 0.55e6 + 0.35e6, kept  # a job of seconds: less than an hour's summaries
    assert summary(tree)["ranks"]["0-algo-1"]["steps"]["TRAIN"] == 1_000_000
    print(f"kept {kept} bytes; train exited {exited - ended:.2f} s after the program's last line")
    assert exited - ended < 2.0 + 1.0, exited - ended  # the report's end bound, with a busy machine's second
    loaded = smdebug_framework(tree, tmp_path)
    names = {row[0] for row in loaded["events"]}
    assert {"Step:ModeKeys.TRAIN", "Summary:ModeKeys.TRAIN", "BetweenSummary:ModeKeys.TRAIN"} <= names, names
