"""A Pipe channel dealt across the job's hosts, at the demultiplexers' level: two hosts' real demultiplexer
processes, each fed the same stream by its own feeder (SageMaker's FullyReplicated), agree the job's readers
through the master's real control server on loopback (smtrain.run.pipe_dealing), and every record reaches one
rank of the job an epoch. The whole job on simulated hosts: tests/cluster/test_pipe_dealing.py."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Optional

import pytest

from smtrain import pipes
from smtrain.data.feeder import Feeder
from smtrain.data.fingerprints import fingerprint, to_bytes
from smtrain.run.control_server import ControlServer
from smtrain.wire.pipe_assignment import consumed_handoff, demux_folder, demux_prefix, rank_ended_marker
from tests.harness.records import write_objects

HOSTS = ("algo-1", "algo-2")


class _Job:
    """The master's control server, and per host a feeder and a demultiplexer of channel `c`."""

    def __init__(self, tmp_path: Path, ranks: int, epochs: int, sources: dict[str, Path],
                 seed: Optional[int] = None) -> None:
        self.said: list[str] = []
        self.server = ControlServer("127.0.0.1", 0, "t" * 32, self.said.append)
        self.ranks, self.epochs = ranks, epochs
        self.data: dict[str, Path] = {}
        self.feeders, self.processes = [], []
        for index, host in enumerate(HOSTS):
            data = self.data[host] = tmp_path / host
            data.mkdir()
            self.feeders.append(Feeder(data, {"c": sorted(sources[host].iterdir())}, {"c": seed}, epochs=epochs).start())
            job = f"127.0.0.1:{self.server.port}:{host}:{len(HOSTS)}:{index * ranks}"
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", "smtrain.data.demux", "--data", str(data), "--channel", "c", "--ranks",
                 str(ranks), "--format", "tfrecord", "--epochs", str(epochs), "--rank-wait", "20", "--job", job],
                stderr=subprocess.PIPE, text=True))
        deadline = time.monotonic() + 30  # its first FIFOs made: a rank's end mark or hand-over made now stays
        while not all(Path(f"{demux_prefix(d, 'c', r)}_0").exists() for d in self.data.values()
                      for r in range(ranks)) and time.monotonic() < deadline:
            time.sleep(0.01)

    def read(self, host: str, local: int, got: dict, skip: bool = False) -> threading.Thread:
        """Rank `local` of `host` reads every epoch into got[(global rank, epoch)]; `skip`: it never opens its FIFO."""
        data, rank = self.data[host], HOSTS.index(host) * self.ranks + local
        env = {"SM_PIPE_C": str(demux_prefix(data, "c", local)), "SM_PIPE_FORMAT_C": "tfrecord"}

        def run() -> None:
            for epoch in range(0 if skip else self.epochs):
                got[(rank, epoch)] = list(pipes.records("c", epoch, environ=env, timeout=30))
            rank_ended_marker(demux_folder(data), local).touch()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def finish(self, readers: list[threading.Thread]) -> dict[str, str]:
        for reader in readers:
            reader.join(60)
        logs = {}
        for host, process in zip(HOSTS, self.processes):
            try:
                logs[host] = process.communicate(timeout=60)[1]
            except subprocess.TimeoutExpired:
                process.kill()
                logs[host] = process.communicate()[1]
        for feeder in self.feeders:
            feeder.stop.set()
            feeder.join(10)
        self.server.close()
        assert not any(r.is_alive() for r in readers)
        assert [p.returncode for p in self.processes] == [0, 0], logs
        return logs


def _same_stream(tmp_path: Path, per_object: int = 150) -> tuple[dict[str, Path], list[bytes]]:
    records = write_objects(tmp_path / "src", ["a", "b"], per_object)
    return dict.fromkeys(HOSTS, tmp_path / "src"), records


