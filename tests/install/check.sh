#!/bin/sh
# rlx as a user gets it, checked from outside the tree (ctest label install):
#
#   tests/install/check.sh install BUILD_DIR WORK_DIR VERSION   # cmake --install BUILD_DIR
#   tests/install/check.sh deb RLX.deb WORK_DIR VERSION         # dpkg -x of the package
#
# Either way, from the prefix alone: `rlx --version`, librlx found beside the CLI (not in
# the build tree), pkg-config's view, and tests/install/consumer configured with
# find_package(rlx CONFIG REQUIRED), built with Ninja and run on an ONNX model.
set -eu
mode=$1 from=$2 work=$3 version=$4
here=$(cd "$(dirname "$0")" && pwd)
model=$here/../data/onnx/mlp

rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
start=$(date +%s)
case $mode in
  install)
    prefix=$work/prefix
    cmake --install "$from" --prefix "$prefix" >"$work/install.log"
    ;;
  deb)
    dpkg -x "$from" "$work/root"
    prefix=$work/root/usr
    echo "check: $(dpkg-deb -f "$from" Package Version Architecture | tr '\n' ' ')"
    echo "check: Depends: $(dpkg-deb -f "$from" Depends)"
    ;;
  *) echo "usage: $0 install|deb FROM WORK VERSION" >&2; exit 2 ;;
esac
echo "check: $mode into $prefix in $(($(date +%s) - start)) s"

got=$("$prefix/bin/rlx" --version)
[ "$got" = "rlx $version" ] || { echo "check: rlx --version said '$got', expected 'rlx $version'"; exit 1; }
echo "check: $got"
# The installed CLI loads the installed librlx ($ORIGIN in its RUNPATH).
ldd "$prefix/bin/rlx" | grep 'librlx' | while read -r name _ path _; do
  case $path in
    "$prefix"/*) ;;
    *) echo "check: $name resolved to $path, outside $prefix"; exit 1 ;;
  esac
done

if command -v pkg-config >/dev/null; then
  pc=$(find "$prefix" -name rlx.pc)
  export PKG_CONFIG_PATH
  PKG_CONFIG_PATH=$(dirname "$pc")
  [ "$(pkg-config --modversion rlx)" = "$version" ] || { echo "check: pkg-config --modversion rlx"; exit 1; }
  echo "check: pkg-config rlx: $(pkg-config --cflags --libs rlx-onnx)"
  # The flags build a program (rlx/version.h alone: a quick compile). pkg-config quotes
  # its output for a shell (RLX_VERSION is a string): eval, as make's shell does.
  printf '#include <cstdio>\n#include "rlx/version.h"\nint main() { std::printf("%%s %%s\\n", RLX_VERSION, rlx::version()); }\n' >"$work/pc.cpp"
  eval c++ -std=c++20 "$work/pc.cpp" -o "$work/pc" "$(pkg-config --cflags --libs rlx)" \
    -Wl,-rpath,"$(pkg-config --variable=libdir rlx)"
  [ "$("$work/pc")" = "$version $version" ] || { echo "check: the pkg-config program says $("$work/pc")"; exit 1; }
else
  echo "check: no pkg-config here; rlx.pc not checked"
fi

launcher=""
if command -v ccache >/dev/null; then launcher=-DCMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
start=$(date +%s)
cmake -S "$here/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON \
  -DRLX_EXPECTED_PREFIX="$prefix" $launcher >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
grep 'rlx ' "$work/configure.log" || true
cmake --build "$work/consumer"
echo "check: consumer configured and built in $(($(date +%s) - start)) s"
"$work/consumer/consumer" "$model/model.onnx" "$model/test_data_set_0/input_0.pb" \
  "$model/test_data_set_0/output_0.pb"
rm -rf "$work"
