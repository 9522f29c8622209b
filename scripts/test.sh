#!/usr/bin/env bash
# The whole test suite, as README command (b) and CI run it: install what is
# missing, configure and build with -Werror, run every test, then build the
# unit suite again with AddressSanitizer + UndefinedBehaviorSanitizer and run
# it, and fuzz the ONNX importer for a minute (clang, libFuzzer, ASan +
# UBSan). Exits non-zero on any failure, a fuzzer crash included.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)

# Where the CUDA toolkit is installed the GPU path must build: ON turns a
# missing cuBLAS or NCCL into a configure error (AUTO would leave it out).
cuda=AUTO
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then
  cuda=ON
fi

echo "== build (release, -Werror, CUDA $cuda)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCG_WERROR=ON -DCCG_WITH_CUDA=$cuda
cmake --build build -j"$jobs"
echo "== tests"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCCG_SANITIZE=ON -DCCG_WERROR=ON -DCCG_WITH_CUDA=$cuda
cmake --build build-asan -j"$jobs"
echo "== unit tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit
echo "== fuzz the ONNX importer (libFuzzer + ASan + UBSan, 60 s)"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCG_FUZZ=ON -DCCG_WERROR=ON
cmake --build build-fuzz -j"$jobs" --target fuzz_import
# Seeds: the bad corpus and every small model the test suite exported.
rm -rf build-fuzz/corpus build-fuzz/crashes && mkdir -p build-fuzz/corpus build-fuzz/crashes
cp tests/data/bad/*.onnx build-fuzz/corpus/
find build -name '*.onnx' -size -256k -exec cp -t build-fuzz/corpus/ {} + 2>/dev/null || true
# First every input that once crashed it, then a minute of new ones.
build-fuzz/tests/fuzz/fuzz_import tests/fuzz/regressions/*
build-fuzz/tests/fuzz/fuzz_import -max_total_time=60 -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/ \
  build-fuzz/corpus
echo "== all tests passed"
