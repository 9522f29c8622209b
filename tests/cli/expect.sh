# Sourced by the tool's test scripts: one way to check a command.
# The caller sets `run` (the command and any wrapper, e.g. valgrind, as an
# array); sourcing sets the counts `passes` and `failures` to 0, which a
# script's own checks may add to; expect_summary NAME prints the closing
# line and returns non-zero on any failure.
passes=0
failures=0

# expect CODE PATTERN -- ARGS...: exit status CODE, PATTERN (grep -E) in
# stdout and stderr together.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out
  out=$("${run[@]}" "$@" 2>&1)
  local got=$?
  if [ "$got" -ne "$code" ]; then
    echo "FAIL: ccgraph $* exited $got, expected $code"
    echo "$out" | sed 's/^/    /' | head -20
    failures=$((failures + 1))
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: ccgraph $*: output lacks /$pattern/"
    echo "$out" | sed 's/^/    /' | head -20
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

# expect_absent PATH...: a command that failed left none of these behind.
expect_absent() {
  local p
  for p in "$@"; do
    if [ -e "$p" ]; then
      echo "FAIL: $p left behind"
      failures=$((failures + 1))
    else
      passes=$((passes + 1))
    fi
  done
}

expect_summary() {
  echo "$1: ${passes} passed, ${failures} failed"
  [ "$failures" -eq 0 ]
}
