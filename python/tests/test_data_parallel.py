"""Data parallelism from Python (docs/parallelism.md): shard's dp options
and grad's buckets, each rank's outputs and gradients against the
unsharded full-batch model."""
import numpy as np
import pytest

import ccgraph
from conftest import PLAN


@pytest.mark.parametrize("zero, bucket_mb",
                         [(0, 25), (1, 25), (3, 25), (1, 0.004), (3, 0.004)])
def test_dp_gradients_equal_the_full_batch(gpt, ids, zero, bucket_mb):
    """dp=2 without a plan: each rank gets its batch row, and with summed
    gradients every rank's gradient (or its dp shard under ZeRO 1 and 3,
    also from 4 KB buckets) is the full batch's."""
    with ccgraph.grad(gpt, "logits") as g:
        ref = g.run({"ids": ids})[0]
    with ccgraph.shard(gpt, None, "dp=2", dp_reduce="sum", zero=zero) as s, \
            ccgraph.grad(s, "logits", bucket_mb=bucket_mb) as gs:
        assert s.shard_report["dp_inputs"] == 1
        assert s.shard_report["dp_params"] > 0
        assert (s.shard_report["dp_sharded"] > 0) == (zero > 0)
        outs = gs.run({"ids": ids})
        for r, o in enumerate(outs):
            np.testing.assert_allclose(o["logits"], ref["logits"][r:r + 1],
                                       atol=1e-4, err_msg=f"rank {r}")
            for name, a in o.items():
                want = ccgraph.part_of(gs, name, ref[name], r)
                np.testing.assert_allclose(a, want, atol=2e-4,
                                           err_msg=f"rank {r} {name}")
        grads = [n for n in outs[0] if n.startswith("grad/")]
        assert len(grads) > 5


def test_dp_mean_halves_the_sum(gpt, ids):
    with ccgraph.shard(gpt, None, "dp=2") as s, \
            ccgraph.grad(s, "logits", bucket_mb=0) as mean, \
            ccgraph.shard(gpt, None, "dp=2", dp_reduce="sum") as s2, \
            ccgraph.grad(s2, "logits") as total:
        a, b = mean.run({"ids": ids})[0], total.run({"ids": ids})[0]
        np.testing.assert_allclose(a["grad/ln_f.weight"],
                                   b["grad/ln_f.weight"] / 2, rtol=1e-5,
                                   atol=1e-6)


def test_dp_with_tp(gpt, ids):
    """dp=2,tp=2: four ranks; ranks of one dp coordinate see its batch row,
    and their logits equal the unsharded ones for that row."""
    ref = gpt.run({"ids": ids})[0]["logits"]
    with ccgraph.shard(gpt, PLAN, "dp=2,tp=2", zero=1) as s:
        assert s.ranks == 4
        assert ccgraph.verify(s)["ok"]
        for r, o in enumerate(s.run({"ids": ids})):
            row = r // 2  # dp is the mesh's first axis
            np.testing.assert_allclose(o["logits"], ref[row:row + 1],
                                       atol=1e-4, err_msg=f"rank {r}")


@pytest.mark.parametrize("kwargs, words", [
    ({"zero": 2}, "zero=2: give 0"),
    ({"zero": True}, "zero=True"),
    ({"dp_reduce": "max"}, "dp_reduce='max'"),
])
def test_dp_bad_options(gpt, kwargs, words):
    with pytest.raises(ccgraph.BadInput, match=words):
        ccgraph.shard(gpt, None, "dp=2", **kwargs)


def test_dp_errors_from_the_library(gpt):
    with pytest.raises(ccgraph.BadInput) as e:
        ccgraph.shard(gpt, None, "tp=2")  # no plan and no data axis
    assert "dp" in e.value.message
    with pytest.raises(ccgraph.BadInput, match="bucket_mb=-1"):
        ccgraph.grad(gpt, "logits", bucket_mb=-1)
