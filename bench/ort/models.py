"""The benchmark's models, written with onnx.helper, and NumPy references.

Each maker returns (ModelProto, inputs, reference): inputs maps graph input
names to arrays, reference(inputs) gives the outputs by name as NumPy
computes them (used where ONNX Runtime is not there to compare with).

The transformer block is what torch.onnx.export (TorchScript, opset 17)
writes for a pre-LN block of nn.LayerNorm, nn.Linear, nn.GELU() and
scaled-dot-product attention with an additive mask: LayerNormalization,
MatMul + Add for every Linear, Reshape/Transpose into heads, MatMul, Div by
sqrt(head dim), Add mask, Softmax, MatMul, Transpose/Reshape back, GELU
written out as Div/Erf/Add/Mul/Mul, residual Adds.
"""
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # what ccgraph and every ONNX Runtime since 1.10 read

F32 = TensorProto.FLOAT


def _model(nodes, inits, inputs, outputs, name):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, producer_name="ccgraph-bench",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


class _Builder:
    """Nodes and initializers with generated names."""

    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op, *ins, **attrs):
        self.n += 1
        out = f"/{op}_{self.n}_output_0"
        self.nodes.append(helper.make_node(op, list(ins), [out],
                                           name=f"/{op}_{self.n}", **attrs))
        return out


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float32])(x)


def _layer_norm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def transformer(hidden, seq, layers, heads, seed=0):
    """Pre-LN blocks on x [1, seq, hidden] with a causal additive mask."""
    rng = np.random.default_rng(seed)
    hd, ffn = hidden // heads, 4 * hidden
    b = _Builder()
    w = {}

    def param(name, shape, scale=0.02):
        w[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
        return b.init(name, w[name])

    def const(name, arr):
        w[name] = arr
        return b.init(name, arr)

    heads_shape = const("heads_shape", np.array([1, seq, heads, hd], np.int64))
    merge_shape = const("merge_shape", np.array([1, seq, hidden], np.int64))
    scale = const("scale", np.array(math.sqrt(hd), np.float32))
    sqrt2 = const("sqrt2", np.array(math.sqrt(2.0), np.float32))
    one = const("one", np.array(1.0, np.float32))
    half = const("half", np.array(0.5, np.float32))

    def linear(x, name, n_in, n_out):
        y = b.op("MatMul", x, param(f"{name}.weight", (n_in, n_out)))
        return b.op("Add", y, param(f"{name}.bias", (n_out,)))

    def norm(x, name):
        g = const(f"{name}.weight", np.ones(hidden, np.float32))
        be = const(f"{name}.bias", np.zeros(hidden, np.float32))
        return b.op("LayerNormalization", x, g, be, axis=-1, epsilon=1e-5)

    x = "x"
    for i in range(layers):
        p = f"h.{i}"
        h = norm(x, f"{p}.ln_1")
        q = b.op("Transpose", b.op("Reshape", linear(h, f"{p}.q", hidden, hidden),
                                   heads_shape), perm=[0, 2, 1, 3])
        k = b.op("Transpose", b.op("Reshape", linear(h, f"{p}.k", hidden, hidden),
                                   heads_shape), perm=[0, 2, 3, 1])
        v = b.op("Transpose", b.op("Reshape", linear(h, f"{p}.v", hidden, hidden),
                                   heads_shape), perm=[0, 2, 1, 3])
        s = b.op("Add", b.op("Div", b.op("MatMul", q, k), scale), "mask")
        a = b.op("MatMul", b.op("Softmax", s, axis=-1), v)
        a = b.op("Reshape", b.op("Transpose", a, perm=[0, 2, 1, 3]), merge_shape)
        x = b.op("Add", x, linear(a, f"{p}.o", hidden, hidden))
        h = linear(norm(x, f"{p}.ln_2"), f"{p}.fc1", hidden, ffn)
        gl = b.op("Mul", b.op("Mul", h, b.op("Add", b.op("Erf", b.op(
            "Div", h, sqrt2)), one)), half)
        x = b.op("Add", x, linear(gl, f"{p}.fc2", ffn, hidden))
    b.nodes.append(helper.make_node("Identity", [x], ["y"], name="/out"))
    model = _model(b.nodes, b.inits,
                   [helper.make_tensor_value_info("x", F32, [1, seq, hidden]),
                    helper.make_tensor_value_info("mask", F32, [1, 1, seq, seq])],
                   [helper.make_tensor_value_info("y", F32, [1, seq, hidden])],
                   f"transformer_h{hidden}_s{seq}_l{layers}")
    causal = np.triu(np.full((seq, seq), -1e4, np.float32), 1)
    inputs = {"x": rng.standard_normal((1, seq, hidden)).astype(np.float32),
              "mask": causal.reshape(1, 1, seq, seq)}

    def reference(inp):
        x = inp["x"]
        for i in range(layers):
            p = f"h.{i}"

            def lin(t, n):
                return t @ w[f"{p}.{n}.weight"] + w[f"{p}.{n}.bias"]
            h = _layer_norm(x, w[f"{p}.ln_1.weight"], w[f"{p}.ln_1.bias"])
            q, k, v = (lin(h, n).reshape(1, seq, heads, hd).transpose(0, 2, 1, 3)
                       for n in ("q", "k", "v"))
            s = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(hd))
            a = _softmax(s + inp["mask"]) @ v
            x = x + lin(a.transpose(0, 2, 1, 3).reshape(1, seq, hidden), "o")
            h = lin(_layer_norm(x, w[f"{p}.ln_2.weight"], w[f"{p}.ln_2.bias"]),
                    "fc1")
            x = x + lin(h * (_erf(h / np.float32(math.sqrt(2.0))) + 1) * 0.5,
                        "fc2")
        return {"y": x}
    return model, inputs, reference


