#!/usr/bin/env bash
# ccgraph plan on the GPT-style sample (separate and fused QKV): the
# proposed plan is valid against schemas/plan.schema.json, shards the
# model exactly as samples/plan_gpt_block.json does (the rank models are
# byte-identical), and the sharded ranks run equal to the unsharded model
# (tp=2 and tp=4, and tp=2 with sequence parallel) and pass verify. A mesh
# that divides no heads, or a model that is no transformer, gives exit 2
# and an empty plan, naming why.
# With a WRAPPER (valgrind ...), the plan commands run under it.
# usage: test_plan_cli.sh PATH/TO/ccgraph SOURCE_DIR WORK_DIR [WRAPPER...]
set -u
tool=$1 src=$2 work=$3
shift 3
plan_run=("$@" "$tool")
rm -rf "$work" && mkdir -p "$work"
py=/usr/bin/python3
gen=$src/samples/make_gpt_block.py
sample=$src/samples/plan_gpt_block.json
run=("${plan_run[@]}")
. "$(dirname "$0")/expect.sh"

$py "$gen" "$work/gpt.onnx" >/dev/null || exit 1
$py "$gen" "$work/gpt_fused.onnx" --fused-qkv >/dev/null || exit 1
$py - "$work" <<'PY' || exit 1
import sys, numpy as np, onnx
from onnx import TensorProto, helper
w = sys.argv[1]
np.save(f"{w}/ids.npy", (np.arange(16).reshape(2, 8) * 7 % 50).astype(np.int64))
# no projection, Softmax or embedding: nothing a plan could shard
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["s"], name="/add/Add"),
                       helper.make_node("Relu", ["s"], ["y"], name="/act/Relu")],
                      "no_transformer", [x], [y])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, f"{w}/relu.onnx")
PY

# the plan itself: text (a line per entry saying which nodes matched)
expect 0 "h\.\*\.attn\.q_proj +colwise +attention input projection: MatMul '/h.0/attn/q_proj/MatMul' \[64x64\] gives q of Softmax '/h.0/attn/Softmax'" -- \
  plan "$work/gpt.onnx" --mesh tp=2
expect 0 "h\.\*\.mlp\.fc2 +rowwise +MLP output projection: MatMul '/h.0/mlp/fc2/MatMul' \[256x64\] reads Erf" -- \
  plan "$work/gpt.onnx" --mesh tp=2
expect 0 "2 attention blocks \(4 heads\), 2 MLPs \(ffn 256\), word embeddings \(vocabulary 128\), LM head" -- \
  plan "$work/gpt.onnx" --mesh tp=4
expect 0 "h\.\*\.attn\.qkv +colwise +attention input projection: .*gives q, k and v" -- \
  plan "$work/gpt_fused.onnx" --mesh tp=4
expect 0 "h\.\*\.ln_1 +sequence_parallel" -- plan "$work/gpt.onnx" --mesh tp=2 --sequence-parallel
expect 0 "wrote $work/written.json" -- plan "$work/gpt.onnx" --mesh tp=2 -o "$work/written.json"

for m in gpt gpt_fused; do
  for sp in "" --sequence-parallel; do
    p=$work/${m}${sp:+_sp}.plan.json
    if ! "${run[@]}" plan "$work/$m.onnx" --mesh tp=2 --json $sp >"$p"; then
      echo "FAIL: plan $m $sp"; failures=$((failures + 1))
    fi
  done
done
if ! cmp -s "$work/written.json" "$work/gpt.plan.json"; then
  echo "FAIL: -o and --json differ"; failures=$((failures + 1))
fi
$py - "$src/schemas/plan.schema.json" "$work"/*.plan.json <<'PY' || failures=$((failures + 1))
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
for path in sys.argv[2:]:
    jsonschema.validate(json.load(open(path)), schema)
print(f"{len(sys.argv) - 2} proposed plans valid against the schema")
PY

# equivalent to the sample plan: the same rank models, byte for byte; and
# the ranks equal the unsharded model (shard, run and verify unwrapped)
run=("$tool")
for m in gpt gpt_fused; do
  for cfg in "2" "4" "2 --sequence-parallel"; do
    set -- $cfg
    tp=$1 sp=${2:-}
    out=$work/${m}_tp${tp}${sp:+_sp}
    expect 0 "wrote .*rank0.onnx" -- shard "$work/$m.onnx" --plan "$work/${m}${sp:+_sp}.plan.json" \
      --mesh tp=$tp -o "$out" $sp
    "$tool" shard "$work/$m.onnx" --plan "$sample" --mesh tp=$tp -o "$out.sample" $sp >/dev/null
    for f in "$out"/*.onnx; do
      if ! cmp -s "$f" "$out.sample/$(basename "$f")"; then
        echo "FAIL: $f differs from the sample plan's"; failures=$((failures + 1))
      fi
    done
    expect 0 "max \|diff\| [0-9.e-]+ \(tolerance 0.0001\): ok" -- \
      run "$out" --input ids="$work/ids.npy" --check "$work/$m.onnx"
    expect 0 "^ok: $tp ranks" -- verify "$out"
  done
done

# a mesh that divides some parts: those are left out, said on stderr
run=("${plan_run[@]}")
expect 0 "h.0.attn.q_proj .*head count 4 is not divisible by tp=8" -- plan "$work/gpt.onnx" --mesh tp=8 --json
# bad inputs
expect 2 "nothing can be sharded on tp=3, the plan is empty: .*head count 4 is not divisible by tp=3 \(attention input projection 'h.0.attn.q_proj'\)" -- \
  plan "$work/gpt.onnx" --mesh tp=3
expect 2 "^\{\}$" -- plan "$work/gpt.onnx" --mesh tp=3 --json
expect 2 "relu.onnx: plan: not transformer-shaped: .*the plan is empty" -- plan "$work/relu.onnx" --mesh tp=2
expect 2 "axis 'tp' is not in the mesh dp=2" -- plan "$work/gpt.onnx" --mesh dp=2
expect 2 "nope.onnx" -- plan "$work/nope.onnx" --mesh tp=2
expect 2 "mesh" -- plan "$work/gpt.onnx" --mesh tp=0
expect 1 "--mesh is required" -- plan "$work/gpt.onnx"
expect 1 "missing the MODEL.onnx" -- plan --mesh tp=2
expect 0 "usage: ccgraph plan" -- plan --help
expect_summary plan
