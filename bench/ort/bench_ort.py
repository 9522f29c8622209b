#!/usr/bin/env python3
"""ccgraph beside ONNX Runtime on the same ONNX files, inputs and threads.

usage: bench_ort.py --bench-run PATH --ccgraph PATH [--smoke] [--work DIR]
                    [--venv DIR] [--threads 1,2] [--models a,b,...]
                    [--warmup W] [--steps K] [--rounds R]
                    [--no-coretype-unset] [--memory-only]

Writes the models (bench/ort/models.py) and their inputs into a temporary
folder (--work keeps them there), then for every model and thread count:
ccgraph's step time, measured in process by bench_run (bench/bench_run.c:
ccg_exec_run alone, no process start or model load), and ONNX Runtime's
(CPU provider, intra_op_num_threads N, inter_op_num_threads 1, sequential
execution, graph optimizations at ORT's default level), each the median of
K steps after W warm-up steps, in R rounds that alternate ccgraph and
ORT (the median of the rounds' medians); their outputs must agree within
1e-3 * max(1, max |ORT's output|). Where OPENBLAS_CORETYPE is set, ccgraph
is also timed with it unset (ONNX Runtime's GEMM does not read it). Then
the memory of each ccgraph run: the peak resident set over the steps
against the weights plus the memory plan's arena (the kernels' scratch is
planned in it), whole and less the process's resident set before loading
(its code and libraries; target 1.2); the inputs, which the caller holds
and the run reads in place, are in the peak and shown beside it; and the
anonymous resident set after the steps (RssAnon: data, heap, stacks and
generated code, no file-backed code pages) against weights + plan; then
the run peak broken down: the data, the file-backed code, the code
generated at run time and the other anonymous pages.
--memory-only skips ONNX Runtime and the repeated rounds (1 warm-up and 2
steps unless given; outputs still checked against NumPy): the memory table
in seconds.

ONNX Runtime comes from the venv of scripts/make-bench-venv.sh (--venv,
else $CCG_BENCH_VENV, else build-bench-venv at the top of the source
tree): the script re-runs itself there. Without it, ccgraph's outputs are
compared with NumPy's (the zoo model's with torch's stored outputs) and the
ORT columns say why they are empty. Nothing is downloaded.

--threads N is passed to ccgraph only where `ccgraph run --help` offers
--threads; otherwise ccgraph runs at its default in every row, beside ONNX
Runtime at N threads.

The last line is one JSON document: {"bench":"ort","ok":true|false, ...}.
Exit 1 when an output disagrees or a run fails.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import models  # noqa: E402

TOL = 1e-3
MIB = 1 << 20


def find_ort(args, argv):
    """onnxruntime, or None and the reason; may re-exec in the venv."""
    try:
        import onnxruntime
        return onnxruntime, None
    except ImportError:
        pass
    venv = args.venv or os.environ.get("CCG_BENCH_VENV") or \
        os.path.join(ROOT, "build-bench-venv")
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(py) and os.path.realpath(sys.prefix) != \
            os.path.realpath(venv):
        os.execv(py, [py, os.path.abspath(__file__)] + argv)
    if not os.path.exists(py):
        return None, (f"no venv at {venv} (make it with "
                      "scripts/make-bench-venv.sh)")
    return None, f"onnxruntime does not import in {venv}"


def machine(ort):
    info = {"cpu": platform.processor() or "?", "flags": [],
            "cores": len(os.sched_getaffinity(0)),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
            "python": platform.python_version(), "numpy": np.__version__,
            "onnx": models.onnx.__version__,
            "onnxruntime": ort.__version__ if ort else None}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    fl = line.split(":", 1)[1].split()
                    info["flags"] = [x for x in ("avx2", "avx512f", "fma")
                                     if x in fl]
                    break
    except OSError:
        pass
    return info


def pick_zoo(smoke):
    """The largest TorchScript static export of tests/data/zoo."""
    zoo = os.path.join(ROOT, "tests", "data", "zoo")
    try:
        with open(os.path.join(zoo, "MANIFEST.json")) as f:
            man = json.load(f)
    except OSError as e:
        return None, f"no zoo manifest ({e})"
    cands = [m for m in man["models"] if m["variant"] == "ts_static"]
    if not cands:
        return None, "no ts_static model in the zoo"
    m = max(cands, key=lambda m: os.path.getsize(os.path.join(zoo, m["model"])))
    inputs = {k: np.load(os.path.join(zoo, p)) for k, p in m["inputs"].items()}
    outs = {k: np.load(os.path.join(zoo, p)) for k, p in m["outputs"].items()}
    return (os.path.join(zoo, m["model"]), inputs, lambda _: outs,
            f"zoo {m['arch']}/{m['variant']}"), None


def make_models(args, work):
    """[(label, model path, inputs, reference, steps)] written under work."""
    s = args.smoke
    # (hidden, seq, layers, heads) of a and b; chain nodes; mlp width, batch
    ta, tb = ((32, 8, 1, 2), (16, 8, 2, 2)) if s else \
        ((1024, 512, 1, 16), (256, 128, 2, 4))
    nodes, (width, batch) = (200, (64, 4)) if s else (10000, (4096, 64))

    def tlabel(t):
        return f"transformer h{t[0]} s{t[1]} l{t[2]}"
    makers = {
        "a": (tlabel(ta), lambda: models.transformer(*ta), 1),
        "b": (tlabel(tb), lambda: models.transformer(*tb), 3),
        "c": (f"chain {nodes} Add/Mul [64]", lambda: models.chain(nodes), 3),
        "d": (f"mlp {width}x{width} batch {batch}",
              lambda: models.mlp(width, batch), 1),
    }
    out = []
    for key in args.models:
        if key == "e":
            z, why = pick_zoo(s)
            if z:
                out.append((z[3], z[0], z[1], z[2], 3))
            else:
                print(f"model e skipped: {why}")
            continue
        label, make, mult = makers[key]
        model, inputs, ref = make()
        d = os.path.join(work, key)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        models.onnx.save(model, path)
        out.append((label, path, inputs, ref, mult))
    return out


def write_inputs(d, inputs):
    os.makedirs(d, exist_ok=True)
    flags = []
    for i, (name, arr) in enumerate(inputs.items()):
        p = os.path.join(d, f"in{i}.pb")
        with open(p, "wb") as f:
            f.write(models.tensor_bytes(arr, name))
        flags += ["--input", f"{name}={p}"]
    return flags


def run_ccgraph(args, path, in_flags, threads, d, env):
    """bench_run's JSON and outputs {name: array}; raises on failure."""
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    cmd = [args.bench_run, path, *in_flags, "--warmup", str(args.warmup),
           "--steps", str(args.k), "--output-dir", d]
    if threads:
        cmd += ["--threads", str(threads)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: "
                           f"{p.stderr.strip()}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    outs = dict(models.read_tensor(os.path.join(d, f))
                for f in sorted(os.listdir(d)) if f.endswith(".pb"))
    return res, outs


