#!/bin/bash
# scaling.sh BENCH [NGPU] — the GPT-2-small AMP train step at 1 and NGPU GPUs (default:
# all), rlx (BENCH = rlx-bench-dist, env launch) next to PyTorch DDP (torchrun), and the
# scaling efficiency: tokens/s at N over N times tokens/s at 1. NCCL_NVLS_ENABLE=0.
bench=$1
n=${2:-$(nvidia-smi -L | wc -l)}
here=$(dirname "$0")
export NCCL_NVLS_ENABLE=0
run_rlx() {  # ranks
  local pids=() r
  for r in $(seq 0 $(($1 - 1))); do
    WORLD_SIZE=$1 RANK=$r LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29531 \
      timeout 300 "$bench" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p; done
}
run_torch() {  # ranks
  timeout 300 python3 -m torch.distributed.run --standalone --nproc-per-node "$1" \
    "$here/ddp_torch.py" 2>/dev/null
}
line() { grep -o "tokens_per_s=[0-9]*" | cut -d= -f2; }
printf "%-6s %6s %14s %14s %11s\n" impl gpus "tokens/s @1" "tokens/s @N" efficiency
for impl in rlx torch; do
  one=$(run_$impl 1 | tee /dev/stderr | line)
  many=$(run_$impl "$n" | tee /dev/stderr | line)
  eff=$(python3 -c "print(f'{100 * $many / ($n * $one):.1f} %')" 2>/dev/null || echo "?")
  printf "%-6s %6s %14s %14s %11s\n" $impl "$n" "$one" "$many" "$eff"
done
