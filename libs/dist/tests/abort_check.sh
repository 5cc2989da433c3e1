#!/bin/sh
# abort_check.sh ABORT_TEST MPIRUN... — a rank that throws must end a 2-rank job within
# seconds (no hang), non-zero, with its error on stderr; both through run_or_abort and
# through an uncaught exception.
bin=$1; shift
for mode in guarded uncaught; do
  log=$(mktemp)
  start=$(date +%s)
  timeout 60 "$@" -np 2 "$bin" $mode >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  echo "== $mode: rc=$rc after ${secs}s"
  cat "$log"
  if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then echo "FAIL: expected a non-zero exit before the timeout"; exit 1; fi
  if [ $secs -gt 15 ]; then echo "FAIL: the job took ${secs}s to end (limit 15s)"; exit 1; fi
  grep -q "deliberate failure on rank 1" "$log" || { echo "FAIL: the error is not in the output"; exit 1; }
  if grep -q "returned, which it must not" "$log"; then echo "FAIL: a collective completed"; exit 1; fi
  rm -f "$log"
done
echo "PASS"
