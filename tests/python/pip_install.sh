#!/bin/sh
# The README's install, checked: `pip wheel --no-build-isolation .` from a fresh copy of
# the source tree (what a clone holds), the wheel installed into a venv, then `import rlx`
# from another directory. ctest runs it (test python_pip_install, label python).
#
#   tests/python/pip_install.sh SOURCE_DIR WORK_DIR [PYTHON]
#
# The copy builds in its own ./build, from scratch. ccache makes that cheap (about 30 s on
# 2 cores) when the main build went through ccache with CCACHE_BASEDIR set (the Makefile
# sets it): object files are then keyed by paths relative to the build dir, the same in
# the copy. Otherwise the copy compiles everything once (minutes), cached afterwards.
# RLX_SKIP_PIP_INSTALL_TEST=1 skips it (exit 77: ctest says "skipped"), for a CI without
# ccache where the second build would double the build time.
set -eu
if [ "${RLX_SKIP_PIP_INSTALL_TEST:-0}" = 1 ]; then
  echo "SKIP: RLX_SKIP_PIP_INSTALL_TEST=1"
  exit 77
fi
src=$(cd "$1" && pwd)
work=$2
python=${3:-/usr/bin/python3}

rm -rf "$work"
mkdir -p "$work/src" "$work/elsewhere"
work=$(cd "$work" && pwd)

# The tree a clone holds: tracked files and untracked ones git does not ignore.
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z --cached --others --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$work/src"
else
  echo "pip_install: $src is not a git checkout; copying it without build dirs"
  tar -C "$src" --exclude='./build*' --exclude='./.git' -cf - . | tar -xf - -C "$work/src"
fi

export CCACHE_BASEDIR="$work/src" CCACHE_NOHASHDIR=1
export JOBS="${JOBS:-$(nproc)}"
unset RLX_BUILD_DIR PYTHONPATH

# A venv over Debian's python3 with its site packages (NumPy, setuptools): Debian's own
# python3 refuses `pip install` into the system (PEP 668).
"$python" -m venv --system-site-packages "$work/venv"
start=$(date +%s)
# `pip wheel .`, then the wheel installed: the module and the libraries it loads
# (librlx.so.*, beside it) travel in the wheel; the source tree and its build are gone
# before the import.
(cd "$work/src" && "$work/venv/bin/python" -m pip wheel -q --no-build-isolation --no-index \
  --no-deps -w "$work/wheel" .)
wheel=$(ls "$work"/wheel/rlx-*.whl)
echo "pip_install: $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) built in $(($(date +%s) - start)) s"
"$work/venv/bin/python" -m pip install -q --no-index "$wheel"
rm -rf "$work/src"

cd "$work/elsewhere"
"$work/venv/bin/python" - "$work/venv" <<'EOF'
import importlib.metadata, pathlib, sys

import numpy as np
import rlx

venv = pathlib.Path(sys.argv[1]).resolve()
where = pathlib.Path(rlx.__file__).resolve()
assert venv in where.parents, f"rlx imported from {where}, not from the venv {venv}"
assert rlx.__version__ == importlib.metadata.version("rlx"), (
    rlx.__version__, importlib.metadata.version("rlx"))
# the compiled module works: a gradient through a compiled graph
# librlx from the wheel (beside the module), not from a build tree or the system
maps = pathlib.Path("/proc/self/maps").read_text().splitlines()
libs = {line.split()[-1] for line in maps if "/librlx" in line}
assert libs and all(venv in pathlib.Path(p).parents for p in libs), libs
dx = rlx.grad(lambda x: rlx.sum(x * x * x))(np.arange(3.0))
np.testing.assert_allclose(dx, [0.0, 3.0, 12.0])
print("pip_install: import rlx", rlx.__version__, "from", where.parent)
EOF
rm -rf "$work"
