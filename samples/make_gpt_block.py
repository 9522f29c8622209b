#!/usr/bin/env python3
"""Writes a small GPT-style ONNX model as torch.onnx.export names it: scoped
node names (/h.0/attn/q_proj/MatMul is module h.0.attn.q_proj), MatMul
weights as anonymous onnx::MatMul_<k> initializers (the transposed Linear
weights torch writes) and biases and norms under their parameter names.

  ids [B,S] -> wte (Gather) + wpe -> per layer:
     x + out_proj(attn(ln_1(x)))     attn: q/k/v (or one fused qkv + Split),
                                      Reshape to heads, Softmax(QK^T/sqrt(d)
                                      + causal mask) V, Reshape back
     x + fc2(gelu(fc1(ln_2(x))))     gelu in its erf form (opset 17)
  -> ln_f -> lm_head -> logits [B,S,V]

With --dynamic the batch and sequence dims are symbolic (batch, seq), as
torch.onnx.export with dynamic_axes writes them: every Reshape target is
computed, Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x),
1)), <head count or hidden size as a Constant>, ...), positions come from
Range(seq) (seq <= 16) and the causal mask is Trilu of a [seq, seq]
ConstantOfShape.

With --core-scope the attention core (QK^T, mask, Softmax, PV: heads in,
heads out, [B, heads, S, d]) is a module of its own, h.<i>.attn.core, as a
Ulysses wrapper around the local attention would name it.

Deterministic weights (seeded). usage:
  make_gpt_block.py OUT.onnx [--fused-qkv] [--core-scope] [--dynamic]
                    [--layers N] [--seed S] [--batch N]
Only the python3-onnx helper API and numpy are used."""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

B, S, H, HEADS, V, FFN = 2, 8, 64, 4, 128, 256
HD = H // HEADS
MAX_S = 16  # positions and mask rows of a --dynamic model


