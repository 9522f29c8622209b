#!/usr/bin/env python3
"""Runs onnx.checker.check_model(full_check=True) on every model the test
suite exported (the .onnx files of the folder given, external data beside
them). Fails if the folder holds no model or if any model is refused.
usage: check_models.py FOLDER"""
import glob
import os
import sys

import onnx
import onnx.checker


def main():
    folder = sys.argv[1]
    paths = sorted(glob.glob(os.path.join(folder, "*.onnx")))
    if not paths:
        print(f"FAIL: no .onnx model in {folder}")
        return 1
    bad = 0
    for path in paths:
        model = onnx.load(path, load_external_data=False)
        if model.ir_version > onnx.IR_VERSION:
            print(f"FAIL: {path}: IR version {model.ir_version} is newer than "
                  f"the installed checker's ({onnx.IR_VERSION}); the suite "
                  f"keeps only models this checker can judge")
            bad += 1
            continue
        try:
            # A path (not a loaded model) so that external data is checked
            # where it lies.
            onnx.checker.check_model(path, full_check=True)
        except Exception as e:  # the checker raises several error types
            print(f"FAIL: {path}: {e}")
            bad += 1
            continue
        print(f"ok: {os.path.basename(path)} (IR {model.ir_version}, "
              f"{len(model.graph.node)} nodes)")
    print(f"{len(paths) - bad} of {len(paths)} models pass onnx.checker "
          f"{onnx.__version__} (full_check)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
