#!/bin/bash
# bench/llm_quant_mixes.sh [CONFIG] [MIXES] [PROMPTS] — files quantized by llama.cpp's own
# llama-quantize through rlx and llama.cpp side by side: for each prompt length, how many of
# the first 32 greedy tokens agree, and the last prompt position's logits (max |difference|
# over max |logit|, both centred). Needs ~/.cache/rlx-llm (../shared/tools/llm/README.md:
# npm's node-llama-cpp and build_tools.sh) and build/tools/rlx.
#
# The model is ../shared/tools/llm/make_gguf.py's CONFIG (default small, plain random
# weights) in F32, which llama-quantize turns into each mix; both engines use f16 KV caches
# (their default). With random weights the layers amplify every rounding difference, so
# the tokens only agree this far where rlx rounds as llama.cpp's CPU backend does: int8
# activations, the integer dots' block sums and their f32 order (by type, and on a CPU
# with AMX as ggml's AMX kernels sum), ggml's expf in SwiGLU and softmax, and its
# attention's order of additions (docs/llm.md, "Parity with llama.cpp").
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-small}
mixes=${2:-Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K}
prompts=${3:-16 120}
cache=${RLX_LLM_CACHE:-$HOME/.cache/rlx-llm}
ref=$PWD/../shared/tools/llm/llama_ref.mjs
dir=/tmp/rlx-quant-mixes
mkdir -p $dir
f32=$dir/$config-f32.gguf
[ -f $f32 ] || /usr/bin/python3 ../shared/tools/llm/make_gguf.py --config $config --type F32 \
  -o $f32 > /dev/null
printf '%-8s' mix
for n in $prompts; do printf '  prompt %-4s greedy  logits      ' $n; done
echo
for q in $mixes; do
  m=$dir/$config-$q.gguf
  [ -f $m ] || $cache/bin/llama-quantize $f32 $m $q > /dev/null 2>&1
  printf '%-8s' $q
  for n in $prompts; do
    out=$dir/$config-$q-p$n
    [ -f $out.json ] || (cd $cache && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node $ref $m \
      --n-prompt $n --n-gen 32 --kv f16 --out $out > /dev/null 2>&1)
    /usr/bin/python3 - $out $m <<'PY'
import json, subprocess, sys
import numpy as np
out, model = sys.argv[1:]
j = json.load(open(out + '.json'))
ids = subprocess.run(['build/tools/rlx', 'generate', model, '--prompt-tokens',
                      ','.join(map(str, j['prompt_tokens'])), '-n', '32', '--temp', '0',
                      '--print-tokens', '--dump-logits', out + '.npy'],
                     capture_output=True, text=True, errors='replace').stdout
got = [int(t) for t in ids.strip().split('\n')[-1].split(',') if t]
want = j['greedy_next']
k = 0
while k < min(len(got), len(want)) and got[k] == want[k]:
    k += 1
x = np.fromfile(out + '.logits.f32', dtype=np.float32).astype(np.float64)
y = np.load(out + '.npy').astype(np.float64).ravel()
x -= x.mean()
y -= y.mean()
print(f'              {k:2d}/{len(want)}  {np.abs(x - y).max() / np.abs(x).max():.1e}', end='')
PY
  done
  echo
done
