#!/usr/bin/env python3
"""tools/check_links.py OBJECT... — fails on a call that points up the layers (run by ctest).

check_layers.py holds the includes to the layering of src/ (lowest first: ir, transforms,
ops, passes, runtime, backend, frontend, train); a call can still point up through a
declaration in a public header. This check reads librlx's object files (ctest passes
$<TARGET_OBJECTS:rlx>): every symbol an object of layer L leaves undefined and an object of
a layer above L defines (strongly: inline and template code, defined weakly wherever it is
used, does not count) is a link that points up.

DEBTS lists the (source, layer above) pairs still to be removed. The check also fails when
one of them is gone (delete its line then), so the list only shrinks.

It also fails on a call from code of one CPU instruction-set level (or from outside the
kernels) to a symbol only a higher level defines (level_problems), which would run, say,
AVX-512 code on a CPU without it; the levels' own namespaces keep rlx's code apart, and
this watches what they share (library templates).
"""
import os
import re
import subprocess
import sys

LAYERS = ['ir', 'transforms', 'ops', 'passes', 'runtime', 'backend', 'frontend', 'train']
# (source under src/, the layer above it that it calls into) pairs allowed for now.
DEBTS = {
    # Graph::apply / apply1 / constant by op name look ops up in OpRegistry::global(), which
    # registers the core ops; the transforms (below ops) build by name through them. Moving
    # the registry down needs the core ops handed to it at start-up, and a static link does
    # not order that before other static initialisers' lookups.
    ('ir/graph.cpp', 'ops'),
}

SOURCE = re.compile(r'/src/([a-z_]+)/(.+?)\.o(bj)?$')
# The CPU kernels' objects of each instruction-set level (CMake's rlx_cpu_<level>); code
# outside them, and a native build's, is rank 0.
LEVEL = re.compile(r'/rlx_cpu_([a-z0-9]+)\.dir/')
LEVEL_RANK = {'baseline': 1, 'avx2': 2, 'avx512': 3}
# What backend/cpu/isa.cpp calls in each level, having checked the CPU has it.
LEVEL_ENTRY = re.compile(r'^rlx::cpu::(baseline|avx2|avx512)::(register_all|layout_rows)\(')


def symbols(obj, flags):
    out = subprocess.run(['nm', '-C'] + flags + [obj], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith('U '):  # undefined: no address
            yield 'U', line[2:]
            continue
        parts = line.split(' ', 2)
        if len(parts) == 3:
            yield parts[1], parts[2]


def level_problems(objects):
    """Calls that reach code built for a higher instruction-set level than the caller's: a
    symbol (inline and template code included) that only objects of higher levels define
    runs their instructions on a CPU that may lack them."""
    def level(obj):
        m = LEVEL.search(obj)
        return LEVEL_RANK.get(m.group(1), 0) if m else 0
    lowest = {}  # symbol -> the lowest level that defines it
    for obj, _, _ in objects:
        for kind, name in symbols(obj, ['--defined-only', '-g']):
            lowest[name] = min(lowest.get(name, 9), level(obj))
    bad = set()
    for obj, _, source in objects:
        for kind, name in symbols(obj, ['-u']):
            if kind == 'U' and lowest.get(name, 0) > level(obj) and not LEVEL_ENTRY.match(name):
                bad.add(f'{source} (level {level(obj)}) calls {name}, defined only at level '
                        f'{lowest[name]}')
    return sorted(bad)


def main():
    rank = {name: i for i, name in enumerate(LAYERS)}
    objects = []
    for obj in sys.argv[1:]:
        m = SOURCE.search(obj)
        if m and m.group(1) in rank:
            objects.append((obj, m.group(1), f'{m.group(1)}/{m.group(2)}'))
    if not objects:
        print('check_links: expected librlx object files under src/<layer>/, got none')
        return 1
    defined = {}  # strong symbol -> layer that defines it
    for obj, layer, _ in objects:
        for kind, name in symbols(obj, ['--defined-only', '-g']):
            if kind in 'TDBR':
                defined.setdefault(name, layer)
    found = {}
    for obj, layer, source in objects:
        for kind, name in symbols(obj, ['-u']):
            owner = defined.get(name)
            if kind == 'U' and owner and rank[owner] > rank[layer]:
                found.setdefault((source, owner), name)
    bad = [f'{s} calls into {l} ({sym})' for (s, l), sym in sorted(found.items())
           if (s, l) not in DEBTS]
    bad += [f'{s} no longer calls into {l}: delete its DEBTS line' for s, l in sorted(DEBTS)
            if (s, l) not in found]
    bad += level_problems(objects)
    for line in bad:
        print(line)
    print(f'{len(objects)} objects: {len(found)} links point up the layers '
          f'({len(DEBTS)} known debts), {len(bad)} problems')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
