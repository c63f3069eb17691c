"""Saves 3-MB TensorFlow checkpoints (a variable filled with the step number) with a CheckpointStore
until a save fails, after restoring the newest one. Used by the full-disk tests.

    ckpt_fill.py DIR sync|async|async-exit KEEP [pipes]

Prints `restored STEP VALUE` (0 0.0 when it started fresh), then `saved STEP` per checkpoint, and on a
failed save `failed STEP ERRNO` and the error's text, then exits 3. `async-exit` does not wait for the
third save: it exits 0 right after it, and the store's own exit check must turn its failure into status 1.
With `pipes`, every save carries a Pipe position and a shuffled channel's consumed fingerprints.
"""
import os
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf  # noqa: E402

from smtrain.checkpoints import AllPositions, CheckpointStore, CheckpointWriteError, PipePosition  # noqa: E402

directory, mode, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
with_pipes = sys.argv[4:] == ["pipes"]
variable = tf.Variable(tf.zeros((786432,)))  # 3 MB of float32
state = tf.train.Checkpoint(v=variable)
store = CheckpointStore(directory, keep=keep, asynchronous=mode != "sync")
restored = store.restore(state)
start = restored.step if restored else 0
if restored is not None and with_pipes:
    assert restored.position("train") == PipePosition(start // 4, start), restored
print(f"restored {start} {float(variable[0])}", flush=True)
for step in range(start + 1, start + 8):
    variable.assign(tf.fill((786432,), float(step)))
    positions = AllPositions([{"train": PipePosition(step // 4, step)}], [{"train": step.to_bytes(8, "little")}]) \
        if with_pipes else ()
    try:
        store.save(step, state, pipe_positions=positions)
        if mode == "async-exit":
            if step == start + 3:
                print("exiting without wait()")  # buffered: must still reach stdout
                sys.exit(0)  # no wait(): the interpreter's exit waits for the save in flight
            continue
        store.wait()
    except CheckpointWriteError as e:
        print(f"failed {step} {e.errno}", flush=True)
        print(e, flush=True)
        sys.exit(3)
    print(f"saved {step}", flush=True)
