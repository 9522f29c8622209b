#!/usr/bin/env bash
# Installs the Debian packages that building and testing ccgraph need, and only
# those that are missing. Safe to run again: with everything present it does
# nothing but say so. Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  cmake make gcc g++ pkg-config
  protobuf-c-compiler libprotobuf-c-dev
  libjansson-dev libcmocka-dev
  libopenmpi-dev openmpi-bin
  libopenblas-dev libdnnl-dev
  python3 python3-numpy python3-onnx python3-jsonschema libonnx-testdata
  python3-venv python3-setuptools python3-wheel python3-pytest
  graphviz valgrind
  clang clang-format libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present; nothing to install"
  exit 0
fi

echo "install-deps: installing ${#missing[@]} missing package(s): ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "install-deps: not root and no sudo; install these by hand: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
