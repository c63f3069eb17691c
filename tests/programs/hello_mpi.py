"""A tiny MPI-launched program: each rank says who and where it is (no TensorFlow)."""
import os
import socket

print(f"hello from rank {os.environ.get('SM_RANK')} of {os.environ.get('SM_SIZE')} "
      f"(local {os.environ.get('SM_LOCAL_RANK')}) on {os.environ.get('SM_CURRENT_HOST')} [{socket.gethostname()}]",
      flush=True)
