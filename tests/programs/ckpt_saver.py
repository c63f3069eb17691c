"""Saves checkpoints as fast as it can until killed; each file's every byte encodes the step, so a
torn or mixed checkpoint shows. Resumes from the newest checkpoint's step. A second argument
`async` uses an asynchronous store (the fsyncs, manifest and rename in its background thread)."""
import sys

from smtrain.checkpoints import CheckpointStore, PipePosition

manager = CheckpointStore(sys.argv[1], keep=3, log=lambda message: None, asynchronous=sys.argv[2:] == ["async"])
latest = manager.restore()
step = latest.step + 1 if latest else 1


def write(folder):
    for i in range(4):
        (folder / f"part-{i}.bin").write_bytes(step.to_bytes(8, "little") * (32 * 1024))


while True:
    manager.save(step, write, pipe_positions=[{"train": PipePosition(step // 10, step % 10)}], extra={"step": step})
    step += 1
