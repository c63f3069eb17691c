"""Multi-host latencies of `train` on simulated hosts (scripts/cluster.py; needs root).

  launch   all hosts' train started -> every rank running
  job end  the last rank's process exits -> the master's train, and the last worker's, have exited
  script end  the same from the last rank's script's last line (its interpreter's exit included)
  failure  a rank on the last worker is SIGKILLed -> every host's train has exited
  master MB, threads  the master's `train`: its peak resident memory and most threads (its control
           server keeps a connection and a thread per worker and per rank)
  launch CPU busy, end CPU busy  how busy this machine's CPUs were during the launch, and from the
           last rank's exit to the master's (every simulated host's processes share them: near 100 %,
           the edge waits for CPU, not for the toolkit)

Each is measured with the profiler on (the system monitor and step metrics, the master's report at
the end: the default) and off (`sagemaker_system_monitor` and `sagemaker_framework_metrics` off).
`--program timed` (default) runs ranks that import no framework (programs/timed_rank.py: the
toolkit's own latencies); `--program hvd` a Horovod TensorFlow job of 10 steps
(programs/hvd_timed.py), whose ranks' interpreter exits (TensorFlow, Horovod, MPI) count too.
`--steps N`: each timed rank also takes N steps (`smtrain.progress.step()`), which the step profiler
records and every worker ships to the master for the job's one report (the report must then count
every rank's steps).

    /opt/smtrain/venv/bin/python benchmarks/bench_multihost.py [--hosts 2 4 8] [--repeat 3] [--program timed|hvd] [--steps N]
        [--per-host N]

Every run checks that every host exited 0 (the failure runs aside) and, with the profiler on, that the
master's one report counts every host and every rank with steps.

Anchor (sagemaker-training 4.9.0, measured on simulated hosts): its workers sleep
30 s after the job and poll every 30 s, so a job end takes >= 30 s to reach every host; a rank
failing on a worker leaves that worker hanging; a job shorter than its 1 s poll is never seen.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.harness.cluster import Cluster  # noqa: E402

PROGRAMS = {"timed": Path(__file__).resolve().parent / "programs" / "timed_rank.py",
            "hvd": Path(__file__).resolve().parent / "programs" / "hvd_timed.py"}
PROFILER_OFF = {"sagemaker_system_monitor": "off", "sagemaker_framework_metrics": "off"}
TRAIN = [str(Path(sys.executable).parent / "train")]
PER_HOST = 2


class CpuBusy:
    """This machine's CPUs sampled every 0.1 s (/proc/stat): how busy they were between two times - on
    simulated hosts every host's processes share them."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int, int]] = []  # (wall clock, busy jiffies, all jiffies)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
            idle = fields[3] + fields[4]  # idle, iowait
            self.samples.append((time.time(), sum(fields) - idle, sum(fields)))

    def between(self, start: float, end: float) -> float:
        """The CPUs' busy share from `start` to `end` (wall clock), sampling stopped."""
        self._stop.set()
        self._thread.join()
        return self.busy(start, end)

    def busy(self, start: float, end: float) -> float:
        """The CPUs' busy share from `start` to `end` (wall clock) in the samples so far."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return float("nan")
        return (inside[-1][1] - inside[0][1]) / max(1, inside[-1][2] - inside[0][2])


class ProcessPeak:
    """One process's peak resident memory (VmHWM) and most threads, sampled every 0.1 s from /proc until
    it ends (the master's `train`: its control server holds a connection and a thread per worker and rank)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.rss_mb, self.threads = pid, 0.0, 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                fields = dict(line.split(":", 1) for line in open(f"/proc/{self.pid}/status") if ":" in line)
            except OSError:
                return
            if "VmHWM" not in fields:  # exited, not yet reaped: its memory is gone
                return
            self.rss_mb = max(self.rss_mb, int(fields["VmHWM"].split()[0]) / 1024)
            self.threads = max(self.threads, int(fields["Threads"]))
            time.sleep(0.1)

    def result(self) -> tuple[float, int]:
        """(peak resident MB, most threads), once the process has ended."""
        self._thread.join(timeout=5)
        return self.rss_mb, self.threads


def _read_times(cluster: Cluster, pattern: str) -> list[float]:
    return [float(p.read_text()) for h in cluster.hosts for p in (h.ml / "output" / "data").glob(pattern)]


def one_run(num_hosts: int, die: bool, program: str, profiler: bool, steps: int = 0,
            per_host: int = PER_HOST) -> dict[str, float]:
    with Cluster(f"bm{num_hosts}", num_hosts, net=200 + num_hosts) as cluster:
        ranks = num_hosts * per_host
        hps = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": per_host, "run-for": 1,
               **({} if profiler else PROFILER_OFF)}
        if die:
            hps["die-rank"] = ranks - 1
        elif steps:
            hps["steps"] = steps
        cluster.write_job(hps, program=PROGRAMS["timed" if die else program])
        cpu = CpuBusy()
        started, started_mono = time.time(), time.monotonic()
        cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
        master_pid = cluster.hosts[0].train_pid
        peak = ProcessPeak(master_pid) if master_pid is not None else None
        edges = cluster.wait_timed(300)
        if len(edges.ended) < num_hosts:
            raise RuntimeError(f"hosts still running after 300 s: {sorted(set(edges.statuses) - set(edges.ended))}")
        ended = {name: started + at - started_mono for name, at in edges.ended.items()}  # wall clock
        starts = _read_times(cluster, "start-*")
        if len(starts) != ranks:
            raise RuntimeError(f"{len(starts)} of {ranks} ranks started")
        result = {"launch": max(starts) - started, "launch_cpu_busy": cpu.busy(started, max(starts))}
        if peak is not None:
            result["master_rss_mb"], result["master_threads"] = peak.result()
        last_host = max(ended.values())
        if die:
            result["failure"] = last_host - _read_times(cluster, "killed")[0]
        else:
            failed = {name: status for name, status in edges.statuses.items() if status != 0}
            if failed:
                raise RuntimeError(f"hosts that did not exit 0: {failed}")
            last_line = max(_read_times(cluster, "end-*"))
            master = cluster.hosts[0].name
            worker = max(t for name, t in ended.items() if name != master)
            after = edges.after_last_rank()
            result.update(job_end_master=after[master], job_end_worker=max(t for n, t in after.items() if n != master),
                          script_end_master=ended[master] - last_line, script_end_worker=worker - last_line,
                          end_cpu_busy=cpu.between(ended[master] - after[master], ended[master]))
            report = cluster.hosts[0].ml / "output" / "data" / "profiler-report" / "summary.json"
            if profiler and not report.is_file():
                raise RuntimeError("the master wrote no profiler report")
            if profiler:  # the one report counts every host, and every rank with its steps (ranks that took some)
                summary = json.loads(report.read_text())
                counted = {n: r["steps"]["TRAIN"] for n, r in summary["ranks"].items()}
                if len(summary["hosts"]) != num_hosts or (steps and (len(counted) != ranks or set(counted.values()) != {steps})):
                    missing = sorted(set(f"{r}-{cluster.hosts[r // per_host].name}" for r in range(ranks)) - set(counted))
                    raise RuntimeError(f"the master's report counted {len(summary['hosts'])} hosts and {counted}, "
                                       f"not {num_hosts} hosts and {ranks} ranks of {steps} steps (missing: "
                                       f"{missing}; its notes: {summary['notes']}); the master's log:\n"
                                       + cluster.hosts[0].stderr()[-1500:] + "".join(
                                           f"\n{h.name}'s log:\n{h.stderr()[-1500:]}" for h in cluster.hosts
                                           if any(m.endswith(f"-{h.name}") for m in missing)))
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--program", choices=sorted(PROGRAMS), default="timed")
    parser.add_argument("--steps", type=int, default=0, help="steps each timed rank takes (smtrain.progress.step)")
    parser.add_argument("--per-host", type=int, default=PER_HOST, help="ranks per host")
    args = parse(parser, quick=dict(hosts=[2], repeat=1))
    print(f"{args.per_host} ranks per host, program {args.program}; median of {args.repeat} runs; seconds")
    print(f"{'hosts':>6}{'profiler':>10}{'launch':>10}{'end master':>12}{'end worker':>12}{'failure':>10}"
          f"{'script end master':>19}{'script end worker':>19}{'launch CPU busy':>16}{'end CPU busy':>13}"
          f"{'master MB':>11}{'threads':>9}")
    figures = {}
    for hosts in args.hosts:
        for profiler in (True, False):
            runs = [one_run(hosts, False, args.program, profiler, args.steps, args.per_host) for _ in range(args.repeat)]
            fails = [one_run(hosts, True, args.program, profiler, per_host=args.per_host) for _ in range(args.repeat)]
            got = {key: statistics.median(r[key] for r in runs) for key in
                   ("launch", "launch_cpu_busy", "job_end_master", "job_end_worker", "script_end_master",
                    "script_end_worker", "end_cpu_busy", "master_rss_mb", "master_threads")}
            got["failure"] = statistics.median(r["failure"] for r in fails)
            print(f"{hosts:>6}{'on' if profiler else 'off':>10}{got['launch']:>10.2f}{got['job_end_master']:>12.2f}"
                  f"{got['job_end_worker']:>12.2f}{got['failure']:>10.2f}{got['script_end_master']:>19.2f}"
                  f"{got['script_end_worker']:>19.2f}{got['launch_cpu_busy']:>16.0%}{got['end_cpu_busy']:>13.0%}"
                  f"{got['master_rss_mb']:>11.1f}{got['master_threads']:>9.0f}", flush=True)
            suffix = f"{hosts}_hosts" + ("" if profiler else "_profiler_off")
            figures.update({f"{key}_{suffix}" if key.endswith(("cpu_busy", "_mb", "_threads")) else f"{key}_s_{suffix}":
                            value for key, value in got.items()})
    print("anchor, sagemaker-training 4.9.0: job end >= 30 s on every worker (sleep 30, then 30 s polls);"
          " a rank failing on a worker: that worker hangs")
    print_figures(figures)


if __name__ == "__main__":
    main()
