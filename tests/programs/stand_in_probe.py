"""A job that meets SageMaker's container contract where the SageMaker stand-in plays it
(tests/sdk/test_sagemaker_contract.py). Pipe channel `train` (gzip objects, each wrapped in a RecordIO record
by SageMaker, shuffled each epoch), read from SageMaker's own FIFOs as the guide says: one record of epoch 0,
the FIFO closed early, then epoch 1 read to its end; channel `wrapped` (the same, unshuffled) through
smtrain's reader, which must frame it as RecordIO (RecordWrapperType); what it read, and the container's
hostname, to probe.json; a checkpoint
file; lines to stdout and stderr in turn; then it waits to be stopped (MaxRuntimeInSeconds) and fails with a
reason of its own."""
import json
import os
import pathlib
import signal
import socket
import struct
import sys
import time

stopping = []
signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
data = pathlib.Path("/opt/ml/input/data")


def fifo(epoch: int) -> pathlib.Path:
    """SageMaker's FIFO of `epoch`: the next may not exist yet ("your code may need to retry")."""
    path, deadline = data / f"train_{epoch}", time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return path


def recordio(stream):
    while True:
        head = stream.read(8)
        if len(head) < 8:
            return
        magic, length = struct.unpack("<II", head)
        assert magic == 0xCED7230A, hex(magic)
        length &= (1 << 29) - 1
        body = stream.read(length)
        stream.read(-length % 4)
        yield body.decode().split()[0]  # the object's name


with open(fifo(0), "rb") as f:
    first = next(recordio(f))  # and the FIFO closed before its end
with open(fifo(1), "rb") as f:
    second = list(recordio(f))
from smtrain import pipes  # noqa: E402 - after the raw FIFOs: the product's reader on the other channel

wrapped = [r.decode().split()[0] for r in pipes.records("wrapped")]
findings = {"epoch0_first": first, "epoch1": second, "wrapped": wrapped, "hostname": socket.gethostname()}
pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"], "probe.json").write_text(json.dumps(findings))
pathlib.Path(os.environ["SM_CHECKPOINT_DIR"], "ckpt-1").write_text("checkpoint 1")
for i in range(4):
    print(f"line {2 * i} on stdout", flush=True)
    time.sleep(0.05)
    print(f"line {2 * i + 1} on stderr", file=sys.stderr, flush=True)
    time.sleep(0.05)
deadline = time.monotonic() + 600
while not stopping and time.monotonic() < deadline:
    time.sleep(0.1)
raise SystemExit("probe: stopped before its work was done")
