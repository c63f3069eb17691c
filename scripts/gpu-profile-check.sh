#!/usr/bin/env bash
# A GPU host's profiling end to end, without the image (a machine with a GPU, Python 3, PyTorch,
# nvidia-ml-py, psutil and matplotlib): the system monitor (NVML) samples while a PyTorch loop of
# bf16 matrix products, sleeping 0.3 s every 40 steps and taking 1 GiB more GPU memory every 300,
# reports its steps through smtrain.progress.step() (the rank's start-up hook on PYTHONPATH); then
# the report over both. From the repository's root; what it writes goes to $OUT (default ./gpu-check):
#
#   scripts/gpu-profile-check.sh
set -u
out=${OUT:-$PWD/gpu-check}
job=$(mktemp -d)
mkdir -p "$out" "$job/profiler"
export PYTHONPATH="$PWD/entrypoint"
python3 -m smtrain.profiler.monitor --out "$job/profiler" --host algo-1 --interval-ms 200 2>"$out/monitor.err" &
monitor=$!
settings="{\"out\":\"$job/profiler\",\"host\":\"algo-1\",\"steps\":true,\"min_free_mb\":0}"
PYTHONPATH="$PWD/entrypoint/smtrain/rank/startup:$PWD/entrypoint" SM_FRAMEWORK_PROFILER=$settings \
  python3 - <<'EOF' >"$out/loop.txt" 2>&1
import time, torch
from smtrain import progress
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
keep, i, t = [], 0, time.time()
while time.time() - t < 20:
    y = x @ x
    torch.cuda.synchronize()
    progress.step()
    i += 1
    if i % 300 == 0:
        keep.append(torch.empty(1 << 28, device="cuda"))  # 1 GiB more: the memory grows
    if i % 40 == 0:
        time.sleep(0.3)  # an input stall
print("steps", i, "gpu memory GiB", torch.cuda.memory_allocated() / 2**30)
EOF
sleep 1
kill -TERM "$monitor"
wait "$monitor"
python3 -m smtrain.profiler.job_report "$job/profiler" --out "$out/report" --job >"$out/report.txt" 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/gpu.txt"
