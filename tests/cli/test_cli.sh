#!/usr/bin/env bash
# The ccgraph tool's documented behaviour: help, version, exit codes (0 ok,
# 1 usage, 2 bad input), and the output of its subcommands.
# usage: test_cli.sh PATH/TO/ccgraph [wrapper...]
set -u
tool=$1
shift
run=("$@" "$tool")

. "$(dirname "$0")/expect.sh"

expect 1 'usage: ccgraph' --
expect 0 'Exit status: 0 ok, 1 usage error, 2 bad input' -- --help
expect 0 'Commands:' -- help
expect 0 '^ccgraph [0-9]+\.[0-9]+\.[0-9]+$' -- --version
expect 1 "unknown command 'frobnicate'" -- frobnicate
expect 1 "unknown command 'nope'" -- help nope
expect 0 'usage: ccgraph ops' -- help ops

expect 0 'usage: ccgraph ops' -- ops --help
expect 0 '^AllToAll +ccgraph' -- ops
expect 0 '^MatMul +ai.onnx +2 +1' -- ops
expect 0 '"op": "LayerNormalization"' -- ops --json
expect 1 "unexpected argument 'extra'" -- ops extra

expect 0 'usage: ccgraph mesh' -- mesh --help
expect 0 'mesh dp=2,tp=2: 4 ranks' -- mesh dp=2,tp=2
expect 0 'groups over tp \(size 2\): \[0 1\] \[2 3\]' -- mesh dp=2,tp=2
expect 0 'groups over dp \(size 2\): \[0 2\] \[1 3\]' -- mesh dp=2,tp=2
expect 0 'groups over dp,tp \(size 4\): \[0 1 2 3\]' -- mesh dp=2,tp=2 --axes dp,tp
expect 0 'rank 5: dp=1 pp=0 tp=1' -- mesh dp=2,pp=2,tp=2
expect 0 '"world": 8' -- mesh dp=2,pp=2,tp=2 --json
expect 1 'missing the mesh SPEC' -- mesh
expect 1 "unknown option '--bogus'" -- mesh tp=2 --bogus
expect 1 '--axes needs a value' -- mesh tp=2 --axes
expect 2 "size of axis 'tp' must be a positive integer, got '0'" -- mesh tp=0
expect 2 "axis 'tp' appears twice" -- mesh tp=2,tp=2
expect 2 "'tp4' is not NAME=SIZE" -- mesh tp4
expect 2 "mesh axis 'ep' is not in the mesh \[dp=2,tp=2\]" -- mesh dp=2,tp=2 --axes ep

# The main job: sharded equals unsharded, and its errors.
expect 0 'usage: ccgraph demo' -- demo --help
expect 0 'ok: the sharded block matches the unsharded one' -- demo --ranks 2 --steps 1
expect 0 'collectives +AllReduce 6, AllGather 4, ReduceScatter 4' -- demo --ranks 2 --steps 1
expect 0 'max \|diff\| grads +[0-9.e-]+ \(12 parameters and the input\)' -- demo --ranks 2 --steps 1
expect 0 '"max_abs_diff_grads": [0-9.e-]+,' -- demo --ranks 2 --steps 1 --json
expect 4 'FAILED: differences above the tolerance' -- demo --ranks 2 --steps 1 --tolerance 0
expect 1 '--ranks 3: give 1, 2, 4 or 8' -- demo --ranks 3
expect 1 '--steps 0: give 1 to 100000' -- demo --steps 0
expect 1 '--tolerance x: give a number >= 0' -- demo --tolerance x
expect 2 "cannot create '/nonexistent/demo'" -- demo --out /nonexistent/demo

# CCG_LOG sets the log level; a bad value is reported, not fatal.
export CCG_LOG=debug
expect 2 '\[debug\] PARSE: mesh .tp=0.' -- mesh tp=0
export CCG_LOG=loud
expect 2 'CCG_LOG=loud is not one of debug, info, warn, error, off' -- mesh tp=0
export CCG_LOG=off
expect 2 '^ccgraph mesh: mesh .tp=0.: size' -- mesh tp=0
unset CCG_LOG

expect_summary "cli"
