"""The workers' profiler data, for the job's one report on the master: a worker ships its files once the
job is over (`ship_profile`), the master's control server hands each archive to `unpack_profile` as soon
as it came, and the master waits for them (`gather_profiles`, bounded; a lost host is not waited for)."""
from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import IO, Optional

from ..common.console import log
from ..config.defaults import PROFILE_WAIT_S
from ..wire.control_protocol import PROFILE_CHUNK, MessageType
from .control_server import ControlServer
from .link import MasterLink

__all__ = ["accept_profiles", "gather_profiles", "ship_profile", "unpack_profile"]


def accept_profiles(server: ControlServer, into: Path) -> None:
    """The control server takes the workers' profiler archives, each unpacked into `into` as it comes."""
    from ..profiler.shipping import SHIP_CAP_BYTES

    server.accept_profiles(into / ".incoming", SHIP_CAP_BYTES + (1 << 20),
                           lambda host, archive: unpack_profile(host, archive, into))


def unpack_profile(host: str, archive: IO[bytes], into: Path) -> Optional[str]:
    """A worker's profiler archive unpacked into this host's profiler folder (as soon as it came: the
    control server calls this); the report's note on what is missing from it, if anything."""
    from ..profiler.shipping import SHIP_CAP_BYTES, unpack

    try:
        _, left_out = unpack(archive, into)
    except Exception as e:  # truncated, corrupt (tarfile, gzip, zlib), or the disk: this host is left out
        return f"host {host} is missing from this report: its profiler data did not unpack ({e})"
    if left_out:
        return (f"host {host}: {left_out.get('files')} profiler file(s) of {left_out.get('bytes')} bytes past the "
                f"{SHIP_CAP_BYTES >> 20} MiB a host ships are left out; they are in that host's output/profiler")
    return None


def gather_profiles(server: ControlServer, workers: list[str]) -> list[str]:
    """The workers' profiler data, unpacked into this host's profiler folder as it comes (unpack_profile),
    for the job's one report (at most PROFILE_WAIT_S; a lost host is not waited for). Returns the
    report's notes on what is missing."""
    started = time.monotonic()
    shipped = server.wait_for_profiles(workers, started + PROFILE_WAIT_S)
    notes, lost = [], server.lost_hosts()
    for host in workers:
        if host not in shipped:
            why = "lost during the job" if host in lost else f"its profiler data did not come within {PROFILE_WAIT_S:g} s"
            notes.append(f"host {host} is missing from this report: {why}")
        elif shipped[host] is not None:
            notes.append(str(shipped[host]))
    log(f"profiler data of {len(shipped)} of {len(workers)} worker(s) gathered in {time.monotonic() - started:.2f} s")
    return notes


def ship_profile(link: MasterLink, folder: Path, since: float) -> None:
    """This host's profiler data (`folder`, written since `since`, wall clock) to the master, once the job is over
    and its helpers stopped, for the job's one report: the step events of ranks that left no digest of their own
    digested (smtrain.profiler.digests: the report reads those instead of parsing every rank's events), then the
    files in pieces."""
    from ..profiler.shipping import pack

    started = time.monotonic()
    try:
        _digest_the_rest(folder, since)
    except Exception as e:  # whatever went wrong, the data still ships: the report parses these ranks' events
        log(f"could not digest this host's step events ({type(e).__name__}: {e}); the report will parse them")
    packed = pack(folder, since - 1.0)
    data = packed.data
    for at in range(0, len(data), PROFILE_CHUNK):
        piece = data[at:at + PROFILE_CHUNK]
        link.send(MessageType.PROFILE, data=base64.b64encode(piece).decode(), last=at + PROFILE_CHUNK >= len(data))
    left = f"; {packed.left_out_files} file(s) past the cap left out" if packed.left_out_files else ""
    log(f"sent {packed.files} profiler file(s) ({len(data)} bytes packed) to the master in "
        f"{time.monotonic() - started:.2f} s{left}")


def _digest_the_rest(folder: Path, since: float) -> None:
    """Digests of this host's ranks whose own (written at their exit) is missing or does not cover all
    their event files: killed, or restarted in place."""
    from ..profiler.digest_files import covering, open_files
    from ..profiler.events import event_files

    files = list(event_files([folder]))
    rest = {node for _, node in files} - set(covering([folder], since))
    if rest:
        from ..profiler import digests
        from ..profiler.events import read_folder

        read_open = open_files(files, rest)
        digests.write(folder, digests.digest(e for e in read_folder([folder], rest.__contains__) if e.end >= since),
                      read_open)
