"""ccgraph.torch.export: the glue between torch.onnx.export and shard. The
test suite runs without torch, so a stand-in `torch` package exports the
README's GPT sample and records what it was given; with the real torch the
same call exports the module itself."""
import sys
import types

import numpy as np
import pytest

import ccgraph
import ccgraph.torch as ct
from conftest import PLAN, make_gpt


@pytest.fixture
def fake_torch(monkeypatch, tmp_path):
    calls = []

    def export(module, args, f, **kwargs):
        calls.append((module, args, kwargs))
        make_gpt(tmp_path / "made.onnx")
        (tmp_path / "made.onnx").replace(f)

    torch = types.ModuleType("torch")
    onnx = types.ModuleType("torch.onnx")
    onnx.export = export
    torch.onnx = onnx
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.onnx", onnx)
    return calls


def test_export_shards_what_torch_wrote(fake_torch, gpt, ids, tmp_path):
    out = tmp_path / "ranks"
    with ct.export("module", ("args",), PLAN, "tp=2", path=out,
                   dynamic_axes={"ids": {0: "batch"}},
                   input_names=["ids"]) as m, \
            ccgraph.shard(gpt, PLAN, "tp=2") as want:
        assert fake_torch == [("module", ("args",),
                               {"dynamic_axes": {"ids": {0: "batch"}},
                                "input_names": ["ids"]})]
        assert m.ranks == 2 and m.collectives(0) == want.collectives(0)
        got, ref = m.run({"ids": ids}), want.run({"ids": ids})
        for r in range(2):
            np.testing.assert_array_equal(got[r]["logits"], ref[r]["logits"])
    assert sorted(p.name for p in out.glob("*.onnx")) == [
        "gpt_block.rank0.onnx", "gpt_block.rank1.onnx"]  # the graph's name


def test_export_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ccgraph.BadInput) as e:
        ct.export(object(), (), PLAN, "tp=2")
    assert "needs torch" in str(e.value)


def test_export_bad_plan_names_it(fake_torch):
    with pytest.raises(ccgraph.BadInput) as e:
        ct.export("module", (), {"nope.*": "colwise"}, "tp=2")
    assert "nope.*" in str(e.value)
