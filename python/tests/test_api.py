"""ccgraph's functions on the README tour's GPT model: load, inputs and
outputs, shard, run against the unsharded run, save, grad, verify, cost;
bad inputs raise the right exception with the library's message; handles
are freed; two models work from two threads at once."""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import ccgraph
from conftest import PLAN


def test_library_found_and_versions_agree():
    assert os.path.exists(ccgraph.library_path)
    assert ccgraph.library_version() == ccgraph.__version__


def test_library_lookup_order(source_dir):
    """Without CCGRAPH_LIBRARY: the build tree beside the recorded sources
    first; with it: that path only, and a bad one is an ImportError that
    says what to do."""
    env = {k: v for k, v in os.environ.items() if k != "CCGRAPH_LIBRARY"}
    code = ("import ccgraph._lib as l, json; "
            "print(json.dumps([l.candidates(), l.path]))")
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, cwd="/")
    tree = str(source_dir / "build" / "libccgraph.so")
    if out.returncode != 0:  # built elsewhere and not installed: none found
        assert not os.path.exists(tree), out.stderr
        assert f"{tree} (absent)" in out.stderr
    else:
        cands, used = json.loads(out.stdout)
        assert cands[0] == tree
        assert used == next(c for c in cands
                            if os.path.exists(c) or "/" not in c)
    env["CCGRAPH_LIBRARY"] = "/nonexistent/libccgraph.so"
    bad = subprocess.run([sys.executable, "-c", "import ccgraph"], env=env,
                         capture_output=True, text=True, cwd="/")
    assert bad.returncode != 0
    assert "CCGRAPH_LIBRARY" in bad.stderr
    assert "/nonexistent/libccgraph.so (absent)" in bad.stderr


def test_package_is_the_installed_one():
    if os.environ.get("CCGRAPH_EXPECT_INSTALLED"):
        assert "site-packages" in ccgraph.__file__


def test_load_gives_names_dtypes_shapes(gpt):
    assert gpt.ranks == 1 and gpt.mesh == {} and not gpt.per_rank
    assert [tuple(t[:3]) for t in gpt.inputs] == [("ids", "i64", (2, 8))]
    assert [tuple(t[:3]) for t in gpt.outputs] == [("logits", "f32",
                                                    (2, 8, 128))]
    assert gpt.inputs[0].numpy_dtype == np.int64
    assert "model 'gpt_block'" in gpt.summary()
    assert "input ids: i64 [2,8]" in gpt.summary()
    assert "MatMul" in gpt.dump("text")
    assert json.loads(gpt.dump("json"))
    with pytest.raises(ccgraph.BadInput, match="format 'svg'"):
        gpt.dump("svg")


def test_load_missing_file(tmp_path):
    missing = tmp_path / "nope.onnx"
    with pytest.raises(ccgraph.BadInput) as e:
        ccgraph.load(missing)
    assert str(missing) in str(e.value) and e.value.status == "IO"


