"""A demultiplexer of SageMaker's own FIFOs across a restart in place (`--restartable`): the real
demultiplexer process, fed by the local feeder playing SageMaker's part (epoch after epoch, each FIFO
once the previous one was read to its end). The failed attempt's ranks leave mid-epoch; SageMaker's
FIFO is still read to its end (never closed early), and the next attempt's FIFO 0 is SageMaker's next
epoch, whole."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from smtrain import pipes
from smtrain.data.feeder import Feeder
from smtrain.wire.pipe_assignment import demux_prefix, rank_ended_marker, restart_ack
from tests.harness.records import write_objects


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.02)


def _read(data: Path, rank: int, limit: int = -1, fifo: int = 0) -> list[bytes]:
    """What rank `rank` reads of its FIFO `fifo` (the first `limit` records, then it goes away, as a rank
    that died mid-epoch; all without a limit)."""
    env = {"SM_PIPE_C": str(demux_prefix(data, "c", rank)), "SM_PIPE_FORMAT_C": "tfrecord"}
    got = []
    records = pipes.records("c", fifo, environ=env, timeout=30)
    for record in records:
        got.append(record)
        if len(got) == limit:
            records.close()  # its FIFO closed mid-epoch
            break
    return got


def test_a_restart_reads_sagemakers_epoch_to_its_end_and_deals_the_next_one_as_fifo_0(tmp_path: Path, capfd) -> None:
    import threading

    records = write_objects(tmp_path / "src", ["o"], 6000)  # about 9 MB: more than the ranks' pipes hold
    data = tmp_path / "data"
    data.mkdir()
    feeder = Feeder(data, {"c": [tmp_path / "src" / "o"]}, {"c": None}, epochs=None).start()
    demux = subprocess.Popen([sys.executable, "-m", "smtrain.data.demux", "--data", str(data), "--channel", "c",
                              "--ranks", "2", "--format", "tfrecord", "--restartable"],
                             stderr=subprocess.PIPE, text=True)
    try:
        first: dict[int, list[bytes]] = {}
        readers = [threading.Thread(target=lambda r=r: first.__setitem__(r, _read(data, r, limit=40))) for r in (0, 1)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(60)
        assert [len(first[r]) for r in (0, 1)] == [40, 40]
        for rank in (0, 1):  # what each rank's launcher does when its program has ended
            rank_ended_marker(demux_prefix(data, "c", rank).parent, rank).touch()
        time.sleep(0.5)
        demux.send_signal(signal.SIGUSR1)  # train's restart in place, once this host's ranks are gone
        _wait_for(restart_ack(data, "c").exists, 30, "acknowledgement")
        assert not rank_ended_marker(demux_prefix(data, "c", 0).parent, 0).exists()  # the old attempt's, gone
        second: dict[tuple[int, int], list[bytes]] = {}

        def attempt(rank: int) -> None:
            for fifo in (0, 1):
                second[rank, fifo] = _read(data, rank, fifo=fifo)

        readers = [threading.Thread(target=attempt, args=(r,)) for r in (0, 1)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(60)
        for fifo in (0, 1):  # SageMaker's epochs 1 and 2, whole, dealt evenly
            assert len(second[0, fifo]) == len(second[1, fifo]) == len(records) // 2
            assert Counter(second[0, fifo] + second[1, fifo]) == Counter(records)
        assert demux.poll() is None  # it stays for the next restart until the job ends
    finally:
        demux.terminate()
        log = demux.communicate(timeout=30)[1]
        feeder.stop.set()
    assert "read the rest of the epoch" in log
    assert "restart in place: the next attempt's FIFO 0 is SageMaker's c_1" in log
    assert "closed the FIFO early" not in capfd.readouterr().err  # SageMaker's FIFO was read to its end


def test_train_waits_for_each_demultiplexers_acknowledgement_and_says_which_one_has_ended(tmp_path: Path) -> None:
    """`HostJob.rewind_pipes`' part for SageMaker's FIFOs (run.pipe_rewind.restart_kept_demultiplexers), with real
    demultiplexer helpers, started from their declaration (plan.helper_plan), that no rank has read yet: ready at once;
    one that has ended is named."""
    from smtrain.plan.fifo_plan import DemuxSpec
    from smtrain.plan.helper_plan import DEMUX
    from smtrain.proc.helpers import HelperGroup, HelperSpec
    from smtrain.run.pipe_rewind import restart_kept_demultiplexers
    from smtrain.wire.record_format import RecordFormat

    data = tmp_path / "data"
    data.mkdir()
    commands = [DemuxSpec(data, channel, 2, RecordFormat.TFRECORD, True) for channel in ("train", "eval")]

    helpers = HelperGroup()
    try:
        for spec in commands:
            helpers.start(HelperSpec(spec.name, DEMUX.argv(sys.executable, *spec.args)))
        _wait_for(lambda: all(Path(f"{demux_prefix(data, c, 1)}_0").exists() for c in ("train", "eval")), 30, "FIFOs")
        started = time.monotonic()
        assert restart_kept_demultiplexers(helpers, commands, 10.0) is None
        assert time.monotonic() - started < 5 and restart_ack(data, "eval").exists()
        helpers.helpers[1].process.kill()
        helpers.helpers[1].process.wait(10)
        assert restart_kept_demultiplexers(helpers, commands, 10.0) == "the demultiplexer of Pipe channel eval has ended"
    finally:
        helpers.stop()
