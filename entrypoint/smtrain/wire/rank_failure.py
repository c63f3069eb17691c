"""A failed rank's report to the master, and which failed rank the master blames (pure).

The rank launcher sends a `RankFailure` over the control channel: an early one as soon as a Python
traceback appears on the program's stderr, a final one when the program ended non-zero.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Sequence

HOROVOD_CONSEQUENCE = "Horovod has been shut down"
# TensorFlow's collectives (MultiWorkerMirroredStrategy) when another task failed or went silent.
TF_COLLECTIVE_CONSEQUENCE = "Collective ops is aborted by"

__all__ = ["HOROVOD_CONSEQUENCE", "TF_COLLECTIVE_CONSEQUENCE", "RankFailure", "is_consequence", "root_cause",
           "settled"]


class RankFailure(NamedTuple):
    """A rank's failure as its launcher reports it to the master."""
    host: str
    rank: int
    local_rank: int
    final: bool  # the program ended (False: an early report, sent when a traceback appeared)
    program: str
    error_at: float  # wall clock (comparable across hosts) of the first traceback, else of the end
    stderr_tail: str
    traceback_seen: Optional[bool] = None  # final reports: whether a traceback came before the end
    exit_code: Optional[int] = None  # final reports: the program's status
    term_signal: Optional[int] = None
    shutdown_signal: Optional[int] = None  # a shutdown signal the rank's launcher received
    killed_after_grace: bool = False
    oom_killed: bool = False  # final reports: the kernel's OOM killer ended it (read on its host)
    uncaught: bool = False  # early reports: its main thread died of an uncaught exception (it is ending)

    def to_fields(self) -> dict[str, Any]:
        """The report as a control message's fields."""
        return self._asdict()

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> "RankFailure":
        """From a control message's fields; ValueError when one is missing or of the wrong type."""
        try:
            return cls(
                host=str(fields["host"]),
                rank=int(fields["rank"]),
                local_rank=int(fields["local_rank"]),
                final=bool(fields["final"]),
                program=str(fields["program"]),
                error_at=float(fields["error_at"]),
                stderr_tail=str(fields.get("stderr_tail", "")),
                traceback_seen=_optional(fields.get("traceback_seen"), bool),
                exit_code=_optional(fields.get("exit_code"), int),
                term_signal=_optional(fields.get("term_signal"), int),
                shutdown_signal=_optional(fields.get("shutdown_signal"), int),
                killed_after_grace=bool(fields.get("killed_after_grace", False)),
                oom_killed=bool(fields.get("oom_killed", False)),
                uncaught=bool(fields.get("uncaught", False)),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a rank report: {e}") from None


def _optional(value: Any, convert: type) -> Any:
    return None if value is None else convert(value)


def settled(report: Optional[RankFailure]) -> bool:
    """Whether `report` (the root cause so far) is a rank that failed of itself and has ended, or is
    ending: a rank failing as early would have sent its own report by then."""
    return report is not None and (report.final or report.uncaught) and not is_consequence(report)


def is_consequence(report: RankFailure) -> bool:
    """A rank that failed because another did: Horovod or TensorFlow's collectives say so on its
    stderr, or the rank showed no error of its own and ended after its launcher was told to shut
    down (mpirun's abort, the master's)."""
    if HOROVOD_CONSEQUENCE in report.stderr_tail or TF_COLLECTIVE_CONSEQUENCE in report.stderr_tail:
        return True
    return report.final and report.shutdown_signal is not None and report.traceback_seen is False


def root_cause(reports: Sequence[RankFailure]) -> Optional[RankFailure]:
    """The failed rank to blame. A rank's final report replaces its early one (as does an uncaught
    exception's a handled traceback's). Leaving out the
    consequences (`is_consequence`):
    - final reports (the rank ended non-zero) and early ones of an uncaught exception (it is ending),
      earliest traceback first (each rank's wall clock);
    - else early reports (a traceback appeared, then the launcher was killed by mpirun's abort),
      the latest first: an earlier one may be a traceback the program handled and went on from;
    - else whatever there is, earliest first."""
    by_rank: dict[tuple[str, int], RankFailure] = {}
    for report in reports:
        key = (report.host, report.rank)
        if key not in by_rank or report.final or (report.uncaught and not by_rank[key].final):
            by_rank[key] = report
    ranked = list(by_rank.values())
    if not ranked:
        return None
    causes = [r for r in ranked if not is_consequence(r)]
    finals = [r for r in causes if r.final or r.uncaught]
    if finals:
        return min(finals, key=lambda r: r.error_at)
    if causes:
        return max(causes, key=lambda r: r.error_at)
    return min(ranked, key=lambda r: r.error_at)
