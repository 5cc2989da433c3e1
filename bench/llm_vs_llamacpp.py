#!/usr/bin/env python3
"""rlx against llama.cpp on GGUF models, side by side in one run (CPU).

    /usr/bin/python3 bench/llm_vs_llamacpp.py [--configs small,1b] [--types F16,Q8_0,Q4_0,Q4_K]
        [-p 512] [-n 128] [-t 2] [-r 3] [--rlx build/tools/rlx] [--models DIR]

For each model: `rlx bench-llm` and llama.cpp's `llama-bench` (built by
../shared/tools/llm/build_tools.sh into ~/.cache/rlx-llm/bin) with the same prompt length,
generated tokens and threads; prefill (ppN) and decode (tgN) tokens/s, each one's peak
RSS (/usr/bin/time), and rlx / llama.cpp ratios (> 1: rlx is faster; RSS < 1: rlx uses
less). rlx also prints its decode bandwidth against the read bandwidth measured in the same
run. The machine's speed drifts (other tenants): --rounds alternates the two engines and each
side keeps its best round (fastest pp and tg, smallest RSS). Models are made by ../shared/tools/llm/make_gguf.py (random weights; same code paths as
real checkpoints) and kept in --models.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(os.path.dirname(ROOT), 'shared', 'tools', 'llm')


def run_timed(cmd):
    """Runs cmd under /usr/bin/time -v; returns (stdout, peak RSS MiB)."""
    p = subprocess.run(['/usr/bin/time', '-v'] + cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f'failed: {" ".join(cmd)}\n{p.stdout}\n{p.stderr}')
    rss = re.search(r'Maximum resident set size \(kbytes\): (\d+)', p.stderr)
    return p.stdout, (int(rss.group(1)) / 1024 if rss else float('nan'))


def llama_bench(bin_dir, model, a):
    out, rss = run_timed([os.path.join(bin_dir, 'llama-bench'), '-m', model, '-p', str(a.p),
                          '-n', str(a.n), '-t', str(a.t), '-r', str(a.r), '-o', 'csv'])
    pp = tg = float('nan')
    lines = [l for l in out.splitlines() if l.strip()]
    head = next(i for i, l in enumerate(lines) if 'avg_ts' in l)
    cols = [c.strip('"') for c in lines[head].split(',')]
    for l in lines[head + 1:]:
        row = dict(zip(cols, [c.strip('"') for c in l.split(',')]))
        if int(row['n_prompt']) > 0:
            pp = float(row['avg_ts'])
        if int(row['n_gen']) > 0:
            tg = float(row['avg_ts'])
    return pp, tg, rss


def rlx_bench(rlx, model, a):
    out, rss = run_timed([rlx, 'bench-llm', model, '-p', str(a.p), '-n', str(a.n), '-t', str(a.t),
                          '-r', str(a.r)])
    pp = float(re.search(rf'^pp{a.p} ([\d.]+)', out, re.M).group(1))
    tg = float(re.search(rf'^tg{a.n} ([\d.]+)', out, re.M).group(1))
    bw = re.search(r'^decode reads .*$', out, re.M)
    rss_self = float(re.search(r'^peak memory ([\d.]+)', out, re.M).group(1))
    return pp, tg, min(rss, rss_self), bw.group(0) if bw else ''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--configs', default='small,1b')
    ap.add_argument('--types', default='F16,Q8_0,Q4_0,Q4_K')
    ap.add_argument('-p', type=int, default=512)
    ap.add_argument('-n', type=int, default=128)
    ap.add_argument('-t', type=int, default=2)
    ap.add_argument('-r', type=int, default=3)
    ap.add_argument('--rounds', type=int, default=2, help='alternating rounds; best of each side')
    ap.add_argument('--rlx', default=os.path.join(ROOT, 'build', 'tools', 'rlx'))
    ap.add_argument('--llama-bin', default=os.path.expanduser('~/.cache/rlx-llm/bin'))
    ap.add_argument('--models', default=os.path.expanduser('~/.cache/rlx-llm/models'))
    a = ap.parse_args()
    os.makedirs(a.models, exist_ok=True)
    print(f'{"model":<16} {"rlx pp":>9} {"llama pp":>9} {"x":>6}  {"rlx tg":>8} {"llama tg":>9} '
          f'{"x":>6}  {"rlx MiB":>8} {"llama MiB":>9} {"x":>5}')
    for cfg in a.configs.split(','):
        for ty in a.types.split(','):
            m = os.path.join(a.models, f'{cfg}-{ty.lower()}.gguf')
            if not os.path.exists(m):
                subprocess.run(['/usr/bin/python3', os.path.join(SHARED, 'make_gguf.py'), '--config',
                                cfg, '--type', ty, '-o', m], check=True, capture_output=True)
            lp = lt = rp = rt = 0.0
            lr = rr = float('inf')
            for _ in range(max(1, a.rounds)):
                p, t, r = llama_bench(a.llama_bin, m, a)
                lp, lt, lr = max(lp, p), max(lt, t), min(lr, r)
                p, t, r, b = rlx_bench(a.rlx, m, a)
                if t >= rt: bw = b
                rp, rt, rr = max(rp, p), max(rt, t), min(rr, r)
            print(f'{cfg + "-" + ty:<16} {rp:9.1f} {lp:9.1f} {rp / lp:6.2f}  {rt:8.2f} {lt:9.2f} '
                  f'{rt / lt:6.2f}  {rr:8.0f} {lr:9.0f} {rr / lr:5.2f}   {bw}', flush=True)


if __name__ == '__main__':
    main()
