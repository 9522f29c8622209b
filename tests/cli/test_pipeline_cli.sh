#!/usr/bin/env bash
# Pipeline parallelism through the tool: `ccgraph shard --mesh pp=P[,tp=T]`
# on the zoo's llama and gpt2 training variants (2 layers, batch 2) and on
# the samples' GPT (4 layers, batch 4), with 1, 2 and 4 microbatches under
# GPipe and 1F1B; `ccgraph grad` of the stage program; `ccgraph verify`
# proves its sends, receives and collectives match; `ccgraph run --check`
# compares the last stage's outputs and every stage's parameter gradients
# with the unsharded model's (tolerance 1e-4); `ccgraph cost` reports the
# bubble fraction; the rank models pass onnx.checker; bad input gives exit
# 1 or 2 naming the fault.
# usage: test_pipeline_cli.sh PATH/TO/ccgraph SOURCE_DIR WORK_DIR
set -u
tool=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
py=/usr/bin/python3
run=("$tool")
. "$(dirname "$0")/expect.sh"

ok='max \|diff\| [0-9.e-]+ \(tolerance 0.0001\): ok'

# shard -> verify -> run --check (forward) -> grad -> verify -> run --check
# (gradients). args: NAME MODEL GRAD_REF LOSS INPUTS SHARD_ARGS...
pipeline() {
  local name=$1 model=$2 ref=$3 loss=$4 inputs=$5
  shift 5
  local out=$work/$name
  expect 0 'wrote .*rank0.onnx' -- shard "$model" "$@" -o "$out"
  expect 0 '^ok: ' -- verify "$out"
  expect 0 "$ok" -- run "$out" $inputs --check "$model"
  expect 0 'models written' -- grad "$out" --loss "$loss" -o "$out.grad"
  expect 0 '^ok: ' -- verify "$out.grad"
  expect 0 "$ok" -- run "$out.grad" $inputs --check "$ref"
}

# the same with each tensor compared relative to its largest element
# (--rtol 1e-4): summed losses have gradients of larger scale
rel='per tensor [0-9.e+-]+: ok'
pipeline_rel() {
  local name=$1 model=$2 ref=$3 loss=$4 inputs=$5
  shift 5
  local out=$work/$name
  expect 0 'wrote .*rank0.onnx' -- shard "$model" "$@" -o "$out"
  expect 0 "$rel" -- run "$out" $inputs --check "$model" --rtol 1e-4
  expect 0 'models written' -- grad "$out" --loss "$loss" -o "$out.grad"
  expect 0 '^ok: ' -- verify "$out.grad"
  expect 0 "$rel" -- run "$out.grad" $inputs --check "$ref" --rtol 1e-4
}

# ---- the zoo: llama (untied head), gpt2 (head tied to the embedding, sent
# from stage 0 to the last stage and its gradient back) ----
for arch in llama gpt2; do
  z=$src/tests/data/zoo/$arch/ts_train
  "$tool" grad "$z/model.onnx" --loss loss -o "$work/${arch}_ref.onnx" >/dev/null || exit 1
  in="--input input_ids=$z/inputs/input_ids.npy --input labels=$z/inputs/labels.npy"
  for sch in gpipe 1f1b; do
    for mb in 1 2; do
      pipeline "${arch}_pp2_${sch}_m$mb" "$z/model.onnx" "$work/${arch}_ref.onnx" loss \
        "$in" --mesh pp=2 --microbatches $mb --schedule $sch
    done
  done
