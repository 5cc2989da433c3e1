#!/bin/sh
# tests/isa/run_level.sh LEVEL COMMAND... — runs COMMAND with the CPU kernels at LEVEL
# (RLX_CPU_ISA), or skips (exit 77, saying why) where this CPU lacks the level. The
# default runs of the suite take the best level; these run the others' kernels too.
level=$1
shift
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
need() {
  for f in "$@"; do
    case "$flags" in
      *" $f "*) ;;
      *) echo "SKIP: this CPU has no $f, so level $level cannot run here"; exit 77 ;;
    esac
  done
}
case "$level" in
  baseline) need sse4_2 popcnt ;;
  avx2) need avx2 fma f16c bmi2 ;;
  avx512) need avx512f avx512bw avx512cd avx512dq avx512vl avx512_vnni ;;
  *) echo "run_level: expected baseline, avx2 or avx512, got '$level'"; exit 2 ;;
esac
RLX_CPU_ISA=$level exec "$@"
