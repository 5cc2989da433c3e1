#!/bin/bash
# tools/gpu/llm_profile.sh MODEL.gguf [rlx bench-llm args…] — where a decode step's time goes
# on the GPU machine (after tools/gpu/llm.sh has unpacked .gpuz): rlx's per-op kernel
# totals (RLX_PROFILE=1, which synchronises each call) and, when the machine has Nsight
# Compute, each kernel's GPU time over a few decode steps (tools/gpu/ncu_kernels.py).
cd "$(dirname "$0")/../.."
. .gpu/env.sh || exit 1
model=$1
shift
RLX_PROFILE=1 .gpu/bin/rlx bench-llm "$model" --device cuda "$@" 2>&1 | head -30
# Nsight Compute, where the machine has it: each kernel's GPU time (a few steps' worth).
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -z "$ncu" ]; then
  echo "(no ncu here)"
  exit 0
fi
# The batch the first run was given (-b B), so that both tables time the same steps.
batch=1
while [ $# -gt 0 ]; do
  case "$1" in -b | --batch) batch=$2; shift ;; esac
  shift
done
$ncu --csv --metrics gpu__time_duration.sum --launch-count 1500 .gpu/bin/rlx bench-llm "$model" \
  --device cuda -p 0 -n 6 -r 0 -b "$batch" > /tmp/rlx-ncu.csv 2>/dev/null
python3 tools/gpu/ncu_kernels.py /tmp/rlx-ncu.csv | head -30
