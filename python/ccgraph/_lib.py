"""The C library through ctypes: where it is found, the structs of the public
headers (include/ccgraph/*.h) and the prototypes of the functions bound.

Only the public API is used. Struct layouts mirror the headers field for
field; tests/test_abi.py compiles the headers and compares sizes and offsets.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double,
                    c_float, c_int, c_int64, c_size_t, c_uint32, c_void_p)
from pathlib import Path
from typing import List, Optional

MAX_RANK = 8
MAX_MESH_AXES = 4
MESH_NAME_MAX = 16
NONE_ID = 0xFFFFFFFF

# ---- structs (graph.h, onnx.h, shard.h, autodiff.h, verify.h, exec.h) -----


class Dim(Structure):
    _fields_ = [("size", c_int64), ("sym", c_char_p)]


class Shape(Structure):
    _fields_ = [("rank", c_int), ("dims", Dim * MAX_RANK)]


class Tensor(Structure):
    _fields_ = [("dtype", c_int), ("rank", c_int),
                ("dims", c_int64 * MAX_RANK), ("data", c_void_p)]


class Mesh(Structure):
    _fields_ = [("ndims", c_int), ("sizes", c_int64 * MAX_MESH_AXES),
                ("names", (c_char * MESH_NAME_MAX) * MAX_MESH_AXES)]


class Placement(Structure):
    _fields_ = [("kind", c_int), ("dim", c_int), ("reduce", c_int)]


class Attr(Structure):
    _fields_ = [("name", c_char_p), ("type", c_int), ("i", c_int64),
                ("f", c_float), ("s", c_char_p), ("ints", POINTER(c_int64)),
                ("floats", POINTER(c_float)), ("strings", POINTER(c_char_p)),
                ("n", c_size_t), ("t", POINTER(Tensor))]


class ExecTensor(Structure):
    _fields_ = [("name", c_char_p), ("tensor", Tensor), ("dst", c_void_p),
                ("dst_bytes", c_size_t)]


class ExecOptions(Structure):
    _fields_ = [("size", c_size_t), ("rank", c_int), ("comm", c_void_p),
                ("input_shapes", POINTER(ExecTensor)),
                ("n_input_shapes", c_size_t), ("dims", c_void_p),
                ("n_dims", c_size_t), ("deadline_s", c_double),
                ("allocator", c_void_p), ("debug_collectives", c_bool),
                ("flight_records", c_size_t), ("overlap", c_int),
                ("device", c_int), ("device_index", c_int),
                ("cuda_graph", c_int), ("tf32", c_int),
                ("max_specializations", c_int), ("threads", c_int)]

    @classmethod
    def make(cls, rank: int = 0, comm: Optional[int] = None,
             device: int = 0) -> "ExecOptions":
        """CCG_EXEC_OPTIONS_INIT with rank, comm and device set."""
        o = cls()
        o.size = ctypes.sizeof(cls)
        o.rank, o.comm, o.device = rank, comm, device
        o.deadline_s, o.flight_records, o.device_index = 300.0, 32, -1
        o.overlap = -1
        return o


DEVICE_CPU, DEVICE_CUDA = 0, 1  # ccg_device


class ExportOptions(Structure):
    _fields_ = [("size", c_size_t), ("opset", c_int64), ("dialect", c_int),
                ("external_threshold", c_size_t), ("rank", c_int)]

    @classmethod
    def make(cls, opset: int = 17, rank: int = -1,
             external_threshold: int = 1 << 20) -> "ExportOptions":
        return cls(ctypes.sizeof(cls), opset, 0, external_threshold, rank)


class ShardOptions(Structure):
    _fields_ = [("size", c_size_t), ("mesh_axis", c_char_p),
                ("sequence_parallel", c_bool), ("sequence_dim", c_int64),
                ("dp_axis", c_char_p), ("zero", c_int), ("dp_sum", c_bool),
                ("dp_batch_dim", c_int64), ("dp_inputs", c_char_p)]


class ShardReport(Structure):
    _fields_ = [("n_sharded_params", c_size_t), ("n_collectives", c_size_t),
                ("n_reshape_rewrites", c_size_t), ("n_dp_inputs", c_size_t),
                ("n_dp_params", c_size_t), ("n_dp_sharded", c_size_t)]


class PipelineOptions(Structure):
    _fields_ = [("size", c_size_t), ("axis", c_char_p), ("stages", c_char_p),
                ("microbatches", c_int64), ("schedule", c_int)]


PIPELINE_MAX_STAGES = 64


class PipelineReport(Structure):
    _fields_ = [("n_stages", c_int64), ("n_layers", c_size_t),
                ("first_layer", c_char_p * PIPELINE_MAX_STAGES),
                ("last_layer", c_char_p * PIPELINE_MAX_STAGES),
                ("stage_cost", c_double * PIPELINE_MAX_STAGES),
                ("n_p2p", c_size_t),
                ("text", (c_char * 256) * (PIPELINE_MAX_STAGES * 2))]


class PlanProposeOptions(Structure):
    _fields_ = [("size", c_size_t), ("mesh_axis", c_char_p),
                ("sequence_parallel", c_bool)]


class PlanNote(Structure):
    _fields_ = [("pattern", c_char_p), ("style", c_int),
                ("proposed", c_bool), ("role", c_char_p), ("why", c_char_p)]


class BackwardOptions(Structure):
    _fields_ = [("size", c_size_t), ("loss", c_uint32),
                ("outputs", POINTER(c_uint32)),
                ("output_grads", POINTER(c_uint32)), ("n_outputs", c_size_t),
                ("wrt", POINTER(c_char_p)), ("n_wrt", c_size_t),
                ("add_outputs", c_bool), ("p2p", c_bool)]


class VerifyOptions(Structure):
    _fields_ = [("size", c_size_t), ("stage_axis", c_char_p),
                ("p2p_buffer", c_int), ("dim_names", POINTER(c_char_p)),
                ("dim_values", POINTER(c_int64)), ("n_dims", c_size_t)]


class VerifyReport(Structure):
    _fields_ = [("kind", c_int), ("rank_a", c_int), ("rank_b", c_int),
                ("node_a", c_char * 128), ("node_b", c_char * 128),
                ("position", c_int64), ("group", c_char * 96),
                ("n_calls", c_size_t), ("message", c_char * 1024)]


class CostItem(Structure):
    _fields_ = [("op", c_int), ("node", c_char_p), ("first_rank", c_int),
                ("group_size", c_int), ("bytes", c_double),
                ("bus_factor", c_double), ("bus_bytes", c_double),
                ("time_s", c_double), ("axes", ctypes.c_uint)]


class CostReport(Structure):
    _fields_ = [("n_items", c_size_t), ("items", POINTER(CostItem)),
                ("n_ranks", c_int), ("rank_bytes", POINTER(c_double)),
                ("rank_bus_bytes", POINTER(c_double)),
                ("step_bus_bytes", c_double), ("step_time_s", c_double),
                ("link_bytes_per_s", c_double), ("n_axes", c_int),
                ("axis_bytes", c_double * 4), ("axis_bus_bytes", c_double * 4),
                ("multi_axis_bus_bytes", c_double)]


# ---- finding the library ---------------------------------------------------


def _source_dir() -> Optional[Path]:
    """The source tree the package was installed from (recorded at build
    time by setup.py), or the one it is imported from (python/ccgraph)."""
    try:
        from . import _build_info  # type: ignore[attr-defined]
        return Path(_build_info.SOURCE_DIR)
    except ImportError:
        here = Path(__file__).resolve().parent
        if (here.parent.parent / "include" / "ccgraph" / "ccgraph.h").exists():
            return here.parent.parent
    return None


def candidates() -> List[str]:
    """Where the library is looked for, in order: $CCGRAPH_LIBRARY, the
    build tree's build/libccgraph.so beside the sources, the installed
    library (ctypes.util.find_library)."""
    out = []
    env = os.environ.get("CCGRAPH_LIBRARY")
    if env:
        return [env]  # named explicitly: nothing else is tried
    src = _source_dir()
    if src is not None:
        out.append(str(src / "build" / "libccgraph.so"))
    found = ctypes.util.find_library("ccgraph")
    if found:
        out.append(found)
    return out


def _load() -> "tuple[ctypes.CDLL, str]":
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError(
        "ccgraph: cannot find the C library libccgraph.so; build it "
        "(cmake -S . -B build && cmake --build build), install it "
        "(cmake --install build), or set CCGRAPH_LIBRARY to its path. "
        "Tried: " + ("; ".join(tried) if tried else "nothing"))


lib, path = _load()
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
libc.free.argtypes = [c_void_p]
libc.free.restype = None

# ---- prototypes --------------------------------------------------------------

_P = c_void_p  # an opaque handle: ccg_graph *, ccg_plan *, ...


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


st = c_int  # ccg_status
_fn("ccg_status_name", c_char_p, st)
_fn("ccg_version", c_char_p)
_fn("ccg_last_error", c_char_p, _P)
_fn("ccg_last_status", st, _P)
_fn("ccg_clear_error", None, _P)
_fn("ccg_dtype_name", c_char_p, c_int)
_fn("ccg_dtype_size", c_size_t, c_int)
_fn("ccg_tensor_nbytes", st, POINTER(Tensor), POINTER(c_size_t))
_fn("ccg_mesh_parse", st, c_char_p, POINTER(Mesh))
_fn("ccg_mesh_format", c_int, POINTER(Mesh), c_char_p, c_size_t)
_fn("ccg_mesh_world_size", c_int64, POINTER(Mesh))
_fn("ccg_mesh_coords", st, POINTER(Mesh), c_int64, POINTER(c_int64))
_fn("ccg_mesh_axis", c_int, POINTER(Mesh), c_char_p)
_fn("ccg_placement_format", c_int, POINTER(Placement), c_char_p, c_size_t)
_fn("ccg_op_name", c_char_p, c_int)
_fn("ccg_op_is_collective", c_bool, c_int)
_fn("ccg_graph_free", None, _P)
_fn("ccg_graph_pin_dims", st, POINTER(c_void_p), POINTER(c_char_p),
    POINTER(c_int64), c_size_t)
_fn("ccg_graph_name", c_char_p, _P)
_fn("ccg_graph_mesh", POINTER(Mesh), _P)
_fn("ccg_graph_num_nodes", c_size_t, _P)
_fn("ccg_graph_num_inputs", c_size_t, _P)
_fn("ccg_graph_num_outputs", c_size_t, _P)
_fn("ccg_graph_num_initializers", c_size_t, _P)
_fn("ccg_graph_input", c_uint32, _P, c_size_t)
_fn("ccg_graph_output", c_uint32, _P, c_size_t)
_fn("ccg_graph_initializer", c_uint32, _P, c_size_t)
_fn("ccg_graph_find_value", st, _P, c_char_p, POINTER(c_uint32))
_fn("ccg_graph_dump_string", st, _P, c_int, POINTER(c_void_p))
_fn("ccg_value_name", c_char_p, _P, c_uint32)
_fn("ccg_value_dtype", c_int, _P, c_uint32)
_fn("ccg_value_shape", POINTER(Shape), _P, c_uint32)
_fn("ccg_value_rank_data", POINTER(Tensor), _P, c_uint32, c_int64)
_fn("ccg_value_placements", c_int, _P, c_uint32, POINTER(Placement))
_fn("ccg_node_op", c_int, _P, c_uint32)
_fn("ccg_node_attr", POINTER(Attr), _P, c_uint32, c_char_p)
_fn("ccg_onnx_import_file", st, c_char_p, _P, POINTER(c_void_p))
_fn("ccg_onnx_import_buffer", st, c_void_p, c_size_t, c_char_p, _P,
    POINTER(c_void_p))
_fn("ccg_onnx_export_file", st, _P, c_char_p, POINTER(ExportOptions))
_fn("ccg_onnx_export_buffer", st, _P, POINTER(ExportOptions),
    POINTER(c_void_p), POINTER(c_size_t))
_fn("ccg_onnx_export_rank_graphs", st, POINTER(c_void_p), c_size_t, c_char_p,
    c_char_p, POINTER(ExportOptions))
_fn("ccg_plan_parse", st, c_char_p, POINTER(c_void_p))
_fn("ccg_plan_load", st, c_char_p, POINTER(c_void_p))
_fn("ccg_plan_free", None, _P)
_fn("ccg_shard_apply", st, _P, _P, POINTER(Mesh), POINTER(ShardOptions),
    POINTER(c_void_p), POINTER(ShardReport))
_fn("ccg_plan_propose", st, _P, POINTER(Mesh), POINTER(PlanProposeOptions),
    POINTER(c_void_p), POINTER(c_void_p))
_fn("ccg_plan_report_num_notes", c_size_t, _P)
_fn("ccg_plan_report_note", POINTER(PlanNote), _P, c_size_t)
_fn("ccg_plan_report_json", c_char_p, _P)
_fn("ccg_plan_report_summary", c_char_p, _P)
_fn("ccg_plan_report_free", None, _P)
_fn("ccg_plan_style_name", c_char_p, c_int)
_fn("ccg_backward", st, _P, POINTER(BackwardOptions))
_fn("ccg_ddp_bucket_gradients", st, _P, c_size_t, POINTER(c_size_t))
_fn("ccg_verify_kind_name", c_char_p, c_int)
_fn("ccg_verify_program", st, POINTER(c_void_p), c_size_t,
    POINTER(VerifyOptions), POINTER(VerifyReport))
_fn("ccg_verify_placements", st, _P, POINTER(VerifyReport))
_fn("ccg_cost_program", st, POINTER(c_void_p), c_size_t,
    POINTER(VerifyOptions), c_double, POINTER(POINTER(CostReport)))
_fn("ccg_cost_report_free", None, POINTER(CostReport))
_fn("ccg_comm_mpi_new", st, POINTER(c_void_p))
_fn("ccg_comm_mpi_available", c_bool)
_fn("ccg_comm_nccl_new", st, c_void_p, POINTER(c_void_p))
_fn("ccg_comm_nccl_available", c_bool)
_fn("ccg_comm_free", None, _P)
_fn("ccg_comm_rank", c_int, _P)
_fn("ccg_comm_size", c_int, _P)
_fn("ccg_exec_create", st, _P, POINTER(ExecOptions), POINTER(c_void_p))
_fn("ccg_exec_free", None, _P)
_fn("ccg_exec_run", st, _P, POINTER(ExecTensor), c_size_t,
    POINTER(ExecTensor), c_size_t)
_fn("ccg_exec_run_local_ranks", st, POINTER(c_void_p), c_int, _P, c_int,
    POINTER(POINTER(ExecTensor)), c_size_t, POINTER(POINTER(ExecTensor)),
    c_size_t, POINTER(c_int), POINTER(c_double))


_fn("ccg_graph_set_mesh", st, _P, POINTER(Mesh))
_fn("ccg_pipeline_split", st, _P, POINTER(PipelineOptions),
    POINTER(POINTER(_P)), POINTER(c_size_t), POINTER(PipelineReport))
_fn("ccg_pipeline_stages_free", None, POINTER(_P), c_size_t)
_fn("ccg_pipeline_schedule_parse", c_int, c_char_p, POINTER(c_int))
_fn("ccg_pipeline_bubble", c_double, POINTER(c_double), c_int64, c_int64)
_fn("ccg_exec_run_local_program", st, POINTER(c_void_p), c_int, _P, c_int,
    POINTER(POINTER(ExecTensor)), POINTER(c_size_t),
    POINTER(POINTER(ExecTensor)), POINTER(c_size_t), POINTER(c_int),
    POINTER(c_double))


def _names(fn) -> List[str]:
    """Every name of an enum whose name function says "invalid"/"UNKNOWN"/
    NULL past its end."""
    out = []
    for i in range(4096):
        s = fn(i)
        if s is None or s in (b"invalid", b"UNKNOWN"):
            break
        out.append(s.decode())
    return out


STATUS_NAMES = _names(lib.ccg_status_name)  # "OK", "INVALID_ARG", ...
DTYPE_NAMES = _names(lib.ccg_dtype_name)    # "undefined", "f32", ...
VERIFY_KINDS = _names(lib.ccg_verify_kind_name)
OP_NAMES = _names(lib.ccg_op_name)
COLLECTIVES = frozenset(n for i, n in enumerate(OP_NAMES)
                        if lib.ccg_op_is_collective(i))
VERIFY_PLACEMENT = VERIFY_KINDS.index("placement")
PLACEMENT_SHARD = 1  # ccg_placement_kind: REPLICATE, SHARD, PARTIAL
ATTR_STRING, ATTR_STRINGS = 2, 5  # ccg_attr_type


def text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b is not None else ""
