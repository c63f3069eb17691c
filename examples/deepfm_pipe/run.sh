#!/usr/bin/env bash
# The DeepFM example in one command: synthetic CTR data, a Pipe-mode channel fed as SageMaker feeds
# it (smtrain's feeder), and `train` running train.py as 2 Horovod ranks on this machine, against a
# temporary folder standing in for /opt/ml. Sets up the environment first (scripts/setup.sh).
#
#   examples/deepfm_pipe/run.sh [EPOCHS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${SMTRAIN_VENV:-/opt/smtrain/venv}
epochs=${1:-3}
"$root/scripts/setup.sh"
base=$(mktemp -d -t smtrain-deepfm-XXXX)
mkdir -p "$base/input/config" "$base/input/data"
"$venv/bin/python" "$here/make_data.py" "$base/source"
echo '{"current_host": "algo-1", "hosts": ["algo-1"]}' >"$base/input/config/resourceconfig.json"
echo '{"train": {"TrainingInputMode": "Pipe", "ContentType": "application/x-tfrecord"}}' \
  >"$base/input/config/inputdataconfig.json"
cat >"$base/input/config/hyperparameters.json" <<JSON
{"sagemaker_program": "\"train.py\"", "sagemaker_submit_directory": "\"$here\"",
 "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
 "epochs": "$epochs", "batch-size": "64"}
JSON
echo "deepfm: job folder $base"
SAGEMAKER_BASE_DIR=$base "$venv/bin/python" -m smtrain.data.feeder --source "train=$base/source" \
  --epochs "$epochs" &
feeder=$!
status=0
SAGEMAKER_BASE_DIR=$base SM_CHECKPOINT_DIR=$base/checkpoints "$venv/bin/train" || status=$?
wait "$feeder" || true
echo "deepfm: exit status $status; checkpoints: $(ls "$base/checkpoints" | tr '\n' ' ')"
exit "$status"
