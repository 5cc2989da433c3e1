#!/usr/bin/env python3
"""tools/check_layers.py — fails on an #include that points up the layers (run by ctest).

src/ is layered, lowest first: ir, transforms, ops, passes, runtime, backend, frontend,
train. A source may include headers of its own layer and of those below it, and the public
headers (include/rlx) from anywhere. The public headers and the downstream packages
(libs/, examples/, python/), built as a user's code is, include no private header at all.

DEBTS lists the upward includes still to be removed. The check also fails when one of them
is gone (delete its line then), so the list only shrinks.
"""
import os
import re
import sys

LAYERS = ['ir', 'transforms', 'ops', 'passes', 'runtime', 'backend', 'frontend', 'train']
PUBLIC_ONLY = ['include', 'libs', 'examples', 'python']
# (file, included header) pairs allowed for now; empty: no upward include is left.
DEBTS = set()

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')
SOURCES = ('.h', '.hpp', '.cpp', '.cc', '.cu', '.cuh')


def includes(path):
    with open(path, errors='replace') as f:
        for line in f:
            m = INCLUDE.match(line)
            if m:
                yield m.group(1)


def sources(top):
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith('.') and d != 'build']
        for name in sorted(files):
            if name.endswith(SOURCES):
                yield os.path.join(root, name)


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad, seen, files = [], set(), 0
    for layer in LAYERS:
        for path in sources(os.path.join('src', layer)):
            files += 1
            for inc in includes(path):
                top = inc.split('/', 1)[0]
                if top in rank and rank[top] > rank[layer]:
                    if (path, inc) in DEBTS:
                        seen.add((path, inc))
                    else:
                        bad.append(f'{path}: includes "{inc}" ({top} is above {layer})')
    for top in PUBLIC_ONLY:
        for path in sources(top):
            files += 1
            for inc in includes(path):
                if inc.split('/', 1)[0] in rank:
                    bad.append(f'{path}: includes the private header "{inc}" (public API only)')
    for path, inc in sorted(DEBTS - seen):
        bad.append(f'{path} no longer includes "{inc}": delete its DEBTS entry')
    if bad:
        print('\n'.join(['layering (tools/check_layers.py):'] + bad))
        return 1
    print(f'{files} files: every include points down the layers ({len(DEBTS)} known debts)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
