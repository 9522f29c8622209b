#!/usr/bin/env bash
# Make the pinned Python environment in which bench/ort/bench_ort.py runs
# ONNX Runtime beside ccgraph. Only the benchmark needs it: the product and
# the tests depend on Debian packages alone, and the bench's test runs its
# ccgraph half without it.
#
# usage: scripts/make-bench-venv.sh [VENV_DIR]   (default: build-bench-venv)
#   PYTHON=... picks the interpreter (default /usr/bin/python3, the one the
#   tests run; ONNX Runtime 1.32 has wheels for 3.11 to 3.13).
#
# Where PyPI cannot be reached it says so and exits 0 without a venv: the
# benchmark then prints why ONNX Runtime is skipped.
set -euo pipefail

VENV=${1:-build-bench-venv}
PYTHON=${PYTHON:-/usr/bin/python3}
INDEX=${PIP_INDEX_URL:-https://pypi.org/simple}

# The pins. docs/performance.md records the figures measured with them.
PINS=(
  onnxruntime==1.32.0
  onnx==1.19.1
  numpy==2.2.6
)

if ! "$PYTHON" - "$INDEX" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/onnxruntime/", timeout=15)
except Exception as e:
    print(f"make-bench-venv: skipped: {sys.argv[1]} cannot be reached ({e})")
    sys.exit(1)
PY
then
  exit 0
fi

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip==25.0.1
"$VENV/bin/python" -m pip install --quiet "${PINS[@]}"
"$VENV/bin/python" - <<'PY'
import sys, onnxruntime, onnx, numpy
print("bench venv:", sys.version.split()[0], "onnxruntime",
      onnxruntime.__version__, "onnx", onnx.__version__, "numpy",
      numpy.__version__)
PY
