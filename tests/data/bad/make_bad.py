#!/usr/bin/python3
"""Writes the corpus of malformed ONNX models in this folder and its manifest,
EXPECTED.tsv: one line per file, `file<TAB>STATUS<TAB>fragment...`, every
fragment being text the importer's message must contain. Wire-level defects
are written as raw bytes; semantic ones with the onnx package (Debian's
python3-onnx), so that only the one defect differs from a valid model.

Run from anywhere: /usr/bin/python3 tests/data/bad/make_bad.py
The symlink case is made by tests/unit/test_onnx_bad.c at run time (a
committed symlink would point outside the tree).
"""
import os
import struct
import sys

from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = [helper.make_opsetid("", 17)]
ENTRIES = []


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """A length-delimited field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def write(name, data, status, *fragments):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    ENTRIES.append((name, status) + fragments)


def relu_graph(**kw):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    node = helper.make_node("Relu", ["x"], ["y"], name="relu0")
    args = dict(nodes=[node], name="g", inputs=[x], outputs=[y])
    args.update(kw)
    return helper.make_graph(**args)


def model(graph, opsets=OPSET):
    return helper.make_model(graph, opset_imports=opsets, ir_version=8,
                             producer_name="make_bad")


def write_model(name, m, status, *fragments):
    write(name, m.SerializeToString(), status, *fragments)


def with_initializer(tensor, consumer="Add"):
    """x + tensor, the tensor being the defective initializer."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    node = helper.make_node(consumer, ["x", tensor.name], ["y"], name="add0")
    return model(helper.make_graph([node], "g", [x], [y], [tensor]))


def external(name, location, offset=None, length=None, dims=(2, 3)):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset),
                 ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


