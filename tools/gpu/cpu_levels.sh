#!/bin/bash
# tools/gpu/cpu_levels.sh [LEVELS] — the CPU kernel levels' tests that tools/gpu/bundle.sh
# carries, at every level the GPU host's CPU has (or those of LEVELS), one line each: that
# machine's Xeon may have the AVX-512 VNNI level the development machine lacks.
cd "$(dirname "$0")/../.."
[ -d .gpu ] || tar -xJf .gpuz/gpu.tar.xz || exit 1
. .gpu/env.sh || exit 1
grep -m1 "model name" /proc/cpuinfo
echo "flags: $(grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for level in ${1:-baseline avx2 avx512}; do
  for t in .gpu/bin/cpu_*_test .gpu/bin/ops_*_test .gpu/bin/frontend_quant_test \
    .gpu/bin/runtime_session_test .gpu/bin/llm_model_test; do  # what bundle.sh packed
    r=$(sh tests/isa/run_level.sh $level timeout 300 $t --gtest_brief=1 2>&1 |
      grep -E "PASSED|FAILED|SKIP|rlx:" | tr '\n' ' ')
    echo "[$level $(basename $t)] $r"
  done
done