def ort_session(ort, path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]), \
        str(so.graph_optimization_level)


def run_ort(sess, args, inputs):
    """Median ms of K steps after the warm-up, and the outputs by name."""
    feed = {i.name: inputs[i.name] for i in sess.get_inputs()}
    for _ in range(args.warmup):
        sess.run(None, feed)
    ms = []
    for _ in range(args.k):
        t0 = time.perf_counter()
        outs = sess.run(None, feed)
        ms.append(1e3 * (time.perf_counter() - t0))
    names = [o.name for o in sess.get_outputs()]
    return statistics.median(ms), dict(zip(names, outs))


def compare(got, want):
    """(max |diff|, allowed, ok) over the outputs want names."""
    worst, allowed, ok = 0.0, 0.0, True
    for name, w in want.items():
        g = got.get(name)
        w = np.asarray(w)
        tol = TOL * max(1.0, float(np.abs(w).max()) if w.size else 1.0)
        if g is None or g.shape != w.shape:
            return float("inf"), tol, False
        d = float(np.abs(g.astype(np.float64) - w).max()) if w.size else 0.0
        worst, allowed = max(worst, d), max(allowed, tol)
        ok = ok and d <= tol
    return worst, allowed, ok


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def print_tables(rows, mem, unset):
    print()
    print("## time (ms per step, median)")
    head = f"{'model':34} {'thr':>4} {'ccgraph':>10} {'ORT':>10} {'ratio':>7}"
    if unset:
        head += f" {'ccg unset':>10} {'ratio':>7}"
    print(head + f" {'max|diff|':>10} {'check':>6}")
    for r in rows:
        line = (f"{r['model']:34} {r['threads_label']:>4} "
                f"{fmt(r['ccgraph_ms'], '.3f'):>10} {fmt(r['ort_ms'], '.3f'):>10} "
                f"{fmt(r['ratio']):>7}")
        if unset:
            line += (f" {fmt(r.get('ccgraph_unset_ms'), '.3f'):>10} "
                     f"{fmt(r.get('ratio_unset')):>7}")
        print(line + f" {r['max_diff']:>10.2e} {r['check']:>6}")
    print()
    print("## ccgraph memory (MiB; run peak: VmHWM over the steps)")
    print(f"{'model':34} {'thr':>4} {'weights':>8} {'plan':>7} "
          f"{'w+plan':>7} {'inputs':>7} {'run peak':>9} {'ratio':>6} "
          f"{'base':>6} {'-base':>6} {'anon':>6} {'ratio':>6} "
          f"{'load peak':>9}")
    for m in mem:
        need = max(1, m['weights_bytes'] + m['plan_peak_bytes'])
        print(f"{m['model']:34} {m['threads']!s:>4} "
              f"{m['weights_bytes'] / MIB:8.1f} "
              f"{m['plan_peak_bytes'] / MIB:7.2f} "
              f"{(m['weights_bytes'] + m['plan_peak_bytes']) / MIB:7.1f} "
              f"{m.get('inputs_bytes', 0) / MIB:7.2f} "
              f"{m['run_peak_rss_bytes'] / MIB:9.1f} "
              f"{m['run_peak_ratio']:6.2f} {m['base_rss_bytes'] / MIB:6.1f} "
              f"{m['above_base_ratio']:6.2f} "
              f"{m.get('anon_rss_bytes', 0) / MIB:6.1f} "
              f"{m.get('anon_rss_bytes', 0) / need:6.2f} "
              f"{m['load_peak_rss_bytes'] / MIB:9.1f}")
    print_breakdown(mem)


