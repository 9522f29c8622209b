#!/usr/bin/env bash
# Data parallelism end to end (docs/parallelism.md): zoo training models
# (gpt2, llama) and the GPT sample sharded on dp=2 alone and dp=2,tp=2 (four
# local ranks), with ZeRO 0, 1 and 3: `ccgraph grad` on the ranks, `verify`,
# `run --check` against the unsharded model's full-batch outputs and
# gradients (the loss as the dp mean; a gradient as the dp shard under ZeRO),
# onnx.checker on the rank models; the cost report's dp bytes per step
# against the formulas; bad input exits non-zero naming the fault.
# usage: test_dp_cli.sh PATH/TO/ccgraph SOURCE_DIR WORK_DIR
set -u
tool=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
py=/usr/bin/python3
run=("$tool")
. "$(dirname "$0")/expect.sh"
zoo=$src/tests/data/zoo

# shard_grad_check NAME ARCH MESH [shard options]: shard the zoo model's
# training variant, differentiate every rank, verify, and check against the
# unsharded model's gradients (ref_ARCH.onnx).
shard_grad_check() {
  local name=$1 arch=$2 mesh=$3
  shift 3
  local model=$zoo/$arch/${variant:-ts_train}/model.onnx plan=()
  [[ $mesh == *tp=* ]] && plan=(--plan "$src/samples/plans/$arch.json")
  expect 0 "data parallel: 2 batch inputs split" -- shard "$model" "${plan[@]}" \
    --mesh "$mesh" -o "$work/$name/s" "$@"
  expect 0 "models written" -- grad "$work/$name/s" --loss loss -o "$work/$name/g"
  expect 0 "ok: .* communication calls match" -- verify "$work/$name/g"
  expect 0 "check against .*: [0-9]+ outputs on .* ok$" -- run "$work/$name/g" \
    --input "input_ids=$zoo/$arch/${variant:-ts_train}/inputs/input_ids.npy" \
    --input "labels=$zoo/$arch/${variant:-ts_train}/inputs/labels.npy" \
    --check "$work/ref_${variant:+dynamo_}$arch.onnx"
}

for arch in gpt2 llama; do
  "$tool" grad "$zoo/$arch/ts_train/model.onnx" --loss loss \
    -o "$work/ref_$arch.onnx" >/dev/null || exit 1
done
shard_grad_check gpt2_dp2 gpt2 dp=2
shard_grad_check gpt2_dp2_z1 gpt2 dp=2 --zero 1
shard_grad_check gpt2_dp2_z3 gpt2 dp=2 --zero 3
shard_grad_check llama_dp2 llama dp=2
shard_grad_check llama_dp2tp2 llama dp=2,tp=2
shard_grad_check llama_dp2tp2_z1 llama dp=2,tp=2 --zero 1
shard_grad_check llama_tp2dp2_z3 llama tp=2,dp=2 --zero 3
shard_grad_check llama_dp2tp2_data llama data=2,tp=2 --dp-axis data
# Only input_ids named as carrying the batch: labels stay whole on every
# rank and the loss takes each rank's chunk of them (ddp.batch_chunk).
expect 0 "data parallel: 1 batch inputs split" -- shard "$zoo/gpt2/ts_train/model.onnx" \
  --mesh dp=2 --dp-inputs input_ids -o "$work/gpt2_ids/s"
expect 0 "models written" -- grad "$work/gpt2_ids/s" --loss loss -o "$work/gpt2_ids/g"
expect 0 "check against .* ok$" -- run "$work/gpt2_ids/g" \
  --input "input_ids=$zoo/gpt2/ts_train/inputs/input_ids.npy" \
  --input "labels=$zoo/gpt2/ts_train/inputs/labels.npy" --check "$work/ref_gpt2.onnx"

# The other training variants: dp=2, and dp=2,tp=2 with ZeRO 1 where the
# tp plan alone gives the unsharded gradients (falcon's and opt's tied
# embeddings get two gradient parts from the plan's axis, docs/shard.md).
for arch in mistral qwen2 phi gpt_neox falcon opt; do
  "$tool" grad "$zoo/$arch/ts_train/model.onnx" --loss loss \
    -o "$work/ref_$arch.onnx" >/dev/null || exit 1
  shard_grad_check "${arch}_dp2" "$arch" dp=2
