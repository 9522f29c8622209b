#!/bin/bash
# The conformance runner must notice a wrong answer: a copy of the Relu node
# test passes, the same test with its expected output replaced by its input
# (negative values where Relu gives 0) fails, named with its first mismatch.
# usage: exec_conformance_detects.sh EXEC_CONFORMANCE NODE_TEST_DIR
set -u
runner=$1 nodes=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$nodes/test_relu" "$work/test_relu"
out=$("$runner" "$work" relu) || { echo "FAIL: untouched copy: $out"; exit 1; }
grep -qx 'conformance: 1 passed, 0 failed, 0 unsupported' <<<"$out" ||
  { echo "FAIL: untouched copy: $out"; exit 1; }
cp "$work/test_relu/test_data_set_0/input_0.pb" \
   "$work/test_relu/test_data_set_0/output_0.pb"
if out=$("$runner" "$work" relu); then
  echo "FAIL: a wrong expected output passed: $out"; exit 1
fi
grep -q 'FAIL test_relu: test_data_set_0: output .y. .*first mismatch at index' <<<"$out" &&
  grep -qx 'conformance: 0 passed, 1 failed, 0 unsupported' <<<"$out" ||
  { echo "FAIL: mismatch not reported: $out"; exit 1; }
echo "ok: the runner reports a wrong output"
