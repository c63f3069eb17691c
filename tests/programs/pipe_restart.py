"""The guide's checkpoint example (docs/guide.md) as a user writes it, for in-place restarts: reads Pipe channel `train`
for --epochs epochs, resuming at the checkpoint's position (shared_restore, pipes.records(skip=...)),
and saves every --save-every steps. Rank --fail-rank raises once, at step --fail-at (a marker in its
output/data says it did). Logs each record when a checkpoint commits it (what a restart will not read
again) as `<epoch> <record hex>` to SM_OUTPUT_DATA_DIR/trained-<rank>, and each attempt's starting point
to starts-<rank>. Alone or under Horovod (--horovod yes)."""
import argparse
import os

from smtrain import pipes
from smtrain.checkpoints import CheckpointStore, PipePosition, all_positions, shared_restore

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--horovod", default="no")
parser.add_argument("--save-every", type=int, default=10)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-at", type=int, default=-1)
args, _ = parser.parse_known_args()
if args.horovod == "yes":
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
rank = int(os.environ.get("SM_RANK", "0"))
out = os.environ["SM_OUTPUT_DATA_DIR"]
store = CheckpointStore(keep=2)
restored = shared_restore(store)
start_epoch, skip = (restored.position("train", rank) or (0, 0)) if restored else (0, 0)
step = restored.step if restored else 0
with open(os.path.join(out, f"starts-{rank}"), "a") as f:
    f.write(f"{step} {start_epoch} {skip}\n")
pending: list[str] = []


def save(epoch: int, consumed: int) -> None:
    store.save(step, lambda folder: (folder / "step").write_text(str(step)),
               pipe_positions=all_positions({"train": PipePosition(epoch, consumed)}))
    with open(os.path.join(out, f"trained-{rank}"), "a") as log:
        log.write("".join(pending))
    pending.clear()


for fifo, epoch in enumerate(range(start_epoch, args.epochs)):  # after a restart: from FIFO 0 again
    consumed = skip if fifo == 0 else 0
    for record in pipes.records("train", fifo, skip=consumed, timeout=60):
        pending.append(f"{epoch} {record.hex()}\n")
        consumed += 1
        step += 1
        if args.horovod == "yes":
            hvd.allreduce(tf.constant(0.0), name="step")  # the ranks go step by step, as training does
        if step % args.save_every == 0:
            save(epoch, consumed)
        marker = os.path.join(out, f"failed-{rank}")
        if rank == args.fail_rank and step == args.fail_at and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError(f"rank {rank} fails once at step {step}")
    save(epoch, consumed)
    skip = 0
print(f"rank {rank} done at step {step}", flush=True)
