#!/usr/bin/env bash
# ccgraph export: a sharded GPT block's per-rank models rewritten in the
# ONNX Runtime dialect (com.microsoft collectives) at opset 18 still pass
# onnx.checker and verify and run equal to the unsharded model, and come
# back to the ccgraph dialect; a sequence-parallel model lowered for ORT
# (ccg_lower) runs equal too; one model at opset 21; a model the ORT
# dialect cannot express (a group of part of the mesh) fails naming the
# node and leaves nothing; bad options are usage errors.
# usage: test_export_cli.sh PATH/TO/ccgraph SOURCE_DIR WORK_DIR
set -u
tool=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
py=/usr/bin/python3
plan=$src/samples/plan_gpt_block.json
$py "$src/samples/make_gpt_block.py" "$work/gpt.onnx" >/dev/null || exit 1
"$tool" shard "$work/gpt.onnx" --plan "$plan" --mesh tp=4 -o "$work/tp4" >/dev/null || exit 1
"$tool" shard "$work/gpt.onnx" --plan "$plan" --mesh tp=2 -o "$work/sp" --sequence-parallel >/dev/null || exit 1
$py -c "import numpy as np; np.save('$work/ids.npy', (np.arange(16).reshape(2, 8) * 7 % 50).astype(np.int64))" || exit 1

run=("$tool")
. "$(dirname "$0")/expect.sh"

expect 0 'usage: ccgraph export' -- export --help
expect 0 '4 models written to .*/ort \(opset 18, ort dialect\)' -- export "$work/tp4" -o "$work/ort" --dialect ort --opset 18
expect 0 'ok: 4 ranks, 24 communication calls match' -- verify "$work/ort"
if $py -c "import onnx, sys; m = onnx.load('$work/ort/gpt.rank0.onnx'); sys.exit(0 if any(n.domain == 'com.microsoft' and n.op_type == 'AllReduce' for n in m.graph.node) else 1)"; then
  passes=$((passes + 1))
else
  echo "FAIL: export --dialect ort wrote no com.microsoft AllReduce"
  failures=$((failures + 1))
fi
expect 0 'check against .*: 4 outputs on 4 ranks, .*: ok' -- run "$work/ort" --input ids="$work/ids.npy" --check "$work/gpt.onnx"
expect 0 '"dialect": "ccgraph"' -- export "$work/ort" -o "$work/back" --json
expect 0 'check against .*: 4 outputs on 4 ranks, .*: ok' -- run "$work/back" --input ids="$work/ids.npy" --check "$work/gpt.onnx"
expect 0 '1 model written to .*gpt18.onnx \(opset 18' -- export "$work/gpt.onnx" -o "$work/gpt18.onnx" --opset 18 --inline
expect 0 '1 model written to .*gpt21.onnx \(opset 21' -- export "$work/gpt.onnx" -o "$work/gpt21.onnx" --opset 21
if $py -c "import onnx, sys; m = onnx.load('$work/gpt21.onnx', load_external_data=False); sys.exit(0 if [o.version for o in m.opset_import if o.domain == ''] == [21] else 1)"; then
  passes=$((passes + 1))
else
  echo "FAIL: export --opset 21 did not write opset 21"
  failures=$((failures + 1))
fi
# sequence parallel in the ORT dialect: each rank's ShardSlices become
# Slices of its chunk and its ReduceScatters AllReduce + Slice (ccg_lower)
expect 0 '2 models written to .*/ort_sp' -- export "$work/sp" -o "$work/ort_sp" --dialect ort
expect 0 'ok: 2 ranks, .*placements agree' -- verify "$work/ort_sp"
expect 0 'check against .*: 2 outputs on 2 ranks, .*: ok' -- run "$work/ort_sp" --input ids="$work/ids.npy" --check "$work/gpt.onnx"
if $py -c "
import onnx, sys
m = onnx.load('$work/ort_sp/gpt.rank1.onnx')
ops = [(n.domain, n.op_type) for n in m.graph.node]
sys.exit(0 if ('com.microsoft', 'AllReduce') in ops and ('', 'Slice') in ops and not any(d == 'ccgraph' for d, _ in ops) else 1)"; then
  passes=$((passes + 1))
else
  echo "FAIL: the lowered ORT model still has ccgraph collectives"
  failures=$((failures + 1))
fi
mkdir -p "$work/checked"
cp "$work"/ort/*.onnx "$work/checked/" && cp "$work/gpt18.onnx" "$work/checked/"
for f in "$work"/ort_sp/*.onnx; do cp "$f" "$work/checked/sp_$(basename "$f")"; done
if $py "$src/tests/onnx/check_models.py" "$work/checked" >"$work/checker.log" 2>&1; then
  passes=$((passes + 1))
else
  echo "FAIL: onnx.checker refused a model ccgraph export wrote:"
  sed 's/^/    /' "$work/checker.log"
  failures=$((failures + 1))
fi
# what the ORT dialect cannot say fails naming the node, and leaves nothing
"$tool" shard "$work/gpt.onnx" --plan "$plan" --mesh dp=2,tp=2 -o "$work/dptp" >/dev/null || exit 1
expect 2 "node '.*AllReduce.*' \(AllReduce\): com.microsoft collectives span every rank" -- \
  export "$work/dptp" -o "$work/no_ort" --dialect ort
expect 1 "--opset '9': give 17 to 24" -- export "$work/tp4" -o "$work/no_9" --opset 9
expect 1 "--dialect 'xyz': give ccgraph or ort" -- export "$work/tp4" -o "$work/no_x" --dialect xyz
expect 1 'missing -o OUT' -- export "$work/tp4"
expect 2 'nope.onnx' -- export "$work/nope.onnx" -o "$work/no_nope.onnx"
# -o makes missing parent folders, and a failure removes those it made
expect 0 '4 models written to .*/new/a/b' -- export "$work/tp4" -o "$work/new/a/b"
expect 0 '1 model written to .*/new1/a/gpt.onnx' -- export "$work/gpt.onnx" -o "$work/new1/a/gpt.onnx"
[ -f "$work/new/a/b/gpt.rank3.onnx" ] && [ -f "$work/new1/a/gpt.onnx" ] ||
  { echo "FAIL: export -o into new folders wrote nothing"; failures=$((failures + 1)); }
expect 2 "com.microsoft collectives span every rank" -- export "$work/dptp" -o "$work/no_deep/a/b" --dialect ort
expect 2 "File name too long" -- export "$work/gpt.onnx" -o "$work/no_long/a/$(printf 'g%.0s' $(seq 300)).onnx"
expect_absent "$work"/{no_ort,no_9,no_x,no_nope.onnx,no_deep,no_long}
expect 1 "--opset '25': give 17 to 24" -- shard "$work/gpt.onnx" --plan "$plan" --mesh tp=2 -o "$work/no_25" --opset 25
expect 0 'wrote .*rank0.onnx' -- shard "$work/gpt.onnx" --plan "$plan" --mesh tp=2 -o "$work/o19" --opset 19
if $py -c "import onnx, sys; m = onnx.load('$work/o19/gpt.rank0.onnx'); sys.exit(0 if [o.version for o in m.opset_import if o.domain == ''] == [19] else 1)"; then
  passes=$((passes + 1))
else
  echo "FAIL: shard --opset 19 did not write opset 19"
  failures=$((failures + 1))
fi
expect_summary "cli export"
