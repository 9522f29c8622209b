#!/usr/bin/env python3
"""onnx.checker.check_model(full_check=True) on the models whose paths are
read from stdin, one a line; prints one JSON object a line:
{"path": ..., "status": "ok" | "fail" | "skip", "reason": ...}.

A model this checker cannot judge is "skip" with the reason: an IR version
or a default-domain opset newer than the installed onnx knows (Debian's
onnx may be older than the exporter that made the zoo's dynamo models).
Exit 0 when every line was answered, 2 when onnx cannot be imported.
run_zoo.py starts one of these per job on its list of models."""
import json
import sys


def main():
    try:
        import onnx
        import onnx.checker
        import onnx.defs
    except ImportError as e:
        print(f"onnx_check: python3 cannot import onnx ({e})",
              file=sys.stderr)
        return 2
    max_opset = onnx.defs.onnx_opset_version()
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        r = {"path": path, "status": "ok", "reason": ""}
        try:
            model = onnx.load(path, load_external_data=False)
            opset = max([o.version for o in model.opset_import
                         if o.domain in ("", "ai.onnx")] or [0])
            if model.ir_version > onnx.IR_VERSION:
                r = {"path": path, "status": "skip",
                     "reason": f"IR {model.ir_version} is newer than onnx "
                     f"{onnx.__version__}'s checker knows "
                     f"(IR {onnx.IR_VERSION})"}
            elif opset > max_opset:
                r = {"path": path, "status": "skip",
                     "reason": f"opset {opset} is newer than onnx "
                     f"{onnx.__version__}'s checker knows "
                     f"(opset {max_opset})"}
            else:
                # a path, so that external data is checked where it lies
                onnx.checker.check_model(path, full_check=True)
        except Exception as e:  # the checker raises several error types
            msg = " ".join(str(e).split())
            r = {"path": path, "status": "fail", "reason": msg[:300]}
        print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
