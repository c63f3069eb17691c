"""Every line a rank writes reaches the job's log whole, once, in its rank's order (smtrain.run.rank_output):
3 simulated hosts x 2 ranks, each writing 3,000 metric lines in two writes apiece (as `print` under
PYTHONUNBUFFERED does), then exiting at once - or one rank failing once all have written. mpirun's own
forwarding cuts such lines into each other (hundreds of 18,000 in a run)."""
from __future__ import annotations

import re
from collections import defaultdict

import pytest

from tests.harness.cluster_jobs import PROGRAMS, TRAIN

MPI = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2}
LINES = 3000
RANKS = 6
METRIC = re.compile(r"^metric rank=(\d) i=(\d+) loss=(\d+\.\d{6}); (x*)$")


def _metric_lines(log: str) -> dict[int, list[int]]:
    """Each rank's metric line indices in the order the log has them; a line that mentions a metric but is
    not one whole fails the test."""
    seen: dict[int, list[int]] = defaultdict(list)
    for line in log.splitlines():
        if "metric rank=" not in line:
            continue
        match = METRIC.match(line)
        assert match is not None, f"a torn or merged line: {line!r}"
        rank, i = int(match[1]), int(match[2])
        assert match[3] == f"{i / 7:.6f}" and match[4] == "x" * (rank * 7 % 40), f"a torn line: {line!r}"
        seen[rank].append(i)
    return seen


@pytest.mark.parametrize("fail_rank", [-1, 3])
def test_every_line_of_every_rank_on_three_hosts_reaches_the_log_whole_and_once(make_cluster, fail_rank: int) -> None:
    cluster = make_cluster(3)
    cluster.write_job({**MPI, "lines": LINES, "fail-rank": fail_rank}, program=PROGRAMS / "chatty_ranks.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(180)
    master = cluster.hosts[0]
    out, err = (open(master.folder / name, encoding="utf-8", newline="").read() for name in ("stdout", "stderr"))
    if fail_rank < 0:
        assert statuses == {h.name: 0 for h in cluster.hosts}, err[-2000:]
    else:  # the failing rank's status on the master, non-zero on every worker
        assert statuses["algo-1"] == 1 and all(statuses.values()), (statuses, err[-2000:])
    assert _metric_lines(out) == {rank: list(range(LINES)) for rank in range(RANKS)}  # whole, once, in order
    for rank in range(RANKS):
        assert out.count(f"progress rank={rank} 1/3\rprogress rank={rank} 2/3\rprogress rank={rank} 3/3\n") == 1
        assert err.count(f"stderr rank={rank} starts\n") == 1 and err.count(f"stderr rank={rank} wrote {LINES} lines\n") == 1
        if fail_rank < 0:  # a last line without its newline, whole, ended by one
            assert out.count(f"\nlast words rank={rank} without a newline\n") == 1
    if fail_rank >= 0:
        assert f"RuntimeError: rank {fail_rank} fails on purpose\n" in err
        assert f"rank {fail_rank} fails on purpose" in (master.failure() or "")
    for worker in cluster.hosts[1:]:  # lines land in the master's log, as mpirun's forwarding put them
        assert "metric rank=" not in worker.stdout() + worker.stderr()
    assert cluster.leftovers() == {}
