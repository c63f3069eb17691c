#!/usr/bin/env bash
# Build the pinned Python stack into a fresh virtual environment; scripts/setup.sh and both flavours
# of the Dockerfile use it, so the stack is built one way everywhere.
#
#   scripts/build-stack.sh PYTHON VENV REQUIREMENTS_FILE...
#
# HOROVOD_GPU_OPERATIONS=NCCL in the environment adds Horovod's NCCL operations (the GPU flavour);
# mpicc must be on PATH (Horovod links against the MPI it finds). The build is checked: MPI and
# Gloo always, NCCL operations when asked for.
set -euo pipefail

[ $# -ge 3 ] || { echo "usage: $0 PYTHON VENV REQUIREMENTS_FILE..." >&2; exit 2; }
python=$1 venv=$2
shift 2
requirements=()
for file in "$@"; do requirements+=(-r "$file"); done

rm -rf "$venv"
"$python" -m venv "$venv"
py="$venv/bin/python"
"$py" -m pip install -q --upgrade pip==24.3.1 setuptools==75.6.0 wheel==0.45.1
"$py" -m pip install -q "${requirements[@]}"
# tf-keras without its dependencies: it would otherwise pull a second TensorFlow (the GPU wheel).
"$py" -m pip install -q --no-deps tf-keras==2.18.0
# Horovod against the installed TensorFlow, with MPI and Gloo; no build isolation so it sees TF.
HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
MAKEFLAGS="-j$(nproc)" \
  "$py" -m pip install -q --no-build-isolation --no-cache-dir horovod==0.28.1
# Horovod's Keras API against tf_keras is patched afterwards, in a step of its own (scripts/patch-horovod.py).
"$py" - <<'PY'
import os

import horovod.tensorflow as hvd

assert hvd.mpi_built() and hvd.gloo_built(), "Horovod was built without MPI or Gloo"
if os.environ.get("HOROVOD_GPU_OPERATIONS") == "NCCL":
    assert hvd.nccl_built(), "Horovod was built without NCCL operations"
PY
