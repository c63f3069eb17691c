"""Reads a Pipe channel for --epochs epochs, resuming at the checkpoint's position; stops with a
final checkpoint on SIGTERM. Logs every record it consumed as `<epoch> <record hex>` to
SM_OUTPUT_DATA_DIR/consumed-<run>-<rank>. Works alone or under Horovod (--horovod)."""
import argparse
import os
import sys
import time

from smtrain import pipes
from smtrain.checkpoints import CheckpointStore, PipePosition, StopSignal, all_positions, shared_restore

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--run", default="1")
parser.add_argument("--horovod", default="no")
parser.add_argument("--delay", type=float, default=0.01)
args, _ = parser.parse_known_args()  # the TensorFlow estimator adds --model_dir
if args.horovod == "yes":
    import horovod.tensorflow as hvd

    hvd.init()
rank = int(os.environ.get("SM_RANK", "0"))
stop = StopSignal()
manager = CheckpointStore(keep=2)
restored = shared_restore(manager)
position = restored.position("train", rank) if restored else None
start_epoch, skip = position if position else (0, 0)
step = restored.step if restored else 0
log = open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"consumed-{args.run}-{rank}"), "a")
print(f"rank {rank} starts at epoch {start_epoch}, skipping {skip}", flush=True)


def save(epoch, consumed):
    manager.save(step, lambda folder: (folder / "step").write_text(str(step)),
                 pipe_positions=all_positions({"train": PipePosition(epoch, consumed)}))


for fifo, epoch in enumerate(range(start_epoch, args.epochs)):
    consumed = skip if epoch == start_epoch else 0
    for record in pipes.records("train", fifo, skip=consumed, timeout=60):
        log.write(f"{epoch} {record.hex()}\n")
        log.flush()
        consumed += 1
        step += 1
        time.sleep(args.delay)
        if stop.agreed():
            save(epoch, consumed)
            print(f"rank {rank} stopped at epoch {epoch} after {consumed} records", flush=True)
            sys.exit(0)
        if step % 25 == 0:
            save(epoch, consumed)
print(f"rank {rank} done", flush=True)