def test_load_garbage_and_empty_folder(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\xff\xff\xff not a model")
    with pytest.raises(ccgraph.BadInput) as e:
        ccgraph.load(bad)
    assert "bad.onnx" in e.value.message
    with pytest.raises(ccgraph.BadInput, match="no per-rank models"):
        ccgraph.load(tmp_path)


def test_load_folder_missing_a_rank(sharded, tmp_path):
    sharded.save(tmp_path / "out")
    os.remove(tmp_path / "out" / "gpt_block.rank0.onnx")
    with pytest.raises(ccgraph.BadInput, match="gpt_block.rank0.onnx' is missing"):
        ccgraph.load(tmp_path / "out")


def test_shard(sharded):
    assert sharded.ranks == 2 and sharded.mesh == {"tp": 2}
    assert sharded.per_rank
    assert sharded.shard_report == {"sharded_params": 22, "collectives": 6,
                                    "reshape_rewrites": 8, "dp_inputs": 0,
                                    "dp_params": 0, "dp_sharded": 0}
    assert sharded.collectives(0) == {"AllReduce": 5, "AllGather": 1}
    assert sharded.collectives(1, axis="tp") == {"AllReduce": 5,
                                                 "AllGather": 1}
    assert sharded.collectives(1, axis="dp") == {}
    s = sharded.summary()
    assert "rank 1: 97 nodes" in s and "AllReduce 5, AllGather 1" in s
    assert sharded.outputs[0].placements == ("Replicate",)


def test_shard_plan_as_dict_and_sequence_parallel(gpt):
    plan = json.loads(PLAN.read_text())
    with ccgraph.shard(gpt, plan, {"tp": 2}, sequence_parallel=True) as sp:
        assert sp.collectives(0) == {"AllGather": 6, "ReduceScatter": 5}


@pytest.mark.parametrize("plan, mesh, status, words", [
    ({"nope.*": "colwise"}, "tp=2", "INVALID_ARG", "nope.*"),
    ({"wte": "sideways"}, "tp=2", "PARSE", "sideways"),
    ("/nonexistent/plan.json", "tp=2", "IO", "/nonexistent/plan.json"),
    ({"wte": "vocab_parallel"}, "tp=0", "PARSE", "tp=0"),
    ({"h.*.mlp.fc1": "colwise"}, "tp=3", None, "3"),
    ({"wte": "vocab_parallel"}, "dp=2", None, "tp"),
])
def test_shard_bad_input(gpt, plan, mesh, status, words):
    with pytest.raises(ccgraph.BadInput) as e:
        ccgraph.shard(gpt, plan, mesh).close()
    assert words in e.value.message
    if status:
        assert e.value.status == status


def test_shard_needs_an_unsharded_model(sharded):
    with pytest.raises(ccgraph.BadInput, match="2 per-rank models"):
        ccgraph.shard(sharded, PLAN, "tp=2")



def test_shard_mesh_of_another_type(gpt):
    with pytest.raises(ccgraph.BadInput, match="mesh 4: give a spec"):
        ccgraph.shard(gpt, PLAN, 4)


def test_run_matches_the_unsharded_run(gpt, sharded, ids):
    full = gpt.run({"ids": ids})
    assert len(full) == 1 and set(full[0]) == {"logits"}
    outs = sharded.run({"ids": ids}, ranks=2)
    assert len(outs) == 2
    for rank, o in enumerate(outs):
        assert o["logits"].shape == (2, 8, 128)
        assert o["logits"].dtype == np.float32
        np.testing.assert_allclose(o["logits"], full[0]["logits"], atol=1e-4,
                                   err_msg=f"rank {rank}")
    again = sharded.run({"ids": ids})  # the kept executables' graphs again
    np.testing.assert_array_equal(again[1]["logits"], outs[1]["logits"])


@pytest.mark.parametrize("inputs, status, words", [
    ({}, "INVALID_ARG", "input 'ids' is not given"),
    ({"ids": None, "x": 1}, "INVALID_ARG", "no input of that name"),
    ({"ids": np.zeros((2, 7), np.int64)}, "SHAPE",
     "input 'ids' dim 1 is 7 on rank 0; the model needs 8"),
    ({"ids": np.zeros((2, 8), np.float32)}, "DTYPE",
     "input 'ids' needs i64 (int64) of rank 2; the array is float32"),
    ({"ids": np.zeros((16,), np.int64)}, "SHAPE", "of rank 2"),
])
def test_run_bad_inputs(sharded, inputs, status, words):
    with pytest.raises(ccgraph.BadInput) as e:
        sharded.run(inputs)
    assert words in e.value.message and e.value.status == status


def test_run_ranks_must_match_the_mesh(sharded, ids):
    with pytest.raises(ccgraph.BadInput, match="mesh has 2 ranks"):
        sharded.run({"ids": ids}, ranks=4)


def test_run_failure_names_the_node(gpt):
    """Token ids past the vocabulary: the library's Gather refuses them on
    the run, naming the rank, the node and the index."""
    with pytest.raises(ccgraph.BadInput) as e:
        gpt.run({"ids": np.full((2, 8), 10 ** 6, np.int64)})
    assert e.value.message.startswith("rank 0: node '/wte/Gather' (Gather)")
    assert "index 1000000" in e.value.message


def test_statuses_map_to_the_tool_exit_classes():
    from ccgraph import _errors, _lib
    bad = {"PARSE", "SHAPE", "DTYPE", "INVALID_ARG", "UNSUPPORTED", "IO"}
    runtime = {"COMM", "TIMEOUT", "BACKEND", "OOM", "INTERNAL"}
    assert set(_lib.STATUS_NAMES) == bad | runtime | {"OK"}
    for i, name in enumerate(_lib.STATUS_NAMES[1:], 1):
        e = _errors.from_status(i, "the message")
        assert type(e) is (ccgraph.BadInput if name in bad else
                           ccgraph.RuntimeFailure)
        assert e.status == name and str(e) == "the message"
        assert isinstance(e, ccgraph.Error)


def test_save_and_load_again(gpt, sharded, ids, tmp_path):
    sharded.save(tmp_path / "out")
    assert sorted(os.listdir(tmp_path / "out")) == [
        "gpt_block.rank0.onnx", "gpt_block.rank1.onnx"]
    with ccgraph.load(tmp_path / "out") as back, \
            ccgraph.load(tmp_path / "out" / "gpt_block.rank1.onnx") as one:
        assert back.per_rank and back.ranks == 2 and one.ranks == 2
        a, b = back.run({"ids": ids}), sharded.run({"ids": ids})
        np.testing.assert_array_equal(a[1]["logits"], b[1]["logits"])
    gpt.save(tmp_path / "copy.onnx")
    with ccgraph.load(tmp_path / "copy.onnx") as c:
        assert c.outputs == gpt.outputs
    with pytest.raises(ccgraph.BadInput):
        gpt.save(tmp_path / "no" / "such" / "folder" / "x.onnx")


def test_grad(gpt, sharded, ids):
    with ccgraph.grad(gpt, "logits") as g, \
            ccgraph.grad(sharded, "logits") as gs:
        names = [t.name for t in g.outputs]
        assert names[0] == "logits" and "grad/ln_f.weight" in names
        assert sorted(t.name for t in gs.outputs) == sorted(names)
        assert len(gpt.outputs) == 1  # the model given is left unchanged
        ref = g.run({"ids": ids})[0]
        for r, outs in enumerate(gs.run({"ids": ids})):
            for name, a in outs.items():
                want = ccgraph.part_of(gs, name, ref[name], r)
                np.testing.assert_allclose(a, want, atol=2e-4,
                                           err_msg=f"rank {r} {name}")
    with ccgraph.grad(gpt, "logits", wrt="ln_f.*") as g:
        assert [t.name for t in g.outputs] == [
            "logits", "grad/ln_f.weight", "grad/ln_f.bias"]


def test_grad_bad_input(gpt, sharded):
    with pytest.raises(ccgraph.BadInput, match="no value named 'nope'"):
        ccgraph.grad(gpt, "nope")
    with pytest.raises(ccgraph.BadInput, match="rank 0: no value named"):
        ccgraph.grad(sharded, "nope")
    with pytest.raises(ccgraph.BadInput, match="wrt 'zzz\\*' matches no"):
        ccgraph.grad(gpt, "logits", wrt=["zzz*"])


def test_verify_and_cost(sharded, gpt):
    rep = ccgraph.verify(sharded)
    assert rep == {"ok": True, "kind": "ok", "calls": 12, "graphs": 2,
                   "ranks": 2}
    assert ccgraph.verify(gpt)["ok"]
    c = ccgraph.cost(sharded, link_gbps=100)
    assert [i["op"] for i in c["collectives"]].count("AllReduce") == 5
    assert c["step"]["bus_bytes"] == 24576
    assert c["step"]["time_s"] == pytest.approx(24576 * 8 / 100e9)
    assert len(c["ranks"]) == 2
    assert ccgraph.cost(sharded, link_gbps=200)["step"]["time_s"] == \
        pytest.approx(c["step"]["time_s"] / 2)
    with pytest.raises(ccgraph.BadInput, match="link_gbps"):
        ccgraph.cost(sharded, link_gbps=0)


def mixed_program(gpt, tmp_path):
    """Rank 0 of the tensor-parallel program beside rank 1 of the sequence
    parallel one: their collectives disagree."""
    with ccgraph.shard(gpt, PLAN, "tp=2") as a, \
            ccgraph.shard(gpt, PLAN, "tp=2", sequence_parallel=True) as b:
        a.save(tmp_path / "a")
        b.save(tmp_path / "b")
    os.mkdir(tmp_path / "mixed")
    for src, r in (("a", 0), ("b", 1)):
        os.rename(tmp_path / src / f"gpt_block.rank{r}.onnx",
                  tmp_path / "mixed" / f"gpt_block.rank{r}.onnx")
    return ccgraph.load(tmp_path / "mixed")


def test_verify_mismatch_raises_check_failed(gpt, tmp_path):
    with mixed_program(gpt, tmp_path) as m:
        with pytest.raises(ccgraph.CheckFailed) as e:
            ccgraph.verify(m)
    rep = e.value.report
    assert not rep["ok"] and rep["kind"] == "op"
    assert {rep["mismatch"]["rank_a"], rep["mismatch"]["rank_b"]} == {0, 1}
    assert "rank 0" in e.value.message and "rank 1" in e.value.message


def test_close_and_context_manager(gpt_path):
    m = ccgraph.load(gpt_path)
    with m:
        assert m.ranks == 1
    assert m.closed and "closed" in repr(m)
    m.close()  # again: nothing
    for f in (lambda: m.ranks, lambda: m.inputs, lambda: m.run({}),
              lambda: ccgraph.verify(m), lambda: ccgraph.shard(m, PLAN, "tp=2"),
              lambda: ccgraph.grad(m, "logits"), lambda: m.save("x.onnx")):
        with pytest.raises(ccgraph.BadInput, match="closed"):
            f()


def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))


