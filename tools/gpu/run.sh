#!/bin/bash
# tools/gpu/run.sh — the GPU machine's half of a GPU run (DEVELOPERS.md): unpack the bundle
# (tools/gpu/bundle.sh), run the GPU tests, the reference models on cuda and the
# benchmarks; logs under $OUT (tests.log, models.log, bench.log, sparse_bench.log).
# `run.sh tests` or `run.sh bench` runs one half (each well inside a 10-minute call).
cd "$(dirname "$0")/../.."
stage=${1:-all}
tar -xJf .gpuz/gpu.tar.xz && . .gpu/env.sh || exit 1
B=.gpu/bin
nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv,noheader
if [ "$stage" != bench ]; then
{
  timeout 170 $B/cuda_all_tests --gtest_brief=1 --gtest_filter=-*CudaGradCheck* 2>&1
  echo "== cuda_all_tests rc=$?"
  timeout 120 $B/llm_cuda_test --gtest_brief=1 2>&1
  echo "== llm_cuda_test rc=$?"
} > $OUT/tests.log 2>&1
grep "== \|FAILED\|Failure" $OUT/tests.log | head -40
{
  for m in mlp cnn tiny_gpt bert_tiny vocos_head; do
    $B/rlx run tests/data/onnx/$m/model.onnx --data tests/data/onnx/$m/test_data_set_0 --device cuda --runs 20
    echo "== $m rc=$?"
  done
  if [ -d .gpuz/mobilenet_v2 ]; then
    $B/rlx run .gpuz/mobilenet_v2/model.onnx --data .gpuz/mobilenet_v2/test_data_set_0 --device cuda --runs 20
    echo "== mobilenet_v2 rc=$?"
  fi
} > $OUT/models.log 2>&1
grep "== \|time:\|max abs\|error" $OUT/models.log | head -40
# rlx::dist over NCCL (NVLink multicast off): one rank as torchrun starts it, one under the
# machine's mpirun (its own OpenMPI, not the bundled one), then one rank per GPU.
if [ -x $B/dist_nccl ]; then (
  export NCCL_NVLS_ENABLE=0
  ngpu=$(nvidia-smi -L | wc -l)
  {
    RANK=0 WORLD_SIZE=1 timeout 40 $B/dist_nccl --gtest_brief=1; echo "== dist_nccl env 1 rank rc=$?"
    if command -v mpirun >/dev/null; then
      ldconfig -p | grep -q libmpi.so.40 && rm -f .gpu/lib/libmpi.so.40 .gpu/lib/libopen-*.so.40
      timeout 40 mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
        $B/dist_nccl --gtest_brief=1; echo "== dist_nccl mpirun -np 1 rc=$?"
    fi
    if [ "$ngpu" -ge 2 ]; then
      pids=()
      for r in $(seq 0 $((ngpu - 1))); do
        WORLD_SIZE=$ngpu MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 RANK=$r LOCAL_RANK=$r \
          timeout 40 $B/dist_nccl --gtest_brief=1 > $OUT/dist_rank$r.log 2>&1 & pids+=($!)
      done
      rc=0; for p in "${pids[@]}"; do wait $p || rc=1; done
      cat $OUT/dist_rank0.log; echo "== dist_nccl env $ngpu ranks rc=$rc (every rank: dist_rank*.log)"
      # GPT-2-small AMP step scaling, 1 -> ngpu GPUs, rlx next to PyTorch DDP.
      bash libs/dist/bench/scaling.sh $B/rlx-bench-dist $ngpu; echo "== dist scaling rc=$?"
    fi
  } > $OUT/dist.log 2>&1
  grep "== \|FAILED\|Failure\|^impl\|^rlx \|^torch " $OUT/dist.log | head -30
) fi
fi
[ "$stage" = tests ] && exit 0
# rlx first, then PyTorch's side on its own (torch.compile takes minutes).
timeout 140 $B/rlx-bench-gpu --no-torch --runs 20 > $OUT/bench.log 2>&1; echo "== bench rc=$?"
cat $OUT/bench.log
timeout 150 python3 bench/gpu_torch.py --runs 10 > $OUT/torch.log 2>&1; echo "== torch rc=$?"
cat $OUT/torch.log
timeout 60 .gpuz/f32_gemm_probe > $OUT/f32_probe.log 2>&1; echo "== f32 probe rc=$?"
grep "^m=\|sgemm  \|cuBLAS\|rlx\|alone" $OUT/f32_probe.log
timeout 45 $B/rlx-bench-sparse-gpu > $OUT/sparse_bench.log 2>&1; echo "== sparse bench rc=$?"
cat $OUT/sparse_bench.log
# The gradient checks on cuda (every op's rules, f64), last of the correctness runs.
timeout 90 $B/cuda_all_tests --gtest_brief=1 --gtest_filter=*CudaGradCheck* > $OUT/gradcheck.log 2>&1
echo "== cuda grad checks rc=$?"; grep "FAILED\|PASSED\|Failure" $OUT/gradcheck.log | head -30
# CUDA Graphs off, and where the time goes (RLX_PROFILE syncs after every kernel).
export RLX_CUDA_GRAPHS=0
timeout 40 $B/rlx-bench-gpu --no-torch --only gpt2 --runs 12 > $OUT/bench_nographs.log 2>&1
echo "== without CUDA Graphs:"; cat $OUT/bench_nographs.log
RLX_PROFILE=1 timeout 30 $B/rlx-bench-gpu --no-torch --only gpt2 --runs 4 > $OUT/profile.log 2>&1
echo "== profile written"