done
# other layer names (encoder.layer.N, block.N, layer.N) and exporters,
# forward: the last stage's outputs
for v in bert/ts_train t5_encoder/ts_train vit/ts_train falcon/dynamo_train opt/dynamo_static; do
  z=$src/tests/data/zoo/$v
  in=""
  for f in "$z"/inputs/*.npy; do in="$in --input $(basename "$f" .npy)=$f"; done
  expect 0 'wrote .*rank0.onnx' -- shard "$z/model.onnx" --mesh pp=2 --microbatches 2 -o "$work/zoo_${v/\//_}"
  expect 0 "$ok" -- run "$work/zoo_${v/\//_}" $in --check "$z/model.onnx"
done
# tables made for the whole batch's tokens ([batch x sequence, hidden],
# batch outermost), as MoE routing scatters its experts' outputs into:
# each microbatch takes its rows of the table it scatters into (index_add,
# ScatterElements reduction=add) and of one it multiplies with; both tables
# differ row by row, so a wrong chunk fails the check
$py - "$work/tok.onnx" "$work/tok_x.npy" <<'PY' || exit 1
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
B, S, H = 4, 3, 8
rng = np.random.default_rng(0)
table = np.arange(B * S * H, dtype=np.float32).reshape(B * S, H) / 10
i64 = lambda v, n: nh.from_array(np.array(v, np.int64), n)
inits = [nh.from_array(rng.standard_normal((H, H)).astype(np.float32) * 0.5, "h.0.w"),
         nh.from_array(rng.standard_normal((H, H)).astype(np.float32) * 0.5, "h.1.w"),
         i64([B * S, H], "flat_shape"), i64([B, S, H], "full_shape"), i64([0], "zero"),
         i64(0, "zero_s"), i64(1, "one_s"), i64([1], "axis1")]
nodes = [
    h.make_node("MatMul", ["x", "h.0.w"], ["a"], name="/h.0/MatMul"),
    h.make_node("Tanh", ["a"], ["y0"], name="/h.0/Tanh"),
    h.make_node("Reshape", ["y0", "flat_shape"], ["flat"], name="/h.1/Reshape"),
    h.make_node("Shape", ["flat"], ["fs"], name="/h.1/Shape", start=0, end=1),
    h.make_node("Squeeze", ["fs", "zero"], ["n"], name="/h.1/Squeeze"),
    h.make_node("Range", ["zero_s", "n", "one_s"], ["rows"], name="/h.1/Range"),
    h.make_node("Unsqueeze", ["rows", "axis1"], ["rows2"], name="/h.1/Unsqueeze"),
    h.make_node("Shape", ["flat"], ["fshape"], name="/h.1/Shape_1"),
    h.make_node("Expand", ["rows2", "fshape"], ["idx"], name="/h.1/Expand"),
    h.make_node("Constant", [], ["tbl"], name="/h.1/Constant", value=nh.from_array(table, "tbl")),
    h.make_node("ScatterElements", ["tbl", "idx", "flat"], ["sc"], name="/h.1/ScatterElements",
                axis=0, reduction="add"),
    h.make_node("Constant", [], ["tbl2"], name="/h.1/Constant_1", value=nh.from_array(-table, "tbl2")),
    h.make_node("Mul", ["sc", "tbl2"], ["prod"], name="/h.1/Mul"),
    h.make_node("Reshape", ["prod", "full_shape"], ["back"], name="/h.1/Reshape_1"),
    h.make_node("MatMul", ["back", "h.1.w"], ["out"], name="/h.1/MatMul"),
]
g = h.make_graph(nodes, "tokens", [h.make_tensor_value_info("x", T.FLOAT, [B, S, H])],
                 [h.make_tensor_value_info("out", T.FLOAT, [B, S, H])], inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), sys.argv[1])
np.save(sys.argv[2], rng.standard_normal((B, S, H)).astype(np.float32))
PY
"$tool" grad "$work/tok.onnx" --loss out -o "$work/tok_ref.onnx" >/dev/null || exit 1
for mb in 2 4; do
  pipeline_rel "tok_m$mb" "$work/tok.onnx" "$work/tok_ref.onnx" out "--input x=$work/tok_x.npy" \
    --mesh pp=2 --microbatches $mb
done
# mixtral's MoE routing: the same tables per microbatch; NonZero's count
# on stage 1 is found from the received hidden state, which the program's
# Recv then takes from what the size guard received (docs/exec.md)
z=$src/tests/data/zoo/mixtral/ts_train
"$tool" grad "$z/model.onnx" --loss loss -o "$work/moe_ref.onnx" >/dev/null || exit 1
in="--input input_ids=$z/inputs/input_ids.npy --input labels=$z/inputs/labels.npy"
pipeline_rel moe_m1 "$z/model.onnx" "$work/moe_ref.onnx" loss "$in" --mesh pp=2
pipeline_rel moe_m2 "$z/model.onnx" "$work/moe_ref.onnx" loss "$in" --mesh pp=2 --microbatches 2
pipeline_rel moe_tp_m2 "$z/model.onnx" "$work/moe_ref.onnx" loss "$in" \
  --plan "$src/samples/plans/mixtral.json" --mesh pp=2,tp=2 --microbatches 2 --schedule gpipe
# three steps: each step's guard receives anew, the program takes it
expect 0 "$rel" -- run "$work/moe_m2.grad" $in --steps 3 --check "$work/moe_ref.onnx" --rtol 1e-4

# ---- dynamic-axes exports (batch and sequence symbolic): refused as they
# are, run with the symbols pinned by --dims; the zoo's dynamic variants
# have no labels, so the loss is the logits' sum and the gradients are
# compared relative to each tensor's largest element (--rtol 1e-4) ----
$py -c "import numpy as np; np.save('$work/dyn_ids.npy', (np.arange(32).reshape(4, 8) * 7 % 256).astype(np.int64))" || exit 1
expect 2 "crosses to stage 1 with a symbolic shape" -- \
  shard "$src/tests/data/zoo/gpt2/ts_dynamic/model.onnx" --mesh pp=2 -o "$work/bad_dyn"
for v in gpt2/ts_dynamic llama/ts_dynamic mistral/ts_dynamic llama/dynamo_dynamic; do
  z=$src/tests/data/zoo/$v arch=${v%%/*} tag=${v/\//_}
  dims=batch=4,sequence=8
  [ "${v#*/}" = dynamo_dynamic ] && dims=s72=4,s70=8
  "$tool" grad "$z/model.onnx" --dims $dims --loss logits -o "$work/${tag}_ref.onnx" >/dev/null || exit 1
  for run_mesh in pp=2:1 pp=2:2 pp=2,tp=2:1 pp=2,tp=2:2; do
    mesh=${run_mesh%:*} mb=${run_mesh#*:} out=$work/${tag}_${run_mesh//[=,:]/_}
    plan=
    [ "$mesh" = pp=2 ] || plan="--plan $src/samples/plans/$arch.json"
    expect 0 'wrote .*rank0.onnx' -- shard "$z/model.onnx" $plan --mesh $mesh \
      --microbatches $mb --dims $dims -o "$out"
    expect 0 "$rel" -- run "$out" --input input_ids="$work/dyn_ids.npy" --check "$z/model.onnx" --rtol 1e-4
    # the dynamo export's mask fill value (a scalar initializer) has a NaN
    # gradient on both sides: the check takes NaN against NaN as equal
    expect 0 'models written' -- grad "$out" --loss logits -o "$out.grad"
    expect 0 '^ok: ' -- verify "$out.grad"
    expect 0 "$rel" -- run "$out.grad" --input input_ids="$work/dyn_ids.npy" --check "$work/${tag}_ref.onnx" --rtol 1e-4
  done
done
# pinning errors: a name no input dim has, a size below 1, a size the
# model's fixed shapes contradict, one name given two sizes
z=$src/tests/data/zoo/gpt2/ts_dynamic/model.onnx
expect 2 "no input of graph .* has a dim named 'seq' \(its symbolic dims: batch, sequence\)" -- \
  shard "$z" --mesh pp=2 --dims batch=4,seq=8 -o "$work/bad_pin1"
expect 2 "dim 'batch' = 0; give a size of 1 or more" -- \
  shard "$z" --mesh pp=2 --dims batch=0,sequence=8 -o "$work/bad_pin2"
expect 2 "pinning dims: .*node '" -- \
  shard "$z" --mesh pp=2 --dims batch=4,sequence=4096 -o "$work/bad_pin3"
expect 2 "dim 'batch' is given twice, as 4 and 8" -- \
  shard "$z" --mesh pp=2 --dims batch=4,batch=8 -o "$work/bad_pin4"
expect 1 "--dims 'batch' is not NAME=VALUE" -- \
  shard "$z" --mesh pp=2 --dims batch -o "$work/bad_pin5"

# with tp: the llama plan (gpt2's tied weight becomes two weights under tp)
z=$src/tests/data/zoo/llama/ts_train
in="--input input_ids=$z/inputs/input_ids.npy --input labels=$z/inputs/labels.npy"
for mb in 1 2; do
  pipeline "llama_pp2tp2_m$mb" "$z/model.onnx" "$work/llama_ref.onnx" loss "$in" \
    --plan "$src/samples/plans/llama.json" --mesh pp=2,tp=2 --microbatches $mb
done

# ---- the samples' GPT: 4 layers, batch 4; the loss is the logits' sum ----
$py "$src/samples/make_gpt_block.py" "$work/gpt.onnx" --layers 4 --batch 4 >/dev/null || exit 1
$py -c "import numpy as np; np.save('$work/ids.npy', (np.arange(32).reshape(4, 8) * 7 % 100).astype(np.int64))" || exit 1
"$tool" grad "$work/gpt.onnx" --loss logits -o "$work/gpt_ref.onnx" >/dev/null || exit 1
for mesh in pp=2 pp=2,tp=2; do
  plan=
  [ "$mesh" = pp=2 ] || plan="--plan $src/samples/plan_gpt_block.json"
  for mb in 2 4; do
    for sch in gpipe 1f1b; do
      pipeline "gpt_${mesh/,/_}_${sch}_m$mb" "$work/gpt.onnx" "$work/gpt_ref.onnx" logits \
        "--input ids=$work/ids.npy" $plan --mesh "$mesh" --microbatches $mb --schedule $sch
    done
  done
done
# ---- scalar losses over microbatches: a sum over the batch is the sum of
# the microbatches' sums, a mean the mean of their means: llama with
# SoftmaxCrossEntropyLoss reduction=sum (batch 2), the GPT's logits summed
# (ReduceSum) and averaged (ReduceMean) as its loss (batch 4) ----
$py - "$src/tests/data/zoo/llama/ts_train/model.onnx" "$work/llama_sum.onnx" "$work/gpt.onnx" "$work/gpt_rsum.onnx" "$work/gpt_rmean.onnx" <<'PY' || exit 1
import sys, onnx
from onnx import helper, TensorProto
m = onnx.load(sys.argv[1])
for n in m.graph.node:
    for a in n.attribute:
        if n.op_type == "SoftmaxCrossEntropyLoss" and a.name == "reduction":
            a.s = b"sum"
onnx.save(m, sys.argv[2])
for op, path in (("ReduceSum", sys.argv[4]), ("ReduceMean", sys.argv[5])):
    g = onnx.load(sys.argv[3])
    g.graph.node.append(helper.make_node(op, ["logits"], ["loss"], name="loss_" + op, keepdims=0))
    g.graph.output.append(helper.make_tensor_value_info("loss", TensorProto.FLOAT, []))
    onnx.save(g, path)
PY
z=$src/tests/data/zoo/llama/ts_train
in="--input input_ids=$z/inputs/input_ids.npy --input labels=$z/inputs/labels.npy"
"$tool" grad "$work/llama_sum.onnx" --loss loss -o "$work/llama_sum_ref.onnx" >/dev/null || exit 1
for mesh in pp=2 pp=2,tp=2; do
  plan=
  [ "$mesh" = pp=2 ] || plan="--plan $src/samples/plans/llama.json"
  pipeline_rel "llama_sum_${mesh//[=,]/_}_m2" "$work/llama_sum.onnx" "$work/llama_sum_ref.onnx" loss \
    "$in" $plan --mesh $mesh --microbatches 2
done
for red in rsum rmean; do
  "$tool" grad "$work/gpt_$red.onnx" --loss loss -o "$work/gpt_${red}_ref.onnx" >/dev/null || exit 1
  for mb in 2 4; do
    pipeline_rel "gpt_${red}_m$mb" "$work/gpt_$red.onnx" "$work/gpt_${red}_ref.onnx" loss \
      "--input ids=$work/ids.npy" --mesh pp=2 --microbatches $mb
  done
done
# ---- a mean over the targets that are not ignored: llama's labels with
# row 0 mostly -100, so that its two microbatches count 3 and 7 targets;
# the loss is the mean over all 10 (the mean of the two means is off by
# 0.022, its gradients by up to 0.21), and the gradients follow ----
$py -c "import numpy as np; l = np.load('$z/inputs/labels.npy'); l[0, :5] = -100; np.save('$work/labels_ign.npy', l)" || exit 1
in_ign="--input input_ids=$z/inputs/input_ids.npy --input labels=$work/labels_ign.npy"
for sch in gpipe 1f1b; do
  pipeline "llama_ignore_pp2_${sch}_m2" "$z/model.onnx" "$work/llama_ref.onnx" loss \
    "$in_ign" --mesh pp=2 --microbatches 2 --schedule $sch
done
pipeline "llama_ignore_pp2tp2_m2" "$z/model.onnx" "$work/llama_ref.onnx" loss \
  "$in_ign" --plan "$src/samples/plans/llama.json" --mesh pp=2,tp=2 --microbatches 2
# a scalar that is neither a mean nor a sum over the batch
$py - "$work/gpt.onnx" "$work/gpt_pick.onnx" <<'PY' || exit 1
import sys, onnx
from onnx import helper, TensorProto
g = onnx.load(sys.argv[1])
g.graph.node.append(helper.make_node("ReduceMax", ["logits"], ["loss"], name="loss_max", keepdims=0))
g.graph.output.append(helper.make_tensor_value_info("loss", TensorProto.FLOAT, []))
onnx.save(g, sys.argv[2])
PY
expect 2 "output 'loss' is a scalar that depends on the batch, but not through a mean or a sum" -- \
  shard "$work/gpt_pick.onnx" --mesh pp=2 --microbatches 2 -o "$work/bad_pick"

# given stages, 4 stages of one layer, and the layer count reported
expect 0 'stage 0: h.0 .. h.2' -- shard "$work/gpt.onnx" --mesh pp=2 --stages 'h.0-h.2|h.3' -o "$work/given"
expect 0 "$ok" -- run "$work/given" --input ids="$work/ids.npy" --check "$work/gpt.onnx"
expect 0 '4 stages of 4 layers' -- shard "$work/gpt.onnx" --mesh pp=4 --microbatches 4 -o "$work/pp4"
expect 0 "$ok" -- run "$work/pp4" --input ids="$work/ids.npy" --check "$work/gpt.onnx"

# ---- MPI: a process per rank (rank 0, stage 0, checks its gradients) ----
if command -v mpirun >/dev/null 2>&1; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  for d in "gpt_pp=2_tp=2_1f1b_m2" "gpt_pp=2_gpipe_m4"; do
    out=$(timeout 120 mpirun -np "$([ "$d" = "gpt_pp=2_gpipe_m4" ] && echo 2 || echo 4)" \
      "$tool" run "$work/$d.grad" --comm mpi --input ids="$work/ids.npy" --check "$work/gpt_ref.onnx" 2>&1)
    if grep -qE "$ok" <<<"$out"; then
      passes=$((passes + 1))
    else
      echo "FAIL: mpirun ccgraph run $work/$d.grad --comm mpi"
      echo "$out" | tail -5 | sed 's/^/    /'
      failures=$((failures + 1))
    fi
  done
else
  echo "note: mpirun not found; the --comm mpi runs are not done"
fi

# ---- cost: the bubble of 2 equal-ish stages and 4 microbatches ----
expect 0 'bubble fraction 0\.[0-9]+ \(\(p-1\)/\(M\+p-1\) = 0\.2000' -- cost "$work/gpt_pp=2_1f1b_m4.grad"
expect 0 '"equal_stage_bubble": 0\.2' -- cost "$work/gpt_pp=2_1f1b_m4" --json
expect 0 'sends between stages: [1-9][0-9]* bytes' -- cost "$work/gpt_pp=2_gpipe_m2"
expect 0 'per axis .*: pp [1-9][0-9]* bus bytes .* tp [1-9][0-9]* bus bytes' -- cost "$work/gpt_pp=2_tp=2_1f1b_m2.grad"

# a 24-layer GPT on pp=4,tp=2: six layers a stage, the bubble of M=8
$py "$src/samples/make_gpt_block.py" "$work/gpt24.onnx" --layers 24 --batch 8 >/dev/null || exit 1
expect 0 'stage 3: h.18 .. h.23' -- shard "$work/gpt24.onnx" \
  --plan "$src/samples/plan_gpt_block.json" --mesh pp=4,tp=2 --microbatches 8 -o "$work/gpt24"
expect 0 'bubble fraction 0\.2[89][0-9]* \(\(p-1\)/\(M\+p-1\) = 0\.2727' -- cost "$work/gpt24"

# ---- bad input ----
expect 2 "--stages names 'h.9', which is no layer" -- \
  shard "$work/gpt.onnx" --mesh pp=2 --stages 'h.0-h.1|h.2-h.9' -o "$work/bad1"
expect 2 "4 stages on axis 'pp' but the model has 2 layers" -- \
  shard "$z/model.onnx" --mesh pp=4 -o "$work/bad2"
expect 2 '3 microbatches do not divide the batch of 4' -- \
  shard "$work/gpt.onnx" --mesh pp=2 --microbatches 3 -o "$work/bad3"
expect 2 "gives 1 stages covering layers up to h.3; axis 'pp' has 2" -- \
  shard "$work/gpt.onnx" --mesh pp=2 --stages 'h.0-h.3' -o "$work/bad4"
expect 2 'stage 1 .* must start at layer h.2' -- \
  shard "$work/gpt.onnx" --mesh pp=2 --stages 'h.0-h.1|h.3' -o "$work/bad5"
expect 1 "need the pipeline axis 'pp' in --mesh" -- \
  shard "$work/gpt.onnx" --plan "$src/samples/plan_gpt_block.json" --mesh tp=2 --microbatches 2 -o "$work/bad6"
expect 1 "--schedule 'zb': give gpipe or 1f1b" -- \
  shard "$work/gpt.onnx" --mesh pp=2 --schedule zb -o "$work/bad7"
expect_absent "$work"/bad{1,2,3,4,5,6,7,_dyn,_pin1,_pin2,_pin3,_pin4,_pin5,_pick}
# a stage program's gradient needs the loss somewhere
expect 2 "no value named 'nope' to use as the loss on any rank" -- \
  grad "$work/given" --loss nope -o "$work/bad8"

# ---- onnx.checker on stage models (forward and backward) ----
mkdir -p "$work/all"
for d in gpt_pp=2_tp=2_1f1b_m2 gpt_pp=2_tp=2_1f1b_m2.grad llama_pp2tp2_m2.grad; do
  for f in "$work/$d"/*.onnx; do cp "$f" "$work/all/${d//[=,.]/_}_$(basename "$f")"; done
done
if $py "$src/tests/onnx/check_models.py" "$work/all" | tail -1; then
  passes=$((passes + 1))
else
  echo "FAIL: onnx.checker rejects a stage model"
  failures=$((failures + 1))
fi
expect_summary "cli pipeline"
