#!/usr/bin/env bash
# ccgraph run on the GPT-style sample: sharded rank models (tp=2 with
# sequence parallel, tp=4) run on local ranks equal the unsharded model
# (--check), inputs from .npy and .pb, outputs written as .npy that numpy
# reads; bad inputs give their exit codes and messages.
# usage: test_run_cli.sh PATH/TO/ccgraph SOURCE_DIR WORK_DIR
set -u
tool=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
py=/usr/bin/python3
$py "$src/samples/make_gpt_block.py" "$work/gpt.onnx" >/dev/null || exit 1
for cfg in "tp=2 --sequence-parallel" "tp=4"; do
  set -- $cfg
  "$tool" shard "$work/gpt.onnx" --plan "$src/samples/plan_gpt_block.json" \
    --mesh "$1" -o "$work/${1/=/}${2:+_sp}" ${2:-} >/dev/null || exit 1
done
$py - "$work" <<'PY' || exit 1
import sys, numpy as np
from onnx import numpy_helper
w = sys.argv[1]
ids = (np.arange(16).reshape(2, 8) * 7 % 50).astype(np.int64)
np.save(f"{w}/ids.npy", ids)
open(f"{w}/ids.pb", "wb").write(numpy_helper.from_array(ids, "ids").SerializeToString())
np.save(f"{w}/f32.npy", np.zeros((2, 8), np.float32))
np.save(f"{w}/big.npy", ids.astype(">i8"))
np.save(f"{w}/fortran.npy", np.asfortranarray(ids.reshape(4, 4)))
open(f"{w}/junk.npy", "wb").write(b"not numpy")
PY

run=("$tool")
. "$(dirname "$0")/expect.sh"

expect 0 'usage: ccgraph run' -- run --help
expect 0 'check against .*: 2 outputs on 2 ranks, max \|diff\| [0-9.e-]+ \(tolerance 0.0001\): ok' -- \
  run "$work/tp2_sp" --input ids="$work/ids.npy" --output-dir "$work/out" --check "$work/gpt.onnx"
expect 0 'ran 4 ranks, 2 steps' -- run "$work/tp4" --input ids="$work/ids.pb" --steps 2 --check "$work/gpt.onnx"
expect 0 '"max_abs_diff": [0-9.e-]+' -- run "$work/tp4" --input ids="$work/ids.npy" --check "$work/gpt.onnx" --json
expect 4 'FAILED' -- run "$work/tp2_sp" --input ids="$work/ids.npy" --check "$work/gpt.onnx" --tolerance 0
expect 0 'ran 1 rank' -- run "$work/gpt.onnx" --input ids="$work/ids.npy"

# --output-dir makes missing parent folders; a failure removes those made
expect 0 'written to .*/oo/a/b' -- run "$work/tp4" --input ids="$work/ids.npy" --output-dir "$work/oo/a/b"
[ -f "$work/oo/a/b/rank3/logits.npy" ] || { echo "FAIL: no $work/oo/a/b/rank3/logits.npy"; failures=$((failures + 1)); }
expect 2 "File name too long" -- run "$work/tp4" --input ids="$work/ids.npy" --output-dir "$work/no_out/a/$(printf 'g%.0s' $(seq 300))"
expect_absent "$work/no_out"

# A dynamic-axes export (batch and seq symbolic, head reshapes' targets
# computed by Shape -> Gather -> Unsqueeze -> Concat with the head count a
# Constant): equal to the static model where the sizes agree; sharded, its
# ranks equal it at two batch/seq sizes (the executor binds them per run),
# with the static model's collectives (Shape of a shard gathers nothing).
$py "$src/samples/make_gpt_block.py" "$work/dyn.onnx" --dynamic >/dev/null || exit 1
$py "$src/samples/make_gpt_block.py" "$work/dyn_fused.onnx" --dynamic --fused-qkv >/dev/null || exit 1
$py -c "import numpy as np; np.save('$work/ids_3x4.npy', (np.arange(12).reshape(3, 4) * 5 % 100).astype(np.int64))" || exit 1
expect 0 'max \|diff\| 0 .*: ok' -- run "$work/dyn.onnx" --input ids="$work/ids.npy" --check "$work/gpt.onnx"
expect 0 'collectives: AllReduce 5, AllGather 1$' -- shard "$work/dyn.onnx" \
  --plan "$src/samples/plan_gpt_block.json" --mesh tp=2 -o "$work/dyn_tp2"
expect 0 'collectives: AllGather 6, ReduceScatter 5, ShardSlice 1$' -- shard "$work/dyn_fused.onnx" \
  --plan "$src/samples/plan_gpt_block.json" --mesh tp=4 -o "$work/dyn_fused_tp4_sp" --sequence-parallel
for ids in ids ids_3x4; do
  expect 0 'check against .*: 2 outputs on 2 ranks, .*: ok' -- \
    run "$work/dyn_tp2" --input ids="$work/$ids.npy" --check "$work/dyn.onnx"
  expect 0 'check against .*: 4 outputs on 4 ranks, .*: ok' -- \
    run "$work/dyn_fused_tp4_sp" --input ids="$work/$ids.npy" --check "$work/dyn_fused.onnx"
