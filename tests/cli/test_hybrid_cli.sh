#!/usr/bin/env bash
# Data, pipeline and tensor parallelism together through the tool:
# `ccgraph shard --mesh dp=2,tp=2 | pp=2,tp=2 | dp=2,pp=2,tp=2` on every
# training variant of the zoo (TorchScript and dynamo exports) and on the samples' GPT (batch 8, 2 and 4 microbatches, ZeRO 1
# and 3, their gradient buckets of 25 MB and of 16 KB), then `ccgraph grad`; `ccgraph verify` proves every rank's
# collectives and sends/receives match; `ccgraph run --check --rtol 1e-4`
# compares every rank's outputs and parameter gradients with the
# unsharded model's full-batch ones, each tensor within 1e-6 + 1e-4 x its
# largest magnitude; the rank models pass onnx.checker; `ccgraph cost`
# reports the data axis's bus bytes as 2(n-1)/n P (P the parameter bytes
# of the busiest rank's stage) and the bubble; one program again under
# mpirun (--comm mpi, 8 processes: three programs) when mpirun is there; combinations that
# cannot work exit 2 naming why and write nothing.
# usage: test_hybrid_cli.sh PATH/TO/ccgraph SOURCE_DIR WORK_DIR
set -u
tool=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
py=/usr/bin/python3
run=("$tool")
. "$(dirname "$0")/expect.sh"

. "$(dirname "$0")/hybrid_lib.sh"

# ---- the zoo: every training variant (TorchScript and dynamo), batch 2,
# so one microbatch per dp rank; the arch's sample plan, or ccgraph plan's
# proposal where a dynamo export's module paths differ from it. Mixtral's
# routing (NonZero over each dp rank's flattened tokens) is chunk-local
# under dp, and on pp its expert sizes are found from received data ----
# args: TAG MODEL GRAD_REF INPUTS PLAN (each_zoo_variant)
three_meshes() {
  local mesh
  for mesh in dp=2,tp=2 pp=2,tp=2 dp=2,pp=2,tp=2; do
    hybrid "${1}_${mesh//[=,]/_}" "$2" "$3" loss "$4" --plan "$5" --mesh "$mesh"
  done
}
each_zoo_variant three_meshes

# mixtral's experts as ZeRO 3 shards, gathered again for the backward of
# each rank's routed rows
z=$src/tests/data/zoo/mixtral/ts_train
hybrid mixtral_ts_train_dp2tp2_z3 "$z/model.onnx" "$work/mixtral_ts_train_ref.onnx" loss \
  "$(zoo_inputs "$z")" --plan "$src/samples/plans/mixtral.json" --mesh dp=2,tp=2 --zero 3
# ZeRO 1 and 3 per stage; the mesh in another order
z=$src/tests/data/zoo/llama/ts_train
in=$(zoo_inputs "$z")
for zero in 1 3; do
  hybrid "llama_ts_train_dp2pp2tp2_z$zero" "$z/model.onnx" "$work/llama_ts_train_ref.onnx" loss "$in" \
    --plan "$src/samples/plans/llama.json" --mesh dp=2,pp=2,tp=2 --zero $zero
done
hybrid llama_ts_train_tp2pp2dp2 "$z/model.onnx" "$work/llama_ts_train_ref.onnx" loss "$in" \
  --plan "$src/samples/plans/llama.json" --mesh tp=2,pp=2,dp=2 --zero 1
# tied embeddings (gpt2, bert): each use's dp shard of its tp part is
# summed with the other's through the provenance's dp ranges
for arch in gpt2 bert; do
  z=$src/tests/data/zoo/$arch/ts_train
  hybrid "${arch}_ts_train_dp2pp2tp2_z1" "$z/model.onnx" "$work/${arch}_ts_train_ref.onnx" loss \
    "$(zoo_inputs "$z")" --plan "$src/samples/plans/$arch.json" --mesh dp=2,pp=2,tp=2 --zero 1
done
z=$src/tests/data/zoo/mistral/ts_train
hybrid mistral_ts_train_dp2pp2tp2_z3 "$z/model.onnx" "$work/mistral_ts_train_ref.onnx" loss \
  "$(zoo_inputs "$z")" --plan "$src/samples/plans/mistral.json" --mesh dp=2,pp=2,tp=2 --zero 3

