#!/usr/bin/env bash
# Runs each libFuzzer target of a fuzz build for SECONDS (make fuzz FUZZ_SECONDS=N).
#   fuzz/run.sh BUILD_DIR SECONDS [TARGET…]
# Each target's corpus grows in BUILD_DIR/corpus/<target>, seeded from fuzz/corpus/<target>,
# tests/data/fuzz/<target> and, gathered here, ONNX's node tests and tests/data (models,
# TensorProtos). Findings land in BUILD_DIR/artifacts/<target>/; the log of each run in
# BUILD_DIR/logs/<target>.log. Prints one line per target (executions, corpus, coverage)
# and exits 1 when any target found something.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz/run.sh BUILD_DIR SECONDS [TARGET…]}
seconds=${2:?usage: fuzz/run.sh BUILD_DIR SECONDS [TARGET…]}
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(onnx text npy safetensors tensor_proto gguf)
onnx_data=/usr/share/libonnx-testdata/data
max_seed=65536  # bytes; larger files make slow seeds
cli=${RLX_CLI:-build/tools/rlx}  # converts ONNX seeds to text seeds

# Copies the files given on stdin (at most max_seed bytes each) into dir, named by path.
gather() {
  local dir=$1 f
  while read -r f; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -le $max_seed ] || continue
    cp -n "$f" "$dir/$(echo "$f" | tr '/' '_')"
  done
}

# The seeds of one target beyond the committed ones, in BUILD_DIR/seeds/<target>.
seeds() {
  local t=$1 dir=$build/seeds/$1
  [ -d "$dir" ] && return
  mkdir -p "$dir"
  case $t in
    onnx) find "$onnx_data" tests/data/onnx ../shared/models -name '*.onnx' 2>/dev/null | gather "$dir" ;;
    tensor_proto)
      find "$onnx_data/node" tests/data/onnx -path '*test_data_set_0*' -name '*.pb' 2>/dev/null |
        gather "$dir" ;;
    text)  # ONNX node tests as rlx text, when a regular build's CLI is there to convert them
      if [ -x "$cli" ]; then
        for m in "$onnx_data"/node/test_*/model.onnx; do
          "$cli" convert "$m" -o "$dir/$(basename "$(dirname "$m")").rlx" >/dev/null 2>&1
        done
      fi ;;
  esac
}

status=0
for t in "${targets[@]}"; do
  bin=$build/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "$t: no $bin (make fuzz builds it)"; status=1; continue; }
  seeds "$t"
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t" "$build/logs"
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  dirs=()
  for d in "fuzz/corpus/$t" "tests/data/fuzz/$t" "$build/seeds/$t"; do
    [ -d "$d" ] && dirs+=("$d")
  done
  start=$(date +%s)
  # One thread per run (OpenMP, BLAS): libFuzzer runs one input at a time anyway.
  OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -max_len=$max_seed \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" "${dict[@]}" \
    "$build/corpus/$t" "${dirs[@]}" >"$build/logs/$t.log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/logs/$t.log" | grep -o '[0-9]*$')
  last=$(grep -E '^#[0-9]+' "$build/logs/$t.log" | tail -1)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*')
  corp=$(ls "$build/corpus/$t" | wc -l)
  found=$(ls "$build/artifacts/$t" | wc -l)
  echo "$t: ${execs:-?} executions in ${took}s, corpus $corp, cov ${cov:-?} edges, ft ${ft:-?}, findings $found (exit $rc; $build/logs/$t.log)"
  [ "$rc" -eq 0 ] && [ "$found" -eq 0 ] || status=1
done
exit $status
