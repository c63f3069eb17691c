"""Patch Horovod 0.28.1's released source tree so that it builds against TensorFlow 2.19 and later
(the image's TensorFlow, requirements/stack.txt). scripts/build-stack.sh runs it on the unpacked
sdist before `pip install`; idempotent; it fails loudly when the source is not what it expects.

    python scripts/patch-horovod-build.py HOROVOD_SOURCE_DIR

The patches, each the smallest the build needs:

1. `horovod/tensorflow/CMakeLists.txt`: leave `xla_mpi_ops.cc` out of the TensorFlow library.
   Since TensorFlow 2.19 the XLA headers it includes (`xla/printer.h`) include
   `highwayhash/arch_specific.h`, which TensorFlow's wheel does not ship, so the file cannot compile
   against the wheel (Horovod's own fix for TF 2.20 is an unmerged pull request). The file only
   registers XLA implementations of Horovod's collectives, and only when a job sets
   `HOROVOD_ENABLE_XLA_OPS=1` (off by default); without it a Horovod op inside a
   `tf.function(jit_compile=True)` is refused by XLA, as it is by default anyway. Everything else -
   the MPI, Gloo and NCCL operations, eager and `tf.function` graphs - is built as released.
2. `horovod/tensorflow/mpi_ops.cc` (GPU builds only: inside `#if HAVE_GPU`): Horovod declares and
   calls `stream_executor::gpu::AsGpuStreamValue(Stream*)`, which TensorFlow 2.21 no longer exports,
   so the GPU library compiles but does not load (`undefined symbol`). The patch defines it inline
   from the stream's own `platform_specific_handle().stream` - the same CUDA stream - after the
   stream header is included. The CPU build never compiles this code.
"""
from __future__ import annotations

import sys
from pathlib import Path

XLA_SOURCE = 'list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")\n'
XLA_LEFT_OUT = ("# smtrain: xla_mpi_ops.cc left out: its XLA headers need highwayhash, which the TensorFlow "
                "wheel does not ship (TF >= 2.19)\n")


STREAM_DECLARATION = """// Forward declaration of AsGpuStreamValue
namespace stream_executor {
namespace gpu {
GpuStreamHandle AsGpuStreamValue(Stream* stream);
} // namespace stream_executor
} // namespace gpu
#if TENSORFLOW_VERSION >= 2011000000
#include "tensorflow/compiler/xla/stream_executor/stream.h"
#else
#include "tensorflow/stream_executor/stream.h"
#endif // TENSORFLOW_VERSION >= 2011000000
"""
STREAM_DEFINITION = """#if TENSORFLOW_VERSION >= 2011000000
#include "tensorflow/compiler/xla/stream_executor/stream.h"
#else
#include "tensorflow/stream_executor/stream.h"
#endif // TENSORFLOW_VERSION >= 2011000000
// smtrain: TensorFlow >= 2.21 no longer exports AsGpuStreamValue; the stream's own handle is the same value
namespace stream_executor {
namespace gpu {
inline GpuStreamHandle AsGpuStreamValue(Stream* stream) {
  return static_cast<GpuStreamHandle>(stream->platform_specific_handle().stream);
}
} // namespace gpu
} // namespace stream_executor
"""


def _replace_once(path: Path, old: str, new: str, what: str) -> list[str]:
    """`old` replaced by `new` in `path`; nothing when `new` is there already; SystemExit when neither is."""
    text = path.read_text()
    if old in text:
        path.write_text(text.replace(old, new, 1))
        return [f"{path}: {what}"]
    if new in text:
        return []
    raise SystemExit(f"patch-horovod-build: {path} is not Horovod 0.28.1's: no {old.splitlines()[0]!r}")


def patch(source: Path) -> list[str]:
    """Apply every patch to the tree at `source`; returns what it changed (nothing when already applied)."""
    changed = []
    cmake = source / "horovod" / "tensorflow" / "CMakeLists.txt"
    text = cmake.read_text()
    if XLA_SOURCE in text:
        cmake.write_text(text.replace(XLA_SOURCE, XLA_LEFT_OUT))
        changed.append(f"{cmake}: xla_mpi_ops.cc left out")
    elif XLA_LEFT_OUT not in text:
        raise SystemExit(f"patch-horovod-build: {cmake} is not Horovod 0.28.1's: no line {XLA_SOURCE.strip()!r}")
    changed += _replace_once(source / "horovod" / "tensorflow" / "mpi_ops.cc", STREAM_DECLARATION, STREAM_DEFINITION,
                             "AsGpuStreamValue defined from the stream's handle")
    return changed


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    for line in patch(Path(argv[0])) or ["already patched"]:
        print(f"patch-horovod-build: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