# a dynamic-axes export (batch and sequence symbolic) with its symbols
# pinned by --dims: batch 8, so each dp rank's 4 rows make 2 microbatches;
# no labels, so the loss is the logits' sum and dp sums
z=$src/tests/data/zoo/llama/ts_dynamic
"$tool" grad "$z/model.onnx" --dims batch=8,sequence=8 --loss logits -o "$work/llama_dyn_ref.onnx" >/dev/null || exit 1
$py -c "import numpy as np; np.save('$work/dyn_ids.npy', (np.arange(64).reshape(8, 8) * 7 % 256).astype(np.int64))" || exit 1
for mesh in dp=2,tp=2 pp=2,tp=2 dp=2,pp=2,tp=2; do
  mb=
  [ "$mesh" = dp=2,tp=2 ] || mb="--microbatches 2"
  hybrid "llama_ts_dynamic_${mesh//[=,]/_}" "$z/model.onnx" "$work/llama_dyn_ref.onnx" logits \
    "--input input_ids=$work/dyn_ids.npy" --plan "$src/samples/plans/llama.json" --mesh "$mesh" \
    --dims batch=8,sequence=8 --dp-reduce sum $mb
done

# ---- the samples' GPT: 4 layers, batch 8; each dp rank's 4 rows split
# into microbatches; the loss is the logits' sum, so dp sums ----
$py "$src/samples/make_gpt_block.py" "$work/gpt.onnx" --layers 4 --batch 8 >/dev/null || exit 1
$py -c "import numpy as np; np.save('$work/ids.npy', (np.arange(64).reshape(8, 8) * 7 % 100).astype(np.int64))" || exit 1
"$tool" grad "$work/gpt.onnx" --loss logits -o "$work/gpt_ref.onnx" >/dev/null || exit 1
gpt() {
  local name=$1
  shift
  hybrid "$name" "$work/gpt.onnx" "$work/gpt_ref.onnx" logits "--input ids=$work/ids.npy" \
    --plan "$src/samples/plan_gpt_block.json" --mesh dp=2,pp=2,tp=2 --dp-reduce sum "$@"
}
gpt gpt_m2 --microbatches 2
gpt gpt_m4_gpipe --microbatches 4 --schedule gpipe
gpt gpt_m2_z1 --microbatches 2 --zero 1
gpt gpt_m2_z3 --microbatches 2 --zero 3 --schedule gpipe
# ZeRO buckets of at most 16 KB: several fsdp.reduce_scatter_buckets per
# stage instead of one (25 MB)
grad_args="--bucket-mb 0.015625" gpt gpt_m2_z1_b16k --microbatches 2 --zero 1
grad_args="--bucket-mb 0.015625" gpt gpt_m2_z3_b16k --microbatches 2 --zero 3 --schedule gpipe
$py - "$work" <<'PY' && passes=$((passes + 1)) || { failures=$((failures + 1)); echo "FAIL: ZeRO buckets per stage"; }
import glob, sys, onnx
w = sys.argv[1]
def rs(name, r):
    m = onnx.load(glob.glob(f"{w}/{name}.grad/*.rank{r}.onnx")[0], load_external_data=False)
    return sum(n.op_type == "ReduceScatter" for n in m.graph.node)
for z in (1, 3):
    one = [rs(f"gpt_m2_z{z}", r) for r in range(8)]
    small = [rs(f"gpt_m2_z{z}_b16k", r) for r in range(8)]
    print(f"ZeRO {z}: reduce-scatters per rank, 25 MB buckets {one}, 16 KB {small}")
    assert all(o == 1 for o in one) and all(s > 1 for s in small), (one, small)
PY
# a batch-averaged loss: each dp rank's mean over its microbatches' means
# (Partial(avg) over dp), the gradients averaged over dp (--dp-reduce mean)
$py - "$work/gpt.onnx" "$work/gpt_mean.onnx" <<'PY' || exit 1
import sys, onnx
from onnx import helper, TensorProto
m = onnx.load(sys.argv[1])
m.graph.node.append(helper.make_node("ReduceMean", ["logits"], ["loss"],
                                     name="loss_mean", keepdims=0))
