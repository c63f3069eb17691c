#!/usr/bin/env bash
# Build the pinned Python stack into a fresh virtual environment; scripts/setup.sh and both flavours
# of the Dockerfile use it, so the stack is built one way everywhere.
#
#   scripts/build-stack.sh PYTHON VENV REQUIREMENTS_FILE...
#
# TensorFlow comes in the version of requirements/tensorflow-version (beside the first requirements
# file): tensorflow-cpu, or `tensorflow[and-cuda]` (the GPU wheel with the CUDA, cuDNN and NCCL wheels
# it pins) when HOROVOD_GPU_OPERATIONS=NCCL is in the environment (the GPU flavour, which also adds
# Horovod's NCCL operations, compiled with the CUDA toolkit that scripts/cuda-home.sh assembles in
# HOROVOD_CUDA_HOME from NVIDIA_COMPILER_ROOT - Debian's compiler, unpacked - and those wheels);
# tf-keras in the same version. Horovod is built from its released source, patched by scripts/patch-horovod-build.py
# (beside this script) for that TensorFlow. mpicc must be on PATH (Horovod links against the MPI it
# finds). The build is checked: MPI and Gloo always, NCCL operations when asked for.
set -euo pipefail

[ $# -ge 3 ] || { echo "usage: $0 PYTHON VENV REQUIREMENTS_FILE..." >&2; exit 2; }
python=$1 venv=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
tf_version=$(grep -v '^#' "$(dirname "$1")/tensorflow-version" | tr -d '[:space:]')
horovod_version=0.28.1
requirements=()
for file in "$@"; do requirements+=(-r "$file"); done
tf_wheel=tensorflow-cpu
[ "${HOROVOD_GPU_OPERATIONS:-}" = NCCL ] && tf_wheel="tensorflow[and-cuda]"

rm -rf "$venv"
"$python" -m venv "$venv"
py="$venv/bin/python"
"$py" -m pip install -q --upgrade pip==24.3.1 setuptools==75.6.0 wheel==0.45.1
"$py" -m pip install -q "$tf_wheel==$tf_version" "${requirements[@]}"
# tf-keras without its dependencies: it would otherwise pull a second TensorFlow (the GPU wheel).
"$py" -m pip install -q --no-deps "tf-keras==$tf_version"
if [ "${HOROVOD_GPU_OPERATIONS:-}" = NCCL ]; then
  site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$here/cuda-home.sh" "${NVIDIA_COMPILER_ROOT:?the GPU build needs NVIDIA_COMPILER_ROOT}" "$site" \
    "${HOROVOD_CUDA_HOME:?the GPU build needs HOROVOD_CUDA_HOME}"
  export HOROVOD_NCCL_INCLUDE="$HOROVOD_CUDA_HOME/include" HOROVOD_NCCL_LIB="$HOROVOD_CUDA_HOME/lib64"
  export HOROVOD_NCCL_LINK=SHARED CUDAFLAGS="${CUDAFLAGS:-} -cudadevrt none"  # the wheel's libcudadevrt is newer than nvlink
  # Horovod loads the wheel's libnccl.so.2 from the library path (the image sets it the same way)
  export LD_LIBRARY_PATH="$site/nvidia/nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# Horovod from its released source, patched for this TensorFlow, against the installed TensorFlow with
# MPI and Gloo; no build isolation so it sees TF.
source=$(mktemp -d)
"$py" -m pip download -q --no-deps --no-binary :all: -d "$source" "horovod==$horovod_version"
tar -xzf "$source/horovod-$horovod_version.tar.gz" -C "$source"
"$py" "$here/patch-horovod-build.py" "$source/horovod-$horovod_version"
HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
MAKEFLAGS="-j$(nproc)" \
  "$py" -m pip install -q --no-build-isolation --no-cache-dir "$source/horovod-$horovod_version"
rm -rf "$source"
# Horovod's Keras API against tf_keras is patched afterwards, in a step of its own (scripts/patch-horovod.py).
"$py" - <<'PY'
import os

import horovod.tensorflow as hvd

assert hvd.mpi_built() and hvd.gloo_built(), "Horovod was built without MPI or Gloo"
if os.environ.get("HOROVOD_GPU_OPERATIONS") == "NCCL":
    assert hvd.nccl_built(), "Horovod was built without NCCL operations"
PY