class Builder:
    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inits = [], []
        self.counts = {}
        self.anon = 100

    def name(self, scope, op):
        key = (scope, op)
        k = self.counts.get(key, 0)
        self.counts[key] = k + 1
        return f"{scope}/{op}" + (f"_{k}" if k else "")

    def node(self, scope, op, inputs, n_out=1, **attrs):
        nm = self.name(scope, op)
        outs = [f"{nm}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=nm, **attrs))
        return outs[0] if n_out == 1 else outs

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def weight(self, shape, scale=0.08):
        self.anon += 1
        arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return self.init(f"onnx::MatMul_{self.anon}", arr)

    def param(self, name, shape, scale=0.05, base=0.0):
        arr = (base + self.rng.standard_normal(shape) * scale).astype(np.float32)
        return self.init(name, arr)

    def const(self, scope, values):
        t = numpy_helper.from_array(np.array(values, dtype=np.int64))
        return self.node(scope, "Constant", [], value=t)

    def linear(self, scope, pname, x, n_in, n_out):
        w = self.weight((n_in, n_out))
        y = self.node(scope, "MatMul", [x, w])
        b = self.param(f"{pname}.bias", (n_out,))
        return self.node(scope, "Add", [b, y])

    def layer_norm(self, scope, pname, x):
        g = self.param(f"{pname}.weight", (H,), base=1.0)
        b = self.param(f"{pname}.bias", (H,))
        return self.node(scope, "LayerNormalization", [x, g, b], axis=-1,
                         epsilon=1e-5)


def target(b, scope, x, tail):
    """[B, S] + tail: a constant, or with b.dynamic as torch computes it:
    the batch and sequence sizes from Shape(x), the tail a Constant."""
    if not b.dynamic:
        return b.const(scope, [B, S] + tail)
    shape = b.node(scope, "Shape", [x])
    dims = []
    for i in range(2):
        idx = b.node(scope, "Constant", [], value=numpy_helper.from_array(
            np.array(i, dtype=np.int64)))
        d = b.node(scope, "Gather", [shape, idx], axis=0)
        axes = b.const(scope, [0])
        dims.append(b.node(scope, "Unsqueeze", [d, axes]))
    return b.node(scope, "Concat", dims + [b.const(scope, tail)], axis=0)


def heads(b, scope, x, perm):
    r = b.node(scope, "Reshape", [x, target(b, scope, x, [HEADS, HD])])
    return b.node(scope, "Transpose", [r], perm=perm)


def attention(b, i, x, fused, core_scope):
    sc, pn = f"/h.{i}/attn", f"h.{i}.attn"
    cs = f"{sc}/core" if core_scope else sc
    if fused:
        qkv = b.linear(f"{sc}/qkv", f"{pn}.qkv", x, H, 3 * H)
        split = b.init(f"{pn}.split_sizes", np.array([H, H, H], np.int64))
        q, k, v = b.node(sc, "Split", [qkv, split], n_out=3, axis=-1)
    else:
        q = b.linear(f"{sc}/q_proj", f"{pn}.q_proj", x, H, H)
        k = b.linear(f"{sc}/k_proj", f"{pn}.k_proj", x, H, H)
        v = b.linear(f"{sc}/v_proj", f"{pn}.v_proj", x, H, H)
    q = heads(b, sc, q, [0, 2, 1, 3])
    k = heads(b, sc, k, [0, 2, 3, 1])
    v = heads(b, sc, v, [0, 2, 1, 3])
    s = b.node(cs, "MatMul", [q, k])
    s = b.node(cs, "Div", [s, "attn_scale"])
    s = b.node(cs, "Add", [s, "causal_mask"])
    p = b.node(cs, "Softmax", [s], axis=-1)
    o = b.node(cs, "MatMul", [p, v])
    o = b.node(sc, "Transpose", [o], perm=[0, 2, 1, 3])
    o = b.node(sc, "Reshape", [o, target(b, sc, o, [H])])
    return b.linear(f"{sc}/out_proj", f"{pn}.out_proj", o, H, H)


def gelu(b, scope, x):
    t = b.node(scope, "Div", [x, "gelu_sqrt2"])
    t = b.node(scope, "Erf", [t])
    t = b.node(scope, "Add", [t, "gelu_one"])
    t = b.node(scope, "Mul", [x, t])
    return b.node(scope, "Mul", [t, "gelu_half"])


def positions(b):
    """--dynamic: wpe rows 0..seq-1 and the causal mask sliced to seq."""
    shape = b.node("", "Shape", ["ids"])
    one = b.node("", "Constant", [], value=numpy_helper.from_array(
        np.array(1, dtype=np.int64)))
    seq = b.node("", "Gather", [shape, one], axis=0)
    zero = b.node("", "Constant", [], value=numpy_helper.from_array(
        np.array(0, dtype=np.int64)))
    pos = b.node("", "Range", [zero, seq, one])
    wpe = b.node("/wpe", "Gather", ["wpe.weight", pos], axis=0)
    n = b.node("", "Unsqueeze", [seq, b.const("", [0])])
    n = b.node("", "Concat", [n, n], axis=0)
    full = b.node("", "ConstantOfShape", [n], value=numpy_helper.from_array(
        np.array([-1e4], dtype=np.float32)))
    b.nodes.append(helper.make_node("Trilu", [full, b.const("", 1)],
                                    ["causal_mask"], name="/Trilu", upper=1))
    return wpe


def build(fused, layers, seed, core_scope=False, dynamic=False):
    b = Builder(np.random.default_rng(seed))
    b.dynamic = dynamic
    b.init("attn_scale", np.array(np.sqrt(HD), np.float32))
    if not dynamic:
        b.init("causal_mask", np.triu(np.full((S, S), -1e4, np.float32), 1))
    b.init("gelu_sqrt2", np.array(np.sqrt(2.0), np.float32))
    b.init("gelu_one", np.array(1.0, np.float32))
    b.init("gelu_half", np.array(0.5, np.float32))
    wte = b.param("wte.weight", (V, H), scale=0.5)
    wpe = b.param("wpe.weight", (S, H), scale=0.1)
    if dynamic:  # rows past S from another stream: the rest stays the same
        more = np.random.default_rng(seed + 1).standard_normal((MAX_S - S, H))
        b.inits[-1] = numpy_helper.from_array(np.concatenate(
            [numpy_helper.to_array(b.inits[-1]),
             (more * 0.1).astype(np.float32)]), wpe)
    if dynamic:
        wpe = positions(b)
    x = b.node("/wte", "Gather", [wte, "ids"], axis=0)
    x = b.node("", "Add", [x, wpe])
    for i in range(layers):
        h = b.layer_norm(f"/h.{i}/ln_1", f"h.{i}.ln_1", x)
        x = b.node(f"/h.{i}", "Add", [x, attention(b, i, h, fused, core_scope)])
        h = b.layer_norm(f"/h.{i}/ln_2", f"h.{i}.ln_2", x)
        h = b.linear(f"/h.{i}/mlp/fc1", f"h.{i}.mlp.fc1", h, H, FFN)
        h = gelu(b, f"/h.{i}/mlp/act", h)
        h = b.linear(f"/h.{i}/mlp/fc2", f"h.{i}.mlp.fc2", h, FFN, H)
        x = b.node(f"/h.{i}", "Add", [x, h])
    x = b.layer_norm("/ln_f", "ln_f", x)
    w = b.weight((H, V))
    logits = b.node("/lm_head", "MatMul", [x, w])
    b.nodes[-1].output[0] = "logits"
    bs = ["batch", "seq"] if dynamic else [B, S]
    graph = helper.make_graph(
        b.nodes, "gpt_block",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, bs)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       bs + [V])],
        b.inits)
    model = helper.make_model(graph, producer_name="make_gpt_block.py",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    global B
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--fused-qkv", action="store_true")
    ap.add_argument("--core-scope", action="store_true")
    ap.add_argument("--dynamic", action="store_true")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=B,
                    help="the batch of a static model (default 2)")
    a = ap.parse_args()
    B = a.batch
    onnx.save(build(a.fused_qkv, a.layers, a.seed, a.core_scope, a.dynamic),
              a.out)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
