#!/bin/bash
# tools/gpu/llm_profile.sh MODEL.gguf [rlx bench-llm args…] — where a decode step's time goes
# on the GPU machine (after tools/gpu/llm.sh has unpacked .gpuz): rlx's per-op kernel
# totals (RLX_PROFILE=1, which synchronises each call) and, when the machine has Nsight
# Systems, the kernels of a CUDA-Graph run as launched (nsys --stats).
cd "$(dirname "$0")/../.."
. .gpu/env.sh || exit 1
model=$1
shift
RLX_PROFILE=1 .gpu/bin/rlx bench-llm "$model" --device cuda "$@" 2>&1 | head -30
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -z "$nsys" ]; then
  echo "(no nsys here)"
  exit 0
fi
$nsys profile -o /tmp/rlx-llm -f true --cuda-graph-trace=node .gpu/bin/rlx bench-llm "$model" \
  --device cuda "$@" > /dev/null 2>&1
$nsys stats -q --report cuda_gpu_kern_sum,cuda_api_sum --format csv /tmp/rlx-llm.nsys-rep 2>/dev/null |
  cut -d, -f1-9 | head -45
