#!/usr/bin/env bash
# The whole test suite, as README command (b) and CI run it: install what is
# missing, configure and build with -Werror, run every test, then build the
# unit suite again with AddressSanitizer + UndefinedBehaviorSanitizer and run
# it. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)

echo "== build (release, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCG_WERROR=ON
cmake --build build -j"$jobs"
echo "== tests"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCCG_SANITIZE=ON -DCCG_WERROR=ON
cmake --build build-asan -j"$jobs"
echo "== unit tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit
echo "== all tests passed"
