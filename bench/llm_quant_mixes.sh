#!/bin/bash
# bench/llm_quant_mixes.sh [CONFIG] [MIXES] — files quantized by llama.cpp's own llama-quantize
# (its K-quant mixes) through rlx and llama.cpp side by side: greedy tokens after a
# 16-token prompt (how many of the first 16 agree) and the last prompt position's logits
# (rel L2, both centred). Needs ~/.cache/rlx-llm (../shared/tools/llm/README.md: npm's
# node-llama-cpp and build_tools.sh) and build/tools/rlx.
#
# The model is bench/llm/make_gguf.py's CONFIG (default small) in F16 with --branch-gain 0.1:
# each block adds a tenth as much to the residual stream as a plain random block, as a
# trained model's blocks do. With plain random blocks the layers amplify rounding
# differences ~30-fold (small Q4_K: rlx and llama.cpp each 13% off the float64 logits of
# the same file, 4% off each other), and greedy tokens part after 1-7 steps for any two
# engines that round activations to 8 bits. The last column is llama.cpp against itself with
# an f16 instead of an f32 KV cache: how far greedy tokens of these files hold when only
# rounding changes (on small Q5_K_M and Q2_K, 4 of 16).
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-small}
mixes=${2:-Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K}
cache=${RLX_LLM_CACHE:-$HOME/.cache/rlx-llm}
ref=../shared/tools/llm/llama_ref.mjs
dir=/tmp/rlx-quant-mixes
mkdir -p $dir
f16=$dir/$config-f16.gguf
[ -f $f16 ] || /usr/bin/python3 bench/llm/make_gguf.py --config $config --type F16 \
  --branch-gain 0.1 -o $f16 > /dev/null
vocab=$(build/tools/rlx generate $f16 --prompt-tokens 5 -n 1 --temp 0 --print-tokens \
  --dump-logits $dir/probe.npy 2> /dev/null > /dev/null; /usr/bin/python3 -c \
  "import numpy as np; print(np.load('$dir/probe.npy').size)")
prompt=$(/usr/bin/python3 -c \
  "print(','.join(str(3 + (i * 7919 + 17) % ($vocab - 3)) for i in range(16)))")
echo "mix        equal greedy tokens   logits rel L2 (rlx vs llama.cpp)   llama.cpp f16 vs f32 KV"
for q in $mixes; do
  m=$dir/$config-$q.gguf
  [ -f $m ] || $cache/bin/llama-quantize $f16 $m $q 2 > /dev/null 2>&1
  want=$(cd $cache && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node "$OLDPWD/$ref" $m --n-prompt 16 \
    --n-gen 16 2>&1 | awk '/^greedy/ {print $3}')
  self=$(cd $cache && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node "$OLDPWD/$ref" $m --n-prompt 16 \
    --n-gen 16 --kv f16 --out $dir/$q-f16kv 2>&1 | awk '/^greedy/ {print $3}')
  got=$(build/tools/rlx generate $m --prompt-tokens $prompt -n 16 --temp 0 --print-tokens \
    --dump-logits $dir/$q.npy 2> /dev/null | tail -1)
  /usr/bin/python3 - "$want" "$got" "$self" "${m%.gguf}.llamacpp.logits.f32" $dir/$q.npy $q <<'PY'
import sys
import numpy as np
want, got, self_, ref, ours, name = sys.argv[1:]


def agree(u, v):
    a, b, k = u.split(','), v.split(','), 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


x = np.fromfile(ref, dtype=np.float32).astype(np.float64)
y = np.load(ours).astype(np.float64).ravel()
y -= y.mean()
print(f'{name:10s} {agree(want, got):2d} of 16              '
      f'{np.linalg.norm(x - y) / np.linalg.norm(x):.2e}                          '
      f'{agree(want, self_):2d} of 16')
PY
done
