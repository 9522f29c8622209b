#!/usr/bin/env bash
# cmake --install puts the library, headers, tool, CMake package and
# pkg-config file in place, and a program outside the tree builds against
# them both ways. usage: test_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/ccgraph/ccgraph.h include/ccgraph/core.h include/ccgraph/graph.h bin/ccgraph; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
lib=$(find "$prefix" -name 'libccgraph.so*' | head -n1)
[ -n "$lib" ] || { echo "FAIL: libccgraph.so not installed"; exit 1; }
cfg=$(find "$prefix" -name ccgraphConfig.cmake | head -n1)
[ -n "$cfg" ] || { echo "FAIL: ccgraphConfig.cmake not installed"; exit 1; }
pc=$(find "$prefix" -name ccgraph.pc | head -n1)
[ -n "$pc" ] || { echo "FAIL: ccgraph.pc not installed"; exit 1; }
libdir=$(dirname "$lib")
# Private headers stay private.
if find "$prefix/include" -name 'internal.h' -o -name 'arena.h' | grep -q .; then
  echo "FAIL: private headers were installed"; exit 1
fi

# The installed tool runs.
LD_LIBRARY_PATH=$libdir "$prefix/bin/ccgraph" --version | grep -q '^ccgraph '

# find_package(ccgraph)
cmake -S "$src/tests/install/consumer" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/cmake-build" >/dev/null
LD_LIBRARY_PATH=$libdir "$tmp/cmake-build/consumer" | grep -q 'consumer: ccgraph 0.1.0, 1 node(s)'

# pkg-config
export PKG_CONFIG_PATH=$(dirname "$pc")
cc -std=c11 $(pkg-config --cflags ccgraph) "$src/tests/install/consumer/main.c" \
  -o "$tmp/pc-consumer" $(pkg-config --libs ccgraph)
LD_LIBRARY_PATH=$libdir "$tmp/pc-consumer" | grep -q 'consumer: ccgraph 0.1.0, 1 node(s)'
echo "install: find_package and pkg-config consumers built and ran"
