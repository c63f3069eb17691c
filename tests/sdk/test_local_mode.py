"""The SageMaker SDK as users run it today, in local mode with Docker, on the CPU image: SDK v3's
ModelTrainer (sagemaker 3.x) the way v3's docs write a Horovod job, and SDK v2's TensorFlow estimator
(sagemaker 2.257.7), both from PyPI, with scripts that never import smtrain (but the spot rehearsal's,
which keeps its Pipe position in smtrain's checkpoints). Each SDK runs in its own Python: these tests
drive it as a subprocess (tests/sdk/sdk.py)."""
from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.harness.docker_cluster import docker
from tests.harness.records import write_objects
from tests.sdk.sdk import exit_codes, finish_sdk_job, job_containers, run_sdk_job, start_sdk_job, wait_for

PROGRAMS = Path(__file__).parent.parent / "programs"
RANK_LINE = re.compile(r"rank (\d) of 4 \(local rank \d\) on algo-\d\S*: sum of ranks 6")


def _source(tmp_path: Path, program: str, name: str = "train.py") -> Path:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    shutil.copy(PROGRAMS / program, source / name)
    return source


@pytest.mark.parametrize("sdk", ["v3", "v2"])
def test_a_horovod_job_of_two_instances_and_two_processes_each_runs_through_train(
        containers: str, tmp_path: Path, sdk: str) -> None:
    job = run_sdk_job(sdk, containers, tmp_path / "job", _source(tmp_path, "hvd_sdk_job.py"), "train.py", {},
                      {"epochs": 1}, instance_count=2, processes_per_host=2)
    assert job.error is None, job.report()
    assert "[train]" in job.output and "the job succeeded" in job.output  # our toolkit ran the job...
    assert "Running MPI Driver" not in job.output  # ...and not the SDK's own driver
    assert sorted(int(m) for m in RANK_LINE.findall(job.output)) == [0, 1, 2, 3]
    model = job.extract("model.tar.gz", tmp_path / "model")
    assert (model / "model.txt").read_text() == "trained by 4 ranks\n"


def test_a_rank_exiting_3_ends_every_container_with_3_and_the_sdk_reports_it(containers: str, tmp_path: Path) -> None:
    job = run_sdk_job("v3", containers, tmp_path / "job", _source(tmp_path, "hvd_sdk_job.py"), "train.py", {},
                      {"fail-rank": 3}, instance_count=2, processes_per_host=2)
    assert job.error is not None and "exited with code" in job.error, job.report()
    assert exit_codes(containers) == [3, 3], job.report()
    assert "rank 3 fails on purpose" in job.output
    failure = job.extract("output.tar.gz", tmp_path / "output") / "failure"
    assert "rank 3" in failure.read_text()


@pytest.mark.parametrize("sdk,processes", [("v3", 2), ("v2", 2), ("v3", 0)])
def test_a_pipemode_script_reads_every_record_once_per_epoch_on_two_ranks_or_one(
        containers: str, tmp_path: Path, sdk: str, processes: int) -> None:
    """input_mode Pipe (v3: training_input_mode): local mode still writes File; train streams the
    channel's files through FIFOs, one per rank, and says so. processes 0: v3 without `distributed`."""
    expected = write_objects(tmp_path / "data", ["a", "b", "c"], 30)
    job = run_sdk_job(sdk, containers, tmp_path / "job", _source(tmp_path, "pipemode_reader.py"), "train.py",
                      {"train": tmp_path / "data"}, {"epochs": 2}, instance_count=1, processes_per_host=processes,
                      input_mode="Pipe")
    assert job.error is None, job.report()
    assert "Pipe mode emulated for channel train" in job.output
    data = job.extract("output.tar.gz", tmp_path / "output") / "data"
    if not processes:  # one process reads the channel as it comes, in key order
        assert [bytes.fromhex(x) for x in (data / "pmd-0").read_text().split()] == expected * 2
        return
    got = {r: [bytes.fromhex(x) for x in (data / f"pmd-{r}").read_text().split()] for r in (0, 1)}
    assert len(got[0]) == len(got[1]) == len(expected)  # each rank its half of each of 2 epochs
    assert sorted(got[0] + got[1]) == sorted(expected * 2)


