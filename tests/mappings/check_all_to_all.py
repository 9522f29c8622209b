#!/usr/bin/env python3
"""Runs the all-to-all mapping goldens on simulated ranks and compares them
with the upstream definitions, numerically.

A single-buffer all-to-all exchanges dim-0 chunks, so a mapping whose
exchange is on another dim must move the group axis to the front (MAPPINGS.md
pitfall 2). The golden graphs do that with Reshape/Transpose around an
AllToAll on dim 0; this script interprets those nodes with numpy on W ranks
holding different data and checks the result against Open-Sora's
_all_to_all (tensor_split on scatter_dim, exchange, cat on gather_dim) and
Megatron's all_to_all_sp2hp / all_to_all_hp2sp, and that each backward
(itself an exchange) gives the input back.

usage: check_all_to_all.py <tests/data/golden/mappings>
"""
import json
import sys

import numpy as np


def run(path, w, xs, backward=False):
    """The (forward or backward) nodes of a golden, on w ranks."""
    g = json.load(open(path))
    start = g["inputs"][1 if backward else 0]["name"]
    envs = [{start: x} for x in xs]
    nodes = [n for n in g["nodes"] if n["tag"]["backward"] == backward]
    for n in nodes:
        op, out = n["op"], n["outputs"][0]["name"]
        if op == "AllToAll":
            a = n["attrs"]
            assert a["split_axis"] == 0 and a["concat_axis"] == 0, n["name"]
            ins = [e[n["inputs"][0]] for e in envs]
            for r, e in enumerate(envs):
                e[out] = np.concatenate(
                    [np.array_split(ins[s], w, 0)[r] for s in range(w)], 0)
            continue
        for e in envs:
            a = [e.get(i) for i in n["inputs"]]
            if op == "Constant":
                v = np.array(n["attrs"]["value"]["data"], dtype=np.int64)
            elif op == "Reshape":
                v = a[0].reshape([int(s) if s != 0 else a[0].shape[i]
                                  for i, s in enumerate(a[1])])
            elif op == "Transpose":
                v = a[0].transpose(n["attrs"]["perm"])
            elif op == "Identity":
                v = a[0]
            else:
                raise SystemExit("%s: unexpected op %s" % (path, op))
            e[out] = v
    return [e[nodes[-1]["outputs"][0]["name"]] for e in envs]


def opensora(s, gd):
    def ref(xs, w):
        return [np.concatenate([np.array_split(xs[src], w, s)[r]
                                for src in range(w)], gd) for r in range(w)]
    return ref


def exchange_rows(xs, w):
    return [np.concatenate([np.array_split(xs[s], w, 0)[r] for s in range(w)],
                           0) for r in range(w)]


def sp2hp(xs, w):
    flat = [x.reshape(-1, x.shape[-1]) for x in xs]
    return exchange_rows([np.concatenate(np.split(x, w, 1), 0) for x in flat],
                         w)


def hp2sp(xs, w):
    flat = [x.reshape(-1, x.shape[-1]) for x in xs]
    return [np.concatenate(np.split(e, w, 0), -1)
            for e in exchange_rows(flat, w)]


CASES = [
    ("opensora/all_to_all_tp4.json", 4, (2, 4, 8, 16), opensora(2, 1)),
    ("opensora/all_to_all_dp2tp2.json", 2, (2, 4, 8, 16), opensora(2, 1)),
    ("opensora/all_to_all_qkv_tp4.json", 4, (2, 4, 3, 8, 16), opensora(3, 1)),
    ("opensora/all_to_all_qkv_dp2tp2.json", 2, (2, 4, 3, 8, 16),
     opensora(3, 1)),
    ("opensora/all_to_all_back_tp4.json", 4, (2, 16, 2, 16), opensora(1, 2)),
    ("opensora/all_to_all_negative_dims_tp4.json", 4, (2, 4, 8, 16),
     opensora(2, 1)),
    ("opensora/all_to_all_dim0_tp4.json", 4, (8, 4), opensora(0, 0)),
    ("megatron/sp2hp_tp4.json", 4, (4, 2, 16), sp2hp),
    ("megatron/sp2hp_dp2tp2.json", 2, (4, 2, 16), sp2hp),
    ("megatron/hp2sp_tp4.json", 4, (16, 2, 4), hp2sp),
    ("megatron/hp2sp_dp2tp2.json", 2, (16, 2, 4), hp2sp),
]


def main():
    root = sys.argv[1]
    rng = np.random.default_rng(0)
    failed = 0
    for name, w, shape, ref in CASES:
        xs = [rng.standard_normal(shape) for _ in range(w)]
        y = run("%s/%s" % (root, name), w, xs)
        fwd = all(np.array_equal(a, b) for a, b in zip(y, ref(xs, w)))
        back = run("%s/%s" % (root, name), w, y, backward=True)
        bwd = all(np.array_equal(a, b) for a, b in zip(back, xs))
        print("%s %s (forward %s, backward %s)" % (
            "ok  " if fwd and bwd else "FAIL", name,
            "matches" if fwd else "DIFFERS", "inverts" if bwd else "DIFFERS"))
        failed += not (fwd and bwd)
    print("all-to-all: %d passed, %d failed" % (len(CASES) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
