#!/bin/bash
# tools/gpu/bundle.sh [BUILD] — pack what the GPU machine runs into .gpuz/ (git-ignored):
# the CUDA tests (libs/sparse's and libs/linalg's among them), the CLI, rlx-bench-gpu and
# rlx-bench-sparse-gpu with the libraries they load (through
# ../shared/tools/gpu-bundle), stripped and xz-compressed, plus mobilenet_v2 from
# ../shared/models when present. Then, with the device tool: carry [".gpuz"] and run
# `bash tools/gpu/run.sh` (DEVELOPERS.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpuz
build=${1:-build}
targets=(cuda_all_tests rlx-cli rlx-bench-gpu rlx-bench-sparse-gpu)
bins=(tests/cuda_all_tests tools/rlx bench/rlx-bench-gpu bench/rlx-bench-sparse-gpu)
# rlx::dist's NCCL tests, when the build has them (MPI and NCCL found).
if grep -q '^dist_nccl:' <(ninja -C "$build" -t targets all 2>/dev/null); then
  targets+=(dist_nccl rlx-bench-dist)
  bins+=(libs/dist/dist_nccl libs/dist/rlx-bench-dist)
fi
cmake --build "$build" --target "${targets[@]}"
# The f32 GEMM probe (cuBLAS's f32 options next to rlx's tensor-core kernel).
nvcc -O2 -arch=sm_90 -std=c++20 -Isrc tools/gpu/f32_gemm_probe.cu -lcublas -lcublasLt \
  -o .gpuz/f32_gemm_probe
rm -rf .gpu
../shared/tools/gpu-bundle .gpu "${bins[@]/#/$build/}"
strip .gpu/bin/*
# A dictionary larger than the tar: the binaries share most of librlx, which then
# compresses once (~24 MB instead of ~53 MB, at a minute or two more of one core).
tar -cf - .gpu | xz -T1 --lzma2=preset=4,dict=192MiB > .gpuz/gpu.tar.xz
if [ -d ../shared/models/mobilenet_v2 ] && [ ! -d .gpuz/mobilenet_v2 ]; then
  mkdir -p .gpuz/mobilenet_v2
  cp -r ../shared/models/mobilenet_v2/{model.onnx,test_data_set_0} .gpuz/mobilenet_v2/
fi
du -sh .gpuz
