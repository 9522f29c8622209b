#!/usr/bin/env python3
"""Conformance of the ONNX reader over ONNX's node test models (Debian's
libonnx-testdata). Every model.onnx whose ops are all in ccgraph's registry
must import, re-export (opset 17) and pass onnx.checker (full_check). Prints
how many were imported and the ops of the models that were not.
usage: conformance.py ONNX_CONVERT NODE_TEST_DIR WORK_DIR"""
import collections
import glob
import os
import subprocess
import sys

import onnx
import onnx.checker


def main():
    convert, node_dir, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    listed = subprocess.run([convert, "--list-ops"], check=True,
                            capture_output=True, text=True).stdout.split("\n")
    supported = {tuple(l.split()) for l in listed if l.strip()}
    models = sorted(glob.glob(os.path.join(node_dir, "*", "model.onnx")))
    if not models:
        print(f"FAIL: no node test models under {node_dir}")
        return 1
    unsupported_ops = collections.Counter()
    refused = []  # supported ops, but a feature the IR lacks (named)
    failed = []
    imported = 0
    for path in models:
        name = os.path.basename(os.path.dirname(path))
        model = onnx.load(path, load_external_data=False)
        ops = {(n.domain or "ai.onnx", n.op_type) for n in model.graph.node}
        missing = ops - supported
        if missing:
            for d, op in missing:
                unsupported_ops[op if d == "ai.onnx" else f"{d}.{op}"] += 1
            continue
        out = os.path.join(work, name + ".onnx")
        r = subprocess.run([convert, path, out], capture_output=True,
                           text=True)
        if r.returncode == 3:
            refused.append((name, r.stderr.strip()))
            continue
        if r.returncode != 0:
            failed.append((name, r.stderr.strip() or f"exit {r.returncode}"))
            continue
        imported += 1
        try:
            onnx.checker.check_model(out, full_check=True)
        except Exception as e:  # the checker raises several error types
            failed.append((name, f"re-exported model refused: {e}"))
    print(f"node test models: {len(models)}; all ops supported: "
          f"{imported + len(refused) + len(failed)}; imported and re-exported "
          f"(onnx.checker ok): {imported - sum(1 for f in failed if 're-exported' in f[1])}")
    print(f"refused for a feature ccgraph lacks ({len(refused)}):")
    for name, msg in refused:
        print(f"  {name}: {msg}")
    print(f"unsupported ops ({len(unsupported_ops)}): " +
          ", ".join(f"{op}({n})" for op, n in sorted(unsupported_ops.items())))
    for name, msg in failed:
        print(f"FAIL: {name}: {msg}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
