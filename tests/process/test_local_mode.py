"""Pipe mode emulated under the SDK's local mode, through the real `train`, real FIFOs, a real feeder and
demultiplexer and real TensorFlow: the config files as local mode writes them (every channel File,
instance type `local`), and scripts that never import smtrain."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.harness.records import write_objects
from tests.support import make_tree, run_train

PROGRAMS = Path(__file__).parent.parent / "programs"
LOCAL = {"current_instance_type": "local"}


def _files_job(tmp_path: Path, hyperparameters: dict, program: str):
    tree = make_tree(tmp_path / "ml", channels={"train": {"TrainingInputMode": "File"}}, program="reader.py",
                     hyperparameters=hyperparameters, resource_extra=LOCAL)
    tree.write_program("reader.py", (PROGRAMS / program).read_text())
    expected = write_objects(tree.base / "input" / "data" / "train", ["a", "b", "c"], 30)
    return tree, expected


def test_an_unchanged_pipemode_script_reads_every_record_once_per_epoch_on_two_ranks(tmp_path: Path) -> None:
    tree, expected = _files_job(tmp_path, {"sagemaker_mpi_enabled": "true",
                                           "sagemaker_mpi_num_of_processes_per_host": "2", "epochs": "2"},
                                "pipemode_reader.py")
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", SM_CONTROL_PORT="17330"), timeout=180)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr[-3000:]
    assert "Pipe mode emulated for channel train" in stderr
    got = {r: [bytes.fromhex(x) for x in (tree.base / "output" / "data" / f"pmd-{r}").read_text().split()]
           for r in (0, 1)}
    assert len(got[0]) == len(got[1]) == len(expected)  # each rank its half of 90 records, twice
    assert sorted(got[0] + got[1]) == sorted(expected * 2)
    data = tree.base / "input" / "data"
    assert not [p.name for p in data.iterdir() if p.name.startswith("train_")]  # the feeder's FIFOs went with it
    assert sorted(p.name for p in (data / "train").iterdir()) == ["a", "b", "c"]  # the files untouched


FILES_READER = """
import os, pathlib
folder = pathlib.Path(os.environ["SM_CHANNEL_TRAIN"])
sizes = {p.name: len(p.read_bytes()) for p in sorted(folder.iterdir())}
pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"], "sizes").write_text(repr(sizes))
"""


def test_a_script_reading_the_channel_as_files_still_works_and_the_unread_feeder_ends_with_it(tmp_path: Path) -> None:
    tree, _ = _files_job(tmp_path, {}, "pipemode_reader.py")
    tree.write_program("reader.py", FILES_READER)
    started = time.monotonic()
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off"), timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert time.monotonic() - started < 30  # the feeder of a channel nobody opens does not hold the job
    assert "Pipe mode emulated for channel train" in done.stderr.decode()
    train = tree.base / "input" / "data" / "train"
    expected = {p.name: p.stat().st_size for p in sorted(train.iterdir())}
    assert (tree.base / "output" / "data" / "sizes").read_text() == repr(expected)
    assert not [p.name for p in train.parent.iterdir() if p.name.startswith("train_")]


CHECKPOINTER = """
import os, pathlib, sys
ckpt = pathlib.Path(os.environ["SM_CHECKPOINT_DIR"])
found = sorted(p.name for p in ckpt.iterdir())
(ckpt / f"step-{len(found)}").write_text("saved")
print("found", found, flush=True)
sys.exit(int(os.environ.get("EXIT_WITH", "0")))
"""


def test_a_checkpoints_channel_is_restored_and_the_folder_is_kept_in_the_output_however_the_job_ends(
        tmp_path: Path) -> None:
    """Run 1 (no channel) fails after saving; its output keeps the folder; run 2 names that folder as its
    `checkpoints` channel and starts from it, as a spot restart on SageMaker would."""
    runs = []
    for run in (1, 2):
        channels = {"checkpoints": {"TrainingInputMode": "File"}} if run == 2 else {}
        tree = make_tree(tmp_path / f"ml{run}", channels=channels, program="job.py", resource_extra=LOCAL)
        tree.write_program("job.py", CHECKPOINTER)
        if run == 2:
            import shutil
            shutil.copytree(runs[0] / "output" / "data" / "checkpoints", tree.base / "input" / "data" / "checkpoints")
        done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR="off", EXIT_WITH="3" if run == 1 else "0"), timeout=60)
        assert done.returncode == (3 if run == 1 else 0), done.stderr.decode()[-2000:]
        runs.append(tree.base)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert "found ['step-0']" in stdout  # run 2 started from run 1's checkpoint
    assert "restored 1 files from the checkpoints channel" in stderr
    kept = runs[1] / "output" / "data" / "checkpoints"
    assert sorted(p.name for p in kept.iterdir()) == ["step-0", "step-1"]


HOOK = Path(__file__).resolve().parent.parent.parent / "docker" / "modeltrainer-hook.sh"
MODELTRAINER_COMMAND = ("chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && "
                        "/opt/ml/input/data/sm_drivers/sm_train.sh")


def _bash_as_first_process(tmp_path: Path, command: str, shell: str = "/bin/bash",
                           **env: str) -> subprocess.CompletedProcess:
    """Real bash with the image's BASH_ENV hook as the first process of a new PID namespace, as in a
    container; `train` on its PATH is a stand-in that says it ran (the real one is run by tests/sdk/)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "train").write_text("#!/bin/sh\necho \"train ran as pid $$ with BASH_ENV=${BASH_ENV:-unset}\"\n")
    (bin_dir / "train").chmod(0o755)
    environ = {"PATH": f"{bin_dir}:/usr/bin:/bin", "BASH_ENV": str(HOOK), **env}
    return subprocess.run(["unshare", "--pid", "--fork", "--kill-child", shell, "-c", command],
                          env=environ, capture_output=True, text=True, timeout=30)


