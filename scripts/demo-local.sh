#!/usr/bin/env bash
# Run a small tf_keras job through `train` on this machine, against a new folder standing in for
# /opt/ml (one host, no container), which stays: the job's model and profiler report are printed at
# the end. Sets up the environment first (scripts/setup.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${SMTRAIN_VENV:-/opt/smtrain/venv}
"$here/scripts/setup.sh"
base=$(mktemp -d -t smtrain-demo-local-XXXX)
mkdir -p "$base/input/config"
echo '{"current_host": "algo-1", "hosts": ["algo-1"]}' >"$base/input/config/resourceconfig.json"
cat >"$base/input/config/hyperparameters.json" <<JSON
{"sagemaker_program": "\"train.py\"", "sagemaker_submit_directory": "\"$here/examples/keras_synthetic\"",
 "epochs": "3", "batch-size": "64"}
JSON
echo "demo: job folder $base"
status=0
SAGEMAKER_BASE_DIR=$base "$venv/bin/train" || status=$?
echo "demo: exit status $status"
echo "demo: profiler report: $base/output/data/profiler-report/profiler-report.html"
echo "demo: model: $base/model/model.keras"
exit "$status"