done
for arch in mistral qwen2 phi gpt_neox; do
  shard_grad_check "${arch}_dp2tp2_z1" "$arch" dp=2,tp=2 --zero 1
done

# The dynamo exports: Slices whose axes, starts and ends are computed
# (Cast and Reshape of constants), on other dims or all of the batch dim,
# and falcon's GatherND picking its key and value heads (a dim after the
# batch) keep the batch chunks.
for arch in llama mistral qwen2 phi gpt_neox falcon; do
  "$tool" grad "$zoo/$arch/dynamo_train/model.onnx" --loss loss \
    -o "$work/ref_dynamo_$arch.onnx" >/dev/null || exit 1
  variant=dynamo_train shard_grad_check "${arch}_dynamo_dp2" "$arch" dp=2
done

# Every gradient compared: dp alone keeps the tied embedding one parameter,
# so the rank's gradients are all of the reference's (28 of gpt2).
$py - "$work" <<'PY' && passes=$((passes + 1)) || { failures=$((failures + 1)); echo "FAIL: dp=2 gradients"; }
import sys, onnx
w = sys.argv[1]
for name in ("gpt2_dp2", "gpt2_dp2_z1", "gpt2_dp2_z3"):
    ref = {o.name for o in onnx.load(f"{w}/ref_gpt2.onnx").graph.output}
    got = {o.name for o in onnx.load(f"{w}/{name}/g/model.rank1.onnx",
                                     load_external_data=False).graph.output}
    grads = {n for n in ref if n.startswith("grad/")}
    assert len(grads) == 28 and grads <= got, (name, sorted(grads - got))
PY

# The GPT sample: logits summed as the loss, so the gradients are summed
# over dp (--dp-reduce sum) to give the full batch's.
$py "$src/samples/make_gpt_block.py" "$work/gpt.onnx" >/dev/null || exit 1
$py -c "
import numpy as np; np.save('$work/ids.npy', (np.arange(16).reshape(2, 8) * 7 % 50).astype(np.int64))"
"$tool" grad "$work/gpt.onnx" --loss logits -o "$work/gpt_ref.onnx" >/dev/null || exit 1
for cfg in "dp=2" "dp=2,tp=2 --plan $src/samples/plan_gpt_block.json" \
  "dp=2,tp=2 --plan $src/samples/plan_gpt_block.json --zero 1" \
  "tp=2,dp=2 --plan $src/samples/plan_gpt_block.json --zero 3"; do
  set -- $cfg
  d=$work/gpt_$(echo "$cfg" | md5sum | cut -c1-8)
  expect 0 "data parallel: 1 batch inputs split" -- shard "$work/gpt.onnx" \
    --mesh "$@" --dp-reduce sum -o "$d/s"
  expect 0 "models written" -- grad "$d/s" --loss logits -o "$d/g"
  expect 0 "ok: .* communication calls match" -- verify "$d/g"
  expect 0 "check against .* ok$" -- run "$d/g" --input "ids=$work/ids.npy" \
    --check "$work/gpt_ref.onnx"
done

# A symbolic batch: the input is batch/2 on each rank; head reshapes whose
# targets are computed from shapes are divided at run time. Two batch
# sizes, forward and backward.
$py "$src/samples/make_gpt_block.py" --dynamic "$work/gdyn.onnx" >/dev/null || exit 1
$py -c "
import numpy as np
np.save('$work/ids4.npy', (np.arange(24).reshape(4, 6) * 7 % 50).astype(np.int64))
np.save('$work/ids6.npy', (np.arange(30).reshape(6, 5) * 3 % 50).astype(np.int64))"
"$tool" grad "$work/gdyn.onnx" --loss logits -o "$work/gdyn_ref.onnx" >/dev/null || exit 1
expect 0 "data parallel: 1 batch inputs split" -- shard "$work/gdyn.onnx" \
  --plan "$src/samples/plan_gpt_block.json" --mesh dp=2,tp=2 --dp-reduce sum \
  -o "$work/gdyn/s"
