"""The intermediate output's syncer (plan.intermediate decides where to): every file written and closed
under `output/intermediate` - or renamed into it - is copied aside at once, so that the upload is the file
as it was closed, and uploaded from a small pool of upload threads (never a thread per file) to
`s3://<bucket>/<prefix>/<relative path>`; a deletion is not mirrored (as sagemaker-training). It waits on
inotify and a wake pipe, so it costs nothing while nothing is written. Once the job's success or failure
file appears (or it gets SIGTERM) it makes one more pass over the folder for any file not uploaded as it is
now, finishes the uploads and ends. A failed upload is logged and tried again (RETRY_S); nothing here ever
changes the job's outcome.

    python -m smtrain.sync.intermediate_output --folder F --bucket B --prefix P [--stop-file PATH ...]

S3 through boto3, its region from AWS_REGION and its endpoint from S3_ENDPOINT_URL (sagemaker-training's)
or boto3's own configuration. SMTRAIN_INTERMEDIATE_RETRY_S (seconds, comma-separated) replaces RETRY_S."""
from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional, Sequence

from ..config.settings import INTERMEDIATE_RETRY

__all__ = ["RETRY_S", "Syncer", "main"]

TMP = ".tmp.sagemaker_s3_sync"  # sagemaker-training's folder for the copies, left out of the sync
RETRY_S: tuple[float, ...] = INTERMEDIATE_RETRY.default  # the waits between an upload's attempts
UPLOADERS = 2


def log(message: str) -> None:
    print(f"[intermediate] {message}", file=sys.stderr, flush=True)


class Syncer:
    """One folder's sync (see the module's docstring). `client`: a boto3 S3 client."""

    def __init__(self, folder: Path, bucket: str, prefix: str, client: Any, retry_s: Sequence[float] = RETRY_S) -> None:
        self.folder, self.bucket, self.prefix, self.client = folder, bucket, prefix.strip("/"), client
        self.retry_s = tuple(retry_s)
        self.aside = folder / TMP
        self.sent: dict[str, tuple[int, int]] = {}  # relative path -> (mtime_ns, size) as last copied aside
        self.pool = ThreadPoolExecutor(UPLOADERS, thread_name_prefix="upload")
        self.failed = 0
        self.lock = threading.Lock()

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def copy(self, path: Path) -> None:
        """`path` copied aside as it is now and its upload queued, unless it was sent as it is."""
        relative = path.relative_to(self.folder).as_posix()
        try:
            stat = path.stat()
            if not path.is_file() or self.sent.get(relative) == (stat.st_mtime_ns, stat.st_size):
                return
            copy = self.aside / f"{relative}.{time.time_ns()}"
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
        except FileNotFoundError:  # gone already: nothing to send
            return
        self.sent[relative] = (stat.st_mtime_ns, stat.st_size)
        self.pool.submit(self._upload, copy, relative)

    def _upload(self, copy: Path, relative: str) -> None:
        try:
            for attempt, wait_s in enumerate((*self.retry_s, None)):
                try:
                    self.client.upload_file(str(copy), self.bucket, self.key(relative))
                    return
                except Exception as e:  # botocore raises many unrelated classes; all mean the same here
                    if wait_s is None:
                        with self.lock:
                            self.failed += 1
                        log(f"could not upload {relative} to s3://{self.bucket}/{self.key(relative)} after "
                            f"{attempt + 1} attempts: {type(e).__name__}: {e}")
                        return
                    log(f"uploading {relative} failed ({type(e).__name__}: {e}); trying again in {wait_s:g} s")
                    time.sleep(wait_s)
        finally:
            copy.unlink(missing_ok=True)

    def sweep(self) -> None:
        """Every file under the folder (the copies aside excepted) not sent as it is now."""
        for root, dirs, files in os.walk(self.folder):
            dirs[:] = [d for d in dirs if Path(root, d) != self.aside]
            for name in files:
                self.copy(Path(root, name))

    def finish(self) -> int:
        """Wait for the uploads; how many failed."""
        self.pool.shutdown(wait=True)
        shutil.rmtree(self.aside, ignore_errors=True)
        return self.failed


def watch(syncer: Syncer, stop_files: Sequence[Path], wake_fd: int) -> None:
    """Until a stop file appears or `wake_fd` is written to (SIGTERM): each closed or renamed-in file copied
    and queued as it comes, new folders watched; then the last pass."""
    import inotify_simple

    flags = inotify_simple.flags
    files_mask = flags.CLOSE_WRITE | flags.MOVED_TO | flags.CREATE
    inotify = inotify_simple.INotify()
    folders: dict[int, Path] = {}

    def add(folder: Path) -> None:
        for root, dirs, _ in os.walk(folder):
            dirs[:] = [d for d in dirs if Path(root, d) != syncer.aside]
            folders[inotify.add_watch(root, files_mask)] = Path(root)
        syncer.sweep()  # what was written before the watch

    stops = {stop.parent: [] for stop in stop_files}
    for stop in stop_files:
        stops[stop.parent].append(stop.name)
    stop_watches = {inotify.add_watch(str(parent), flags.CREATE | flags.MOVED_TO): names
                    for parent, names in stops.items() if parent.is_dir()}
    add(syncer.folder)
    stopping = any(stop.exists() for stop in stop_files)
    while not stopping:
        ready, _, _ = select.select([inotify.fileno(), wake_fd], [], [])
        if wake_fd in ready:
            break
        for event in inotify.read(timeout=0):
            if event.wd in stop_watches:
                stopping = stopping or event.name in stop_watches[event.wd]
                continue
            parent = folders.get(event.wd)
            if parent is None or not event.name:
                continue
            path = parent / event.name
            if event.mask & flags.ISDIR:
                if event.mask & (flags.CREATE | flags.MOVED_TO) and path != syncer.aside:
                    add(path)
            elif event.mask & (flags.CLOSE_WRITE | flags.MOVED_TO):
                syncer.copy(path)
    syncer.sweep()  # the last pass: whatever was written and not yet seen
    inotify.close()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Sync output/intermediate to S3 while the job runs.")
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--stop-file", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    wake_r, wake_w = os.pipe()
    signal.signal(signal.SIGTERM, lambda signum, frame: os.write(wake_w, b"x"))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the job's ^C is the program's; the last pass is ours
    args.folder.mkdir(parents=True, exist_ok=True)
    import boto3  # here: the syncer alone needs it

    client = boto3.client("s3", region_name=os.environ.get("AWS_REGION"),
                          endpoint_url=os.environ.get("S3_ENDPOINT_URL") or None)
    retry = os.environ.get(INTERMEDIATE_RETRY.variable or "")  # checked when train started (config.settings)
    syncer = Syncer(args.folder, args.bucket, args.prefix, client,
                    INTERMEDIATE_RETRY.type.parse(retry) if retry else RETRY_S)
    log(f"syncing {args.folder} to s3://{args.bucket}/{syncer.prefix}")
    watch(syncer, args.stop_file, wake_r)
    failed = syncer.finish()
    log(f"synced {len(syncer.sent) - failed} file(s) to s3://{args.bucket}/{syncer.prefix}"
        + (f"; {failed} could not be uploaded" if failed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
