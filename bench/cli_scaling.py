#!/usr/bin/env python3
"""Pass scaling as a user meets it: each `ccgraph` command run as its own
process on GPT models of two sizes (samples/make_gpt_block.py, torch's
layout, 96 and 384 layers by default), the sizes in turns, and the ratio
of their best times printed side by side. Each command imports its
model, runs its pass and writes its result, as on the command line:

  inspect --format json  import (and the JSON dump)
  shard                  import + shard tp=4 (samples/plan_gpt_block.json)
                         + export of 4 rank files
  export --dialect ort   import of the 4 rank files + lowering + export
  verify                 import of the 4 rank files + verify
  grad                   import + backward + export
  grad (sharded)         import of the 4 rank files + backward of each
                         + export

Times are the child's CPU time (user + system, what other jobs on a shared
machine do not advance) and wall clock; "best" is the least of --repeat
rounds. In each round a size's commands run twice: after the other size's
(memory the process takes is then new to the machine: on a virtual
machine the host backs it on first touch) and after their own; the two
are printed apart. A command that fails stops the bench with its message (exit 1).
Only Debian's python3 with python3-onnx and numpy is needed (the models'
writer); one JSON line ends the output.

usage: cli_scaling.py --ccgraph PATH [--layers 96,384] [--repeat 5]
                      [--work DIR]
"""
import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MAKE = os.path.join(ROOT, "samples", "make_gpt_block.py")
PLAN = os.path.join(ROOT, "samples", "plan_gpt_block.json")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def commands(tool, work, layers):
    m = os.path.join(work, f"gpt{layers}.onnx")
    ranks = os.path.join(work, f"shard{layers}")
    out = os.path.join(work, f"out{layers}")
    return [
        ("inspect", [tool, "inspect", m, "--format", "json"], None),
        ("shard", [tool, "shard", m, "--plan", PLAN, "--mesh", "tp=4",
                   "-o", ranks], ranks),
        ("export ort", [tool, "export", ranks, "--dialect", "ort",
                        "-o", out + "-ort"], out + "-ort"),
        ("verify", [tool, "verify", ranks], None),
        ("grad", [tool, "grad", m, "--loss", "logits",
                  "-o", out + "-grad.onnx"], out + "-grad.onnx"),
        ("grad sharded", [tool, "grad", ranks, "--loss", "logits",
                          "-o", out + "-gs"], out + "-gs"),
    ]


def remove(path):
    if path and os.path.isdir(path):
        shutil.rmtree(path)
    elif path and os.path.exists(path):
        os.remove(path)


def timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"cli_scaling: {' '.join(cmd)}: exit {p.returncode}: "
                 f"{p.stderr.strip()[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ccgraph", required=True)
    ap.add_argument("--layers", default="96,384")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work")
    a = ap.parse_args()
    try:
        small, big = (int(x) for x in a.layers.split(","))
    except ValueError:
        sys.exit(f"cli_scaling: --layers '{a.layers}': give two layer counts, "
                 "as 96,384")
    if small < 1 or big <= small or a.repeat < 1:
        sys.exit("cli_scaling: --layers needs 1 <= small < big and --repeat >= 1")
    tool = os.path.abspath(a.ccgraph)
    if not os.access(tool, os.X_OK):
        sys.exit(f"cli_scaling: --ccgraph '{a.ccgraph}' is not an executable")
    work = a.work or tempfile.mkdtemp(prefix="ccg-cli-scaling-")
    os.makedirs(work, exist_ok=True)
    for n in (small, big):
        p = subprocess.run([sys.executable, MAKE, os.path.join(work, f"gpt{n}.onnx"),
                            "--layers", str(n)], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"cli_scaling: make_gpt_block.py --layers {n}: "
                     f"{p.stderr.strip()[-800:]}")

    # Each size's commands run twice in a row per round: the first run
    # follows the other size's (its memory is new to the process and, on a
    # virtual machine, often to the host too), the second follows a run of
    # its own size. Both are kept, apart.
    best = {}
    for _ in range(a.repeat):
        for n in (small, big):
            for turn in ("after other", "after own"):
                for name, cmd, out in commands(tool, work, n):
                    if name != "verify" and name != "inspect":
                        remove(out)
                    cpu, wall = timed(cmd)
                    b = best.setdefault((turn, name, n), [cpu, wall])
                    b[0], b[1] = min(b[0], cpu), min(b[1], wall)

    print(f"cpu: {cpu_name()} ({os.cpu_count()} logical cpus); "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"GPT (make_gpt_block.py), {small} and {big} layers "
          f"({big / small:.2f}x), each command its own process, best of "
          f"{a.repeat} rounds")
    print(f"{'command':14} {'turn':12} {'cpu small':>10} {'cpu big':>9}"
          f" {'ratio':>6} {'wall small':>11} {'wall big':>9} {'ratio':>6}")
    rows, worst = [], {}
    for turn in ("after own", "after other"):
        for name, _, _ in commands(tool, work, small):
            cs, ws = best[(turn, name, small)]
            cb, wb = best[(turn, name, big)]
            r, rw = cb / cs, wb / ws
            worst[turn] = max(worst.get(turn, 0.0), r)
            rows.append({"command": name, "turn": turn,
                         "cpu_s": [round(cs, 5), round(cb, 5)],
                         "wall_s": [round(ws, 5), round(wb, 5)],
                         "cpu_ratio": round(r, 3), "wall_ratio": round(rw, 3)})
            print(f"{name:14} {turn:12} {cs:10.4f} {cb:9.4f} {r:5.2f}x"
                  f" {ws:11.4f} {wb:9.4f} {rw:5.2f}x")
    print(f"worst CPU-time ratio {worst['after own']:.2f}x after a run of the "
          f"same size, {worst['after other']:.2f}x after one of the other "
          f"size, for {big / small:.2f}x the layers")
    print(json.dumps({"bench": "cli_scaling", "layers": [small, big],
                      "repeat": a.repeat,
                      "worst_cpu_ratio": round(worst["after own"], 3),
                      "worst_cpu_ratio_after_other":
                          round(worst["after other"], 3),
                      "rows": rows}))
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