def test_the_image_hook_turns_modeltrainers_first_bash_into_train_and_nothing_else(tmp_path: Path) -> None:
    done = _bash_as_first_process(tmp_path, MODELTRAINER_COMMAND)
    assert done.stdout == "train ran as pid 1 with BASH_ENV=unset\n", done.stderr
    other = _bash_as_first_process(tmp_path, "echo the user bash")
    assert other.stdout == "the user bash\n"
    nested = _bash_as_first_process(tmp_path, f"bash -c '{MODELTRAINER_COMMAND}'; echo nested bash went on",
                                    shell="/bin/sh")  # the same command, by a bash that is not the first process
    assert "train ran" not in nested.stdout and "nested bash went on" in nested.stdout
    sdk = _bash_as_first_process(tmp_path, MODELTRAINER_COMMAND, SMTRAIN_MODELTRAINER_DRIVERS="sdk")
    assert "train ran" not in sdk.stdout and "sm_train.sh" in sdk.stderr  # the SDK's own script, missing here


def test_the_feeder_gives_each_host_its_share_of_a_sharded_file_channel(tmp_path: Path) -> None:
    """`--emulate` feeds a File channel; with ShardedByS3Key, algo-2 of two hosts gets every other object
    from its place in the hosts (objects b and d of a-d), as SageMaker shards S3 keys."""
    tree = make_tree(tmp_path / "ml", hosts=("algo-1", "algo-2"), current_host="algo-2", resource_extra=LOCAL,
                     channels={"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"}})
    objects = tree.base / "input" / "data" / "train"
    write_objects(objects, ["a", "b", "c", "d"], 3)
    feeder = subprocess.Popen([sys.executable, "-m", "smtrain.data.feeder", "--base", str(tree.base), "--emulate",
                               "--source", f"train={objects}", "--epochs", "1"], stderr=subprocess.PIPE)
    fifo = tree.base / "input" / "data" / "train_0"
    deadline = time.monotonic() + 30
    while not fifo.exists():
        assert time.monotonic() < deadline and feeder.poll() is None, "the feeder made no FIFO"
        time.sleep(0.01)
    with open(fifo, "rb") as f:
        fed = f.read()
    assert feeder.wait(30) == 0, feeder.stderr.read().decode() if feeder.stderr else ""
    assert fed == (objects / "b").read_bytes() + (objects / "d").read_bytes()
