"""Data, pipeline and tensor parallelism together from Python
(docs/parallelism.md, "All three axes"): shard's pipeline options, grad of
stages without the loss, and Model.run of ranks with inputs and outputs of
their own, against the unsharded full-batch model."""
import numpy as np
import pytest

import ccgraph
from conftest import PLAN, make_gpt

B = 8  # the batch: 2 dp ranks of 4 rows, 2 microbatches of 2 rows each


@pytest.fixture(scope="module")
def gpt8(tmp_path_factory):
    path = make_gpt(tmp_path_factory.mktemp("gpt8") / "gpt.onnx",
                    "--layers", "4", "--batch", str(B))
    with ccgraph.load(path) as m:
        yield m


@pytest.fixture(scope="module")
def ids8():
    return (np.arange(B * 8, dtype=np.int64).reshape(B, 8) * 7) % 100


def _compare(gs, outs, ref, dp_of, last_stage):
    """Every rank's outputs against its part of the reference: the logits
    of the last stage's ranks are their dp chunk; each gradient of a
    parameter the reference has by name (its tp shard, part_of); returns
    the gradients compared per rank."""
    counts = []
    for r, o in enumerate(outs):
        assert ("logits" in o) == last_stage(r), f"rank {r}: {sorted(o)}"
        if "logits" in o:
            rows = B // 2
            want = ref["logits"][dp_of(r) * rows:(dp_of(r) + 1) * rows]
            np.testing.assert_allclose(o["logits"], want, rtol=1e-4,
                                       atol=1e-5, err_msg=f"rank {r}")
        n = 0
        for name, a in o.items():
            if not name.startswith("grad/") or name not in ref:
                continue
            want = ccgraph.part_of(gs, name, ref[name], r)
            tol = 1e-4 * float(np.abs(want).max()) + 1e-6
            np.testing.assert_allclose(a, want, rtol=0, atol=tol,
                                       err_msg=f"rank {r} {name}")
            n += 1
        counts.append(n)
    return counts


@pytest.mark.parametrize("zero, schedule", [(0, "1f1b"), (1, "gpipe"),
                                            (3, "1f1b")])
def test_three_axes_equal_the_full_batch(gpt8, ids8, zero, schedule):
    """dp=2,pp=2,tp=2 with 2 microbatches of each dp rank's 4 rows: the
    last stage's logits are its dp chunk and every stage's gradients equal
    the unsharded model's (summed over dp, as the loss sums the logits)."""
    with ccgraph.grad(gpt8, "logits") as g:
        ref = g.run({"ids": ids8})[0]
    with ccgraph.shard(gpt8, PLAN, "dp=2,pp=2,tp=2", dp_reduce="sum",
                       zero=zero, microbatches=2, schedule=schedule) as s, \
            ccgraph.grad(s, "logits") as gs:
        pipe = s.shard_report["pipeline"]
        assert len(pipe["stages"]) == 2 and pipe["microbatches"] == 2
        assert pipe["stages"][0]["first_layer"] == "h.0"
        assert 0.3 < pipe["bubble"] < 0.4  # (p-1)/(M+p-1) = 1/3, near-equal
        assert s.shard_report["dp_inputs"] == 1
        assert ccgraph.verify(gs)["ok"]
        outs = gs.run({"ids": ids8})
        # row-major ranks: dp outermost, then pp, then tp
        counts = _compare(gs, outs, ref, dp_of=lambda r: r // 4,
                          last_stage=lambda r: r // 2 % 2 == 1)
        assert min(counts) > 3, counts
        cost = ccgraph.cost(gs)
        assert cost["step"]["bus_bytes"] > 0


def test_pipeline_alone_and_its_report(gpt8, ids8):
    """pp=2 without a plan: stage 0's ranks have no outputs of the model,
    the last stage's its logits; grad seeds stage 0 from its Sends."""
    with ccgraph.grad(gpt8, "logits") as g:
        ref = g.run({"ids": ids8})[0]
    with ccgraph.shard(gpt8, None, "pp=2", microbatches=4,
                       stages="h.0-h.2|h.3") as s, \
            ccgraph.grad(s, "logits") as gs:
        assert [x["last_layer"] for x in s.shard_report["pipeline"]["stages"]] \
            == ["h.2", "h.3"]
        fwd = s.run({"ids": ids8})
        assert "logits" not in fwd[0]
        np.testing.assert_allclose(fwd[1]["logits"], ref["logits"], rtol=1e-4,
                                   atol=1e-5)
        outs = gs.run({"ids": ids8})
        grads0 = [n for n in outs[0] if n.startswith("grad/")]
        assert any(n.startswith("grad/h.0.") for n in grads0), grads0
        for r, o in enumerate(outs):
            for name, a in o.items():
                if name.startswith("grad/") and name in ref:
                    np.testing.assert_allclose(
                        a, ref[name], rtol=0,
                        atol=1e-4 * float(np.abs(ref[name]).max()) + 1e-6,
                        err_msg=f"rank {r} {name}")


@pytest.mark.parametrize("kwargs, pattern", [
    ({"mesh": "tp=2", "microbatches": 2}, "need the pipeline axis 'pp'"),
    ({"mesh": "dp=2,tp=2", "pp_axis": "dp"},
     "cannot be both the pipeline axis and the data axis"),
    ({"mesh": "pp=2,tp=2", "schedule": "zb"}, "give 'gpipe' or '1f1b'"),
    ({"mesh": "pp=2,tp=2", "microbatches": 0}, "give 1 to 4096"),
    ({"mesh": "pp=2,tp=2", "microbatches": 3}, "3 microbatches do not divide"),
    ({"mesh": "pp=2,tp=2", "stages": "h.0|h.9"}, "'h.9', which is no layer"),
])
def test_bad_pipeline_options(gpt8, kwargs, pattern):
    mesh = kwargs.pop("mesh")
    with pytest.raises(ccgraph.BadInput, match=pattern):
        ccgraph.shard(gpt8, PLAN, mesh, **kwargs)


def test_grad_of_a_pipeline_needs_the_loss_somewhere(gpt8):
    with ccgraph.shard(gpt8, None, "pp=2") as s:
        with pytest.raises(ccgraph.BadInput, match="on any rank"):
            ccgraph.grad(s, "nope")


def test_dims_pin_a_dynamic_export_for_the_pipeline(tmp_path, ids8):
    """A symbolic batch and sequence (make_gpt_block.py --dynamic) cannot
    cross a stage boundary; dims= pins them, and the stages' logits equal
    the dynamic model's at those sizes; the model itself stays dynamic."""
    with ccgraph.load(make_gpt(tmp_path / "dyn.onnx", "--layers", "4",
                               "--dynamic")) as m:
        ref = m.run({"ids": ids8})[0]["logits"]
        with pytest.raises(ccgraph.BadInput, match="symbolic shape"):
            ccgraph.shard(m, None, "pp=2")
        with ccgraph.shard(m, None, "pp=2", microbatches=2,
                           dims={"batch": B, "seq": 8}) as s:
            got = s.run({"ids": ids8})[1]["logits"]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
        with pytest.raises(ccgraph.BadInput, match="no input .* named 'sequence'"):
            ccgraph.shard(m, None, "pp=2", dims={"sequence": 8})
        with pytest.raises(ccgraph.BadInput, match="give a size of 1 or more"):
            ccgraph.shard(m, None, "pp=2", dims={"batch": 0})
        # still dynamic: it runs at another batch
        assert m.run({"ids": ids8[:2]})[0]["logits"].shape[0] == 2
