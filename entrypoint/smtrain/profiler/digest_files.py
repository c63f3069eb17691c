"""Where a rank's digest (smtrain.profiler.digests) lies, and which digests cover every event file of
their rank - without reading any events, and without the statistics' imports: a worker asks this at
the job's end to learn which of its ranks it must still digest.

A digest covers its rank's events when every event file of that rank that reaches `since` ended
within the digest's span of events: a rank restarted in place, or killed before its exit wrote its
own digest, left files the digest does not span (or a file still open), and its events are read.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from .events import event_files, file_end_us

__all__ = ["DIGEST_DIR", "covering", "digest_path", "open_files"]

DIGEST_DIR = Path("framework") / "rank-digests"
SLACK_US = 1000  # a file's end in its name is truncated to the microsecond; a rank's processes lie further apart


def digest_path(profiler_dir: Path, node: str) -> Path:
    """The digest of rank `node` in a host's profiler folder."""
    return profiler_dir / DIGEST_DIR / f"{node}.json"


def open_files(files: Iterable[tuple[Path, str]], nodes: Iterable[str]) -> dict[str, dict[str, int]]:
    """Of event `files` (events.event_files), those of `nodes` still open (their ranks killed), by node:
    name -> size, as a digest that read them records them (`covering` then takes them as covered)."""
    wanted, found = set(nodes), {}
    for path, node in files:
        if node in wanted and file_end_us(path) is None:
            try:
                found.setdefault(node, {})[path.name] = path.stat().st_size
            except OSError:
                continue
    return found


def covering(folders: Iterable[Path], since: float = 0.0) -> dict[str, dict[str, Any]]:
    """The digests under `folders` (any depth), as their files hold them, of ranks whose events reach
    `since` (an earlier job's, in a folder reused by local runs, do not) and that cover every event
    file of their rank; a file that does not read is left out (its rank's events are read instead)."""
    folders = list(folders)
    found: dict[str, dict[str, Any]] = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob(f"{DIGEST_DIR.parent.name}/{DIGEST_DIR.name}/*.json")):
            try:
                raw = json.loads(path.read_text())
                raw["first_event"], raw["last_event"] = float(raw["first_event"]), float(raw["last_event"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if raw["last_event"] >= since:
                found[path.stem] = raw
    for path, node in event_files(folders):
        raw = found.get(node)
        if raw is None:
            continue
        end_us = file_end_us(path)
        if end_us is None:  # open, or its rank was killed: covered where its digest read it as it is
            try:
                st = path.stat()
            except OSError:
                continue
            opened = raw.get("open_files")
            if st.st_mtime >= since and (opened if isinstance(opened, dict) else {}).get(path.name) != st.st_size:
                del found[node]
        elif end_us >= since * 1e6 and not \
                raw["first_event"] * 1e6 - SLACK_US <= end_us <= raw["last_event"] * 1e6 + SLACK_US:
            del found[node]
    return found
