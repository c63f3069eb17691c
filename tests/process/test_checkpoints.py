"""Checkpoints: atomic under SIGKILL, TensorFlow state, foreign content, SIGTERM through the real
train, and Pipe-mode resumption mid-epoch (every record exactly once across two runs)."""
from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Optional

import pytest

from smtrain.checkpoints import CheckpointStore, PipePosition
from smtrain.data.feeder import Feeder, channel_objects, epoch_order
from smtrain.data.record_reader import encode_tfrecord
from tests.support import TRAIN, Tree, make_tree

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"


def _assert_consistent(manager: CheckpointStore) -> int:
    """Every visible checkpoint is whole and self-consistent; returns the newest step."""
    visible = sorted(p for p in manager.directory.iterdir() if p.name.startswith("ckpt-"))
    loaded = manager.checkpoints()
    assert [c.path for c in loaded] == visible, "a visible checkpoint is torn"
    latest = manager.latest()
    assert latest is not None
    for part in sorted(latest.path.glob("part-*.bin")):
        assert part.read_bytes() == latest.step.to_bytes(8, "little") * (32 * 1024)
    assert latest.extra == {"step": latest.step}
    assert latest.position("train") == PipePosition(latest.step // 10, latest.step % 10)
    return latest.step


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sigkill_at_random_moments_during_saves_never_tears_a_checkpoint(tmp_path: Path, mode: str) -> None:
    directory = tmp_path / "ckpt"
    manager = CheckpointStore(directory, keep=3, log=lambda m: None)
    rng = random.Random(1234)
    newest, kills = 0, 0
    while kills < 60:
        saver = subprocess.Popen([sys.executable, str(PROGRAMS / "ckpt_saver.py"), str(directory), mode])
        time.sleep(0.15 + rng.random() * 0.25)  # start-up (imports) is ~0.1 s; then it only saves
        saver.send_signal(signal.SIGKILL)
        saver.wait(10)
        kills += 1
        if not directory.exists() or not any(p.name.startswith("ckpt-") for p in directory.iterdir()):
            continue
        step = _assert_consistent(manager)
        assert step >= newest  # never goes back
        newest = step
        assert len(manager.checkpoints()) <= 3 + 1  # keep=3 (+1 while a prune was cut short)
    assert newest > 60, "the saver should have made progress across the kills"
    manager.clean_incomplete()
    assert not [p for p in directory.iterdir() if p.name.startswith(".incomplete")]


def test_asynchronous_save_keeps_the_state_of_the_moment_and_exit_waits_for_it(tmp_path: Path) -> None:
    """save() returns with the state copied; training goes on; the checkpoint holds the saved
    moment's values. A program that exits right after an asynchronous save leaves it complete."""
    program = tmp_path / "prog.py"
    program.write_text(
        "import os, sys\n"
        "os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'\n"
        "import tensorflow as tf\n"
        "from smtrain.checkpoints import CheckpointStore\n"
        "v = tf.Variable(tf.fill((1024, 1024), 1.0))\n"
        "state = tf.train.Checkpoint(v=v)\n"
        "store = CheckpointStore(sys.argv[1], asynchronous=True, log=lambda m: None)\n"
        "store.save(1, state)\n"
        "v.assign(tf.fill((1024, 1024), 2.0))  # the next steps change it at once\n"
        "store.save(2, state)\n"
        "v.assign(tf.fill((1024, 1024), 3.0))\n"
        "sys.exit(0)  # no wait(): exit itself waits for the save in flight\n")
    done = subprocess.run([sys.executable, str(program), str(tmp_path / "ckpt")], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    import tensorflow as tf

    manager = CheckpointStore(tmp_path / "ckpt", log=lambda m: None)
    assert [c.step for c in manager.checkpoints()] == [1, 2]
    for checkpoint, value in zip(manager.checkpoints(), (1.0, 2.0)):
        restored = tf.train.Checkpoint(v=tf.Variable(tf.zeros((1024, 1024))))
        restored.read(checkpoint.state_prefix).expect_partial()
        assert float(tf.reduce_min(restored.v)) == float(tf.reduce_max(restored.v)) == value
    assert manager.latest() is not None and manager.latest().step == 2  # CRCs check out


def test_tensorflow_model_and_optimizer_round_trip(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    import tf_keras as keras

    def build():
        model = keras.Sequential([keras.layers.Dense(3, input_shape=(2,))])
        optimizer = keras.optimizers.Adam(0.1)
        return model, optimizer, tf.train.Checkpoint(model=model, optimizer=optimizer)

    model, optimizer, state = build()
    x = tf.ones((4, 2))
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    manager = CheckpointStore(tmp_path, keep=2, log=lambda m: None)
    manager.save(3, state, extra={"lr": 0.1})
    model2, optimizer2, state2 = build()
    model2(x)
    restored = manager.restore(state2)
    assert restored is not None and restored.step == 3 and restored.extra == {"lr": 0.1}
    for a, b in zip(model.weights, model2.weights):
        assert (a.numpy() == b.numpy()).all()
    assert int(optimizer2.iterations.numpy()) == 3


def test_foreign_and_damaged_content_is_ignored_and_kept(tmp_path: Path) -> None:
    messages: list[str] = []
    manager = CheckpointStore(tmp_path, keep=1, log=messages.append)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "other-tool").mkdir()
    (tmp_path / "ckpt-abc").mkdir()
    damaged = tmp_path / "ckpt-000000000009"
    damaged.mkdir()
    (damaged / "state").write_text("no manifest")
    torn = tmp_path / ".incomplete-ckpt-000000000010-999999"  # a dead writer's
    torn.mkdir()
    for step in (1, 2, 3):
        manager.save(step, lambda folder: (folder / "w").write_text("x"))
    restored = manager.restore()
    assert restored is not None and restored.step == 3  # the damaged step 9 is skipped
    assert (tmp_path / "notes.txt").read_text() == "mine" and (tmp_path / "other-tool").is_dir()
    assert (tmp_path / "ckpt-abc").is_dir() and damaged.is_dir()  # reported, never deleted
    assert not torn.exists()  # this manager's own torn checkpoint is cleaned
    assert sorted(p.name for p in tmp_path.glob("ckpt-0*")) == ["ckpt-000000000003", "ckpt-000000000009"]
    text = "\n".join(messages)
    assert "notes.txt: not a checkpoint of this manager" in text and "ignoring damaged checkpoint" in text


def test_only_rank_0_writes(tmp_path: Path) -> None:
    assert CheckpointStore(tmp_path, rank=1).save(5, lambda folder: (folder / "w").write_text("x")) is None
    assert list(tmp_path.iterdir()) == []


SIGTERM_PROGRAM = """
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
from smtrain.checkpoints import CheckpointStore, StopSignal
stop = StopSignal()
variable = tf.Variable(0.0)
state = tf.train.Checkpoint(v=variable)
manager = CheckpointStore(keep=2, asynchronous=ASYNCHRONOUS)
restored = manager.restore(state)
step = restored.step if restored else 0
print(f"start step={step} v={variable.numpy()}", flush=True)
while step < 40:
    step += 1
    variable.assign_add(1.0)
    time.sleep(0.05)
    if step % 4 == 0:
        manager.save(step, state)  # asynchronous: may still be writing when SIGTERM comes
    if stop.requested:
        manager.save(step, state)
        print(f"stopped step={step}", flush=True)
        sys.exit(0)
manager.save(step, state)
print(f"done step={step} v={variable.numpy()}", flush=True)
"""


@pytest.mark.parametrize("asynchronous", [False, True])
def test_sigterm_saves_a_final_checkpoint_and_the_restart_resumes_there(tmp_path: Path, asynchronous: bool) -> None:
    """Also with asynchronous saves: the final save (queued behind one still in flight) is whole
    and durable once the program has exited, inside the grace period."""
    tree = make_tree(tmp_path / "ml")
    tree.write_program("train.py", SIGTERM_PROGRAM.replace("ASYNCHRONOUS", str(asynchronous)))
    env = tree.env(SM_GRACE_PERIOD_SECONDS="20")
    first = subprocess.Popen([TRAIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert first.stdout is not None
    assert first.stdout.readline().startswith(b"start step=0")
    time.sleep(0.6)
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err.decode()[-2000:]
    stopped = int(out.decode().split("stopped step=")[1].split()[0])
    assert 3 <= stopped < 40
    second = subprocess.run([TRAIN], env=env, capture_output=True, timeout=60)
    assert second.returncode == 0, second.stderr.decode()[-2000:]
    lines = second.stdout.decode().splitlines()
    assert lines[0] == f"start step={stopped} v={float(stopped)}"  # model state and step, as saved
    assert lines[-1] == "done step=40 v=40.0"


def _records(folder: Path, names: list[str], per_object: int) -> list[bytes]:
    folder.mkdir(parents=True)
    everything = []
    for name in names:
        recs = [f"{name}/{i}".encode() for i in range(per_object)]
        (folder / name).write_bytes(b"".join(encode_tfrecord(r) for r in recs))
        everything += recs
    return everything


def _consumed(out: Path, pattern: str) -> dict[int, Counter]:
    by_epoch: dict[int, Counter] = {}
    for path in out.glob(pattern):
        for line in path.read_text().split("\n"):
            if line:
                epoch, record = line.split()
                by_epoch.setdefault(int(epoch), Counter())[bytes.fromhex(record)] += 1
    return by_epoch


def _stopped_and_restarted(tree: Tree, objects: list[Path], seed: Optional[int], hyperparameters: dict[str, str],
                           until_stop: Callable[[], None]) -> bytes:
    """Run pipe_resume.py under `train` twice over 2 epochs fed from FIFO 0 (as SageMaker after a
    restart): SIGTERM to run 1 once `until_stop` returns; returns run 2's stdout."""
    tree.write_program("reader.py", (PROGRAMS / "pipe_resume.py").read_text())
    data = tree.base / "input" / "data"
    data.mkdir(parents=True)
    for run in ("1", "2"):
        tree.write_config("hyperparameters.json", {"sagemaker_program": '"reader.py"', "run": f'"{run}"',
                                                    "epochs": "2", **hyperparameters})
        feeder = Feeder(data, {"train": objects}, {"train": seed}, epochs=2).start()
        proc = subprocess.Popen([TRAIN], env=tree.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if run == "1":
            until_stop()
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()[-2000:]
        feeder.stop.set()
        feeder.join(5)
    return out


def test_pipe_mode_job_stopped_mid_epoch_resumes_with_every_record_once(tmp_path: Path) -> None:
    everything = _records(tmp_path / "src", ["a", "b"], 150)
    tree = make_tree(tmp_path / "ml", channels={"train": {"TrainingInputMode": "Pipe"}}, program="reader.py")
    _stopped_and_restarted(tree, channel_objects(str(tmp_path / "src")), None, {},
                           lambda: time.sleep(2.0))  # ~150 of the 300 records of epoch 0
    first = _consumed(tree.base / "output" / "data", "consumed-1-*")
    assert 0 < sum(first[0].values()) < len(everything), "run 1 should have stopped mid-epoch 0"
    both = _consumed(tree.base / "output" / "data", "consumed-*")
    for epoch in (0, 1):
        assert both[epoch] == Counter(everything), f"epoch {epoch}: a record missing or seen twice"


SEED = 3  # epochs 0 and 1 of 6 objects start with different objects (seed 7's start alike)


def test_shuffled_channel_resumed_mid_epoch_trains_every_record_once(tmp_path: Path) -> None:
    """With a ShuffleConfig the restarted job's FIFO 0 carries epoch 0's order, not the interrupted
    epoch 1's: the reader drops the records whose fingerprints the checkpoint holds (a count-based
    skip would drop the wrong ones: the test checks the two orders differ)."""
    names = [f"o{i}" for i in range(6)]
    everything = _records(tmp_path / "src", names, 40)
    objects = channel_objects(str(tmp_path / "src"))
    assert epoch_order(objects, SEED, 0) != epoch_order(objects, SEED, 1)
    tree = make_tree(tmp_path / "ml", channels={"train": {"TrainingInputMode": "Pipe", "ShuffleConfig": {"Seed": SEED}}},
                     program="reader.py")
    out = tree.base / "output" / "data"

    def well_into_epoch_1() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _lines(out / "consumed-1-0") < len(everything) + 50:
            time.sleep(0.02)

    stdout = _stopped_and_restarted(tree, objects, SEED, {"delay": "0.02"}, well_into_epoch_1)
    first = _consumed(out, "consumed-1-*")
    assert first[0] == Counter(everything) and 0 < sum(first[1].values()) < len(everything), "stop mid-epoch 1"
    in_epoch_0_order = [r for o in epoch_order(objects, SEED, 0) for r in everything if r.startswith(f"{o.name}/".encode())]
    consumed = sum(first[1].values())
    assert Counter(in_epoch_0_order[:consumed]) != first[1], "a count-based skip would have been right: no test"
    assert b"skipping" in stdout  # run 2 started at epoch 1 with a position
    both = _consumed(out, "consumed-*")
    for epoch in (0, 1):
        assert both[epoch] == Counter(everything), f"epoch {epoch}: a record missing or seen twice"
    checkpoint = CheckpointStore(tree.base / "checkpoints").latest()
    assert checkpoint is not None and checkpoint.fingerprints("train", 0) is not None


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


KERAS_PROGRAM = """
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"; os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np, tensorflow as tf, tf_keras as keras
from smtrain.callbacks import CheckpointCallback, MetricsCallback
from smtrain.checkpoints import CheckpointStore
model = keras.Sequential([keras.layers.Dense(4, input_shape=(3,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
state = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
manager = CheckpointStore(keep=2)
restored = manager.restore(state)
x = np.ones((4000, 3), "float32"); y = np.ones((4000, 1), "float32")
print("start", restored.step if restored else 0, flush=True)
class Slow(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        import time; time.sleep(0.01)
model.fit(x, y, batch_size=8, epochs=int(sys.argv[sys.argv.index("--epochs") + 1]), verbose=0, callbacks=[
    Slow(), CheckpointCallback(manager, state, every_n_batches=100, initial_step=restored.step if restored else 0),
    MetricsCallback()])
print("fit returned", flush=True)
"""


def test_keras_callback_saves_periodically_and_stops_on_sigterm(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "ml", hyperparameters={"epochs": "3"})
    tree.write_program("train.py", KERAS_PROGRAM)
    env = tree.env(SM_GRACE_PERIOD_SECONDS="30")
    proc = subprocess.Popen([TRAIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().startswith(b"start 0")
    manager = CheckpointStore(tree.base / "checkpoints", log=lambda m: None)
    deadline = time.monotonic() + 60
    while not manager.checkpoints() and time.monotonic() < deadline:  # the periodic save, every 100 batches
        time.sleep(0.1)
    assert manager.checkpoints() and manager.checkpoints()[0].step % 100 == 0
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert b"fit returned" in out  # the callback stopped training; the program ended normally
    final = manager.latest()
    assert final is not None and final.step % 100 != 0  # saved at the batch where SIGTERM was seen
    assert final.step < 3 * 500  # mid-training, not after the last epoch
    rerun = subprocess.run([TRAIN], env=env, capture_output=True, timeout=120)
    assert rerun.returncode == 0
    lines = rerun.stdout.decode().splitlines()
    assert lines[0] == f"start {final.step}"
    assert [line.split(";")[0] for line in lines if line.startswith("epoch=")] == ["epoch=0", "epoch=1", "epoch=2"]
    assert re.search(r"\bloss=([-+0-9.eE]+|nan|inf);", lines[1])
