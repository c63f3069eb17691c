"""The master's control channel as clusters grow: its memory and threads with H hosts x R ranks connected.

The master's real ControlServer (smtrain.run.control_server) runs in a process of its own, as in the
master's `train`; another process connects H-1 workers (hello, `joined`, a heartbeat every second, as
smtrain.run.link) and H x R rank launchers (a progress report every second, as smtrain.rank.reporter),
each with its own socket, over loopback. Measured in the server's process once every connection has
reported for --seconds: its resident memory (VmRSS, against the same process before the server
started) and its threads and its CPU time a second; then every connection is dropped and the server must see every worker go.

    /opt/smtrain/venv/bin/python benchmarks/bench_control.py [--hosts 8 32 64] [--ranks 8] [--seconds 5]
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import threading
import time

from figures import parse, print_figures  # benchmarks/figures.py

TOKEN = "t" * 32


def _status(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def serve(hosts: int, ranks: int, seconds: float) -> None:
    """The server's side (a process of its own): prints its figures as `name value` lines."""
    from smtrain.run.control_server import ControlServer

    before_kb, before_threads = _status("VmRSS"), threading.active_count()
    heard: dict[int, int] = {}
    server = ControlServer("127.0.0.1", 0, TOKEN, lambda line: None, heartbeat_timeout_s=30)
    attempt = server.begin_attempt(0)
    observe = attempt.observe

    def heard_from(host: str, rank: int, counts) -> None:  # every rank's progress, as the attempt takes it
        heard[rank] = counts.steps
        observe(host, rank, counts)

    attempt.observe = heard_from  # type: ignore[method-assign]
    server.start_heartbeat()
    print(f"port {server.port}", flush=True)
    workers = [f"algo-{h}" for h in range(2, hosts + 1)]
    missing = server.wait_for_workers(workers, time.monotonic() + 60)
    assert not missing, f"workers that did not come: {missing[:5]}"
    deadline = time.monotonic() + 60
    while len(heard) < hosts * ranks and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(heard) == hosts * ranks, f"{len(heard)} of {hosts * ranks} ranks reported"
    cpu = time.process_time()
    time.sleep(seconds)  # every connection keeps talking
    print(f"cpu_share {(time.process_time() - cpu) / seconds:.3f}", flush=True)
    print(f"rss_mb {(_status('VmRSS') - before_kb) / 1024:.1f}", flush=True)
    print(f"threads {threading.active_count() - before_threads}", flush=True)
    print(f"max_rss_mb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}", flush=True)
    sys.stdin.readline()  # the clients hang up now
    gone = time.monotonic()
    while len(server.lost_hosts()) < len(workers) and time.monotonic() - gone < 30:
        time.sleep(0.05)
    print(f"lost_s {time.monotonic() - gone:.2f}", flush=True)
    server.close()


def connect(port: int, hosts: int, ranks: int) -> list:
    """The workers' and the ranks' connections, each talking as the real ones do."""
    from smtrain.wire.control_protocol import ControlClient, MessageType

    clients = []
    for h in range(2, hosts + 1):
        client = ControlClient.open("127.0.0.1", port, time.monotonic() + 30, MessageType.HELLO, host=f"algo-{h}")
        assert client is not None
        client.send(MessageType.JOINED)
        clients.append(("worker", client, h))
    for rank in range(hosts * ranks):
        host = f"algo-{rank // ranks + 1}"
        client = ControlClient.open("127.0.0.1", port, time.monotonic() + 30, MessageType.PROGRESS, token=TOKEN,
                                    host=host, rank=rank, steps=1, beats=0, init=0)
        assert client is not None
        clients.append(("rank", client, rank))
    return clients


def one_run(hosts: int, ranks: int, seconds: float) -> dict[str, float]:
    from smtrain.wire.control_protocol import MessageType

    server = subprocess.Popen([sys.executable, __file__, "--serve", str(hosts), str(ranks), str(seconds)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdin is not None
    port = int(server.stdout.readline().split()[1])
    clients = connect(port, hosts, ranks)
    stop = threading.Event()

    def talk() -> None:  # a heartbeat from each worker and progress from each rank, every second
        step = 1
        while not stop.wait(1.0):
            step += 100
            for kind, client, n in clients:
                if kind == "worker":
                    client.send(MessageType.HEARTBEAT)
                else:
                    client.send(MessageType.PROGRESS, token="t" * 32, host=f"algo-{n // ranks + 1}", rank=n,
                                steps=step, beats=0, init=0)
                while client.readable(0):  # the master's heartbeats
                    if client.receive(0.0) is None:
                        break

    talker = threading.Thread(target=talk, daemon=True)
    talker.start()
    got = {}
    for _ in range(4):
        name, value = server.stdout.readline().split()
        got[name] = float(value)
    stop.set()
    talker.join()
    for _, client, _ in clients:
        client.close()
    server.stdin.write("\n")
    server.stdin.flush()
    name, value = server.stdout.readline().split()
    got[name] = float(value)
    server.wait(timeout=60)
    return got


def main() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # a socket a connection, on both sides
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--ranks", type=int, default=8, help="ranks per host")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parse(parser, quick=dict(hosts=[2], ranks=2, seconds=0.5))
    figures = {}
    print(f"{'hosts':>6}{'ranks':>7}{'connections':>13}{'threads':>9}{'RSS MB':>8}{'CPU (of a core)':>17}"
          f"{'all lost after s':>18}")
    for hosts in args.hosts:
        got = one_run(hosts, args.ranks, args.seconds)
        connections = hosts - 1 + hosts * args.ranks
        print(f"{hosts:>6}{hosts * args.ranks:>7}{connections:>13}{got['threads']:>9.0f}{got['rss_mb']:>8.1f}"
              f"{got['cpu_share']:>17.1%}{got['lost_s']:>18.2f}", flush=True)
        figures.update({f"control_threads_{hosts}x{args.ranks}": got["threads"],
                        f"control_rss_mb_{hosts}x{args.ranks}": got["rss_mb"]})
    print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
