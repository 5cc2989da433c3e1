#!/bin/sh
# One corpus model through `rlx run --data` (ctest's onnx_corpus_<name>).
#   run_model.sh RLX CORPUS_DIR NAME EXPECTED_FAILURES
# Exits 77 (a skip) when the corpus has no complete NAME (onnx_corpus_generate skipped or
# failed). A model listed in EXPECTED_FAILURES ("name  reason" lines) must still import,
# run and reach the comparison, with every output within 1e-4 of its range of ORT's (the
# issue's bar for f32 models); it fails when it matches at the default tolerance (XPASS:
# take it off the list), as tests/onnx/expected_failures.txt works.
rlx=$1 dir=$2/$3 name=$3 xfail_file=$4
if [ ! -f "$dir/stamp" ]; then
  echo "SKIP: no $dir (onnx_corpus_generate did not make it; see its output)"
  exit 77
fi
reason=$(awk -v n="$name" '$1 == n { $1 = ""; sub(/^ +/, ""); print; exit }' "$xfail_file")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# A quantized model's tolerance (make_corpus.py: a multiple of ORT's spread against itself).
tol=
[ -f "$dir/range_tol" ] && tol="--range-tol $(cat "$dir/range_tol")"
"$rlx" run "$dir/model.onnx" --data "$dir/test_data_set_0" --runs 0 --show 0 $tol >"$log" 2>&1
rc=$?
cat "$log"
if [ -z "$reason" ]; then exit $rc; fi
if [ $rc -eq 0 ]; then
  echo "XPASS: $name matches ONNX Runtime now; take it off $xfail_file"
  exit 1
fi
# "  NAME  max abs err E (S of range R), ...": S is the error's share of the output's range.
if ! grep -q "max abs err" "$log"; then
  echo "FAIL: $name (expected to fail only the comparison: $reason) did not reach it"
  exit 1
fi
worst=$(sed -n 's/.*max abs err [^ ]* (\([^ ]*\) of range.*/\1/p' "$log" | sort -g | tail -n 1)
if awk -v s="$worst" 'BEGIN { exit !(s + 0 <= 1e-4) }'; then
  echo "XFAIL: $name: $reason (largest error $worst of its output's range)"
  exit 0
fi
echo "FAIL: $name: an output is off by $worst of its range (listed for: $reason)"
exit 1
