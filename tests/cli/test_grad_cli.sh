#!/usr/bin/env bash
# ccgraph grad on the models test_onnx exports: one model and a folder of
# per-rank models get their backward, the results pass onnx.checker and
# verify; bad inputs give their exit codes and messages, and leave nothing.
# usage: test_grad_cli.sh PATH/TO/ccgraph MODELS_DIR CHECK_MODELS.py
set -u
tool=$1 models=$2 checker=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
loss=/mlp/Add_5_output_0

run=("$tool")
. "$(dirname "$0")/expect.sh"

expect 0 'usage: ccgraph grad' -- grad --help
expect 0 '1 model written to .*/mlp_grad.onnx' -- grad "$models/megatron_mlp.onnx" --loss "$loss" -o "$work/mlp_grad.onnx"
expect 0 '2 models written to' -- grad "$models" --name megatron_tp2 --loss "$loss" --wrt 'fc*.weight' -o "$work/ranks"
expect 0 'ok: 2 ranks, 2 communication calls match' -- verify "$work/ranks"
expect 0 '"grad/fc2.weight"' -- grad "$models" --name megatron_tp2 --loss "$loss" --wrt 'fc*.weight' -o "$work/ranks_json" --json
if /usr/bin/python3 -c "
import json, subprocess, sys
d = json.loads(subprocess.run(sys.argv[1:], capture_output=True, text=True).stdout)
sys.exit(0 if d['models'] == 2 and d['per_rank'] and len(d['gradients']) == 2 else 1)" \
  "$tool" grad "$models" --name megatron_tp2 --loss "$loss" --wrt 'fc*.weight' -o "$work/ranks_json2" --json; then
  passes=$((passes + 1))
else
  echo "FAIL: grad --json is not the expected document"
  failures=$((failures + 1))
fi
mkdir "$work/bad"
expect 2 "no value named 'nope' to use as the loss" -- grad "$models/megatron_mlp.onnx" --loss nope -o "$work/bad/a.onnx"
expect 2 "wrt 'nothing\*' matches no float graph input or initializer" -- grad "$models/megatron_tp2.rank0.onnx" --loss "$loss" --wrt 'nothing*' -o "$work/bad/r"
expect 2 'missing.onnx' -- grad "$work/missing.onnx" --loss "$loss" -o "$work/bad/b.onnx"
expect 1 'missing --loss NAME' -- grad "$models/megatron_mlp.onnx" -o "$work/bad/c.onnx"
expect 1 'missing -o OUT' -- grad "$models/megatron_mlp.onnx" --loss "$loss"
expect 1 "--opset '9': give 17 to 24" -- grad "$models/megatron_mlp.onnx" --loss "$loss" --opset 9 -o "$work/bad/d.onnx"
# -o makes missing parent folders; a write that fails removes those it made
expect 0 '1 model written to .*/deep/a/mlp_grad.onnx' -- grad "$models/megatron_mlp.onnx" --loss "$loss" -o "$work/deep/a/mlp_grad.onnx"
expect 0 '2 models written to .*/deep/r/s' -- grad "$models" --name megatron_tp2 --loss "$loss" -o "$work/deep/r/s"
[ -f "$work/deep/a/mlp_grad.onnx" ] && [ -f "$work/deep/r/s/megatron_tp2.rank1.onnx" ] ||
  { echo "FAIL: grad -o into new folders wrote nothing"; failures=$((failures + 1)); }
expect 2 "File name too long" -- grad "$models/megatron_mlp.onnx" --loss "$loss" -o "$work/bad/x/y/$(printf 'g%.0s' $(seq 300)).onnx"
if [ -n "$(ls -A "$work/bad")" ]; then
  echo "FAIL: failed runs left files: $(ls "$work/bad")"
  failures=$((failures + 1))
else
  passes=$((passes + 1))
fi
if /usr/bin/python3 "$checker" "$work" >"$work/checker.log" 2>&1 &&
  /usr/bin/python3 "$checker" "$work/ranks" >>"$work/checker.log" 2>&1; then
  passes=$((passes + 1))
else
  echo "FAIL: onnx.checker refused a model ccgraph grad wrote:"
  sed 's/^/    /' "$work/checker.log"
  failures=$((failures + 1))
fi
expect_summary "cli grad"