def print_breakdown(mem):
    """The run peak in parts: the data (weights, plan, inputs), then what
    bench_run read from /proc/self/smaps after the steps: file-backed pages
    (code and read-only data of the program and libraries), anonymous
    executable pages (code generated at run time: oneDNN's kernels), the
    other anonymous pages (heap, the graph's and the program's structures,
    oneDNN's packing blocks, libraries' data, stacks); "peak-end": what the
    peak held that the end of the steps did not."""
    if not mem or "file_rss_bytes" not in mem[0]:
        return
    print()
    print("## ccgraph run peak, broken down (MiB)")
    print(f"{'model':34} {'thr':>4} {'run peak':>9} {'weights':>8} "
          f"{'plan':>7} {'inputs':>7} {'code':>6} {'gen.code':>8} "
          f"{'other':>6} {'peak-end':>8}")
    for m in mem:
        anon, jit = m['anon_rss_bytes'], m['jit_rss_bytes']
        data = m['weights_bytes'] + m['plan_peak_bytes'] + \
            m.get('inputs_bytes', 0)
        other = anon - jit - data
        rest = m['run_peak_rss_bytes'] - anon - m['file_rss_bytes']
        print(f"{m['model']:34} {m['threads']!s:>4} "
              f"{m['run_peak_rss_bytes'] / MIB:9.1f} "
              f"{m['weights_bytes'] / MIB:8.1f} "
              f"{m['plan_peak_bytes'] / MIB:7.2f} "
              f"{m.get('inputs_bytes', 0) / MIB:7.2f} "
              f"{m['file_rss_bytes'] / MIB:6.1f} {jit / MIB:8.1f} "
              f"{other / MIB:6.1f} {rest / MIB:8.1f}")


