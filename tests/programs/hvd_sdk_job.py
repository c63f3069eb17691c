"""A plain Horovod script as users bring it to the SDKs (it never imports smtrain): every rank joins an
allreduce of the ranks and says who it is; rank 0 saves a model file; with --fail-rank R, rank R exits
3 after the allreduce."""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--fail-rank", type=int, default=-1)
args, _ = parser.parse_known_args()
hvd.init()
total = int(hvd.allreduce(tf.constant(float(hvd.rank())), op=hvd.Sum).numpy())
print(f"rank {hvd.rank()} of {hvd.size()} (local rank {hvd.local_rank()}) on {os.environ.get('SM_CURRENT_HOST')}: "
      f"sum of ranks {total}", flush=True)
if hvd.rank() == args.fail_rank:
    print(f"rank {hvd.rank()} fails on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
if hvd.rank() == 0:
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as f:
        f.write(f"trained by {hvd.size()} ranks\n")