def test_nothing_leaks(gpt_path, ids):
    """Load, shard, grad, run, verify, cost, fail and drop, many times: the
    process does not grow by what one round holds (about 2 MB of graphs
    and weights)."""
    def round_trip():
        gpt = ccgraph.load(gpt_path)
        with ccgraph.shard(gpt, PLAN, "tp=2") as s, \
                ccgraph.grad(s, "logits") as g:
            g.run({"ids": ids})
            ccgraph.verify(g)
            ccgraph.cost(s)
            with pytest.raises(ccgraph.BadInput):
                s.run({"ids": ids[:, :7]})
        with pytest.raises(ccgraph.BadInput):
            ccgraph.shard(gpt, {"nope": "colwise"}, "tp=2")
        del gpt  # __del__ frees it
    for _ in range(5):
        round_trip()
    before = rss_kib()
    for _ in range(40):
        round_trip()
    grown = rss_kib() - before
    assert grown < 16 * 1024, f"grew {grown} KiB over 40 rounds"


def test_two_models_from_two_threads(gpt_path, ids):
    """Two models, each used by its own thread at once, give what they give
    alone."""
    a = ccgraph.shard(ccgraph.load(gpt_path), PLAN, "tp=2")
    b = ccgraph.grad(ccgraph.load(gpt_path), "logits")
    want = [a.run({"ids": ids}), b.run({"ids": ids})]
    got = [[], []]
    errors = []

    def work(i, m):
        try:
            for _ in range(8):
                got[i].append(m.run({"ids": ids}))
                ccgraph.verify(m)
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i, m))
          for i, m in enumerate((a, b))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for i in range(2):
        assert len(got[i]) == 8
        for res in got[i]:
            for r, outs in enumerate(res):
                for k, v in outs.items():
                    np.testing.assert_array_equal(v, want[i][r][k])
    a.close()
    b.close()


