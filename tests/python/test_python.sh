#!/usr/bin/env bash
# The Python package as a user installs it: a fresh venv in the build folder
# over Debian's python3 (its numpy, onnx and pytest), `pip install` of
# python/ offline (no index, no build isolation: Debian's setuptools), then
# pytest on python/tests with the library just built. pytest's status is the
# test's; a run that collects nothing exits 5, a failure.
# usage: test_python.sh SOURCE_DIR VENV_DIR LIBRARY MODELS_DIR (test_onnx's
# exports: an SPMD model with a symbolic batch)
set -euo pipefail
src=$1 venv=$2 lib=$3 models=$4
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
# setuptools builds in python/build (ignored by git); a file left there by
# an older tree would be installed too, so that folder starts empty
rm -rf "$src/python/build"
"$venv/bin/pip" install --quiet --no-deps --no-build-isolation --no-index \
  --disable-pip-version-check "$src/python"
cd "$venv" # not the source folder: `import ccgraph` is the installed one
export CCGRAPH_LIBRARY=$lib CCGRAPH_SOURCE_DIR=$src CCGRAPH_EXPECT_INSTALLED=1
export CCGRAPH_TEST_MODELS=$models
export PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" -m pytest -p no:cacheprovider -q -ra \
  --rootdir "$src/python" "$src/python/tests"
