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
    for line in bad:
        print(line)
    print(f'{len(objects)} objects: {len(found)} links point up the layers '
          f'({len(DEBTS)} known debts), {len(bad)} problems')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
