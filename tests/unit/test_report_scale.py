"""The job's one report as clusters grow (smtrain.profiler.job_report): ranks digested at their exit or
on their hosts give the same report as their events parsed on the master; what is drawn one by one is bounded; the
plots drawn in forked processes are those drawn in one; the merged percentile equals its reference."""
from __future__ import annotations

import json
import random
import shutil
import statistics
from pathlib import Path

import pytest

from smtrain.profiler import digests, job_report, plots
from smtrain.profiler.events import (BETWEEN, EPOCH, MODES, STEP, as_read, bin_of, file_header, parse, read_folder,
                                     summary_lines, to_lines)
from smtrain.profiler.monitor import EventWriter, Sample, percentile
from smtrain.profiler.steprules import rank_stats, weighted_percentile
from smtrain.profiler.steps import StepRecorder
from smtrain.run.profiles import _digest_the_rest
from smtrain.wire.profiler_settings import ProfilerSettings
from tests.harness.steps import fast_steps


def _cluster(folder: Path, hosts: int, ranks: int, steps: int = 2600) -> None:
    """Each host's profiler folder, as a worker ships it: `ranks` ranks of real recorder files, the
    last rank of the last host slower (3 ms steps against 1 ms), one epoch of evaluation on rank 0."""
    for h in range(1, hosts + 1):
        for r in range(ranks):
            rank = (h - 1) * ranks + r
            recorder = StepRecorder(ProfilerSettings(str(folder / f"algo-{h}"), f"algo-{h}", min_free_mb=0), rank=rank)
            recorder.thread = object()  # no writer thread: _fast_steps flushes as the writer would
            slow = h == hosts and r == ranks - 1
            end = fast_steps(recorder, steps, step_s=0.003 if slow else 0.001, start=1000.0 + 0.01 * rank,
                              slow_every=500)
            if rank == 0:
                recorder.add_step("EVAL", end + 1, end + 1.5)
            recorder.close()


def _report(folder: Path, out: Path) -> dict:
    assert job_report.main([str(folder), "--out", str(out), "--job", "--no-plots"]) == 0
    return json.loads((out / "summary.json").read_text())


def test_digested_ranks_give_the_report_their_events_give(tmp_path: Path) -> None:
    _cluster(tmp_path / "hosts", hosts=3, ranks=2)
    assert len(list((tmp_path / "hosts").rglob("rank-digests/*.json"))) == 6  # each rank's own, at its exit
    own = _report(tmp_path / "hosts", tmp_path / "own")
    for path in (tmp_path / "hosts").rglob("rank-digests/*.json"):
        path.unlink()
    parsed = _report(tmp_path / "hosts", tmp_path / "parsed")
    assert own == parsed
    for worker in ("algo-2", "algo-3"):  # what each worker does before shipping, where its ranks left none
        _digest_the_rest(tmp_path / "hosts" / worker, 0.0)
    assert len(list((tmp_path / "hosts").rglob("rank-digests/*.json"))) == 4
    digested = _report(tmp_path / "hosts", tmp_path / "digested")
    assert digested == parsed
    assert len(digested["ranks"]) == 6 and digested["ranks"]["5-algo-3"]["steps"]["TRAIN"] == 2600
    # a digest of an earlier job (its events end before --since) is left out; so is one that does not read
    old = digests.read([tmp_path / "hosts"], since=1e12)
    assert old == {}
    broken = tmp_path / "hosts" / "algo-2" / digests.DIGEST_DIR / "2-algo-2.json"
    broken.write_text("{")
    assert "2-algo-2" not in digests.read([tmp_path / "hosts"]) and _report(tmp_path / "hosts", tmp_path / "b") == parsed


def _written_ones(summaries: int, rng: random.Random) -> tuple[list[tuple], list[tuple], int]:
    base_us = rng.randrange(1_700_000_000_000_000, 1_800_000_000_000_000)
    at = base_us / 1e6 + rng.random()
    records, sums = [], []
    for step in range(rng.randrange(1, 60)):
        kind, mode = rng.choice([STEP, BETWEEN, EPOCH]), rng.choice(MODES)
        length = rng.choice([0.0, 1e-7, rng.random() * 1e-3, rng.random() * 5])
        records.append((kind, mode, step, at, at + length))
        at += length + rng.random() * 1e-3
    for first in range(summaries):
        low, high = sorted((rng.random() * 1e-2, rng.random() * 1e-2))
        bins = {bin_of(rng.random() * 30 + 1e-3): rng.randrange(1, 500) for _ in range(rng.randrange(1, 12))}
        sums.append((rng.choice([STEP, BETWEEN]), rng.choice(MODES), first * 100, first * 100 + 99, at, at + 10,
                     sum(bins.values()), rng.random() * 3, low, high, bins))
        at += 10
    return records, sums, base_us


def test_what_a_rank_wrote_reads_back_as_the_file_does() -> None:
    """events.as_read (the rank's own digest) against the reference: the written lines parsed."""
    rng = random.Random(7)
    for _ in range(300):
        records, sums, base_us = _written_ones(rng.randrange(0, 4), rng)
        text = file_header(base_us) + to_lines(records, base_us, {}, 1) + summary_lines(sums, base_us, {}, 1)
        assert as_read(records, sums, base_us, "3-algo-2") == parse(text.rstrip().rstrip(",") + "\n]\n", "3-algo-2")