def test_spmd_model_with_a_symbolic_batch(spmd_path, tmp_path):
    """One graph run by every rank of tp=4: the batch is bound by the input
    given, every rank gets the replicated input and ends with the same
    all-reduced output; grad and save keep it one SPMD graph."""
    with ccgraph.load(spmd_path) as m:
        assert not m.per_rank and m.ranks == 4 and m.mesh == {"tp": 4}
        assert m.inputs[0][:4] == ("x", "f32", ("batch", 16), ("Replicate",))
        testing_counts = m.collectives(3, axis="tp")
        assert testing_counts == {"AllReduce": 1}
        x = np.random.default_rng(0).standard_normal((3, 16), np.float32)
        outs = m.run({"x": x})
        assert len(outs) == 4
        out = m.outputs[0].name
        assert outs[0][out].shape == (3, 16)
        for o in outs[1:]:
            np.testing.assert_allclose(o[out], outs[0][out], atol=1e-5)
        assert ccgraph.verify(m)["calls"] == 4
        with pytest.raises(ccgraph.BadInput, match="symbolic dim|batch"):
            ccgraph.cost(m)
        assert ccgraph.cost(m, dims={"batch": 3})["step"]["bus_bytes"] > 0
        with ccgraph.grad(m, out) as g:
            assert not g.per_rank and len(g.run({"x": x})) == 4
        m.save(tmp_path / "mlp.onnx")
        with ccgraph.load(tmp_path / "mlp.onnx") as back:
            np.testing.assert_array_equal(back.run({"x": x})[2][out],
                                          outs[2][out])


