#!/bin/bash
# tools/gpu/cpu_levels.sh [LEVELS] — the CPU kernel levels' tests that tools/gpu/bundle.sh
# carries, at every level the GPU host's CPU has (or those of LEVELS), one line each: that
# machine's Xeon may have the AVX-512 VNNI level the development machine lacks.
cd "$(dirname "$0")/../.."
[ -d .gpu ] || tar -xJf .gpuz/gpu.tar.xz || exit 1
. .gpu/env.sh || exit 1
# The tests run reference scripts (python3 + NumPy) from the development tree's absolute
# paths: where this machine lacks that path, it is this copy.
src=$(cat .gpuz/source_dir 2>/dev/null)
if [ -n "$src" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
# And with a python3 that has NumPy: this machine's /usr/bin/python3 may lack it.
/usr/bin/python3 -c "import numpy" 2>/dev/null || export RLX_PYTHON=$(command -v python3)
grep -m1 "model name" /proc/cpuinfo
echo "flags: $(grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for level in ${1:-baseline avx2 avx512}; do
  for t in .gpu/bin/cpu_*_test .gpu/bin/ops_*_test .gpu/bin/frontend_quant_test \
    .gpu/bin/runtime_session_test .gpu/bin/llm_model_test; do  # what bundle.sh packed
    log=${OUT:-/tmp}/levels_${level}_$(basename $t).log  # the whole output, for failures
    sh tests/isa/run_level.sh $level timeout 300 $t --gtest_brief=1 > $log 2>&1
    echo "[$level $(basename $t)] $(grep -E "PASSED|FAILED|SKIP|rlx:" $log | cut -c1-200 | tr '\n' ' ')"
  done
  # The level's speed on the reference models (bundle.sh's copies; rlx alone, 2 threads).
  if [ -d .gpuz/models ]; then
    sh tests/isa/run_level.sh $level timeout 300 .gpu/bin/rlx-bench-onnx .gpuz/models --quick 2>&1 |
      grep -v '^geometric' | cut -c1-27  # the model and rlx's ms (no ORT there)
  fi
done