def wire_cases():
    good = model(relu_graph()).SerializeToString()
    write("empty.onnx", b"", "PARSE", "not an ONNX model", "empty")
    write("text.onnx", b"hello, this is not a model\n", "PARSE",
          "not an ONNX model")
    write("png.onnx", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "PARSE",
          "not an ONNX model")
    write("truncated_3.onnx", good[:3], "PARSE", "ONNX wire format",
          "truncated")
    write("truncated_half.onnx", good[:len(good) // 2], "PARSE",
          "ONNX wire format", "past the end")
    write("truncated_last_byte.onnx", good[:-1], "PARSE", "ONNX wire format",
          "past the end")
    # GraphProto in AttributeProto in NodeProto in GraphProto ... 10000 deep.
    path = [7] + [(1, 5, 6)[i % 3] for i in range(10000)]
    data = b""
    for num in reversed(path):
        data = field(num, data)
    write("deep_nesting.onnx", data, "PARSE", "past the limit of 64",
          "AttributeProto field 6 (g)")
    # TypeProto.Sequence inside TypeProto inside ... (the other recursion).
    ty = b""
    for _ in range(200):
        ty = field(4, field(1, ty))  # TypeProto.sequence_type.elem_type
    vi = field(1, b"x") + field(2, ty)
    data = field(7, field(11, vi))
    write("deep_type_nesting.onnx", data, "PARSE", "past the limit of 64",
          "TypeProto")
    # The graph claims 2 GiB; the file has a few bytes.
    write("huge_length.onnx", varint(1 << 3) + varint(8) + varint(7 << 3 | 2)
          + varint(0x7FFFFFF0) + b"\x0a\x00", "PARSE", "length 2147483632",
          "ModelProto field 7 (graph)")
    # A start-group wire type inside the node.
    node = field(4, b"Relu") + varint(9 << 3 | 3)
    write("group_wire_type.onnx", field(7, field(1, node)), "PARSE",
          "NodeProto field 9", "group")
    # op_type written as a varint.
    node = varint(4 << 3 | 0) + varint(5)
    write("wrong_wire_type.onnx", field(7, field(1, node)), "PARSE",
          "NodeProto field 4 (op_type)", "wire type varint")


def shape_cases():
    neg = helper.make_tensor("neg_dim_w", TensorProto.FLOAT, [2, 3],
                             [0.0] * 6)
    del neg.dims[:]
    neg.dims.extend([-2, -3])
    write_model("negative_dim.onnx", with_initializer(neg), "PARSE",
                "neg_dim_w", "-2")
    x = helper.make_tensor_value_info("neg_in", TensorProto.FLOAT, [4, -1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1])
    g = helper.make_graph([helper.make_node("Relu", ["neg_in"], ["y"])],
                          "g", [x], [y])
    write_model("negative_input_dim.onnx", model(g), "PARSE", "neg_in",
                "-1")
    big = TensorProto()
    big.name = "overflow_w"
    big.data_type = TensorProto.FLOAT
    big.dims.extend([1 << 40, 1 << 40])
    big.raw_data = b"\x00" * 16
    write_model("dim_overflow.onnx", with_initializer(big), "PARSE",
                "overflow_w", "overflow")
    bad = helper.make_tensor("short_w", TensorProto.FLOAT, [2, 3],
                             b"\x00" * 24, raw=True)
    bad.raw_data = b"\x00" * 20
    write_model("raw_data_mismatch.onnx", with_initializer(bad), "PARSE",
                "short_w", "20", "24")


def external_cases():
    cases = [
        ("ext_dotdot.onnx", external("dotdot_w", "../outside.bin"),
         "dotdot_w", ".."),
        ("ext_absolute.onnx", external("abs_w", "/etc/hostname"),
         "abs_w", "/etc/hostname"),
        ("ext_missing.onnx", external("missing_w", "no_such_file.bin"),
         "missing_w", "no_such_file.bin"),
        ("ext_past_end.onnx",
         external("past_end_w", "ext_past_end.bin", offset=16, length=24),
         "past_end_w", "ext_past_end.bin"),
    ]
    statuses = {"ext_missing.onnx": "IO"}
    for name, t, *frags in cases:
        write_model(name, with_initializer(t), statuses.get(name, "PARSE"),
                    *frags)
    # 32 bytes: offset 16 + length 24 runs 8 past the end.
    with open(os.path.join(HERE, "ext_past_end.bin"), "wb") as f:
        f.write(struct.pack("<8f", *range(8)))
    # Used by the test's symlink case: "weights.bin" is made a symlink there.
    write_model("ext_symlink.onnx",
                with_initializer(external("link_w", "weights.bin")), "SKIP")


def graph_cases():
    g = relu_graph(nodes=[helper.make_node("FrobnicateX", ["x"], ["y"],
                                           name="weird_node")])
    write_model("unknown_op.onnx", model(g), "UNSUPPORTED", "weird_node",
                "FrobnicateX", "17")
    g = relu_graph(nodes=[helper.make_node("Relu", ["x"], ["y"],
                                           name="custom_node",
                                           domain="com.example")])
    write_model("unknown_domain.onnx",
                model(g, OPSET + [helper.make_opsetid("com.example", 3)]),
                "UNSUPPORTED", "custom_node", "Relu", "com.example", "3")
    write_model("no_opset.onnx", model(relu_graph(), []), "PARSE", "opset")
    bad = helper.make_tensor("bad_type_w", TensorProto.FLOAT, [2, 3],
                             [0.0] * 6)
    bad.data_type = 999
    write_model("bad_data_type.onnx", with_initializer(bad), "UNSUPPORTED",
                "bad_type_w", "999")
    x = helper.ValueInfoProto()
    x.name = "untyped_x"
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Relu", ["untyped_x"], ["y"])],
                          "g", [x], [y])
    write_model("input_without_type.onnx", model(g), "PARSE", "untyped_x")
    g = relu_graph(nodes=[
        helper.make_node("Relu", ["x"], ["dup"], name="first"),
        helper.make_node("Relu", ["x"], ["dup"], name="second"),
        helper.make_node("Relu", ["dup"], ["y"], name="third")])
    write_model("duplicate_value.onnx", model(g), "INVALID_ARG", "dup")
    g = relu_graph(nodes=[helper.make_node("Add", ["x", "ghost"], ["y"],
                                           name="haunted")])
    write_model("undefined_input.onnx", model(g), "PARSE", "ghost",
                "haunted")
    node = helper.make_node("Softmax", ["x"], ["y"], name="soft")
    node.attribute.append(helper.make_attribute("axis", 1.5))
    write_model("attr_wrong_type.onnx", model(relu_graph(nodes=[node])),
                "INVALID_ARG", "soft", "axis")
    g = relu_graph()
    g.ClearField("output")
    g.output.append(helper.make_tensor_value_info("nowhere", TensorProto.FLOAT,
                                                  [2, 3]))
    write_model("undefined_output.onnx", model(g), "PARSE", "nowhere")
    # names are hashed once between the check that they are free and the
    # insert: each kind of clash still names what clashes
    g = relu_graph(nodes=[
        helper.make_node("Relu", ["x"], ["h"], name="twin"),
        helper.make_node("Relu", ["h"], ["y"], name="twin")])
    write_model("duplicate_node_name.onnx", model(g), "INVALID_ARG", "twin",
                "a node of that name already exists")
    node = helper.make_node("Split", ["x"], ["y", "y"], name="splitter",
                            axis=0)
    write_model("duplicate_output.onnx", model(relu_graph(nodes=[node])),
                "INVALID_ARG", "splitter", "outputs 0 and 1 are both named")
    w = helper.make_tensor("twin_w", TensorProto.FLOAT, [2, 3], [0.0] * 6)
    m = with_initializer(w)
    m.graph.initializer.append(w)
    write_model("duplicate_initializer.onnx", m, "INVALID_ARG", "twin_w",
                "a value of that name already exists")
    # a node listing far more outputs than any op has is refused naming it
    # (import sizes the graph's tables from the counts, up to a bound)
    node = helper.make_node("Relu", ["x"], ["y"] + ["o%d" % i
                                                    for i in range(5000)],
                            name="many_out")
    write_model("many_outputs.onnx", model(relu_graph(nodes=[node])),
                "INVALID_ARG", "many_out", "5001 outputs")


def main():
    wire_cases()
    shape_cases()
    external_cases()
    graph_cases()
    with open(os.path.join(HERE, "EXPECTED.tsv"), "w") as f:
        f.write("# file\tstatus\tfragments the message must contain "
                "(written by make_bad.py)\n")
        for e in ENTRIES:
            if e[1] != "SKIP":
                f.write("\t".join(e) + "\n")
    print(f"make_bad: {len(ENTRIES)} files", file=sys.stderr)


if __name__ == "__main__":
    main()
