"""A rank the others wait for, named while the job runs. Every host's system monitor sends the master its
ranks' training steps every few seconds (`rank-steps`: smtrain.profiler.live); over the last WINDOW_S of them
(SMTRAIN_STRAGGLER_WINDOW_S) the master judges the ranks by the rule the job's report judges them by at its end (RankImbalance:
smtrain.profiler.steprules.waited_for, the same parameters) - a rank whose median gap between steps (its input,
its callbacks: where the others already wait in their collectives) exceeds the fastest rank's by more than half
the step cycle and by more than 10 ms. A verdict that holds for a quarter of the window is said in the log - the rank, its
host (the host alone where all its ranks are slow and another host's are not), how much slower, since when -
once, and again only when it changes."""
from __future__ import annotations

import collections
import itertools
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from ..wire.control_protocol import LineReader, Message, MessageType

if TYPE_CHECKING:
    from ..profiler.steprules import RankStats, Waited

__all__ = ["Stragglers"]


class Stragglers:
    """The ranks' recent steps, as the monitors send them, and the verdict said so far."""

    def __init__(self, log: Callable[[str], None], window_s: float, clock: Callable[[], float] = time.monotonic,
                 params: Optional[Mapping[str, float]] = None) -> None:
        self._log, self._clock = log, clock
        self._params = params  # RankImbalance's (the report's defaults where None); the rule loads with the first steps
        self.window_s = window_s  # the evidence: each rank's training steps of the last window_s
        self.persist_s = window_s / 4  # how long a verdict holds before it is said (a checkpoint's pause is not one)
        self._lock = threading.Lock()
        self._windows: dict[str, collections.deque] = {}  # node -> (when, RankWindow), the last WINDOW_S
        self._said: tuple[str, ...] = ()  # the slow ranks the log last named
        self._seen: tuple[str, ...] = ()  # the verdict now, and since when it holds
        self._seen_since = 0.0
        self._seen_wall = 0.0
        self.handlers: dict[MessageType, Callable[[str, Mapping[str, Any]], None]] = {MessageType.RANK_STEPS: self.take}

    def follow(self, sock: socket.socket, reader: LineReader, first: Message) -> None:
        """A monitor's connection: its messages, each to its handler, until it hangs up."""
        for message in itertools.chain([first], reader.messages()):
            handler = self.handlers.get(message.type)
            if handler is not None:
                handler(str(message.fields.get("host", "")), message.fields)
        sock.close()

    def take(self, host: str, fields: Mapping[str, Any]) -> None:
        """One host's ranks' steps since its last message; then the verdict."""
        from ..profiler.live_steps import RankWindow  # here: a master's start-up needs none of the profiler

        now = self._clock()
        with self._lock:
            for node, raw in fields["ranks"].items():
                try:
                    window = RankWindow.from_json(raw)
                except (TypeError, ValueError):
                    continue
                self._windows.setdefault(str(node), collections.deque()).append((now, window))
            said = self._judge(now)
        if said:
            self._log(said)

    def _judge(self, now: float) -> Optional[str]:
        from ..profiler.steprules import DEFAULTS, waited_for

        for kept in self._windows.values():
            while kept and kept[0][0] < now - self.window_s:
                kept.popleft()
        waited = waited_for(self._stats(), self._params or DEFAULTS["RankImbalance"])
        slow = tuple(sorted(waited.slow)) if waited is not None else ()  # by name: the order of gaps is no change
        if slow != self._seen:
            self._seen, self._seen_since, self._seen_wall = slow, now, time.time()
        if now - self._seen_since < self.persist_s or slow == self._said:
            return None
        self._said = slow
        return self._line(waited) if slow and waited is not None else (
            "straggler: none any more - every rank's gap between steps is within the rule's bounds (RankImbalance, "
            f"over the last {self.window_s:g} s)")

    def evidence(self) -> dict[str, "RankStats"]:
        """Each rank's steps of the window, as the rule judges them (the report's judges its whole job's)."""
        with self._lock:
            return self._stats()

    def _stats(self) -> dict[str, "RankStats"]:
        from ..profiler.steprules import RankStats, merged_bins

        stats = {}
        for node, kept in self._windows.items():
            steps = sum(w.steps for _, w in kept)
            stats[node] = RankStats(node, {"TRAIN": steps}, [], [], {}, 0.0, 0.0, merged_bins(w.step_bins for _, w in kept),
                                    merged_bins(w.between_bins for _, w in kept))
        return stats

    def _line(self, waited: "Waited") -> str:
        from ..profiler.events import host_of, rank_of

        fastest = min(waited.gaps.values())
        by_host: dict[str, list[str]] = {}
        for node in self._windows:
            by_host.setdefault(host_of(node), []).append(node)
        hosts = [h for h, nodes in by_host.items() if set(nodes) <= set(waited.slow)]
        whole_host = len(hosts) == 1 and len(by_host) > 1 and set(waited.slow) == set(by_host[hosts[0]])
        ranks = sorted(waited.slow, key=rank_of)
        gaps = ", ".join(f"{waited.gaps[n]:.0f}" for n in ranks)
        who = (f"host {hosts[0]} (its ranks {', '.join(str(rank_of(n)) for n in ranks)})" if whole_host else
               "; ".join(f"rank {rank_of(n)} on {host_of(n)}" for n in ranks))
        since = time.strftime("%H:%M:%S", time.gmtime(self._seen_wall))
        return (f"straggler: {who} spend{'s' if len(ranks) == 1 and not whole_host else ''} {gaps} ms between steps, "
                f"the fastest rank {fastest:.0f} ms, of a {waited.cycle:.0f}-ms step cycle (+{waited.gaps[waited.slow[0]] - fastest:.0f} "
                f"ms a step), since {since} UTC: the other ranks wait for {'them' if len(ranks) > 1 else 'it'} in their "
                f"collectives (RankImbalance, over the last {self.window_s:g} s)")