def bench_model(args, ort, entry, work, has_threads, env_unset, rows, mem):
    """Every thread count: R rounds of ccgraph (and ccgraph with
    OPENBLAS_CORETYPE unset) then ORT, alternating so that the load of a
    shared machine falls on both alike; each figure is the median of the
    rounds' medians."""
    label, path, inputs, ref, mult = entry
    d = os.path.join(work, "io", label.split()[0] + str(len(rows)))
    in_flags = write_inputs(os.path.join(d, "in"), inputs)
    want = None if ort else ref(inputs)
    seen, ok_all = set(), True
    for n in args.threads:
        t = n if has_threads else 0
        sess, level = ort_session(ort, path, n) if ort else (None, None)
        ccg, unset, ort_ms = [], [], []
        for _ in range(args.rounds):
            res, outs = run_ccgraph(args, path, in_flags, t,
                                    os.path.join(d, "out"), None)
            ccg.append(res["median_ms"])
            if t not in seen:
                seen.add(t)
                need = res["weights_bytes"] + res["plan_peak_bytes"]
                mem.append(dict(res, model=label,
                                threads=t if has_threads else "default",
                                above_base_ratio=(res["run_peak_rss_bytes"] -
                                                  res["base_rss_bytes"]) /
                                need))
            if env_unset:
                unset.append(run_ccgraph(args, path, in_flags, t,
                                         os.path.join(d, "out_unset"),
                                         env_unset)[0]["median_ms"])
            if sess:
                ms, want = run_ort(sess, args, inputs)
                ort_ms.append(ms)
        row = {"model": label, "threads": n,
               "threads_label": str(n) if has_threads else f"{n}*",
               "rounds": args.rounds, "ccgraph_ms": statistics.median(ccg),
               "ort_ms": statistics.median(ort_ms) if sess else None,
               "ratio": None}
        if unset:
            row["ccgraph_unset_ms"] = statistics.median(unset)
        if sess:
            row["ratio"] = row["ccgraph_ms"] / row["ort_ms"]
            if unset:
                row["ratio_unset"] = row["ccgraph_unset_ms"] / row["ort_ms"]
            row["against"], row["ort_opt_level"] = "onnxruntime", level
        else:
            row["against"] = "torch" if label.startswith("zoo") else "numpy"
        row["max_diff"], row["tolerance"], ok = compare(outs, want)
        row["check"] = "ok" if ok else "FAIL"
        ok_all = ok_all and ok
        rows.append(row)
        print(f"{label}: threads {row['threads_label']}: ccgraph "
              f"{fmt(row['ccgraph_ms'], '.3f')} ms, ORT "
              f"{fmt(row['ort_ms'], '.3f')} ms, max|diff| "
              f"{row['max_diff']:.2e} against {row['against']} "
              f"({row['check']})", flush=True)
    return ok_all


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench-run", required=True)
    ap.add_argument("--ccgraph", required=True)
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, 1 warm-up and 3 steps")
    ap.add_argument("--work")
    ap.add_argument("--venv")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default="a,b,c,d,e")
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--rounds", type=int,
                    help="alternations of ccgraph and ORT (default 3, "
                    "smoke 1)")
    ap.add_argument("--no-coretype-unset", action="store_true")
    ap.add_argument("--memory-only", action="store_true",
                    help="no ONNX Runtime, one round: the memory table")
    args = ap.parse_args(argv)
    args.threads = [int(x) for x in args.threads.split(",")]
    args.models = args.models.split(",")
    bad = [m for m in args.models if m not in "abcde" or len(m) != 1]
    if bad or any(n < 1 for n in args.threads):
        ap.error(f"--models takes a..e, --threads numbers >= 1 ({bad})")
    return args


