#!/bin/bash
# tools/gpu/cpu_levels.sh — the CPU kernel levels' tests (tests/isa/run_level.sh's list, the
# ones tools/gpu/bundle.sh carries) at every level the GPU host's CPU has, one line each:
# that machine's Xeon may have the AVX-512 VNNI level the development machine lacks.
cd "$(dirname "$0")/../.."
[ -d .gpu ] || tar -xJf .gpuz/gpu.tar.xz || exit 1
. .gpu/env.sh || exit 1
grep -m1 "model name" /proc/cpuinfo
echo "flags: $(grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for level in baseline avx2 avx512; do
  for t in cpu_isa_test cpu_consistency_test ops_llm_ops_test cpu_region_jit_test ops_region_test; do
    r=$(sh tests/isa/run_level.sh $level timeout 300 .gpu/bin/$t --gtest_brief=1 2>&1 |
      grep -E "PASSED|FAILED|SKIP|rlx:" | tr '\n' ' ')
    echo "[$level $t] $r"
  done
done
