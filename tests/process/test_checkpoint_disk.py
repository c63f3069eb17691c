"""Checkpoints on a full disk, and restores that do not trust what they cannot load: real file systems
(a tmpfs of a few MB mounted by the test), real TensorFlow saves (synchronous and asynchronous),
real processes that fail, exit and are killed."""
from __future__ import annotations

import errno
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from smtrain.checkpoints import CheckpointStore
from tests.support import TRAIN, make_tree, require_root

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
FILL = PROGRAMS / "ckpt_fill.py"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8-MB tmpfs: room for two 3-MB checkpoints, not three."""
    require_root()
    folder = tmp_path / "disk"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(directory: Path, mode: str, keep: int, pipes: bool = False) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(FILL), str(directory), mode, str(keep)] + (["pipes"] if pipes else [])
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def _visible(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("lost+found"))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("pipes", [False, True], ids=["state", "state+pipes"])
def test_a_full_disk_fails_the_save_by_name_and_the_next_start_restores_the_newest_good(
        small_disk: Path, mode: str, pipes: bool) -> None:
    first = _fill(small_disk, mode, keep=5, pipes=pipes)
    assert first.returncode == 3, first.stderr[-2000:]
    lines = first.stdout.splitlines()
    assert lines[:3] == ["restored 0 0.0", "saved 1", "saved 2"], first.stdout
    assert lines[3] == f"failed 3 {errno.ENOSPC}", first.stdout
    message = lines[4]
    assert message.startswith(f"checkpoint step 3 was not saved in {small_disk}: "), message
    assert "No space left on device" in message and " free there" in message, message
    assert "the newest checkpoint (step 2) holds 3.1 MB" in message, message
    assert message.endswith("nothing was published, step 2 is still the newest"), message
    # the torn folder is gone at once: only the two good checkpoints remain
    assert _visible(small_disk) == ["ckpt-000000000002", "ckpt-000000000001"][::-1]
    second = _fill(small_disk, mode, keep=5, pipes=pipes)
    assert second.stdout.splitlines()[0] == "restored 2 2.0", second.stdout + second.stderr[-2000:]


def test_an_asynchronous_save_that_fails_as_the_program_exits_fails_the_job_by_name(small_disk: Path,
                                                                                   tmp_path: Path) -> None:
    """The program saves, then exits 0 without waiting; the save fails in the background: `train`
    exits 1 and the failure file names the checkpoint error."""
    tree = make_tree(tmp_path / "ml")
    tree.write_program("train.py", f"import sys\nsys.argv[1:] = [{str(small_disk)!r}, 'async-exit', '5']\n"
                                   + FILL.read_text())
    done = subprocess.run([TRAIN], env=tree.env(SM_SYSTEM_MONITOR="off"), capture_output=True, timeout=120, text=True)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "exiting without wait()" in done.stdout  # what the program printed is not lost
    failure = tree.failure.read_text()
    assert failure.startswith("smtrain.checkpoints.CheckpointWriteError: program "), failure
    assert f"checkpoint step 3 was not saved in {small_disk}" in failure, failure
    assert _visible(small_disk) == ["ckpt-000000000001", "ckpt-000000000002"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_store_makes_room_by_pruning_first_so_keep_2_fits_an_8_mb_disk(small_disk: Path, mode: str) -> None:
    """keep=2 and 3-MB checkpoints: the third fits only if the oldest goes first. Every save succeeds."""
    done = _fill(small_disk, mode, keep=2)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "saved 7"
    assert _visible(small_disk) == ["ckpt-000000000006", "ckpt-000000000007"]


def test_keep_1_never_deletes_the_newest_to_make_room(small_disk: Path) -> None:
    (small_disk / "ballast").write_bytes(b"\0" * (4 << 20))  # leaves room for one checkpoint only
    done = _fill(small_disk, "sync", keep=1)
    assert done.returncode == 3 and done.stdout.splitlines()[:3] == ["restored 0 0.0", "saved 1", "failed 2 28"], \
        done.stdout + done.stderr[-2000:]
    assert _visible(small_disk) == ["ballast", "ckpt-000000000001"]
    (small_disk / "ballast").unlink()
    assert _fill(small_disk, "sync", keep=1).stdout.splitlines()[0] == "restored 1 1.0"


def _tf_state(value: float = 0.0):
    import tensorflow as tf

    variable = tf.Variable(tf.fill((4,), value))
    return variable, tf.train.Checkpoint(v=variable)


def test_a_folder_published_the_way_the_old_bug_left_it_is_skipped_with_a_warning(tmp_path: Path) -> None:
    messages: list[str] = []
    store = CheckpointStore(tmp_path, keep=5, log=messages.append)
    variable, state = _tf_state()
    for step in (1, 2):
        variable.assign([float(step)] * 4)
        store.save(step, state)
    torn = tmp_path / "ckpt-000000000003"  # what an asynchronous save on a full disk used to publish
    (torn / "state_temp").mkdir(parents=True)
    (torn / "MANIFEST.json").write_text(json.dumps(
        {"format": "smtrain-checkpoint/1", "step": 3, "created": 0, "files": {}, "pipes": [{}], "extra": {}}))
    fresh, fresh_state = _tf_state()
    restored = store.restore(fresh_state)
    assert restored is not None and restored.step == 2 and list(fresh.numpy()) == [2.0] * 4
    assert any(str(torn) in m and "lists no files" in m for m in messages), messages
    assert torn.is_dir()  # reported, not deleted


def test_a_checkpoint_whose_restore_raises_is_skipped_for_the_next_older(tmp_path: Path) -> None:
    """Its manifest and CRCs check out (written so), but TensorFlow cannot read what it holds."""
    messages: list[str] = []
    store = CheckpointStore(tmp_path, keep=5, log=messages.append)
    variable, state = _tf_state(7.0)
    store.save(1, state)

    def garbage(folder: Path) -> None:
        (folder / "state.index").write_bytes(b"not a tensor bundle")
        (folder / "state.data-00000-of-00001").write_bytes(b"\0" * 64)

    store.save(2, garbage)
    fresh, fresh_state = _tf_state()
    restored = store.restore(fresh_state)
    assert restored is not None and restored.step == 1 and list(fresh.numpy()) == [7.0] * 4
    assert any("skipping checkpoint" in m and "ckpt-000000000002" in m and "raised" in m for m in messages), messages


def test_when_nothing_loads_the_store_starts_fresh_and_says_so(tmp_path: Path) -> None:
    messages: list[str] = []
    store = CheckpointStore(tmp_path, log=messages.append)
    store.save(1, lambda folder: (folder / "notes").write_text("no state"))
    assert store.restore(_tf_state()[1]) is None
    assert any("holds no state.index" in m for m in messages), messages
    assert messages[-1] == f"no checkpoint in {tmp_path} could be restored (of 1 tried): starting fresh"


def test_an_empty_write_is_never_published(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, log=lambda m: None)
    with pytest.raises(OSError, match="the saver wrote no files"):
        store.save(1, lambda folder: None)
    assert list(tmp_path.iterdir()) == []


def test_tensorflow_checkpoint_manager_files_beside_the_store_are_not_touched(tmp_path: Path) -> None:
    import tensorflow as tf

    variable, state = _tf_state(1.0)
    manager = tf.train.CheckpointManager(state, str(tmp_path), max_to_keep=3)
    store = CheckpointStore(tmp_path, keep=2, log=lambda m: None)
    for step in range(1, 6):
        variable.assign([float(step)] * 4)
        manager.save(checkpoint_number=step)
        store.save(step, state)
    theirs = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("ckpt-0000"))
    assert theirs == ["checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index", "ckpt-4.data-00000-of-00001",
                      "ckpt-4.index", "ckpt-5.data-00000-of-00001", "ckpt-5.index"], theirs
    assert manager.latest_checkpoint == str(tmp_path / "ckpt-5")
    fresh, fresh_state = _tf_state()
    fresh_state.read(manager.latest_checkpoint).expect_partial()
    assert list(fresh.numpy()) == [5.0] * 4
    assert [c.step for c in store.checkpoints()] == [4, 5]


ASYNC_SAVER = """
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
from smtrain.checkpoints import CheckpointStore
variable = tf.Variable(tf.zeros((262144,)))
state = tf.train.Checkpoint(v=variable)
store = CheckpointStore(sys.argv[1], keep=3, asynchronous=True, log=lambda m: None)
restored = store.restore(state)
step = restored.step if restored else 0
print("ready", flush=True)
while True:
    step += 1
    variable.assign(tf.fill((262144,), float(step)))
    store.save(step, state)
"""


def test_sigkill_at_random_moments_of_asynchronous_tensorflow_saves_never_leaves_an_unloadable_checkpoint(
        tmp_path: Path) -> None:
    import tensorflow as tf

    program = tmp_path / "saver.py"
    program.write_text(ASYNC_SAVER)
    directory = tmp_path / "ckpt"
    rng = random.Random(4321)
    for _ in range(10):  # ten savers, each killed at a random moment of its saves (one TensorFlow start each)
        saver = subprocess.Popen([sys.executable, str(program), str(directory)], stdout=subprocess.PIPE)
        assert saver.stdout is not None and saver.stdout.readline() == b"ready\n"
        time.sleep(rng.random() * 0.4)
        saver.send_signal(signal.SIGKILL)
        saver.wait(10)
        for folder in sorted(directory.glob("ckpt-*")):  # each visible one loads, and holds its own step
            variable = tf.Variable(tf.zeros((262144,)))
            tf.train.Checkpoint(v=variable).read(str(folder / "state")).expect_partial()
            assert float(variable[0]) == float(int(folder.name.split("-")[1]))
    store = CheckpointStore(directory, log=lambda m: None)
    assert store.latest() is not None and store.latest().step >= 10
