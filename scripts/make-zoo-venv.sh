#!/usr/bin/env bash
# Make the pinned Python environment that scripts/make-zoo.py needs to export
# the model zoo (tests/data/zoo). Only the zoo's maintainers need it: the test
# (tests/zoo/run_zoo.py) runs on the system python3 with numpy alone.
#
# usage: scripts/make-zoo-venv.sh [VENV_DIR]   (default: build-zoo-venv)
#   PYTHON=python3.11 picks the interpreter (3.9-3.12 have wheels for these pins).
#
# torch comes from PyPI: its Linux x86_64 wheel depends on NVIDIA's CUDA
# runtime wheels (about 3 GB installed). The zoo is exported on the CPU; the
# CUDA libraries are pulled only because PyPI's torch needs them to import.
# The install takes 4 to 6 minutes and 6.7 GB.
#
# onnx-ir and protobuf are pinned too: with protobuf 7 the dynamo exporter
# fails to serialize any model ("Field onnx.AttributeProto.i: Expected an
# int, got a boolean"), and onnxscript 0.4.0 cannot inline functions with
# onnx-ir 1.x ("The model contains functions. The version conversion pass
# does not support functions").
set -euo pipefail

VENV=${1:-build-zoo-venv}
PYTHON=${PYTHON:-python3}

# The pins. Change them together and re-run scripts/make-zoo.py: the manifest
# records the versions every file was made with.
PINS=(
  torch==2.8.0
  transformers==4.49.0
  onnx==1.18.0
  onnxscript==0.4.0
  onnx-ir==0.1.7
  protobuf==5.29.3
  numpy==2.2.3
)

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip==25.0.1
"$VENV/bin/python" -m pip install --quiet "${PINS[@]}"
"$VENV/bin/python" - <<'PY'
import sys, torch, transformers, onnx, onnxscript, numpy
print("zoo venv:", sys.version.split()[0], "torch", torch.__version__,
      "transformers", transformers.__version__, "onnx", onnx.__version__,
      "onnxscript", onnxscript.__version__, "numpy", numpy.__version__)
PY
