#!/bin/sh
# tools/check_format.sh — fails (listing the files) when a tracked C++ / CUDA source differs
# from what clang-format makes of it with the repo's .clang-format; `make format` fixes
# them. Run by ctest (format_check); skips (77) where clang-format or git is missing.
cd "$(dirname "$0")/.." || exit 1
command -v clang-format >/dev/null || { echo "SKIP: no clang-format"; exit 77; }
git rev-parse --git-dir >/dev/null 2>&1 || { echo "SKIP: not a git checkout"; exit 77; }
bad=$(git ls-files -z '*.h' '*.cpp' '*.cu' '*.cuh' |
  xargs -0 clang-format --dry-run 2>&1 | sed -n 's/^\(.*\):[0-9]*:[0-9]*: warning: .*/\1/p' |
  sort -u)
if [ -n "$bad" ]; then
  echo "not clang-formatted (make format fixes them):"
  echo "$bad"
  exit 1
fi
echo "$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | wc -l) files clang-formatted"
