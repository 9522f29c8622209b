"""The ctypes structs in ccgraph/_lib.py against the C headers: a small C
program prints every bound struct's size and its fields' offsets, compiled
with the compiler that builds the library."""
import ctypes
import shutil
import subprocess

import pytest

from ccgraph import _lib

# ctypes class -> C type name
STRUCTS = {
    _lib.Dim: "ccg_dim", _lib.Shape: "ccg_shape", _lib.Tensor: "ccg_tensor",
    _lib.Mesh: "ccg_mesh", _lib.Placement: "ccg_placement",
    _lib.Attr: "ccg_attr", _lib.ExecTensor: "ccg_exec_tensor",
    _lib.ExecOptions: "ccg_exec_options",
    _lib.ExportOptions: "ccg_onnx_export_options",
    _lib.ShardOptions: "ccg_shard_options",
    _lib.ShardReport: "ccg_shard_report",
    _lib.PipelineOptions: "ccg_pipeline_options",
    _lib.PipelineReport: "ccg_pipeline_report",
    _lib.PlanProposeOptions: "ccg_plan_propose_options",
    _lib.PlanNote: "ccg_plan_note",
    _lib.BackwardOptions: "ccg_backward_options",
    _lib.VerifyOptions: "ccg_verify_options",
    _lib.VerifyReport: "ccg_verify_report", _lib.CostItem: "ccg_cost_item",
    _lib.CostReport: "ccg_cost_report",
}


def test_structs_match_the_headers(source_dir, tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler builds the library, so one is here"
    lines = ['#include <stddef.h>', '#include <stdio.h>',
             '#include <ccgraph/ccgraph.h>', 'int main(void) {']
    want = []
    for cls, c in STRUCTS.items():
        lines.append(f'  printf("%zu\\n", sizeof({c}));')
        want.append(ctypes.sizeof(cls))
        for name, *_ in cls._fields_:
            lines.append(f'  printf("%zu\\n", offsetof({c}, {name}));')
            want.append(getattr(cls, name).offset)
    lines += ["  return 0;", "}"]
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "abi"
    subprocess.run([cc, "-std=c11", "-I", str(source_dir / "include"),
                    str(src), "-o", str(exe)], check=True)
    got = [int(x) for x in subprocess.run([str(exe)], check=True,
                                          capture_output=True,
                                          text=True).stdout.split()]
    assert got == want


@pytest.mark.parametrize("name, value", [("MAX_RANK", "CCG_MAX_RANK"),
                                         ("MAX_MESH_AXES",
                                          "CCG_MAX_MESH_AXES"),
                                         ("NONE_ID", "CCG_NONE")])
def test_constants_match_the_headers(source_dir, name, value):
    text = "".join((source_dir / "include" / "ccgraph" / "graph.h")
                   .read_text().split())
    expect = {"CCG_NONE": "UINT32_MAX"}.get(value)
    if expect:
        assert f"#define{value}{expect}" in text
        assert getattr(_lib, name) == 2 ** 32 - 1
    else:
        assert f"#define{value}{getattr(_lib, name)}" in text