expect 0 "i64\[batch/2,seq\]" -- inspect "$work/gdyn/s/gdyn.rank3.onnx"
expect 0 "models written" -- grad "$work/gdyn/s" --loss logits -o "$work/gdyn/g"
for b in 4 6; do
  expect 0 "check against .* ok$" -- run "$work/gdyn/g" --input "ids=$work/ids$b.npy" \
    --check "$work/gdyn_ref.onnx"
done

# ViT: the class token is expanded to the global batch from a parameter;
# each rank keeps its chunk (ddp.batch_chunk) and its gradient is the
# chunk's, so the summed gradients are the full batch's.
v=$zoo/vit/ts_static
"$tool" grad "$v/model.onnx" --loss logits -o "$work/vit_ref.onnx" >/dev/null || exit 1
expect 0 "data parallel: 1 batch inputs split" -- shard "$v/model.onnx" \
  --mesh dp=2 --dp-reduce sum -o "$work/vit/s"
expect 0 "models written" -- grad "$work/vit/s" --loss logits -o "$work/vit/g"
expect 0 "ddp.batch_chunk" -- inspect "$work/vit/g/model.rank0.onnx"
expect 0 "check against .* ok$" -- run "$work/vit/g" \
  --input "pixel_values=$v/inputs/pixel_values.npy" --check "$work/vit_ref.onnx"

# Six layers: one bucket of about a hundred gradients (and again with
# buckets of at most 16 KB), still the full batch's gradients.
$py "$src/samples/make_gpt_block.py" --layers 6 "$work/gpt6.onnx" >/dev/null || exit 1
"$tool" grad "$work/gpt6.onnx" --loss logits -o "$work/gpt6_ref.onnx" >/dev/null || exit 1
expect 0 "data parallel" -- shard "$work/gpt6.onnx" --mesh dp=2 --dp-reduce sum \
  -o "$work/gpt6/s"
for mb in 25 0.015625; do
  expect 0 "models written" -- grad "$work/gpt6/s" --loss logits \
    --bucket-mb $mb -o "$work/gpt6/g$mb"
  expect 0 "check against .* ok$" -- run "$work/gpt6/g$mb" \
    --input "ids=$work/ids.npy" --check "$work/gpt6_ref.onnx"
done
expect 0 "ok: 2 ranks, 2 communication calls match" -- verify "$work/gpt6/g25"
expect 0 "ok: 2 ranks, ([3-9]|[1-9][0-9]+) communication calls match" -- \
  verify "$work/gpt6/g0.015625"

# ZeRO buckets (fsdp.reduce_scatter_bucket): six layers on dp=2,tp=2 with
# ZeRO 1 and on tp=2,dp=2 with ZeRO 3 (the dp chunk cut from the tp
# shard), with no buckets (0), one (25 MB) and buckets of at most 16 KB
# (in g/, which onnx.checker reads below): each rank's gradient shards
# are still its part of the full batch's, the reduce-scatters are fewer,
# and the dp bytes do not change (ZeRO 1: 2(n-1)/n P, P the parameter
# bytes of the ZeRO 0 ranks).
expect 0 "data parallel" -- shard "$work/gpt6.onnx" --plan "$src/samples/plan_gpt_block.json" \
  --mesh dp=2,tp=2 --dp-reduce sum -o "$work/gpt6_z0/s"
for z in "1 dp=2,tp=2" "3 tp=2,dp=2"; do
  set -- $z
  d=$work/gpt6_z$1
  expect 0 "data parallel" -- shard "$work/gpt6.onnx" --plan "$src/samples/plan_gpt_block.json" \
    --mesh "$2" --zero "$1" --dp-reduce sum -o "$d/s"
  for mb in 0 25 0.015625; do
    o=$d/g$mb
    [ "$mb" = 0.015625 ] && o=$d/g
    expect 0 "models written" -- grad "$d/s" --loss logits --bucket-mb $mb -o "$o"
    expect 0 "ok: 4 ranks, .* communication calls match; placements agree" -- verify "$o"
    expect 0 "check against .* ok$" -- run "$o" --input "ids=$work/ids.npy" \
      --check "$work/gpt6_ref.onnx" --rtol 1e-4
    "$tool" cost "$o" --json >"$o/cost.json" || exit 1
  done