def test_a_ranks_own_digest_equals_the_one_its_files_give(tmp_path: Path) -> None:
    """Steps one by one and summarised, in two modes, over several files: the digest the recorder writes
    at the rank's exit against the reference, its files digested."""
    recorder = StepRecorder(ProfilerSettings(str(tmp_path), "algo-1", min_free_mb=0), rank=2)
    recorder.thread = object()
    end = fast_steps(recorder, 9000, step_s=0.01, slow_every=700)
    for i in range(2500):
        recorder.add_step("EVAL", end + i * 0.02, end + i * 0.02 + 0.01)
        recorder.flush()
    recorder.close()
    assert len(list(tmp_path.rglob("pevents/*/*.json"))) >= 2
    own = digests.read([tmp_path])["2-algo-1"]
    reference = digests.digest(read_folder([tmp_path]))["2-algo-1"]
    # summaries are added up by kind and mode: the sum over gaps of every mode may differ in the last bit
    assert own.stats.total_s == pytest.approx(reference.stats.total_s, rel=1e-12)
    assert own._replace(stats=own.stats._replace(total_s={})) == \
        reference._replace(stats=reference.stats._replace(total_s={}))
    assert own.stats.steps == {"TRAIN": 9000, "EVAL": 2500, "PREDICT": 0} and own.stats.step_bins


def test_a_digest_that_does_not_span_its_ranks_files_is_not_read(tmp_path: Path) -> None:
    """A rank restarted in place: its second process's digest does not cover the first's files; a
    process killed before its exit left its file open. The worker digests those ranks from their files."""
    def run(start: float, close: bool) -> None:
        recorder = StepRecorder(ProfilerSettings(str(tmp_path), "algo-1", min_free_mb=0), rank=0)
        recorder.thread = object()
        fast_steps(recorder, 300, start=start)
        recorder.close() if close else recorder.flush()

    run(1000.0, close=True)
    assert set(digests.read([tmp_path])) == {"0-algo-1"}
    run(2000.0, close=True)  # the restarted attempt
    assert digests.read([tmp_path]) == {}
    assert digests.read([tmp_path], since=1500.0)["0-algo-1"].stats.train_steps == 300  # the first is older
    _digest_the_rest(tmp_path, 0.0)
    assert digests.read([tmp_path])["0-algo-1"].stats.train_steps == 600
    run(3000.0, close=False)  # killed: its file stays open
    assert digests.read([tmp_path]) == {}
    _digest_the_rest(tmp_path, 0.0)
    assert digests.read([tmp_path])["0-algo-1"].stats.train_steps == 900
    path = tmp_path / digests.DIGEST_DIR / "0-algo-1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "open_files": ["not", "a", "map"]}))
    assert digests.read([tmp_path]) == {}  # a malformed record of what it read: its rank's events are read


def test_a_digest_round_trips_and_keeps_the_ranks_statistics(tmp_path: Path) -> None:
    _cluster(tmp_path, hosts=1, ranks=1)
    events = list(read_folder([tmp_path]))
    (node, made), = digests.digest(events).items()
    digests.write(tmp_path, {node: made})
    assert digests.read([tmp_path]) == {node: made}
    assert made.stats == rank_stats(events)[node]
    assert made.first_train_start == min(e.start for e in events if e.kind == "Step" and e.mode == "TRAIN")
    assert made.last_step_end == max(e.end for e in events if e.kind == "Step")


def test_what_is_drawn_one_by_one_is_bounded_and_tells_something(tmp_path: Path) -> None:
    _cluster(tmp_path, hosts=4, ranks=2, steps=300)
    stats = rank_stats(read_folder([tmp_path]))
    chosen = job_report.telling_ranks(stats)
    assert len(chosen) <= job_report.SHOWN and chosen[0] == "0-algo-1"
    assert "7-algo-4" in chosen  # the slowest
    assert job_report.telling_ranks(dict(list(stats.items())[:3])) == list(stats)[:3]  # few: every one


def test_plots_drawn_in_forked_processes_are_those_drawn_in_one() -> None:
    def picture(i: int):
        return None if i == 2 else (f"picture {i}", bytes([i]) * 10)

    tasks = [lambda i=i: picture(i) for i in range(5)]
    assert job_report.draw(tasks, workers=3) == job_report.draw(tasks, workers=1) == [picture(i) for i in range(5)]


