#!/usr/bin/env bash
# ccgraph shard on the GPT-style sample model (separate Q/K/V and fused QKV,
# with and without sequence parallel, tp=2 and tp=4): rank models written
# and accepted by onnx.checker; bad inputs give exit 2 and name the fault.
# usage: test_shard.sh PATH/TO/ccgraph SOURCE_DIR WORK_DIR
set -u
tool=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
py=/usr/bin/python3
gen=$src/samples/make_gpt_block.py
plan=$src/samples/plan_gpt_block.json
$py "$gen" "$work/gpt.onnx" >/dev/null || exit 1
$py "$gen" "$work/gpt_fused.onnx" --fused-qkv >/dev/null || exit 1

run=("$tool")
. "$(dirname "$0")/expect.sh"

for m in gpt gpt_fused; do
  for tp in 2 4; do
    for sp in "" --sequence-parallel; do
      out=$work/out_${m}_tp${tp}${sp:+_sp}
      expect 0 "wrote .*rank0.onnx" -- shard "$work/$m.onnx" --plan "$plan" \
        --mesh tp=$tp -o "$out" $sp
      mkdir -p "$work/all"
      for f in "$out"/*.onnx; do cp "$f" "$work/all/$(basename "$out")_$(basename "$f")"; done
    done
  done
done
# No dead nodes or unused initializers (the head-count rewrite's old
# targets are pruned), tp=1 included: onnx's own view of the rank models.
expect 0 "wrote .*rank0.onnx" -- shard "$work/gpt.onnx" --plan "$plan" --mesh tp=1 -o "$work/out_gpt_tp1"
$py - "$work/out_gpt_tp1/gpt.rank0.onnx" "$work/out_gpt_tp2/gpt.rank1.onnx" \
  "$work/out_gpt_fused_tp4_sp/gpt_fused.rank3.onnx" <<'PY' || failures=$((failures + 1))
import sys, onnx
for path in sys.argv[1:]:
    g = onnx.load(path).graph
    prod = {o: n for n in g.node for o in n.output}
    live, pending = set(), [o.name for o in g.output]
    while pending:
        v = pending.pop()
        if v not in live:
            live.add(v)
            pending += list(prod[v].input) if v in prod else []
    dead = [n.name for n in g.node if not any(o in live for o in n.output)]
    unused = [i.name for i in g.initializer if i.name not in live]
    if dead or unused or not g.initializer:
        sys.exit(f"FAIL: {path}: dead nodes {dead}, unused initializers {unused}")
    print(f"ok: {path}: {len(g.node)} nodes, {len(g.initializer)} initializers, none dead")
PY
expect 0 '"reshape_rewrites": 8' -- shard "$work/gpt.onnx" --plan "$plan" --mesh dp=2,tp=2 -o "$work/dp" --json
expect 0 'AllGather 6, ReduceScatter 5' -- shard "$work/gpt.onnx" --plan "$plan" --mesh tp=2 -o "$work/sp" --sequence-parallel
# Ulysses around the attention core: q, k, v to the head shard and the
# result back to the sequence shard, one AllToAll each per layer.
$py "$gen" "$work/gpt_core.onnx" --core-scope >/dev/null || exit 1
expect 0 'AllGather 1, AllToAll 8, ShardSlice 2' -- shard "$work/gpt_core.onnx" \
  --plan "$src/samples/plan_gpt_ulysses.json" --mesh tp=2 -o "$work/out_ulysses" --sequence-parallel
for f in "$work/out_ulysses"/*.onnx; do cp "$f" "$work/all/ulysses_$(basename "$f")"; done
expect 0 'ok: 2 ranks' -- verify "$work/out_ulysses"
$py "$src/tests/onnx/check_models.py" "$work/all" | tail -1 || failures=$((failures + 1))

# inspect: a folder's per-rank summary, a rank model as text, JSON and DOT
expect 0 'rank 3: .*mesh tp=4.*AllReduce 5, AllGather 1' -- inspect "$work/out_gpt_tp4"
expect 0 '"ranks": 4' -- inspect "$work/out_gpt_tp4" --format json
expect 0 'AllReduce' -- inspect "$work/out_gpt_tp4/gpt.rank1.onnx"
expect 0 'digraph' -- inspect "$work/out_gpt_tp4/gpt.rank1.onnx" --format dot
expect 2 "nope" -- inspect "$work/nope.onnx"
expect 1 "--format must be text, json or dot" -- inspect "$work/gpt.onnx" --format png

# Provenance: a sharded training model's gradients against the unsharded
# backward, through the ccgraph.shard.provenance metadata (GPT-2 of the zoo:
# wte tied to the LM head through a Transpose, split vocab-parallel and
# colwise; Conv1D weights split colwise and rowwise).
zoo=$src/tests/data/zoo/gpt2/ts_train
zin=(--input input_ids="$zoo/inputs/input_ids.npy" --input labels="$zoo/inputs/labels.npy")
expect 0 "1 model written" -- grad "$zoo/model.onnx" --loss loss -o "$work/gpt2_grad.onnx"
expect 0 '"provenance": \{' -- shard "$zoo/model.onnx" --plan "$src/samples/plans/gpt2.json" \
  --mesh tp=2 -o "$work/gpt2_tp2" --json
expect 0 "2 models written" -- grad "$work/gpt2_tp2" --loss loss -o "$work/gpt2_tp2_grad"
expect 0 "check against .*: 60 outputs on 2 ranks, .*: ok" -- run "$work/gpt2_tp2_grad" "${zin[@]}" \
  --check "$work/gpt2_grad.onnx"
# the metadata as shard wrote it: the tied weight's two uses, each rank's rows
$py - "$work/gpt2_tp2_grad/model.rank1.onnx" <<'PY' || failures=$((failures + 1))
import json, sys, onnx
m = onnx.load(sys.argv[1])
p = json.loads({e.key: e.value for e in m.metadata_props}["ccgraph.shard.provenance"])
uses = {w["name"]: w for w in p["weights"] if w["param"] == "transformer.wte.weight"}
want = {"transformer.wte.weight": (0, False), "transformer.wte.weight.T": (0, True)}
got = {n: (w["dim"], w["transposed"]) for n, w in uses.items()}
if p["world"] != 2 or got != want or uses["transformer.wte.weight"]["ranks"] != [[[0, 128]], [[128, 256]]]:
    sys.exit(f"FAIL: provenance of transformer.wte.weight: {uses}")
print("ok: provenance of the tied embedding")
PY
# a fused QKV projection's weight: each rank its chunk of each block
if "$tool" shard "$work/gpt_fused.onnx" --plan "$plan" --mesh tp=2 -o "$work/fused_prov" --json |
  $py -c "
import json, sys
p = json.load(sys.stdin)['provenance']
w = [w for w in p['weights'] if w['name'] == 'h.0.attn.qkv.bias'][0]
sys.exit(0 if w['dim'] == 0 and w['ranks'] == [[[0, 32], [64, 96], [128, 160]], [[32, 64], [96, 128], [160, 192]]] else 1)"; then
  passes=$((passes + 1))
else
  echo "FAIL: provenance of the fused qkv bias is not chunk r of each block"
  failures=$((failures + 1))
fi
# missing, malformed and wrong metadata: clear errors, and a check that fails
prov() {
  $py - "$work/gpt2_tp2_grad" "$work/$1" "$2" <<'PY'
import json, os, sys, onnx
src, dst, how = sys.argv[1:]
os.makedirs(dst, exist_ok=True)
for r in range(2):
    m = onnx.load(f"{src}/model.rank{r}.onnx")
    e = [e for e in m.metadata_props if e.key == "ccgraph.shard.provenance"][0]
    p = json.loads(e.value)
    for w in p["weights"]:
        if how == "swap" and w["dim"] is not None:
            w["ranks"].reverse()
        if how == "past" and w["dim"] is not None:
            w["ranks"][r] = [[0, 100000]]
    e.value = json.dumps(p) if how != "text" else "not json"
    if how == "drop":
        m.metadata_props.remove(e)
    onnx.save(m, f"{dst}/model.rank{r}.onnx")
PY
}
prov prov_drop drop && expect 2 "rank 0: its gradients are not the reference's by name and the model has no 'ccgraph.shard.provenance' metadata" -- \
  run "$work/prov_drop" "${zin[@]}" --check "$work/gpt2_grad.onnx"
prov prov_text text && expect 2 "rank 0: metadata 'ccgraph.shard.provenance': not JSON" -- \
  run "$work/prov_text" "${zin[@]}" --check "$work/gpt2_grad.onnx"
prov prov_past past && expect 2 "rank 0: metadata 'ccgraph.shard.provenance': a range past the parameter's dim" -- \
  run "$work/prov_past" "${zin[@]}" --check "$work/gpt2_grad.onnx"
prov prov_swap swap && expect 4 "check against .*: FAILED" -- \
  run "$work/prov_swap" "${zin[@]}" --check "$work/gpt2_grad.onnx"

# expert_parallel: a slot weight holds another expert on each rank, named
# per rank by the entry's "params" (Mixtral of the zoo, 4 experts at tp=2;
# 38 outputs compared without them):
# the experts' gradients are compared too, and a wrong list is caught.
mix=$src/tests/data/zoo/mixtral/ts_train
min=(--input input_ids="$mix/inputs/input_ids.npy" --input labels="$mix/inputs/labels.npy")
$py - "$src/samples/plans/mixtral.json" "$work/mixtral_ep.json" <<'PY' || failures=$((failures + 1))
import json, sys
plan = json.load(open(sys.argv[1]))
out = {k: v for k, v in plan.items() if ".experts." not in k}
out["model.layers.*.block_sparse_moe"] = "expert_parallel"
json.dump(out, open(sys.argv[2], "w"))
PY
expect 0 "1 model written" -- grad "$mix/model.onnx" --loss loss -o "$work/mix_grad.onnx"
expect 0 "wrote .*rank0.onnx" -- shard "$mix/model.onnx" --plan "$work/mixtral_ep.json" \
  --mesh tp=2 -o "$work/mix_ep"
expect 0 "2 models written" -- grad "$work/mix_ep" --loss loss -o "$work/mix_ep_grad"
expect 0 "check against .*: 62 outputs on 2 ranks, .*: ok" -- run "$work/mix_ep_grad" "${min[@]}" \
  --check "$work/mix_grad.onnx"
eprov() {
  $py - "$work/mix_ep_grad" "$work/$1" "$2" <<'PY'
import json, os, sys, onnx
src, dst, how = sys.argv[1:]
os.makedirs(dst, exist_ok=True)
for r in range(2):
    m = onnx.load(f"{src}/model.rank{r}.onnx")
    e = [e for e in m.metadata_props if e.key == "ccgraph.shard.provenance"][0]
    p = json.loads(e.value)
    slots = [w for w in p["weights"] if "params" in w]
    if len(slots) < 2 or any(w["params"][0] == w["params"][1] for w in slots):
        sys.exit(f"FAIL: the slots' params are not one expert per rank: {slots}")
    for w in slots:
        if how == "swap":
            w["params"].reverse()
        if how == "short":
            w["params"].pop()
        if how == "unknown":
            w["params"][1] = "no.such.expert.weight"
    e.value = json.dumps(p)
    onnx.save(m, f"{dst}/model.rank{r}.onnx")
PY
}
eprov ep_swap swap
expect 4 "check against .*: FAILED" -- \
  run "$work/ep_swap" "${min[@]}" --check "$work/mix_grad.onnx"
eprov ep_short short
expect 2 "rank 0: metadata 'ccgraph.shard.provenance': an entry whose 'params' is not a list of one parameter per rank" -- \
  run "$work/ep_short" "${min[@]}" --check "$work/mix_grad.onnx"
eprov ep_unknown unknown
expect 2 "names a parameter the reference has no gradient of \('no.such.expert.weight'\)" -- \
  run "$work/ep_unknown" "${min[@]}" --check "$work/mix_grad.onnx"

# bad inputs
expect 2 "nope.onnx" -- shard "$work/nope.onnx" --plan "$plan" --mesh tp=2 -o "$work/x1"
echo '{"fc": "sideways"}' > "$work/bad_plan.json"
expect 2 "plan key 'fc'" -- shard "$work/gpt.onnx" --plan "$work/bad_plan.json" --mesh tp=2 -o "$work/x2"
expect 2 "is not divisible by tp=3" -- shard "$work/gpt.onnx" --plan "$plan" --mesh tp=3 -o "$work/x3"
echo '{"h.*.mlp.fc1": "colwise", "decoder.*": "rowwise"}' > "$work/unused.json"
expect 2 "plan entry 'decoder.\*' \(rowwise\) matches no module" -- shard "$work/gpt.onnx" --plan "$work/unused.json" --mesh tp=2 -o "$work/x4"
expect 2 "axis 'tp' .*not in the mesh" -- shard "$work/gpt.onnx" --plan "$plan" --mesh dp=2 -o "$work/x5"
expect 1 "--mesh and -o are required" -- shard "$work/gpt.onnx"
expect 0 "usage: ccgraph shard" -- shard --help
# -o makes missing parent folders; a failed export removes the ones it made
# (a model name too long for the rank files fails after they are made)
expect 0 "wrote .*/deep/a/b/gpt.rank0.onnx" -- shard "$work/gpt.onnx" --plan "$plan" --mesh tp=2 -o "$work/deep/a/b"
[ -f "$work/deep/a/b/gpt.rank1.onnx" ] || { echo "FAIL: no $work/deep/a/b/gpt.rank1.onnx"; failures=$((failures + 1)); }
long=$(printf 'g%.0s' $(seq 245))
cp "$work/gpt.onnx" "$work/$long.onnx"
expect 2 "File name too long" -- shard "$work/$long.onnx" --plan "$plan" --mesh tp=2 -o "$work/x6/a/b"
rm -f "$work/$long.onnx"
expect_absent "$work"/x{1..6}
expect_summary shard