m.graph.output.append(helper.make_tensor_value_info("loss", TensorProto.FLOAT, []))
onnx.save(m, sys.argv[2])
PY
"$tool" grad "$work/gpt_mean.onnx" --loss loss -o "$work/gpt_mean_ref.onnx" >/dev/null || exit 1
for zero in 0 3; do
  hybrid "gpt_mean_m2_z$zero" "$work/gpt_mean.onnx" "$work/gpt_mean_ref.onnx" loss \
    "--input ids=$work/ids.npy" --plan "$src/samples/plan_gpt_block.json" \
    --mesh dp=2,pp=2,tp=2 --microbatches 2 --zero $zero
done

# a loss summed over the batch (ReduceSum): each dp rank's sum over its
# microbatches' sums (Partial(sum) over dp), the gradients summed over dp
$py - "$work/gpt.onnx" "$work/gpt_sum.onnx" <<'PY' || exit 1
import sys, onnx
from onnx import helper, TensorProto
m = onnx.load(sys.argv[1])
m.graph.node.append(helper.make_node("ReduceSum", ["logits"], ["loss"],
                                     name="loss_sum", keepdims=0))
m.graph.output.append(helper.make_tensor_value_info("loss", TensorProto.FLOAT, []))
onnx.save(m, sys.argv[2])
PY
"$tool" grad "$work/gpt_sum.onnx" --loss loss -o "$work/gpt_sum_ref.onnx" >/dev/null || exit 1
for mb in 2 4; do
  hybrid "gpt_sum_m$mb" "$work/gpt_sum.onnx" "$work/gpt_sum_ref.onnx" loss \
    "--input ids=$work/ids.npy" --plan "$src/samples/plan_gpt_block.json" \
    --mesh dp=2,pp=2,tp=2 --microbatches $mb --dp-reduce sum
done

# ---- MPI: a process per rank; rank 0 checks its gradients: the sample
# GPT with microbatches, llama under ZeRO 1, mixtral's routing on all axes ----
if command -v mpirun >/dev/null 2>&1; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  for case in "gpt_m2|--input ids=$work/ids.npy|gpt_ref" \
    "llama_ts_train_dp2pp2tp2_z1|$(zoo_inputs "$src/tests/data/zoo/llama/ts_train")|llama_ts_train_ref" \
    "mixtral_ts_train_dp_2_pp_2_tp_2|$(zoo_inputs "$src/tests/data/zoo/mixtral/ts_train")|mixtral_ts_train_ref"; do
    IFS='|' read -r prog inputs ref <<<"$case"
    out=$(timeout 120 mpirun -np 8 --oversubscribe "$tool" run "$work/$prog.grad" --comm mpi \
      $inputs --check "$work/$ref.onnx" --rtol 1e-4 2>&1)
    if grep -qE "$ok" <<<"$out"; then
      passes=$((passes + 1))
    else
      echo "FAIL: mpirun -np 8 ccgraph run $work/$prog.grad --comm mpi"
      echo "$out" | tail -5 | sed 's/^/    /'
      failures=$((failures + 1))
    fi
  done
else
  echo "note: mpirun not found; the --comm mpi runs are not done"
fi

# ---- cost: per axis and step, the bubble; dp bus bytes 2(n-1)/n P ----
expect 0 'per axis .*: dp [1-9][0-9]* bus bytes .*; pp [1-9][0-9]* bus bytes .*; tp [1-9][0-9]* bus bytes' -- \
  cost "$work/gpt_m2.grad"
expect 0 'bubble fraction 0\.[0-9]+ \(\(p-1\)/\(M\+p-1\) = 0\.3333' -- cost "$work/gpt_m2.grad"
for name in llama_ts_train_dp_2_pp_2_tp_2 llama_ts_train_dp2pp2tp2_z1 gpt2_ts_train_dp_2_pp_2_tp_2 gpt_m2 gpt_m2_z1 gpt_m2_z3 \
  gpt_m2_z1_b16k gpt_m2_z3_b16k; do
  "$tool" cost "$work/$name.grad" --json >"$work/$name.cost.json" || exit 1
done
$py - "$work" <<'PY' && passes=$((passes + 1)) || { failures=$((failures + 1)); echo "FAIL: dp cost formula"; }
import glob, json, sys, onnx, numpy as np
w = sys.argv[1]
def params(name, rank, pred=lambda s: True):
    # the float initializers of the rank's stage: the parameters its data
    # axis reduces (their tp shard; under ZeRO their dp shard)
    m = onnx.load(glob.glob(f"{w}/{name}/*.rank{rank}.onnx")[0])
    return sum(int(np.prod(i.dims, dtype=np.int64)) * 4
               for i in m.graph.initializer
               if i.data_type == 1 and pred(i.name))
