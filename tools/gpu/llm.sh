#!/bin/bash
# tools/gpu/llm.sh [tests|bench|quick|all] [CONFIGS] — the GPU machine's half of the LLM run
# (bundle it with `tools/gpu/bundle.sh build llm`, carry .gpuz): the CUDA tests of the op
# tables and libs/llm, then random-weight models (bench/llm/make_gguf.py F16 and BF16, `rlx
# quantize` to Q8_0 and Q4_K) timed by bench/llm/llm_torch.py, rlx next to PyTorch. CONFIGS:
# make_gguf.py configs, default "1b". `quick`: the tests, then rlx alone (no PyTorch, whose
# compiles take minutes). Logs under $OUT (tests.log, bench_<config>.log). TORCH_TYPES=bf16
# (say) times only that file beside PyTorch and the quantized ones with rlx alone; ENV_AB
# the settings timed beside the defaults (`quick`: "RLX_DECODE_FUSIONS=0" unless set; `bench`:
# for the files rlx runs alone).
cd "$(dirname "$0")/../.."
stage=${1:-all}
configs=${2:-1b}
tar -xJf .gpuz/gpu.tar.xz && . .gpu/env.sh || exit 1
B=.gpu/bin
nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv,noheader
if [ "$stage" != bench ]; then
  {
    f='*Dispatch*:CudaRuntime*:CudaQuant*'
    for op in dequantize quant_matmul fused_quant_matmul rope kv_cache_write attention_cached sample; do
      f="$f:*CudaConsistency.MatchesReference/$op"
    done
    [ "$stage" = quick ] || f='*Consistency*:*Dispatch*:CudaRuntime*:CudaQuant*'
    timeout 240 $B/cuda_all_tests --gtest_brief=1 --gtest_filter="$f"
    echo "== cuda_all_tests rc=$?"
    timeout 120 $B/llm_cuda_test --gtest_brief=1
    echo "== llm_cuda_test rc=$?"
    # Without the decode fusions (settings().decode_fusions, on by default).
    f='*Dispatch*:*CudaConsistency.MatchesReference/rope_attention_cached'
    f="$f:*CudaConsistency.MatchesReference/fused_quant_matmul"
    RLX_DECODE_FUSIONS=0 timeout 120 $B/cuda_all_tests --gtest_brief=1 --gtest_filter="$f"
    echo "== cuda_all_tests, RLX_DECODE_FUSIONS=0 rc=$?"
    RLX_DECODE_FUSIONS=0 timeout 120 $B/llm_cuda_test --gtest_brief=1
    echo "== llm_cuda_test, RLX_DECODE_FUSIONS=0 rc=$?"
  } > $OUT/tests.log 2>&1
  grep -v "^\[ \|^$" $OUT/tests.log | cut -c1-300 | head -120
fi
[ "$stage" = tests ] && exit 0
M=/tmp/llm-models
mkdir -p $M
for c in $configs; do
  t0=$(date +%s)
  python3 bench/llm/make_gguf.py --config $c --type BF16 -o $M/$c-bf16.gguf > /dev/null &&
    $B/rlx quantize $M/$c-bf16.gguf $M/$c-q8_0.gguf Q8_0 -t 16 > /dev/null &&
    $B/rlx quantize $M/$c-bf16.gguf $M/$c-q4_k.gguf Q4_K -t 16 > /dev/null ||
    { echo "== models $c failed"; continue; }
  echo "== models $c: $(( $(date +%s) - t0 )) s"
  if [ "$stage" = quick ]; then
    for t in bf16 q8_0 q4_k; do
      for b in 1 8; do
        for f in "" ${AB:-}; do  # AB=--no-fuse (say) times a variant beside the default
          echo "== $t b$b ${f:-default}"
          timeout 60 $B/rlx bench-llm $M/$c-$t.gguf --device cuda -p $((b == 1 ? 512 : 0)) -n 64 -r 2 -b $b $f
        done
        for e in ${ENV_AB-RLX_DECODE_FUSIONS=0}; do  # settings to time beside the defaults
          echo "== $t b$b $e"
          env $e timeout 60 $B/rlx bench-llm $M/$c-$t.gguf --device cuda -p 0 -n 64 -r 2 -b $b
        done
      done
    done > $OUT/bench_$c.log 2>&1
    echo "== rlx $c rc=$?"
    grep -E "^==|^pp|^tg" $OUT/bench_$c.log
    continue
  fi
  # TORCH_TYPES (default all three) go through llm_torch.py (rlx and PyTorch side by side);
  # the others rlx alone (PyTorch runs a quantized file's bf16 twin: the bf16 shapes again).
  torch_files=() rlx_only=()
  for t in bf16 q8_0 q4_k; do
    if [[ " ${TORCH_TYPES:-bf16 q8_0 q4_k} " == *" $t "* ]]; then torch_files+=($M/$c-$t.gguf)
    else rlx_only+=($t); fi
  done
  timeout ${BENCH_TIMEOUT:-400} python3 bench/llm/llm_torch.py "${torch_files[@]}" \
    --rlx $B/rlx > $OUT/bench_$c.log 2>&1
  echo "== bench $c rc=$?"
  cat $OUT/bench_$c.log | tail -40
  for t in "${rlx_only[@]}"; do
    for b in 1 8; do
      echo "== rlx $c $t b$b"
      timeout 90 $B/rlx bench-llm $M/$c-$t.gguf --device cuda -p $((b == 1 ? 512 : 0)) -n 128 -r 3 -b $b
      for e in ${ENV_AB:-}; do
        echo "== rlx $c $t b$b $e"
        env $e timeout 90 $B/rlx bench-llm $M/$c-$t.gguf --device cuda -p 0 -n 128 -r 3 -b $b
      done
    done
  done 2>&1 | tee -a $OUT/bench_$c.log | grep -E "^==|^pp|^tg|^decode|^copy"
  rm -f $M/$c-*.gguf
done