@pytest.mark.parametrize("ranks", [1, 2])
def test_every_record_reaches_one_rank_of_the_job_an_epoch_in_equal_counts(tmp_path: Path, ranks: int) -> None:
    """2 hosts x 1 and x 2 ranks, 2 epochs of 300 records: each epoch every record once over the job's ranks
    (at most readers-1 left out, none with 300), every rank the same count; the master says the job's readers."""
    sources, records = _same_stream(tmp_path)
    job = _Job(tmp_path, ranks, 2, sources)
    got: dict = {}
    logs = job.finish([job.read(host, local, got) for host in HOSTS for local in range(ranks)])
    for epoch in range(2):
        mine = [got[(rank, epoch)] for rank in range(2 * ranks)]
        assert Counter(r for rank in mine for r in rank) == Counter(records), f"epoch {epoch}: lost or repeated"
        assert {len(rank) for rank in mine} == {len(records) // (2 * ranks)}
    assert f"Pipe channel c: dealt across 2 hosts to the job's ranks {', '.join(map(str, range(2 * ranks)))}" in job.said
    assert "different streams" not in " ".join(job.said)
    assert all("dealt across the job's 2 hosts" in log for log in logs.values()), logs


def test_a_rank_that_never_reads_is_left_out_of_the_jobs_readers(tmp_path: Path) -> None:
    """Rank 3 (algo-2's local rank 1) ends without opening the channel: ranks 0-2 share each epoch, once each,
    equal counts (300 records: 100 each)."""
    sources, records = _same_stream(tmp_path)
    job = _Job(tmp_path, 2, 2, sources)
    got: dict = {}
    readers = [job.read(host, local, got, skip=(host, local) == ("algo-2", 1)) for host in HOSTS for local in (0, 1)]
    job.finish(readers)
    for epoch in range(2):
        assert Counter(r for rank in range(3) for r in got[(rank, epoch)]) == Counter(records)
        assert [len(got[(rank, epoch)]) for rank in range(3)] == [100] * 3
    assert "Pipe channel c: dealt across 2 hosts to the job's ranks 0, 1, 2" in job.said


def test_hosts_whose_streams_differ_are_said_in_the_masters_log(tmp_path: Path) -> None:
    """Each host fed its own records (a FullyReplicated channel that is not one stream): the master says, per
    epoch, that the streams differed, naming the hosts - not a silent double deal."""
    sources = {}
    for host in HOSTS:
        write_objects(tmp_path / host / "src", [host], 40)
        sources[host] = tmp_path / host / "src"
    (tmp_path / "job").mkdir()
    job = _Job(tmp_path / "job", 1, 1, sources)
    got: dict = {}
    job.finish([job.read(host, 0, got) for host in HOSTS])
    said = [line for line in job.said if "different streams" in line]
    assert len(said) == 1 and said[0].startswith("Pipe channel c epoch 0: the hosts received different streams (algo-1: 40")
    assert "algo-2: 40 records" in said[0] and "SMTRAIN_PIPE_DEALING=host" in said[0]


def test_a_resumed_shuffled_epoch_leaves_out_what_every_hosts_ranks_consumed(tmp_path: Path) -> None:
    """After a restart: algo-1's rank 0 hands over 30 records it consumed, algo-2's rank 3 another 20. Both
    hosts leave out all 50 (the master gathers them) and deal the rest once over the job's 4 ranks."""
    sources, records = _same_stream(tmp_path, per_object=101)
    job = _Job(tmp_path, 2, 1, sources, seed=5)
    consumed = {("algo-1", 0): records[:30], ("algo-2", 1): records[150:170]}
    for (host, local), taken in consumed.items():
        handoff = consumed_handoff(demux_prefix(job.data[host], "c", local))
        handoff.write_bytes(to_bytes([fingerprint(r) for r in taken]))  # what the rank's reader leaves before FIFO 0
    got: dict = {}
    logs = job.finish([job.read(host, local, got) for host in HOSTS for local in (0, 1)])
    left = Counter(records) - Counter(records[:30] + records[150:170])
    dealt = Counter(r for rank in range(4) for r in got[(rank, 0)])
    assert dealt <= left and sum((left - dealt).values()) < 4, "a record lost or repeated"
    assert len({len(got[(rank, 0)]) for rank in range(4)}) == 1
    assert all("the 50 records they consumed before the restart are left out of FIFO 0" in log
               for log in logs.values()), logs
    assert not any("different streams" in line for line in job.said)