done
expect 0 "fsdp.reduce_scatter_bucket" -- inspect "$work/gpt6_z3/g/gpt6.rank0.onnx"
$py - "$work" <<'PY' && passes=$((passes + 1)) || { failures=$((failures + 1)); echo "FAIL: ZeRO buckets"; }
import json, sys, onnx, numpy as np
w = sys.argv[1]
def ops(path, op):
    m = onnx.load(f"{path}/gpt6.rank0.onnx", load_external_data=False)
    return sum(n.op_type == op for n in m.graph.node)
def dp(path):
    return json.load(open(f"{path}/cost.json"))["axes"]["dp"]["bus_bytes"]
m = onnx.load(f"{w}/gpt6_z0/s/gpt6.rank0.onnx")
P = sum(np.prod(i.dims, dtype=np.int64) * 4 for i in m.graph.initializer if i.data_type == 1)
for z in (1, 3):
    d = f"{w}/gpt6_z{z}"
    rs = [ops(f"{d}/{g}", "ReduceScatter") for g in ("g0", "g25", "g")]
    print(f"ZeRO {z}: reduce-scatters without buckets, 25 MB, 16 KB: {rs}; "
          f"dp bus bytes {[dp(f'{d}/{g}') for g in ('g0', 'g25', 'g')]}")
    assert rs[1] == 1 and 1 < rs[2] < rs[0], rs
    assert dp(f"{d}/g0") == dp(f"{d}/g25") == dp(f"{d}/g"), z
    if z == 1:
        assert abs(dp(f"{d}/g") - 2 * (2 - 1) / 2 * P) <= 1e-9 * P, (dp(f"{d}/g"), P)
PY

# Under mpirun (one process per rank, dp=2,tp=2 with ZeRO 1): rank 0 checks
# its outputs and gradient shards (its loss is a dp part: said and
# skipped), and every rank's outputs equal the local ranks' (1e-6).
l=$zoo/llama/ts_train
if command -v mpirun >/dev/null && "$tool" run "$work/ref_llama.onnx" --comm mpi \
  --input "input_ids=$l/inputs/input_ids.npy" --input "labels=$l/inputs/labels.npy" >/dev/null 2>&1; then
  ins=(--input "input_ids=$l/inputs/input_ids.npy" --input "labels=$l/inputs/labels.npy")
  "$tool" run "$work/llama_dp2tp2_z1/g" "${ins[@]}" --output-dir "$work/mpi_local" >/dev/null
  out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 4 --oversubscribe \
    "$tool" run "$work/llama_dp2tp2_z1/g" --comm mpi "${ins[@]}" --output-dir "$work/mpi_out" \
    --check "$work/ref_llama.onnx" 2>&1)
  if grep -qE "check against .*: ok" <<<"$out" && grep -q "output 'loss' of rank 0 skipped" <<<"$out" &&
    $py - "$work" <<'PY'; then
import sys, os, numpy as np
w = sys.argv[1]
n = 0
for r in range(4):
    d = f"{w}/mpi_local/rank{r}"
    for f in os.listdir(d):
        a, b = np.load(f"{d}/{f}"), np.load(f"{w}/mpi_out/rank{r}/{f}")
        assert a.shape == b.shape and np.allclose(a, b, rtol=0, atol=1e-6), (r, f)
        n += 1
assert n == 4 * 23, n
PY
    passes=$((passes + 1))
  else
    echo "FAIL: dp=2,tp=2 under mpirun:"
    echo "$out" | sed 's/^/    /' | head -20
    failures=$((failures + 1))
  fi
else
  echo "SKIP: run --comm mpi: no mpirun or no MPI in this build"
fi

