#!/bin/bash
# Runs check_models.py under a current onnx from PyPI, which knows IR 11 and
# later (Debian's python3-onnx 1.12 stops at IR 8), in a venv made under the
# build tree on first use and kept. When that venv cannot be made (no venv
# module, PyPI out of reach) it skips: exit 77 with the reason printed.
# usage: check_models_current.sh VENV MODELS_FOLDER check_models.py
set -u
venv=$1 models=$2 script=$3
if ! "$venv/bin/python" -c "import onnx" >/dev/null 2>&1; then
  rm -rf "$venv"
  if ! out=$(python3 -m venv "$venv" 2>&1 &&
    timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check \
      "onnx>=1.18" 2>&1); then
    echo "SKIP: no venv with PyPI's onnx (>= 1.18, IR 11) in $venv:"
    echo "$out" | tail -n 3
    rm -rf "$venv"
    exit 77
  fi
fi
exec "$venv/bin/python" "$script" "$models"