def test_a_spot_interruption_is_rehearsed_and_the_second_run_resumes_exactly_once(
        containers: str, tmp_path: Path) -> None:
    """Run 1 is SIGTERMed mid-epoch 1 (as SageMaker stops a spot instance); its final checkpoint is kept
    in its output.tar.gz; run 2 names that folder as its `checkpoints` channel and resumes: across
    the two runs every record is read once in each epoch."""
    everything = write_objects(tmp_path / "data", ["a", "b"], 60)
    source = _source(tmp_path, "pipe_resume.py")
    runs = []
    for run in ("1", "2"):
        channels = {"train": tmp_path / "data"}
        if run == "2":
            channels["checkpoints"] = runs[0].extract("output.tar.gz", tmp_path / "out1") / "data" / "checkpoints"
        started = start_sdk_job("v2", containers, tmp_path / f"job{run}", source, "train.py", channels,
                                {"run": run, "epochs": 2, "delay": 0.02}, input_mode="Pipe")
        if run == "1":
            consumed = tmp_path / "job1"

            def well_into_epoch_1() -> bool:
                logs = list(consumed.rglob("consumed-1-0"))
                return bool(logs) and logs[0].read_text().count("\n") >= len(everything) + 30

            wait_for(well_into_epoch_1, 180, "run 1 reaching the middle of epoch 1", started)
            for container in job_containers(containers):
                docker("kill", "--signal", "TERM", container, check=False)
        runs.append(finish_sdk_job(started, tmp_path / f"job{run}"))
    assert "restored" in runs[1].output and "from the checkpoints channel" in runs[1].output, runs[1].output[-3000:]
    by_epoch: dict[int, Counter] = {0: Counter(), 1: Counter()}
    for run, job in zip("12", runs):
        data = job.extract("output.tar.gz", tmp_path / f"final{run}") / "data"
        for line in (data / f"consumed-{run}-0").read_text().splitlines():
            epoch, record = line.split()
            by_epoch[int(epoch)][bytes.fromhex(record)] += 1
    for epoch in (0, 1):
        assert by_epoch[epoch] == Counter(everything), f"epoch {epoch}: a record lost or read twice"


def test_a_pipemode_horovod_job_is_restarted_in_place_in_local_mode(containers: str, tmp_path: Path) -> None:
    """SDK v2 local mode, one instance, 2 Horovod ranks reading the channel as Pipe mode (emulated from
    its files, dealt by the demultiplexer), `sagemaker_max_restarts`: rank 1 raises once at step 30;
    the job restarts in place, reads the channel from FIFO 0 again and resumes at its checkpoint: exit
    0, and every record trained on once per epoch across the two attempts."""
    everything = write_objects(tmp_path / "data", ["a", "b"], 30)
    job = run_sdk_job("v2", containers, tmp_path / "job", _source(tmp_path, "pipe_restart.py"), "train.py",
                      {"train": tmp_path / "data"}, {"epochs": 2, "horovod": "yes", "fail-rank": 1, "fail-at": 30,
                                                     "sagemaker_max_restarts": 1},
                      instance_count=1, processes_per_host=2, input_mode="Pipe")
    assert job.error is None, job.report()
    assert "restarting the job in place (restart 1 of 1)" in job.output and "after 1 restart(s) in place" in job.output
    data = job.extract("output.tar.gz", tmp_path / "output") / "data"
    by_epoch: dict[int, Counter] = {0: Counter(), 1: Counter()}
    for rank in (0, 1):
        assert len((data / f"starts-{rank}").read_text().splitlines()) == 2
        for line in (data / f"trained-{rank}").read_text().splitlines():
            epoch, record = line.split()
            by_epoch[int(epoch)][bytes.fromhex(record)] += 1
    assert by_epoch == {0: Counter(everything), 1: Counter(everything)}