def chain(nodes, width=64, seed=0):
    """Alternating Add and Mul on a [width] tensor: per-node overhead."""
    rng = np.random.default_rng(seed)
    b = _Builder()
    add = (rng.standard_normal(width) * 1e-3).astype(np.float32)
    mul = (1 + rng.standard_normal(width) * 1e-4).astype(np.float32)
    b.init("c_add", add)
    b.init("c_mul", mul)
    x = "x"
    for i in range(nodes):
        x = b.op("Add" if i % 2 == 0 else "Mul", x,
                 "c_add" if i % 2 == 0 else "c_mul")
    b.nodes.append(helper.make_node("Identity", [x], ["y"], name="/out"))
    model = _model(b.nodes, b.inits,
                   [helper.make_tensor_value_info("x", F32, [width])],
                   [helper.make_tensor_value_info("y", F32, [width])],
                   f"chain_{nodes}")
    inputs = {"x": rng.standard_normal(width).astype(np.float32)}

    def reference(inp):
        y = inp["x"]
        for i in range(nodes):
            y = y + add if i % 2 == 0 else y * mul
        return {"y": y}
    return model, inputs, reference


def mlp(width, batch, seed=0):
    """x [batch, width] -> MatMul + Add -> Relu -> MatMul + Add."""
    rng = np.random.default_rng(seed)
    b = _Builder()
    s = 1 / math.sqrt(width)
    w = [(rng.standard_normal((width, width)) * s).astype(np.float32)
         for _ in range(2)]
    bias = [(rng.standard_normal(width) * 0.1).astype(np.float32)
            for _ in range(2)]
    h = "x"
    for i in range(2):
        h = b.op("Add", b.op("MatMul", h, b.init(f"fc{i}.weight", w[i])),
                 b.init(f"fc{i}.bias", bias[i]))
        if i == 0:
            h = b.op("Relu", h)
    b.nodes.append(helper.make_node("Identity", [h], ["y"], name="/out"))
    model = _model(b.nodes, b.inits,
                   [helper.make_tensor_value_info("x", F32, [batch, width])],
                   [helper.make_tensor_value_info("y", F32, [batch, width])],
                   f"mlp_{width}")
    inputs = {"x": rng.standard_normal((batch, width)).astype(np.float32)}

    def reference(inp):
        h = np.maximum(inp["x"] @ w[0] + bias[0], 0)
        return {"y": h @ w[1] + bias[1]}
    return model, inputs, reference


def tensor_bytes(arr, name):
    """One TensorProto, serialized (what bench_run --input reads)."""
    return numpy_helper.from_array(np.ascontiguousarray(arr), name) \
        .SerializeToString()


def read_tensor(path):
    """(name, array) of a TensorProto file (bench_run's outputs)."""
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)