n = 2
# ZeRO 1: all-gather (n-1)/n P + reduce-scatter (n-1)/n P, P the whole
# (tp-local) parameters: those of the same program without ZeRO
for name, whole in [("llama_ts_train_dp_2_pp_2_tp_2", None),
                    ("llama_ts_train_dp2pp2tp2_z1",
                     "llama_ts_train_dp_2_pp_2_tp_2"),
                    ("gpt2_ts_train_dp_2_pp_2_tp_2", None), ("gpt_m2", None),
                    ("gpt_m2_z1", "gpt_m2"), ("gpt_m2_z1_b16k", "gpt_m2")]:
    cost = json.load(open(f"{w}/{name}.cost.json"))
    got = cost["axes"]["dp"]["bus_bytes"]
    per_rank = [params(whole or name, r) for r in range(8)]
    want = 2 * (n - 1) / n * max(per_rank)
    stage_p = sorted(set(per_rank))
    print(f"{name}: dp bus bytes {got:.0f}, 2(n-1)/n P {want:.0f} (stage P {stage_p}), "
          f"bubble {cost['pipeline']['bubble']:.4f}")
    assert len(stage_p) == 2, stage_p  # two stages, different parameters
    assert want > 0 and abs(got - want) <= 1e-9 * want, (name, got, want)
# ZeRO 3: (n-1)/n (2P + P_g), P_g the parameters a gradient rule reads
# again (the sample's weight matrices and LayerNorm scales), per stage
read = lambda s: s.startswith("onnx::MatMul") or (s.startswith(("h.", "ln_f"))
                                                  and ".ln" in "." + s
                                                  and s.endswith(".weight"))
want = max((n - 1) / n * (2 * params("gpt_m2", r) + params("gpt_m2", r, read))
           for r in range(8))
for name in ("gpt_m2_z3", "gpt_m2_z3_b16k"):
    got = json.load(open(f"{w}/{name}.cost.json"))["axes"]["dp"]["bus_bytes"]
    print(f"{name}: dp bus bytes {got:.0f}, (n-1)/n (2P + P_g) {want:.0f}")
    assert want > 0 and abs(got - want) <= 1e-9 * want, (name, got, want)
PY

# ---- what cannot work: refused, naming why, nothing written ----
z=$src/tests/data/zoo/llama/ts_train
expect 2 "2 microbatches do not divide the batch of 1 .*each rank's chunk of the batch" -- \
  shard "$z/model.onnx" --plan "$src/samples/plans/llama.json" --mesh dp=2,pp=2,tp=2 \
  --microbatches 2 -o "$work/bad1"
expect 1 "mesh axis 'dp' cannot be both the pipeline axis and the data axis" -- \
  shard "$z/model.onnx" --plan "$src/samples/plans/llama.json" --mesh dp=2,tp=2 \
  --pp-axis dp -o "$work/bad3"
# the relative check fails where it should and takes a number
expect 4 "per tensor [0-9.e+-]+: FAILED" -- run "$work/gpt_m2.grad" --input ids="$work/ids.npy" \
  --check "$work/gpt_ref.onnx" --rtol 1e-12 --tolerance 0
expect 1 "--rtol 'x': give a number >= 0" -- run "$work/gpt_m2.grad" --input ids="$work/ids.npy" \
  --check "$work/gpt_ref.onnx" --rtol x
expect_absent "$work"/bad{1,3}

# ---- onnx.checker on the combined programs (forward and backward) ----
mkdir -p "$work/all"
for d in gpt_m2 gpt_m2.grad gpt_m2_z3.grad gpt_m2_z1_b16k.grad gpt_m2_z3_b16k.grad llama_ts_train_dp_2_pp_2_tp_2.grad bert_dynamo_train_dp_2_pp_2_tp_2.grad; do
  for f in "$work/$d"/*.onnx; do cp "$f" "$work/all/${d//./_}_$(basename "$f")"; done
done
if $py "$src/tests/onnx/check_models.py" "$work/all" | tail -1; then
  passes=$((passes + 1))
else
  echo "FAIL: onnx.checker rejects a rank model"
  failures=$((failures + 1))
fi
expect_summary "cli hybrid"
