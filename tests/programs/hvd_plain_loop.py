"""A plain Horovod training loop as users write it: no smtrain import. Every rank allreduces one
tensor per step, eagerly or in a `tf.function`, every --interval seconds for --seconds seconds (or
--steps steps). --sleep-between S: every rank sleeps S seconds between step 2 and step 3 (a long quiet
phase on every rank). --stop-rank R --stop-at N: rank R sleeps forever at step N, leaving the others
waiting in the next allreduce (it writes `stopped-at` to SM_OUTPUT_DATA_DIR first). --slow "R@T,...": from T
seconds after the loop began (rank 0's clock), rank R sleeps --slow-s more between its steps (a slow input
pipeline). --summaries yes: rank 0 writes a `loss` scalar every 10 steps with tf.summary to
SM_TENSORBOARD_DIR/program (a program's own TensorBoard output)."""
import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["eager", "function"], default="eager")
parser.add_argument("--seconds", type=float, default=10)
parser.add_argument("--steps", type=int, default=0)
parser.add_argument("--interval", type=float, default=0.5)
parser.add_argument("--sleep-between", type=float, default=0)
parser.add_argument("--stop-rank", type=int, default=-1)
parser.add_argument("--stop-at", type=int, default=-1)
parser.add_argument("--slow", default="")
parser.add_argument("--slow-s", type=float, default=0.15)
parser.add_argument("--summaries", default="no")
args, _ = parser.parse_known_args()
hvd.init()
slow_from = {int(r): float(t) for r, _, t in (part.partition("@") for part in args.slow.split(",") if part)}
began = float(hvd.broadcast(tf.constant(time.time(), tf.float64), 0, name="began"))
writer = tf.summary.create_file_writer(os.path.join(os.environ["SM_TENSORBOARD_DIR"], "program")) \
    if args.summaries == "yes" and hvd.rank() == 0 else None
print(f"rank {hvd.rank()} began", flush=True)


def allreduce(value):
    return hvd.allreduce(value, name="step", op=hvd.Sum)


step_fn = tf.function(allreduce) if args.mode == "function" else allreduce


def stopped_in_the_training_loop() -> None:
    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "stopped-at"), "w") as f:
        f.write(str(time.time()))
    time.sleep(3600)


# Every rank agrees when to stop: rank 0's clock decides, through the collective itself.
end = time.monotonic() + args.seconds
step = 0
while True:
    if hvd.rank() == args.stop_rank and step == args.stop_at:
        stopped_in_the_training_loop()
    if step == 2 and args.sleep_between:
        time.sleep(args.sleep_between)
    done = 1.0 if (args.steps and step >= args.steps) or (not args.steps and time.monotonic() >= end) else 0.0
    total = step_fn(tf.constant(done if hvd.rank() == 0 else 0.0))
    if writer is not None and step % 10 == 0:
        with writer.as_default():
            tf.summary.scalar("loss", 1.0 / (1 + step), step=step)
    step += 1
    if float(total) > 0:
        break
    time.sleep(args.interval + (args.slow_s if time.time() - began >= slow_from.get(hvd.rank(), 1e9) else 0))
if writer is not None:
    writer.flush()
print(f"rank {hvd.rank()} finished {step} steps", flush=True)
