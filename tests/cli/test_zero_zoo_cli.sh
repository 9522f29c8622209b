#!/usr/bin/env bash
# ZeRO 1 and 3 on every training variant of the zoo (TorchScript and
# dynamo exports): `ccgraph shard --mesh dp=2,tp=2 --zero Z`, `ccgraph
# grad`, `ccgraph verify` of both, and `ccgraph run --check --rtol 1e-4`:
# every rank's outputs and its dp shard of every parameter gradient equal
# the unsharded model's full-batch ones. test_hybrid_cli.sh runs the same
# variants without ZeRO on all three meshes.
# usage: test_zero_zoo_cli.sh PATH/TO/ccgraph SOURCE_DIR WORK_DIR
set -u
tool=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
run=("$tool")
. "$(dirname "$0")/expect.sh"
. "$(dirname "$0")/hybrid_lib.sh"

# args: TAG MODEL GRAD_REF INPUTS PLAN (each_zoo_variant)
zero_1_and_3() {
  local zero
  for zero in 1 3; do
    hybrid "${1}_z$zero" "$2" "$3" loss "$4" --plan "$5" --mesh dp=2,tp=2 --zero $zero
  done
}
each_zoo_variant zero_1_and_3
expect_summary "cli zero zoo"
