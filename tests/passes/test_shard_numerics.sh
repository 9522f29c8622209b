#!/usr/bin/env bash
# The shard pass on the GPT-style sample (separate and fused QKV, with and
# without sequence parallel, tp=2 and 4; Ulysses around the attention core
# with sequence parallel): every rank's logits equal the unsharded model's
# run by the same executor within 1e-5.
# usage: test_shard_numerics.sh SHARD_PLAN SOURCE_DIR WORK_DIR
# (SHARD_PLAN: the samples/shard_plan program)
set -eu
check=$1 src=$2 work=$3
mkdir -p "$work"
/usr/bin/python3 "$src/samples/make_gpt_block.py" "$work/gpt.onnx" >/dev/null
/usr/bin/python3 "$src/samples/make_gpt_block.py" "$work/gpt_fused.onnx" --fused-qkv >/dev/null
for m in gpt gpt_fused; do
  for tp in 2 4; do
    "$check" "$work/$m.onnx" "$src/samples/plan_gpt_block.json" --mesh tp=$tp
    "$check" "$work/$m.onnx" "$src/samples/plan_gpt_block.json" --mesh tp=$tp --sequence-parallel
  done
done
/usr/bin/python3 "$src/samples/make_gpt_block.py" "$work/gpt_core.onnx" --core-scope >/dev/null
for tp in 2 4; do
  "$check" "$work/gpt_core.onnx" "$src/samples/plan_gpt_ulysses.json" --mesh tp=$tp --sequence-parallel
done