def main(argv):
    args = parse(argv)
    if args.memory_only:
        ort, why = None, "--memory-only"
        args.no_coretype_unset, args.rounds = True, 1
    else:
        ort, why = find_ort(args, argv)
    quick = args.smoke or args.memory_only
    args.warmup = args.warmup if args.warmup is not None else \
        (1 if quick else 3)
    steps = args.steps or (2 if args.memory_only else
                           3 if args.smoke else 10)
    args.rounds = args.rounds or (1 if args.smoke else 3)
    info = machine(ort)
    helptext = subprocess.run([args.ccgraph, "run", "--help"],
                              capture_output=True, text=True).stdout
    has_threads = "--threads" in helptext
    version = subprocess.run([args.ccgraph, "--version"], capture_output=True,
                             text=True).stdout.strip()
    print(f"cpu: {info['cpu']}, {info['cores']} cores available, flags: "
          f"{' '.join(info['flags']) or 'none of avx2/avx512f/fma'}")
    print(f"OPENBLAS_CORETYPE={info['OPENBLAS_CORETYPE'] or '(unset)'} "
          f"OPENBLAS_NUM_THREADS={info['OPENBLAS_NUM_THREADS'] or '(unset)'}")
    print(f"versions: {version}, python {info['python']}, numpy "
          f"{info['numpy']}, onnx {info['onnx']}, onnxruntime "
          f"{info['onnxruntime'] or '-'}")
    if not ort:
        print(f"onnxruntime skipped: {why}")
    if not has_threads:
        print("ccgraph run has no --threads: ccgraph runs at its default in "
              "every row (marked *: OpenBLAS's threads, OPENBLAS_NUM_THREADS "
              "or else every core) beside ORT at N threads")
    env_unset = None
    if info["OPENBLAS_CORETYPE"] and not args.no_coretype_unset:
        env_unset = {k: v for k, v in os.environ.items()
                     if k != "OPENBLAS_CORETYPE"}
    work = args.work or tempfile.mkdtemp(prefix="ccg-bench-ort-")
    os.makedirs(work, exist_ok=True)
    rows, mem, ok = [], [], True
    try:
        for entry in make_models(args, work):
            args.k = steps * entry[4]
            try:
                ok = bench_model(args, ort, entry, work, has_threads,
                                 env_unset, rows, mem) and ok
            except RuntimeError as e:
                print(f"{entry[0]}: FAILED: {e}", flush=True)
                ok = False
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print_tables(rows, mem, env_unset is not None)
    print(f"\nchecks: outputs within {TOL:g} * max(1, max |reference|); "
          f"ratio = ccgraph / ORT; memory ratio = run peak / (weights + "
          f"plan), -base: the same less the\nprocess's resident set before loading "
          f"(code, libraries); target <= 1.2; the plan includes the kernels' "
          f"scratch, the run peak the inputs;\nanon: the anonymous resident "
          f"set after the steps (data, heap, stacks, generated code; no "
          f"file-backed code), and its ratio to weights + plan;\nbroken down: "
          f"code = file-backed pages (program, libraries), gen.code = "
          f"anonymous executable pages (oneDNN's kernels), other = the "
          f"rest of anon\n(heap, graph and program, packing blocks, "
          f"libraries' data, stacks), peak-end = run peak - resident set "
          f"after the steps")
    print(json.dumps({"bench": "ort", "ok": ok, "machine": info,
                      "ccgraph": version, "threads_option": has_threads,
                      "ort_skipped": why, "rows": rows, "memory": mem},
                     separators=(",", ":")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
