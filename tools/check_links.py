#!/usr/bin/env python3
"""tools/check_links.py MANIFEST — fails on a link that points up the layers (run by ctest).

CMake builds librlx from one OBJECT library per layer of src/ (CMakeLists.txt; lowest
first: ir, transforms, ops, passes, runtime, backend, frontend, train; the backend's are
rlx_backend_cpu, the kernels' rlx_cpu_<level>, rlx_backend_cuda and rlx_backend) and writes
MANIFEST (rlx_layers-<config>.txt in the build tree): a line per OBJECT library with its
layer, its name, the targets it links and its object files. check_layers.py holds the
includes to the layering; a call can still point up through a declaration in a public
header. This check fails on
- a layer's library that links a library of a layer above it;
- an object of a library that is not its layer's (a source in the wrong library);
- a symbol an object of layer L leaves undefined that only objects of layers above L
  define (rlx's own symbols; those of other libraries do not count).

DEBTS lists the (source, layer above) pairs still to be removed. The check also fails when
one of them is gone (delete its line then), so the list only shrinks.

It also fails on a call from code of one CPU instruction-set level (or from outside the
kernels) to a symbol only a higher level defines (level_problems), which would run, say,
AVX-512 code on a CPU without it; the levels' own namespaces keep rlx's code apart, and
this watches what they share (library templates).
"""
import concurrent.futures
import os
import re
import subprocess
import sys

LAYERS = ['ir', 'transforms', 'ops', 'passes', 'runtime', 'backend', 'frontend', 'train']
# (source under src/, the layer above it that it calls into) pairs allowed for now.
DEBTS = set()  # none left: keep it empty

# An object's source: its path under the OBJECT library's directory, less CMake's '.o'.
SOURCE = re.compile(r'\.dir/(?:\./)?(?:src/)?(.+?)\.o(bj)?$')
# The CPU kernels' libraries, one per instruction-set level (CMake's rlx_cpu_<level>); code
# outside them, and a native build's, is rank 0.
LEVEL = re.compile(r'^rlx_cpu_([a-z0-9]+)$')
LEVEL_RANK = {'baseline': 1, 'avx2': 2, 'avx512': 3}
# What backend/cpu/isa.cpp calls in each level, having checked the CPU has it.
LEVEL_ENTRY = re.compile(r'^rlx::cpu::(baseline|avx2|avx512)::(register_all|layout_rows)\(')


class Object:
    def __init__(self, path, layer, target):
        self.path, self.layer, self.target = path, layer, target
        m = SOURCE.search(path)
        self.source = m.group(1) if m else os.path.basename(path)
        m = LEVEL.match(target)
        self.level = LEVEL_RANK.get(m.group(1), 0) if m else 0
        self.defined, self.undefined = set(), set()

    def read_symbols(self):
        out = subprocess.run(['nm', '-C', '-g', self.path], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            line = line.strip()
            if line.startswith('U '):  # undefined: no address
                self.undefined.add(line[2:])
                continue
            parts = line.split(' ', 2)
            if len(parts) == 3:  # defined (weakly too: inline and template code)
                self.defined.add(parts[2])
        return self


def read_manifest(path):
    """The OBJECT libraries as (layer, target, linked targets) and their objects."""
    libraries, objects = [], []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            layer, target, links, objs = line.rstrip('\n').split('\t')
            libraries.append((layer, target, [t for t in links.split(';') if t]))
            objects += [Object(o, layer, target) for o in objs.split(';') if o]
    return libraries, objects


def library_problems(libraries, rank):
    layer_of = {target: layer for layer, target, _ in libraries}
    bad = [f'{target}: layer {layer} is not one of {", ".join(LAYERS)}'
           for layer, target, _ in libraries if layer not in rank]
    bad += [f'no library of layer {layer}' for layer in LAYERS
            if layer not in layer_of.values()]
    for layer, target, links in libraries:
        for t in links:
            if t in layer_of and rank.get(layer_of[t], 0) > rank.get(layer, 0):
                bad.append(f'{target} ({layer}) links {t}, of the layer above ({layer_of[t]})')
    return bad


def lowest_definer(objects, rank_of):
    """symbol -> the lowest rank_of(object) among the objects that define it."""
    lowest = {}
    for o in objects:
        r = rank_of(o)
        for name in o.defined:
            if name not in lowest or r < lowest[name]:
                lowest[name] = r
    return lowest


def upward_links(objects, rank):
    """{(source, higher layer): a symbol}: what an object leaves undefined that only objects
    of layers above its own define."""
    lowest = lowest_definer(objects, lambda o: rank[o.layer])
    found = {}
    for o in objects:
        for name in sorted(o.undefined):
            if lowest.get(name, -1) > rank[o.layer]:
                found.setdefault((o.source, LAYERS[lowest[name]]), name)
    return found


def level_problems(objects):
    """Calls that reach code built for a higher instruction-set level than the caller's: a
    symbol (inline and template code included) that only objects of higher levels define
    runs their instructions on a CPU that may lack them."""
    lowest = lowest_definer(objects, lambda o: o.level)
    bad = set()
    for o in objects:
        for name in o.undefined:
            if lowest.get(name, 0) > o.level and not LEVEL_ENTRY.match(name):
                bad.add(f'{o.source} (level {o.level}) calls {name}, defined only at level '
                        f'{lowest[name]}')
    return sorted(bad)


def main():
    if len(sys.argv) != 2:
        print('usage: check_links.py MANIFEST (rlx_layers-<config>.txt of a build tree)')
        return 2
    rank = {name: i for i, name in enumerate(LAYERS)}
    libraries, objects = read_manifest(sys.argv[1])
    bad = library_problems(libraries, rank)
    if not objects or bad:
        print('\n'.join(bad or ['check_links: the manifest names no object files']))
        return 1
    # A source under src/<layer>/ belongs to that layer's library.
    for o in objects:
        top = o.source.split('/', 1)[0]
        if top in rank and top != o.layer:
            bad.append(f'{o.source} is built in {o.target}, of layer {o.layer}, not {top}')
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        list(pool.map(Object.read_symbols, objects))
    found = upward_links(objects, rank)
    bad += [f'{s} calls into {l} ({sym})' for (s, l), sym in sorted(found.items())
            if (s, l) not in DEBTS]
    bad += [f'{s} no longer calls into {l}: delete its DEBTS line' for s, l in sorted(DEBTS)
            if (s, l) not in found]
    bad += level_problems(objects)
    for line in bad:
        print(line)
    print(f'{len(libraries)} libraries, {len(objects)} objects: {len(found)} links point up '
          f'the layers ({len(DEBTS)} known debts), {len(bad)} problems')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
