#!/usr/bin/env python3
"""tools/gpu/ncu_kernels.py NCU.csv — per kernel (name and grid) of an Nsight Compute run
(`ncu --csv --metrics gpu__time_duration.sum`), its calls and median / min / total time, the
largest total first: where a decode step's GPU time goes (tools/gpu/llm_profile.sh). ncu
times each kernel alone at locked clocks with cold caches, so the times run above those of
a CUDA-Graph replay; their ratios are what to read."""
import collections
import csv
import re
import sys


def short(name):
    name = re.sub(r'\(.*', '', name).replace('void ', '')
    return re.sub(r'rlx::(cuda::)?|<unnamed>::', '', name)[:60]


def main(path):
    lines = (line for line in open(path, errors='replace') if line.startswith('"'))
    rows = list(csv.reader(lines))
    head, rows = rows[0], rows[1:]
    at = {k: i for i, k in enumerate(head)}
    by = collections.defaultdict(list)
    read = collections.defaultdict(float)  # dram__bytes_read.sum, where the run asked for it
    for r in rows:
        key = (short(r[at['Kernel Name']]), r[at['Grid Size']])
        value = float(r[at['Metric Value']].replace(',', ''))
        unit = r[at['Metric Unit']] if 'Metric Unit' in at else ''
        if 'Metric Name' in at and r[at['Metric Name']].startswith('dram__bytes_read'):
            read[key] += value * {'byte': 1, 'Kbyte': 1e3, 'Mbyte': 1e6, 'Gbyte': 1e9}.get(unit, 1)
        else:
            by[key].append(value / {'usecond': 1e-3, 'msecond': 1e-6}.get(unit, 1) / 1000)
    total = sum(sum(v) for v in by.values())
    print(f'{sum(len(v) for v in by.values())} kernels, {total:.0f} us')
    for key, v in sorted(by.items(), key=lambda kv: -sum(kv[1])):
        gbs = f'{read[key] / (sum(v) * 1e3):6.0f} GB/s' if read else ''
        v.sort()
        print(f'{len(v):5d} x {v[len(v) // 2]:8.2f} us (min {v[0]:7.2f})  {100 * sum(v) / total:5.1f} %'
              f' {gbs}  {key[0]} grid{key[1]}')


if __name__ == '__main__':
    main(sys.argv[1])