def test_hosts_drawn_while_the_ranks_are_read_are_those_drawn_after(tmp_path: Path, monkeypatch) -> None:
    """At a job's end (`--since`) a drawer draws the hosts' plots while the report reads the ranks: the
    same report, in the same order, as where everything is drawn after (one core)."""
    _cluster(tmp_path / "hosts", hosts=6, ranks=1, steps=100)
    for h in range(1, 7):  # each host's monitor: a core per host, busier the higher the host
        writer = EventWriter(tmp_path / "hosts" / f"algo-{h}", f"algo-{h}")
        for t in range(12):
            writer.add([Sample("cpu", "cpu_total", "CPUUtilization", 10.0 * h + t),
                        Sample("cpu", "cpu0", "CPUUtilization", 10.0 * h)], 1000.0 + t / 2)
        writer.flush()
    since = ["--since", "999", "--job"]
    forked = []
    real_start = job_report.Drawing.start
    monkeypatch.setattr(job_report.Drawing, "start", lambda self: forked.append(self.workers) or real_start(self))
    assert job_report.main([str(tmp_path / "hosts"), "--out", str(tmp_path / "early"), *since]) == 0
    assert forked[0] == 1 and len(forked) == 2  # the hosts' drawer, then the others'
    monkeypatch.setattr(job_report.os, "sched_getaffinity", lambda pid: {0})
    assert job_report.main([str(tmp_path / "hosts"), "--out", str(tmp_path / "after"), *since]) == 0
    early, after = ((tmp_path / way / job_report.REPORT_FILE).read_text() for way in ("early", "after"))
    captions = _captions(tmp_path / "early")
    assert early == after and len(captions) == 9, captions  # 5 of the ranks, 4 of the hosts
    assert captions[5].startswith("System utilisation per host (hosts algo-1, algo-4, algo-6 of 6") and \
        captions[6].startswith("Utilisation across hosts") and captions[7].startswith("algo-6: CPU utilisation per core") and \
        captions[8].startswith("algo-1: CPU utilisation per core"), captions


def test_the_merged_percentile_equals_its_reference() -> None:
    def reference(values, bins, q):  # what weighted_percentile computed before (a pair per value, sorted)
        if not bins:
            return (statistics.median(values) if q == 50 else percentile(values, q)) if values else 0.0
        weighted = sorted([(v, 1) for v in values] + [b for b in bins if b[1] > 0])
        total = sum(n for _, n in weighted)
        if not total:
            return 0.0
        wanted, seen = q / 100 * total, 0
        for value, n in weighted:
            seen += n
            if seen >= wanted:
                return value
        return weighted[-1][0]

    rng = random.Random(7)
    for _ in range(20000):
        values = [rng.choice([1.0, 2.0, 3.0, rng.random() * 10]) for _ in range(rng.randint(0, 12))]
        bins = tuple((rng.choice([1.0, 2.0, 4.0, rng.random() * 10]), rng.randint(0, 5)) for _ in range(rng.randint(1, 5)))
        q = rng.choice([0, 1, 12.5, 25, 33.3, 50, 75, 95, 99, 100])
        assert weighted_percentile(values, bins, q) == reference(values, bins, q), (values, bins, q)


def test_the_warm_report_draws_what_a_cold_one_does(tmp_path: Path) -> None:
    """`--wait` (train starts the report with the job) takes its remaining arguments from stdin."""
    import subprocess
    import sys

    _cluster(tmp_path / "hosts", hosts=2, ranks=1, steps=50)
    shutil.copytree(tmp_path / "hosts", tmp_path / "copy")
    process = subprocess.Popen([sys.executable, "-m", "smtrain.profiler.job_report", str(tmp_path / "hosts"), "--out",
                                str(tmp_path / "warm"), "--job", "--wait"], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = process.communicate(json.dumps(["--note", "a note", "--no-plots"]).encode() + b"\n", timeout=120)
    assert process.returncode == 0, err
    summary = json.loads((tmp_path / "warm" / "summary.json").read_text())
    assert summary["notes"] == ["a note"] and len(summary["ranks"]) == 2
    # train gone before the job ended: the warm report writes nothing and ends
    process = subprocess.Popen([sys.executable, "-m", "smtrain.profiler.job_report", str(tmp_path / "copy"), "--out",
                                str(tmp_path / "none"), "--job", "--wait"], stdin=subprocess.PIPE)
    process.stdin.close()  # type: ignore[union-attr]
    assert process.wait(timeout=120) == 0 and not (tmp_path / "none").exists()
    assert plots.warm() is None  # loading twice in one process is harmless


def _captions(out: Path) -> list[str]:
    import re

    import html

    return [html.unescape(c) for c in re.findall(r"<figure><img alt='([^']+)'", (out / job_report.REPORT_FILE).read_text())]


def test_every_plot_is_drawn_and_names_the_ranks_it_picked_where_it_picked(tmp_path: Path) -> None:
    _cluster(tmp_path / "few", hosts=2, ranks=1, steps=100)
    assert job_report.main([str(tmp_path / "few"), "--out", str(tmp_path / "few-out"), "--job"]) == 0
    few = _captions(tmp_path / "few-out")
    assert few[:4] == ["Step duration over time, per rank", "Histogram of training step durations, per rank",
                       "Where each rank's time went", "Spread of step times across ranks"], few
    _cluster(tmp_path / "many", hosts=3, ranks=2, steps=100)
    assert job_report.main([str(tmp_path / "many"), "--out", str(tmp_path / "many-out"), "--job"]) == 0
    many = _captions(tmp_path / "many-out")
    assert len(many) == len(few) and all("of 6: the first, the slowest" in c for c in many[:4]), many
