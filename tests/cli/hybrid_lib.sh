# Sourced by the tests of data, pipeline and tensor parallelism together
# (test_hybrid_cli.sh, test_zero_zoo_cli.sh) after expect.sh: the chain
# every combination runs, and how a zoo variant is fed and planned. The
# caller sets tool, src, work and run.

ok='per tensor [0-9.e+-]+: ok'

# shard -> verify -> grad -> verify -> run --check (outputs and gradients).
# args: NAME MODEL GRAD_REF LOSS INPUTS SHARD_ARGS...; $grad_args go to grad.
hybrid() {
  local name=$1 model=$2 ref=$3 loss=$4 inputs=$5
  shift 5
  local out=$work/$name
  expect 0 'wrote .*rank0.onnx' -- shard "$model" "$@" -o "$out"
  expect 0 '^ok: ' -- verify "$out"
  expect 0 'models written' -- grad "$out" --loss "$loss" ${grad_args:-} -o "$out.grad"
  expect 0 '^ok: ' -- verify "$out.grad"
  expect 0 "$ok" -- run "$out.grad" $inputs --check "$ref" --rtol 1e-4
}

zoo_inputs() {
  local in="" f
  for f in "$1"/inputs/*.npy; do in="$in --input $(basename "$f" .npy)=$f"; done
  echo "$in"
}

# zoo_plan DIR ARCH TAG: the plan a zoo variant shards with on tp (printed):
# the arch's sample plan, or ccgraph plan's proposal where a dynamo export's
# module paths differ from it.
zoo_plan() {
  local plan=$src/samples/plans/$2.json
  if ! "$tool" shard "$1/model.onnx" --plan "$plan" --mesh tp=2 -o "$work/${3}_probe" >/dev/null 2>&1; then
    plan=$work/${3}_plan.json
    "$tool" plan "$1/model.onnx" --mesh tp=2 -o "$plan" >/dev/null || return 1
  fi
  echo "$plan"
}

# For every training variant of the zoo (TorchScript and dynamo exports):
# its reference gradients (unsharded, full batch), inputs and plan, then
# `"$@" TAG MODEL GRAD_REF INPUTS PLAN`.
each_zoo_variant() {
  local z v arch tag in plan
  for z in "$src"/tests/data/zoo/*/*_train; do
    v=${z#"$src"/tests/data/zoo/} arch=${v%%/*} tag=${v/\//_}
    "$tool" grad "$z/model.onnx" --loss loss -o "$work/${tag}_ref.onnx" >/dev/null || exit 1
    in=$(zoo_inputs "$z")
    plan=$(zoo_plan "$z" "$arch" "$tag") || exit 1
    "$@" "$tag" "$z/model.onnx" "$work/${tag}_ref.onnx" "$in" "$plan"
  done
}