# onnx.checker on every rank model written above
mkdir -p "$work/all"
for f in "$work"/*/g/*.onnx; do
  cp "$f" "$work/all/$(basename "$(dirname "$(dirname "$f")")")_$(basename "$f")"
done
$py "$src/tests/onnx/check_models.py" "$work/all" | tail -1 &&
  passes=$((passes + 1)) || failures=$((failures + 1))

# Cost: dp bus bytes per step. P = the bytes of the parameters a rank
# computes with (its tp shard). DDP: all-reduce 2(n-1)/n P. ZeRO 1:
# all-gather (n-1)/n P + reduce-scatter (n-1)/n P. ZeRO 3: that plus the
# backward's re-gather (n-1)/n P_g, P_g the parameters a gradient rule
# reads (gpt2: the weight matrices and LayerNorm scales).
for name in gpt2_dp2 gpt2_dp2_z1 gpt2_dp2_z3 llama_dp2tp2 llama_dp2tp2_z1; do
  "$tool" cost "$work/$name/g" --json >"$work/$name/cost.json" || exit 1
done
$py - "$work" <<'PY' && passes=$((passes + 1)) || { failures=$((failures + 1)); echo "FAIL: dp cost formulas"; }
import json, sys, onnx, numpy as np
w = sys.argv[1]
def params(name, rank=0, pred=lambda n: True):
    m = onnx.load(f"{w}/{name}/s/model.rank{rank}.onnx")
    return sum(np.prod(i.dims, dtype=np.int64) * 4 for i in m.graph.initializer
               if i.data_type == 1 and pred(i.name))
def dp(name):
    return json.load(open(f"{w}/{name}/cost.json"))["axes"]["dp"]["bus_bytes"]
n = 2
cases = {
    "gpt2_dp2": 2 * (n - 1) / n * params("gpt2_dp2"),
    "gpt2_dp2_z1": 2 * (n - 1) / n * n * params("gpt2_dp2_z1"),
    "gpt2_dp2_z3": (n - 1) / n * (2 * n * params("gpt2_dp2_z3") + n * params(
        "gpt2_dp2_z3", pred=lambda s: s.endswith(".weight") and ".wte." not in s
        and ".wpe." not in s)),
    "llama_dp2tp2": 2 * (n - 1) / n * params("llama_dp2tp2"),
    "llama_dp2tp2_z1": 2 * (n - 1) / n * n * params("llama_dp2tp2_z1"),
}
for name, want in cases.items():
    got = dp(name)
    print(f"{name}: dp bus bytes {got:.0f}, formula {want:.0f}")
    assert want > 0 and abs(got - want) <= 1e-9 * want, (name, got, want)
PY

# GatherND and Slice on the batch dim: indices that carry the batch pick
# rows of a whole table (its gradient summed over dp); a Slice of batch
# rows with computed axes, or a GatherND indexing the batch dim, mixes the
# ranks' batches and is refused naming the node.
$py - "$work" <<'PY' || exit 1
import sys, numpy as np
from onnx import helper as h, numpy_helper as nh, TensorProto as T, save
w = sys.argv[1]
def const(name, v, dt=np.int64):
    return h.make_node("Constant", [], [name], value=nh.from_array(np.array(v, dtype=dt)))
def model(path, nodes, inputs, out_shape, inits=()):
    g = h.make_graph(nodes, "g", inputs,
                     [h.make_tensor_value_info("loss", T.FLOAT, out_shape)], list(inits))
    save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), f"{w}/{path}")
x = [h.make_tensor_value_info("x", T.FLOAT, [4, 3])]
table = nh.from_array(np.arange(15, dtype=np.float32).reshape(5, 3) * 0.1, "table")
model("gnd_ids.onnx", [h.make_node("GatherND", ["table", "idx"], ["y"], name="lookup"),
                       h.make_node("Mul", ["y", "y"], ["loss"])],
      [h.make_tensor_value_info("idx", T.INT64, [4, 1])], [4, 3], [table])
np.save(f"{w}/gnd_idx.npy", np.array([[3], [0], [4], [3]], dtype=np.int64))
model("slice_rows.onnx", [const("a0", 0, np.int32), h.make_node("Cast", ["a0"], ["a1"], to=7),
                          const("m1", [-1]), h.make_node("Reshape", ["a1", "m1"], ["axes"]),
                          const("st", [1]), const("en", [3]),
                          h.make_node("Slice", ["x", "st", "en", "axes"], ["y"], name="rows_1_3"),
                          h.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)], x, [])
model("gnd_rows.onnx", [const("idx", [[3], [0]]),
                        h.make_node("GatherND", ["x", "idx"], ["y"], name="pick_rows"),
                        h.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)], x, [])
PY
"$tool" grad "$work/gnd_ids.onnx" --loss loss -o "$work/gnd_ids_ref.onnx" >/dev/null || exit 1
expect 0 "data parallel: 1 batch inputs split" -- shard "$work/gnd_ids.onnx" --mesh dp=2 \
  --dp-reduce sum -o "$work/gnd_ids/s"
expect 0 "models written" -- grad "$work/gnd_ids/s" --loss loss -o "$work/gnd_ids/g"
expect 0 "check against .*: 4 outputs on 2 ranks.* ok$" -- run "$work/gnd_ids/g" \
  --input "idx=$work/gnd_idx.npy" --check "$work/gnd_ids_ref.onnx" --rtol 1e-4
expect 2 "node 'rows_1_3' \(Slice\): data parallel: value 'x' is held as each dp rank's batch chunk" -- \
  shard "$work/slice_rows.onnx" --mesh dp=2 -o "$work/bad11"
expect 2 "node 'pick_rows' \(GatherND\): data parallel: value 'x' is held as each dp rank's batch chunk" -- \
  shard "$work/gnd_rows.onnx" --mesh dp=2 -o "$work/bad12"

# bad input
expect 2 "input 'input_ids' batch dim 0 \(size 2\) is not divisible by dp=3" -- \
  shard "$zoo/gpt2/ts_train/model.onnx" --mesh dp=3 -o "$work/bad1"
expect 2 "no plan, and the mesh \[dq=2\] has no data axis 'dp'" -- \
  shard "$zoo/gpt2/ts_train/model.onnx" --mesh dq=2 -o "$work/bad2"
expect 2 "ZeRO and the batch inputs need the data axis 'data' in the mesh" -- \
  shard "$zoo/gpt2/ts_train/model.onnx" --plan "$src/samples/plans/gpt2.json" \
  --mesh dp=2,tp=2 --dp-axis data --zero 1 -o "$work/bad3"
expect 2 "no plan, and the mesh \[tp=2\] has no data axis 'dp'" -- \
  shard "$zoo/gpt2/ts_train/model.onnx" --mesh tp=2 -o "$work/bad9"
expect 1 "--zero 2 .* is not supported" -- \
  shard "$zoo/gpt2/ts_train/model.onnx" --mesh dp=2 --zero 2 -o "$work/bad4"
expect 1 "--batch-dim takes a whole number from 0 to 7, not '9'" -- \
  shard "$zoo/gpt2/ts_train/model.onnx" --mesh dp=2 --batch-dim 9 -o "$work/bad10"
expect 1 "--dp-reduce takes mean or sum, not 'max'" -- \
  shard "$zoo/gpt2/ts_train/model.onnx" --mesh dp=2 --dp-reduce max -o "$work/bad5"
expect 2 "'nope' \(a batch input named by the options\) is not a graph input" -- \
  shard "$zoo/gpt2/ts_train/model.onnx" --mesh dp=2 --dp-inputs input_ids,nope \
  -o "$work/bad6"
expect 2 "mesh axis 'tp' cannot be both the plan's axis and the data axis" -- \
  shard "$zoo/gpt2/ts_train/model.onnx" --mesh tp=2 --dp-axis tp -o "$work/bad7"
expect 1 "--bucket-mb takes a size in MB" -- grad "$work/gpt2_dp2/s" --loss loss \
  --bucket-mb -3 -o "$work/bad8"
expect_absent "$work"/bad{1..12}
expect_summary cli_dp
