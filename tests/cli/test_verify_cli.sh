#!/usr/bin/env bash
# `ccgraph verify` and `ccgraph cost` on the programs verify_fixtures writes:
# correct ones exit 0, mutated ones exit 2 with the first mismatch; cost
# prints the numbers worked out by hand in tests/unit/test_cost.c.
# usage: test_verify_cli.sh PATH/TO/ccgraph PATH/TO/verify_fixtures WORKDIR [wrapper...]
set -u
tool=$1 fixtures=$2 work=$3
shift 3
run=("$@" "$tool")
rm -rf "$work"
"$fixtures" "$work" || { echo "FAIL: verify_fixtures"; exit 1; }
cd "$work" || exit 1

. "$(dirname "$0")/expect.sh"

expect 0 'usage: ccgraph verify' -- verify --help
expect 1 'missing DIR or MODEL.onnx' -- verify
expect 1 "--p2p-buffer 'x' is not a count" -- verify mlp --p2p-buffer x
expect 0 '^ok: 2 ranks, 6 communication calls match; placements agree with every collective$' -- verify mlp
expect 0 '^ok: 2 ranks, 6 communication calls match; placements agree with every collective$' -- verify mlp/mlp.rank1.onnx
expect 0 '^ok: 4 ranks, 12 communication calls match; placements agree with every collective$' -- verify spmd_tp4.onnx
expect 0 '"ok": true' -- verify moe --json
expect 0 '^ok: 2 ranks' -- verify --stage-axis pp pipe/stage0.onnx pipe/stage1.onnx
expect 0 '^ok: 2 ranks' -- verify --stage-axis pp --p2p-buffer 0 pipe/stage0.onnx pipe/stage1.onnx
expect 2 "dtype mismatch at position 1 of the collectives over tp \[0 1\]: AllReduce '.*' on rank 0 is f32 but AllReduce '.*' on rank 1 is f16" -- verify mlp_dtype
expect 2 '"kind": "dtype"' -- verify mlp_dtype --json
expect 2 '"position": 1' -- verify mlp_dtype --json
expect 2 "missing collective at position 2 of the collectives over tp \[0 1 2 3\]: AllGather '.*' on rank 0 has no partner on rank 3" -- verify mlp_missing
expect 2 'group mismatch: .* on rank 0 is over tp \[0 1\] \(position 1\) while .* on rank 1 is over dp,tp \[0 1 2 3\]' -- verify mlp_group
expect 2 'split mismatch at position 0 .* on rank 0 sends in_splits\[1\]=3 \(48 elements\) to rank 1, but .* on rank 1 expects out_splits\[0\]=2' -- verify moe_splits
expect 2 "deadlock: a cycle of blocking waits: rank 0 at Recv '.*' waits for rank 1; rank 1 at Recv '.*' waits for rank 0" -- verify --stage-axis pp pipe_cycle/stage0.onnx pipe_cycle/stage1.onnx
expect 2 'unmatched send: Send .* on rank 0 \(message 5 to rank 1, tag 7\) is never received' -- verify --stage-axis pp pipe_unmatched/stage0.onnx pipe_unmatched/stage1.onnx
expect 2 "rank 0: placement: node '.*' \(ShardSlice\) on mesh axis 'tp' takes 'grad_w' as Partial\(sum\) and gives '.*' as Shard\(0\): slicing keeps each rank's partial sum unreduced \(a reduce-scatter was meant\)" -- verify placement
expect 2 '"kind": "placement"' -- verify placement --json
expect 2 "holds the models of several programs" -- verify two
expect 0 '^ok: 2 ranks, 6 communication' -- verify two --name a
expect 2 "x.rank1.onnx' is missing" -- verify gap
expect 2 'no per-rank models' -- verify pipe
expect 2 "stage axis 'dp' is not in the mesh" -- verify --stage-axis dp pipe/stage0.onnx pipe/stage1.onnx
expect 2 'cannot open|No such file|nope' -- verify nope.onnx

expect 0 'usage: ccgraph cost' -- cost --help
expect 1 "--link-gbps '0' is not a positive number" -- cost mlp --link-gbps 0
# tp=2 MLP: Broadcast 128 B x 1 + AllReduce 128 B x 2(1)/2 + AllGather 64 B x 1/2
# = 288 bus bytes per rank; at 1 Gbit/s (1.25e8 B/s) 2.304 us.
expect 0 '^step: 288 bus bytes on the busiest rank, 2\.304 us at 1 Gbit/s$' -- cost mlp --link-gbps 1
expect 0 'AllReduce +[^ ]+ +0 +2 +128 +1\.0000 +128\.0' -- cost mlp --link-gbps 1
expect 0 '"bus_bytes": 224' -- cost moe --json --link-gbps 8
expect 0 '"time_s": 2\.2(4|39999)' -- cost moe --json --link-gbps 8
expect 0 'step: 168 bus bytes' -- cost --stage-axis pp pipe/stage0.onnx pipe/stage1.onnx
expect 2 "moves \[batch,4\]: the size batch is symbolic" -- cost sym.onnx
# batch=8: [8,4] f32 = 128 B, factor 2(1)/2 = 1: 128 bus bytes, 1.024 us at 1 Gbit/s
expect 0 '^step: 128 bus bytes on the busiest rank, 1\.024 us at 1 Gbit/s$' -- cost sym.onnx --dims batch=8 --link-gbps 1
expect 0 '^ok: 2 ranks, 2 communication' -- verify sym.onnx --dims batch=8
expect 1 "--dims 'batch' is not NAME=VALUE" -- cost sym.onnx --dims batch

expect_summary "cli verify"
