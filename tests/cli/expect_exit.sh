#!/usr/bin/env bash
# usage: expect_exit.sh CODE PATTERN COMMAND [ARGS...]
# Runs COMMAND; passes when it exits with CODE and its output (stdout and
# stderr) matches the extended regex PATTERN.
set -u
code=$1 pattern=$2
shift 2
out=$("$@" 2>&1)
got=$?
if [ "$got" -ne "$code" ]; then
  echo "FAIL: $* exited $got, expected $code"; echo "$out"; exit 1
fi
if ! grep -qE -- "$pattern" <<<"$out"; then
  echo "FAIL: $*: output lacks /$pattern/"; echo "$out"; exit 1
fi
echo "ok: $* exited $code with /$pattern/"
