#!/usr/bin/env python3
"""What would run if ccgraph folded shape arithmetic: a zoo diagnostic.

usage: build-zoo-venv/bin/python scripts/zoo-fold-check.py CCGRAPH
           [--zoo tests/data/zoo] [--work DIR] [--only ARCH[/VARIANT]]

Most zoo failures are the first symbolic dim that ccgraph cannot relate to
another (docs/models.md); they hide whatever would fail next. This script
folds every model's shape subgraphs with onnxscript's optimizer first
(parameters are kept as initializers under their names, so gradients still
line up), then runs it as tests/zoo/run_zoo.py does: `ccgraph grad` for the
training variants, `ccgraph run`, and a comparison with torch's outputs and
gradients (max abs diff <= 1e-4). Nothing here is a test: it tells what is
behind the first failure. Needs the venv of scripts/make-zoo-venv.sh.
"""
import argparse
import json
import os
import subprocess

import numpy as np
import onnx
import onnxscript

TOL = 1e-4


def fold(model, keep):
    """onnxscript's optimizer, with the parameters in `keep` made graph
    inputs for the time being so that nothing folds them away."""
    for i in model.graph.initializer:
        if i.name in keep:
            model.graph.input.append(onnx.helper.make_tensor_value_info(
                i.name, i.data_type, list(i.dims)))
    model = onnxscript.optimizer.optimize(model)
    ins = [i for i in model.graph.input if i.name not in keep]
    del model.graph.input[:]
    model.graph.input.extend(ins)
    return model


def tool(cmd, work):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        lines = (p.stderr + p.stdout).strip().splitlines() or ["(nothing)"]
        raise RuntimeError(lines[-1].replace(work.rstrip("/") + "/", ""))


def check(ccgraph, zoo, m, work):
    d = os.path.join(work, m["arch"], m["variant"])
    os.makedirs(d, exist_ok=True)
    keep = set(m.get("grad_params", []))
    path = os.path.join(d, "model.onnx")
    onnx.save(fold(onnx.load(os.path.join(zoo, m["model"])), keep), path)
    if m.get("loss"):
        gpath = os.path.join(d, "grad.onnx")
        tool([ccgraph, "grad", path, "--loss", m["loss"], "--wrt",
              ",".join(m["grad_params"]), "-o", gpath], work)
        path = gpath
    out = os.path.join(d, "out")
    cmd = [ccgraph, "run", path, "--output-dir", out]
    for n, f in m["inputs"].items():
        cmd += ["--input", f"{n}={os.path.join(zoo, f)}"]
    tool(cmd, work)
    want = {n: np.load(os.path.join(zoo, f)) for n, f in m["outputs"].items()}
    if m.get("loss"):
        grads = np.load(os.path.join(zoo, m["grads"]))
        want.update({"grad/" + p: grads[p] for p in m["grad_params"]})
    worst, bad = 0.0, []
    for n, w in want.items():
        f = os.path.join(out, "rank0", n.replace("/", "_") + ".npy")
        if not os.path.exists(f):
            bad.append(f"{n} missing")
            continue
        got = np.load(f)
        diff = float(np.max(np.abs(got.astype(np.float64) - w))) \
            if got.shape == w.shape else float("inf")
        worst = max(worst, diff)
        if diff > TOL:
            bad.append(f"{n} differs by {diff:.3g}")
    if bad:
        raise RuntimeError("; ".join(bad[:4]))
    return worst


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ccgraph")
    ap.add_argument("--zoo", default=os.path.join(here, "..", "tests",
                                                  "data", "zoo"))
    ap.add_argument("--work", default="zoo_fold_work")
    ap.add_argument("--only")
    a = ap.parse_args()
    zoo, work = os.path.abspath(a.zoo), os.path.abspath(a.work)
    with open(os.path.join(zoo, "MANIFEST.json")) as f:
        models = json.load(f)["models"]
    ok = bad = 0
    for m in models:
        name = f"{m['arch']}/{m['variant']}"
        if "export_error" in m or (a.only and a.only not in (m["arch"],
                                                             name)):
            continue
        try:
            worst = check(os.path.abspath(a.ccgraph), zoo, m, work)
            ok += 1
            print(f"{name:28s} pass after folding (max abs diff "
                  f"{worst:.2g})", flush=True)
        except Exception as e:  # a report, not a test: go on
            bad += 1
            print(f"{name:28s} fails after folding: {e}", flush=True)
    print(f"zoo-fold-check: {ok} pass after folding, {bad} fail")


if __name__ == "__main__":
    main()
