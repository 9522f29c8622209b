"""ccgraph.testing: each assertion passes on the sharded GPT block and fails,
saying what it found, when the model is not what the test expects."""
import os

import pytest

import ccgraph
from ccgraph import testing
from conftest import make_gpt


def test_assert_collectives(sharded):
    testing.assert_collectives(sharded, {"AllReduce": 5, "AllGather": 1})
    testing.assert_collectives(sharded, {"AllReduce": 5, "AllGather": 1},
                               axis="tp")
    testing.assert_collectives(sharded, {}, axis="dp")


def test_assert_collectives_fails_with_the_counts(sharded):
    with pytest.raises(AssertionError) as e:
        testing.assert_collectives(sharded, {"AllReduce": 6})
    msg = str(e.value)
    assert msg.startswith("rank 0: collectives differ:")
    assert "AllReduce 5 (expected 6)" in msg
    assert "AllGather 1 (expected 0)" in msg
    assert "found AllReduce 5, AllGather 1" in msg
    with pytest.raises(AssertionError, match="on axis 'tp' differ"):
        testing.assert_collectives(sharded, {"ReduceScatter": 5}, axis="tp")
    with pytest.raises(AssertionError, match="'AllReduced' is no collective"):
        testing.assert_collectives(sharded, {"AllReduced": 5})


def test_assert_verified(sharded, gpt, tmp_path):
    assert testing.assert_verified(sharded)["calls"] == 12
    from test_api import mixed_program
    with mixed_program(gpt, tmp_path) as m:
        with pytest.raises(AssertionError) as e:
            testing.assert_verified(m)
    assert str(e.value).startswith("verify failed: ")
    assert "rank 1" in str(e.value)


def test_assert_matches(gpt, sharded, ids):
    outs = testing.assert_matches(sharded, gpt, {"ids": ids})
    assert len(outs) == 2
    with ccgraph.grad(gpt, "logits") as g, ccgraph.grad(sharded, "logits") as s:
        testing.assert_matches(s, g, {"ids": ids}, atol=2e-4)


def test_assert_matches_fails_with_the_difference(sharded, ids, tmp_path):
    """Against the same block with other weights: the message names the
    rank, the output and the largest difference."""
    with ccgraph.load(make_gpt(tmp_path / "other.onnx", "--seed", "2")) as o:
        with pytest.raises(AssertionError) as e:
            testing.assert_matches(sharded, o, {"ids": ids})
    msg = str(e.value)
    assert msg.startswith("rank 0, output 'logits': max |diff| ")
    assert "elements above atol 0.0001 + rtol 1e-05 * |reference|" in msg
    big = float(msg.split("max |diff| ")[1].split()[0])
    assert big > 1e-3


def test_assert_matches_shape_and_names(gpt, ids, tmp_path):
    with ccgraph.load(make_gpt(tmp_path / "l1.onnx", "--layers", "1")) as one, \
            ccgraph.grad(gpt, "logits", wrt="ln_f.*") as g:
        testing.assert_matches(one, one, {"ids": ids})
        with pytest.raises(AssertionError, match="rank 0, output 'logits'"):
            testing.assert_matches(one, gpt, {"ids": ids})
        with pytest.raises(AssertionError, match="share no output"):
            testing.assert_matches(g, _renamed(g, tmp_path), {"ids": ids})


def _renamed(model, tmp_path):
    """A model with no output of `model`'s names: a one-node ONNX graph."""
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node("Identity", ["ids"], ["other"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("ids", TensorProto.INT64,
                                                    [2, 8])],
        [helper.make_tensor_value_info("other", TensorProto.INT64, [2, 8])])
    path = os.path.join(tmp_path, "other.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17)]), path)
    return ccgraph.load(path)