def test_wrong_argument_types(gpt):
    for f in (lambda: ccgraph.shard("gpt.onnx", PLAN, "tp=2"),
              lambda: ccgraph.grad(None, "logits"),
              lambda: ccgraph.verify([]), lambda: ccgraph.cost({})):
        with pytest.raises(TypeError, match="expected a ccgraph.Model"):
            f()
    with pytest.raises(ccgraph.BadInput, match="must be an integer"):
        ccgraph.shard(gpt, PLAN, {"tp": "two"})
    with pytest.raises(ccgraph.BadInput, match="not JSON"):
        ccgraph.shard(gpt, {"wte": object()}, "tp=2")
    with pytest.raises(ccgraph.BadInput, match="not int"):
        ccgraph.shard(gpt, 3, "tp=2")


def test_plan_proposed_shards_like_the_sample(gpt, ids):
    notes = []
    plan = ccgraph.plan(gpt, "tp=2", notes=notes)
    assert plan and all(isinstance(v, (str, dict)) for v in plan.values())
    assert any(n["proposed"] and n["style"] == "colwise" for n in notes)
    assert any(n["proposed"] and n["style"] == "rowwise" for n in notes)
    with ccgraph.shard(gpt, plan, "tp=2") as mine, \
            ccgraph.shard(gpt, PLAN, "tp=2") as sample:
        assert mine.collectives(0) == sample.collectives(0)
        got, want = mine.run({"ids": ids}), sample.run({"ids": ids})
        for r in range(2):
            np.testing.assert_allclose(got[r]["logits"], want[r]["logits"],
                                       rtol=1e-5, atol=1e-6)


def test_plan_bad_input(gpt, sharded):
    with pytest.raises(ccgraph.BadInput) as e:
        ccgraph.plan(gpt, "tp=3")  # 4 heads, ffn and vocab: nothing divides
    assert "3" in str(e.value)
    with pytest.raises(ccgraph.BadInput) as e:
        ccgraph.plan(gpt, "dp=2")
    assert "tp" in str(e.value)
    with pytest.raises(ccgraph.BadInput):
        ccgraph.plan(sharded, "tp=2")  # per-rank models: not one graph
