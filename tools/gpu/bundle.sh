#!/bin/bash
# tools/gpu/bundle.sh [BUILD] [llm] — pack what the GPU machine runs into .gpuz/ (git-ignored):
# the CUDA tests (libs/sparse's and libs/linalg's among them), the CLI, rlx-bench-gpu and
# rlx-bench-sparse-gpu with the libraries they load (through
# ../shared/tools/gpu-bundle), stripped and xz-compressed, plus mobilenet_v2 from
# ../shared/models when present. Then, with the device tool: carry [".gpuz"] and run
# `bash tools/gpu/run.sh` (DEVELOPERS.md).
# With `llm`, only what tools/gpu/llm.sh runs: the CUDA tests, libs/llm's and the CLI.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpuz
build=${1:-build}
mode=${2:-all}
targets=(cuda_all_tests llm_cuda_test rlx-cli)
bins=(tests/cuda_all_tests libs/llm/llm_cuda_test tools/rlx)
# The CPU kernel levels' tests, those of the ctest label `isa` (tools/gpu/cpu_levels.sh): the
# GPU host's CPU may have the AVX-512 level that the development machine lacks.
for t in cpu_isa_test cpu_consistency_test ops_llm_ops_test cpu_region_jit_test ops_region_test \
  frontend_quant_test runtime_session_test; do
  targets+=($t)
  bins+=(tests/$t)
done
targets+=(llm_model_test rlx-bench-onnx)
bins+=(libs/llm/llm_model_test bench/rlx-bench-onnx)
if [ "$mode" != llm ]; then
  targets+=(rlx-bench-gpu rlx-bench-sparse-gpu)
  bins+=(bench/rlx-bench-gpu bench/rlx-bench-sparse-gpu)
fi
# rlx::dist's NCCL tests, when the build has them (MPI and NCCL found).
if [ "$mode" != llm ] && grep -q '^dist_nccl:' <(ninja -C "$build" -t targets all 2>/dev/null); then
  targets+=(dist_nccl rlx-bench-dist)
  bins+=(libs/dist/dist_nccl libs/dist/rlx-bench-dist)
fi
cmake --build "$build" --target "${targets[@]}"
# The f32 GEMM probe (cuBLAS's f32 options next to rlx's tensor-core kernel).
[ "$mode" = llm ] || nvcc -O2 -arch=sm_90 -std=c++20 -Isrc tools/gpu/f32_gemm_probe.cu -lcublas -lcublasLt \
  -o .gpuz/f32_gemm_probe
# The batch-1 bf16 matvec designs side by side (bench/RESULTS.md, "bf16 matvec streaming").
nvcc -O3 -arch=sm_90 -std=c++20 -Isrc -Iinclude tools/gpu/matvec_probe.cu -lcublas \
  -o .gpuz/matvec_probe
rm -rf .gpu
# Where the tests look for their reference scripts (compiled-in absolute paths under this
# tree): tools/gpu/cpu_levels.sh points that path at the GPU machine's copy.
pwd > .gpuz/source_dir
../shared/tools/gpu-bundle .gpu "${bins[@]/#/$build/}"
strip .gpu/bin/*
# A dictionary larger than the tar: the binaries share most of librlx, which then
# compresses once (~24 MB instead of ~53 MB, at a minute or two more of one core).
tar -cf - .gpu | xz -T1 --lzma2=preset=4,dict=192MiB > .gpuz/gpu.tar.xz
if [ "$mode" != llm ] && [ -d ../shared/models/mobilenet_v2 ] && [ ! -d .gpuz/mobilenet_v2 ]; then
  mkdir -p .gpuz/mobilenet_v2
  cp -r ../shared/models/mobilenet_v2/{model.onnx,test_data_set_0} .gpuz/mobilenet_v2/
fi
# The reference models, which cpu_levels.sh times at each level (rlx alone: no ORT there).
if [ -d ../shared/models ] && [ ! -d .gpuz/models ]; then
  for d in ../shared/models/*/; do
    [ -f "$d/model.onnx" ] || continue
    mkdir -p .gpuz/models/$(basename $d)
    cp -r "$d"/model.onnx "$d"/test_data_set_0 .gpuz/models/$(basename $d)/
  done
fi
du -sh .gpuz