done
expect 2 "input 'ids' is not given: pass --input ids=FILE" -- run "$work/tp4"
expect 2 "input 'ids' needs i64 of rank 2; the file holds f32" -- run "$work/tp4" --input ids="$work/f32.npy"
expect 2 "NumPy dtype '>i8' is not supported" -- run "$work/tp4" --input ids="$work/big.npy"
expect 2 'Fortran-order array' -- run "$work/tp4" --input ids="$work/fortran.npy"
expect 2 'not a NumPy .npy file' -- run "$work/tp4" --input ids="$work/junk.npy"
expect 2 "missing.npy: No such file" -- run "$work/tp4" --input ids="$work/missing.npy"
expect 2 "--input 'nope': the model has no value of that name" -- run "$work/tp4" --input ids="$work/ids.npy" --input nope="$work/ids.npy"
expect 2 "--ranks 3: the model's mesh has 4 ranks" -- run "$work/tp4" --input ids="$work/ids.npy" --ranks 3
expect 2 "'ids' is i64: --random-inputs fills float inputs only" -- run "$work/tp4" --random-inputs 1
expect 1 "--comm gloo: give local \\(threads\\), mpi \\(under mpirun\\) or nccl" -- run "$work/tp4" --comm gloo
# The GPU options: where they are refused before anything runs.
expect 1 "--device tpu: give cpu or cuda" -- run "$work/tp4" --device tpu
expect 1 "--device cuda runs one rank per process and the mesh has 4: give --comm nccl" -- \
  run "$work/tp4" --device cuda --input ids="$work/ids.npy"
expect 1 "--comm nccl moves GPU memory: give --device cuda" -- run "$work/tp4" --comm nccl --device cpu
expect 1 "--device cuda: GPU ranks talk through --comm nccl, not local" -- run "$work/tp4" --device cuda --comm local
expect 1 "--tf32 needs --device cuda" -- run "$work/tp4" --tf32
expect 1 "--cuda-graph needs --device cuda" -- run "$work/tp4" --cuda-graph
# One rank on the GPU: where none can be used (no driver, no GPU, or a
# build without CUDA) the refusal says why, with the CUDA error text, and
# exits 3; on a machine with a GPU it runs and equals the CPU's result.
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  expect 0 'check against .*: ok' -- run "$work/gpt.onnx" --device cuda --input ids="$work/ids.npy" --check "$work/gpt.onnx"
  expect 0 'check against .*: ok' -- run "$work/gpt.onnx" --device cuda --cuda-graph --steps 3 --input ids="$work/ids.npy" --check "$work/gpt.onnx"
else
  expect 3 "device cuda.*(cudaGetDeviceCount: .*\\(cuda[A-Za-z]+\\)|built without CUDA)" -- \
    run "$work/gpt.onnx" --device cuda --input ids="$work/ids.npy"
  # the nccl communicator, from a launcher's environment: the same refusal
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 CCG_RENDEZVOUS="file:$work/nccl.id" \
    expect 3 "(cudaGetDeviceCount|CUDA driver|nccl communicator is not in this build)" -- \
    run "$work/gpt.onnx" --comm nccl --input ids="$work/ids.npy"
fi
# Under mpirun each process runs its own rank; rank 0 checks.
if command -v mpirun >/dev/null && "$tool" run "$work/gpt.onnx" --comm mpi --input ids="$work/ids.npy" >/dev/null 2>&1; then
  out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe \
    "$tool" run "$work/tp2_sp" --comm mpi --input ids="$work/ids.npy" --output-dir "$work/mout" \
    --check "$work/gpt.onnx" 2>&1)
  if grep -qE 'ran 2 ranks.*\n?' <<<"$out" && grep -qE 'check against .*: ok' <<<"$out" &&
    [ -f "$work/mout/rank0/logits.npy" ] && [ -f "$work/mout/rank1/logits.npy" ]; then
    passes=$((passes + 1))
  else
    echo "FAIL: run --comm mpi under mpirun:"
    echo "$out" | sed 's/^/    /' | head -20
    failures=$((failures + 1))
  fi
else
  echo "SKIP: run --comm mpi: no mpirun or no MPI in this build"
fi
expect 1 "--input 'ids' is not NAME=FILE" -- run "$work/tp4" --input ids
# Forward+backward: the sharded ranks' gradients against the unsharded
# model's (each rank 0 shard against its slice of the reference).
"$tool" grad "$work/gpt.onnx" --loss logits -o "$work/gpt_grad.onnx" >/dev/null || failures=$((failures + 1))
"$tool" grad "$work/tp2_sp" --loss logits -o "$work/tp2_sp_grad" >/dev/null || failures=$((failures + 1))
expect 0 'check against .*: 86 outputs on 2 ranks, max \|diff\| [0-9.e-]+ \(tolerance 0.0001\): ok' -- \
  run "$work/tp2_sp_grad" --input ids="$work/ids.npy" --check "$work/gpt_grad.onnx"
# every gradient of every rank is compared: none is skipped (the
# vocab-parallel embedding's rows are exactly its slice of the weight)
if "$tool" run "$work/tp2_sp_grad" --input ids="$work/ids.npy" --check "$work/gpt_grad.onnx" 2>&1 | grep -q skipped; then
  echo "FAIL: run --check skipped an output of the sharded gradients"
  failures=$((failures + 1))
else
  passes=$((passes + 1))
fi
# The written outputs: every rank's logits, equal across ranks (replicated).
if $py -c "
import numpy as np, sys
a = np.load('$work/out/rank0/logits.npy'); b = np.load('$work/out/rank1/logits.npy')
sys.exit(0 if a.shape == (2, 8, 128) and a.dtype == np.float32 and (a == b).all() else 1)"; then
  passes=$((passes + 1))
else
  echo "FAIL: the written .npy outputs are not the replicated logits"
  failures=$((failures + 1))
fi
expect_summary "cli run"
