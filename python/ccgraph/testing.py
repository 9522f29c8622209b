"""Assertions for tests of sharding logic (pytest or unittest): what
collectives every rank issues, that the ranks' communication matches, and
that a sharded model computes what the unsharded one does. Each raises
AssertionError with a message naming the rank, the op or output, and the
counts or the largest difference found."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from . import _lib
from ._errors import CheckFailed
from ._functions import part_of, verify
from ._model import Model

__all__ = ["assert_collectives", "assert_verified", "assert_matches"]


def _fmt(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"


def assert_collectives(model: Model, expected: Mapping[str, int],
                       axis: Optional[str] = None) -> None:
    """Every rank has exactly the collectives `expected` lists ({"AllReduce":
    6, "AllGather": 1}; an op left out is expected 0 times), counting only
    those whose group spans mesh axis `axis` when given."""
    bad = sorted(set(expected) - _lib.COLLECTIVES)
    if bad:
        raise AssertionError(
            f"'{bad[0]}' is no collective op; they are "
            f"{', '.join(n for n in _lib.OP_NAMES if n in _lib.COLLECTIVES)}")
    where = f" on axis '{axis}'" if axis else ""
    for r in range(model.ranks):
        have = model.collectives(r, axis)
        diffs = [f"{op} {have.get(op, 0)} (expected {expected.get(op, 0)})"
                 for op in _lib.OP_NAMES
                 if have.get(op, 0) != expected.get(op, 0)]
        if diffs:
            raise AssertionError(
                f"rank {r}: collectives{where} differ: {'; '.join(diffs)}; "
                f"found {_fmt(have)}, expected {_fmt(expected)}")


def assert_verified(model: Model, **kwargs: Any) -> Dict[str, Any]:
    """ccgraph.verify(model) passes: the ranks' collectives and sends/recvs
    match and placements agree with them. Returns verify's report; a
    mismatch is an AssertionError with verify's message (ranks, nodes,
    position)."""
    try:
        return verify(model, **kwargs)
    except CheckFailed as e:
        raise AssertionError(f"verify failed: {e.message}") from None


def _worst(have: np.ndarray, want: np.ndarray, rtol: float,
           atol: float) -> Optional[str]:
    """None when every element is within atol + rtol * |want|; else the
    largest difference, where it is and both values."""
    if have.dtype.kind in "fc":
        a, b = have.astype(np.float64), want.astype(np.float64)
        diff = np.abs(a - b)
        nan = np.isnan(a) != np.isnan(b)
        diff = np.where(nan, np.inf, np.where(np.isnan(a) & np.isnan(b), 0,
                                               diff))
        over = diff > atol + rtol * np.abs(b)
    else:
        a, b = have, want
        diff = (have != want).astype(np.float64)
        over = diff > 0
    if not over.any():
        return None
    i = np.unravel_index(int(np.argmax(np.where(over, diff, -1))), diff.shape)
    return (f"max |diff| {float(diff[i]):.3g} at {tuple(int(x) for x in i)} "
            f"(sharded {a[i]!r}, reference {b[i]!r}); "
            f"{int(over.sum())} of {over.size} elements above "
            f"atol {atol:g} + rtol {rtol:g} * |reference|")


def assert_matches(sharded: Model, reference: Model,
                   inputs: Mapping[str, np.ndarray], rtol: float = 1e-5,
                   atol: float = 1e-4) -> List[Dict[str, np.ndarray]]:
    """Runs `reference` (its rank 0) and `sharded` (every rank) on the same
    global inputs and compares every output they share by name: each
    rank's output with its part of the reference's (ccgraph.part_of: its
    chunk along a dim the output, or for "grad/<x>" x, is Shard on). Fails
    naming the rank, the output and the largest difference, or when a shape
    differs or no output is shared. Returns the sharded outputs."""
    want = reference.run(inputs)[0]
    have = sharded.run(inputs)
    compared = 0
    for r, outs in enumerate(have):
        for name, a in outs.items():
            if name not in want:
                continue
            b = part_of(sharded, name, want[name], r)
            if a.shape != b.shape:
                raise AssertionError(
                    f"rank {r}, output '{name}': shape {a.shape}, its part of "
                    f"the reference {b.shape} (reference {want[name].shape})")
            msg = _worst(a, b, rtol, atol)
            if msg:
                raise AssertionError(f"rank {r}, output '{name}': {msg}")
            compared += 1
    if not compared:
        raise AssertionError(
            "the models share no output by name (sharded: "
            f"{', '.join(have[0]) if have else 'none'}; reference: "
            f"{', '.join(want) or 'none'})")
    return have
