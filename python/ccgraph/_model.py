"""Models: what they hold, what they are, saving and running them
(_functions.py has load, shard, grad, verify and cost).

A Model holds one SPMD graph (run by every rank of its mesh) or one graph
per rank (per-rank models, as `ccgraph shard` writes them). Every graph is a
ccg_graph handle owned by the Model and freed by close() (also called by
__del__ and on leaving a `with` block). Calls on one Model are serialized by
its lock; two Models never share a handle, so two threads may use two Models
at once.
"""
from __future__ import annotations

import ctypes
import os
import re
import threading
import time
from ctypes import (byref, c_double, c_int, c_int64, c_size_t, c_uint32,
                    c_void_p)
from typing import (Any, Dict, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from . import _lib
from ._errors import BadInput, check, from_status

L = _lib.lib
PathLike = Union[str, "os.PathLike[str]"]

# ccgraph dtype name -> numpy dtype (bf16 has none: its data is uint16)
_NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16,
          "f64": np.float64, "i64": np.int64, "i32": np.int32, "i8": np.int8,
          "u8": np.uint8, "bool": np.bool_}

_RANK_FILE = re.compile(r"^(.+)\.rank(0|[1-9][0-9]{0,5})\.onnx$")


class TensorInfo(NamedTuple):
    """A graph input or output: its name, dtype ("f32", "i64", ... as the
    library names them), shape (a number or a symbol such as "batch" per
    dim; rank 0's local shape for a sharded model) and placement on each
    mesh axis ("Replicate", "Shard(1)", "Partial(sum)"; empty when the value
    has none)."""
    name: str
    dtype: str
    shape: Tuple[Union[int, str], ...]
    placements: Tuple[str, ...]

    @property
    def numpy_dtype(self) -> "np.dtype[Any]":
        """The numpy dtype of its data (bf16: uint16, its bits)."""
        return np.dtype(_NUMPY[self.dtype])


def _b(s: str) -> bytes:
    return s.encode("utf-8")


def _import_file(path: str) -> int:
    g = c_void_p()
    check(L.ccg_onnx_import_file(_b(path), None, byref(g)))
    return g.value


def _clone(g: int, rank: int = -1) -> int:
    """A new graph equal to g (rank >= 0: with rank's per-rank weights as
    its weights) through an in-memory ONNX model, as the tool's per-rank
    files carry it."""
    data, size = c_void_p(), c_size_t()
    opts = _lib.ExportOptions.make(rank=rank)
    check(L.ccg_onnx_export_buffer(g, byref(opts), byref(data), byref(size)),
          g)
    try:
        out = c_void_p()
        check(L.ccg_onnx_import_buffer(data, size, None, None, byref(out)))
        return out.value
    finally:
        _lib.libc.free(data)


def _mesh_of(g: int) -> Optional[_lib.Mesh]:
    m = L.ccg_graph_mesh(g)
    return m.contents if m else None


def _world(g: int) -> int:
    m = L.ccg_graph_mesh(g)
    return int(L.ccg_mesh_world_size(m)) if m else 1


def _shape(g: int, v: int) -> Tuple[Union[int, str], ...]:
    s = L.ccg_value_shape(g, v).contents
    return tuple(_lib.text(s.dims[d].sym) if s.dims[d].sym else
                 int(s.dims[d].size) for d in range(s.rank))


def _placements(g: int, v: int) -> List[_lib.Placement]:
    p = (_lib.Placement * _lib.MAX_MESH_AXES)()
    n = L.ccg_value_placements(g, v, p)
    return list(p[:n])


def _find(g: int, name: str) -> Optional[int]:
    v = c_uint32()
    if L.ccg_graph_find_value(g, _b(name), byref(v)) != 0:
        L.ccg_clear_error(g)
        return None
    return v.value


def _info(g: int, v: int) -> TensorInfo:
    names = []
    for p in _placements(g, v):
        buf = ctypes.create_string_buffer(64)
        L.ccg_placement_format(byref(p), buf, 64)
        names.append(_lib.text(buf.value))
    return TensorInfo(_lib.text(L.ccg_value_name(g, v)),
                      _lib.DTYPE_NAMES[L.ccg_value_dtype(g, v)], _shape(g, v),
                      tuple(names))


def _mesh_spec(mesh: Union[str, Mapping[str, int]]) -> _lib.Mesh:
    if isinstance(mesh, Mapping):
        try:
            spec = ",".join(f"{k}={int(v)}" for k, v in mesh.items())
        except (TypeError, ValueError):
            raise BadInput(f"mesh {dict(mesh)!r}: every axis size must be an "
                           "integer", "INVALID_ARG") from None
    elif isinstance(mesh, str):
        spec = mesh
    else:
        raise BadInput(f"mesh {mesh!r}: give a spec such as 'tp=2' or a "
                       "dict such as {'tp': 2}", "INVALID_ARG")
    m = _lib.Mesh()
    check(L.ccg_mesh_parse(_b(spec), byref(m)))
    return m


def _part(g: int, name: str, a: np.ndarray, rank: int,
          strict: bool) -> np.ndarray:
    """Rank `rank`'s part of the global array `a` for value `name` of g:
    along every mesh axis where the value is Shard(d), dim d cut into that
    axis' size and the chunk at the rank's coordinate kept (nested axes of
    one dim: first axis outermost). strict (inputs, as `ccgraph run` splits
    them): a dim already of the local size is taken as the shard, and one
    the axis does not divide is an error; else (reference outputs, as
    `run --check` cuts them; "grad/<x>" takes x's placements) such a dim is
    left whole."""
    m = _mesh_of(g)
    v = _find(g, name)
    if m is None or v is None:
        return a
    pls = _placements(g, v)
    if not pls and not strict and name.startswith("grad/"):
        w = _find(g, name[5:])
        pls = _placements(g, w) if w is not None else []
    if not pls:
        return a
    coords = (c_int64 * _lib.MAX_MESH_AXES)()
    check(L.ccg_mesh_coords(byref(m), rank, coords))
    local = L.ccg_value_shape(g, v).contents if strict else None
    for ax, p in enumerate(pls[:m.ndims]):
        if p.kind != _lib.PLACEMENT_SHARD:
            continue
        d = p.dim if p.dim >= 0 else p.dim + a.ndim
        w, full = int(m.sizes[ax]), None
        if d < 0 or d >= a.ndim:
            continue
        full = a.shape[d]
        if strict:
            ld = local.dims[d]
            if ld.sym is None and full == ld.size:
                continue  # given as the shard already
            if full % w:
                raise BadInput(
                    f"input '{name}' dim {d} is {full}, which the {w} ranks "
                    f"of axis '{_lib.text(m.names[ax].value)}' do not divide",
                    "SHAPE")
        elif w < 2 or full % w:
            continue
        c = full // w
        a = a[(slice(None),) * d + (slice(coords[ax] * c,
                                          (coords[ax] + 1) * c),)]
    return a


def _is_model(m: Any) -> None:
    if not isinstance(m, Model):
        raise TypeError(f"expected a ccgraph.Model, not {type(m).__name__}")


class Model:
    """A model: one SPMD graph, or one graph per rank. Made by load(),
    shard() and grad(); free it with close() or a `with` block (__del__
    frees it too)."""

    def __init__(self, graphs: Sequence[int], per_rank: bool,
                 shard_report: Optional[Dict[str, int]] = None) -> None:
        self._graphs: List[int] = list(graphs)
        self._spmd_copies: List[int] = []  # rank r > 0's copy for run()
        self.per_rank = per_rank
        """True when each rank has a graph of its own (saved as a folder of
        <name>.rank<r>.onnx); False for one SPMD graph (saved as a file)."""
        self.shard_report = shard_report
        """What shard() did (sharded params, collectives, reshape
        rewrites); None for other models."""
        self.last_ranks: List[int] = []
        """The ranks whose outputs the last run() returned, in its order."""
        self.last_step_seconds: float = 0.0
        """The time of one step of the last run() (the slowest rank's)."""
        self._lock = threading.RLock()

    # ---- lifetime ---------------------------------------------------------

    def close(self) -> None:
        """Frees every graph of the model; later calls raise BadInput.
        Calling it again does nothing."""
        with self._lock:
            for g in self._graphs + self._spmd_copies:
                L.ccg_graph_free(g)
            self._graphs, self._spmd_copies = [], []

    def __del__(self) -> None:
        try:
            if getattr(self, "_graphs", None):
                self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return not self._graphs

    def _g(self, rank: int = 0) -> int:
        if not self._graphs:
            raise BadInput("the model is closed", "INVALID_ARG")
        if not self.per_rank:
            return self._graphs[0]
        if not 0 <= rank < len(self._graphs):
            raise BadInput(f"rank {rank}: the model has ranks 0 to "
                           f"{len(self._graphs) - 1}", "INVALID_ARG")
        return self._graphs[rank]

    def _all(self) -> List[int]:
        """The graphs, as the library's verify and cost take them: one SPMD
        graph or one per rank (borrowed ccg_graph handles)."""
        self._g()
        return list(self._graphs)

    # ---- what it is -------------------------------------------------------

    @property
    def name(self) -> str:
        """The graph's name (a saved per-rank model's <name>)."""
        with self._lock:
            return _lib.text(L.ccg_graph_name(self._g()))

    @property
    def ranks(self) -> int:
        """Ranks of the mesh (1 without one)."""
        with self._lock:
            return _world(self._g())

    @property
    def mesh(self) -> Dict[str, int]:
        """The device mesh as {axis: size} in axis order ({} without one)."""
        with self._lock:
            m = _mesh_of(self._g())
            if m is None:
                return {}
            return {_lib.text(m.names[i].value): int(m.sizes[i])
                    for i in range(m.ndims)}

    def _values(self, count, at, rank: int) -> List[TensorInfo]:
        with self._lock:
            g = self._g(rank)
            return [_info(g, at(g, i)) for i in range(count(g))]

    @property
    def inputs(self) -> List[TensorInfo]:
        """Graph inputs (rank 0's, with local shapes, for per-rank models)."""
        return self._values(L.ccg_graph_num_inputs, L.ccg_graph_input, 0)

    @property
    def outputs(self) -> List[TensorInfo]:
        """Graph outputs (rank 0's, with local shapes, for per-rank
        models)."""
        return self._values(L.ccg_graph_num_outputs, L.ccg_graph_output, 0)

    def input_info(self, rank: int) -> List[TensorInfo]:
        """Rank `rank`'s graph inputs."""
        return self._values(L.ccg_graph_num_inputs, L.ccg_graph_input, rank)

    def collectives(self, rank: int = 0,
                    axis: Optional[str] = None) -> Dict[str, int]:
        """Collective nodes of rank `rank`'s graph by op ({"AllReduce": 6,
        ...}, ops in registry order, absent ones left out); with `axis`, only
        those whose group spans that mesh axis."""
        with self._lock:
            g = self._g(rank)
            counts: Dict[str, int] = {}
            for n in range(L.ccg_graph_num_nodes(g)):
                op = L.ccg_node_op(g, n)
                name = _lib.OP_NAMES[op]
                if name not in _lib.COLLECTIVES:
                    continue
                if axis is not None and axis not in _node_axes(g, n):
                    continue
                counts[name] = counts.get(name, 0) + 1
            return {k: counts[k] for k in _lib.OP_NAMES if k in counts}

    def summary(self) -> str:
        """One line for the model, one per rank (nodes, weights and their
        bytes, collectives by kind) as `ccgraph inspect DIR` prints them,
        then the inputs and outputs."""
        with self._lock:
            mesh = ",".join(f"{k}={v}" for k, v in self.mesh.items())
            kind = "per-rank models" if self.per_rank else "one SPMD graph"
            lines = [f"model '{self.name}' (mesh {mesh or 'none'}): "
                     f"{self.ranks} rank{'s' if self.ranks != 1 else ''}, "
                     f"{kind}"]
            for r in range(len(self._graphs)):
                g = self._graphs[r]
                nbytes = 0
                for i in range(L.ccg_graph_num_initializers(g)):
                    t = L.ccg_value_rank_data(g, L.ccg_graph_initializer(g, i),
                                              r if self.per_rank else 0)
                    n = c_size_t()
                    if t and L.ccg_tensor_nbytes(t, byref(n)) == 0:
                        nbytes += n.value
                coll = ", ".join(f"{k} {v}" for k, v in
                                 self.collectives(r).items()) or "none"
                who = f"rank {r}" if self.per_rank else "every rank"
                lines.append(
                    f"  {who}: {L.ccg_graph_num_nodes(g)} nodes, "
                    f"{L.ccg_graph_num_initializers(g)} weights ({nbytes} "
                    f"bytes), collectives: {coll}")
            for what, vals in (("input", self.inputs),
                               ("output", self.outputs)):
                for t in vals:
                    dims = ",".join(str(d) for d in t.shape)
                    pl = f" {'/'.join(t.placements)}" if t.placements else ""
                    lines.append(f"  {what} {t.name}: {t.dtype} [{dims}]{pl}")
            return "\n".join(lines)

    def dump(self, format: str = "text", rank: int = 0) -> str:
        """Rank `rank`'s graph as text (a line per node), the stable JSON
        dump or Graphviz DOT ("text", "json", "dot")."""
        fmts = {"text": 0, "json": 1, "dot": 2}
        if format not in fmts:
            raise BadInput(f"format '{format}': give text, json or dot",
                           "INVALID_ARG")
        with self._lock:
            g = self._g(rank)
            out = c_void_p()
            check(L.ccg_graph_dump_string(g, fmts[format], byref(out)), g)
            try:
                return _lib.text(ctypes.string_at(out))
            finally:
                _lib.libc.free(out)

    def __repr__(self) -> str:
        if self.closed:
            return "<ccgraph.Model closed>"
        return (f"<ccgraph.Model '{self.name}' ranks={self.ranks} "
                f"mesh={self.mesh} per_rank={self.per_rank}>")

    # ---- writing ----------------------------------------------------------

    def save(self, path: PathLike, opset: int = 17) -> None:
        """Writes the model as ONNX: one SPMD graph to the file `path`,
        per-rank models into the folder `path` (made if missing) as
        <name>.rank<r>.onnx. Weights above 1 MiB go to a .data file beside
        each model. All or nothing: on failure nothing is left."""
        path = os.fspath(path)
        with self._lock:
            g = self._g()
            opts = _lib.ExportOptions.make(opset=opset)
            if not self.per_rank:
                check(L.ccg_onnx_export_file(g, _b(path), byref(opts)), g)
                return
            arr = (c_void_p * len(self._graphs))(*self._graphs)
            check(L.ccg_onnx_export_rank_graphs(arr, len(self._graphs),
                                                _b(path), _b(self.name),
                                                byref(opts)), g)

    # ---- running ----------------------------------------------------------

    def _rank_graphs(self) -> List[int]:
        """A graph per rank: an executor compiles from its graph on its own
        thread, so an SPMD graph is copied for ranks 1.. (kept for the next
        run)."""
        g = self._g()
        if self.per_rank:
            return list(self._graphs)
        world = _world(g)
        while len(self._spmd_copies) < world - 1:
            self._spmd_copies.append(_clone(g))
        return [g] + self._spmd_copies

    def run(self, inputs: Mapping[str, np.ndarray],
            ranks: Optional[int] = None, comm: str = "local",
            device: str = "cpu",
            steps: int = 1) -> List[Dict[str, np.ndarray]]:
        """Runs `steps` steps and returns the last step's outputs, one dict
        {output name: array} per rank run here. `inputs` are global arrays,
        one per graph input, with the input's dtype: a rank whose input is
        Shard(d) on a mesh axis gets its chunk of dim d, any other the whole
        array (as `ccgraph run` splits them). `ranks`, when given, must be
        the mesh's world size.

        comm="local" (default): every rank is a thread of this process; the
        list holds every rank. comm="mpi": this process is one rank of a job
        started by mpirun (its MPI rank; the job's size must be the world
        size); comm="nccl": the same with one GPU per process (implies
        device="cuda"; rank and GPU from the launcher's RANK, WORLD_SIZE,
        LOCAL_RANK, or from MPI). Then the list holds this process's rank
        only. device="cuda" runs on a GPU (docs/gpu.md): a one-rank model
        with comm="local", more ranks with comm="nccl". After the call,
        `last_ranks` names the ranks of the list and `last_step_seconds`
        the time of one step. BadInput for a missing, unknown or misshapen
        input, or a comm/device/steps the model cannot run with;
        RuntimeFailure when a rank fails (no GPU, a dead peer)."""
        if comm not in ("local", "mpi", "nccl"):
            raise BadInput(f"comm={comm!r}: give 'local' (threads), 'mpi' "
                           "(under mpirun) or 'nccl' (GPUs)", "INVALID_ARG")
        if device not in ("cpu", "cuda"):
            raise BadInput(f"device={device!r}: give 'cpu' or 'cuda'",
                           "INVALID_ARG")
        if comm == "nccl" and device != "cuda":
            raise BadInput("comm='nccl' moves GPU memory: give "
                           "device='cuda'", "INVALID_ARG")
        if comm == "mpi" and device == "cuda":
            raise BadInput("device='cuda': GPU ranks talk through "
                           "comm='nccl', not 'mpi'", "INVALID_ARG")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise BadInput(f"steps={steps!r}: give an int, 1 or more",
                           "INVALID_ARG")
        with self._lock:
            graphs = self._rank_graphs()
            world = len(graphs)
            if ranks is not None and ranks != world:
                raise BadInput(f"ranks={ranks}: the model's mesh has {world} "
                               "ranks", "INVALID_ARG")
            if comm == "local" and device == "cuda" and world > 1:
                raise BadInput(f"device='cuda' runs one rank per process and "
                               f"the mesh has {world}: give comm='nccl' and "
                               "start a process per rank (mpirun, or RANK/"
                               "WORLD_SIZE/LOCAL_RANK; docs/gpu.md)",
                               "INVALID_ARG")
            # per-rank models may differ in their inputs (pipeline stages)
            names = sorted({_lib.text(L.ccg_value_name(
                g, L.ccg_graph_input(g, i))) for g in graphs
                for i in range(L.ccg_graph_num_inputs(g))})
            unknown = sorted(set(inputs) - set(names))
            if unknown:
                raise BadInput(f"input '{unknown[0]}': the model has no input "
                               f"of that name (its inputs: "
                               f"{', '.join(names) or 'none'})", "INVALID_ARG")
            if comm == "local" and device == "cpu":
                return self._run_local(graphs, inputs, steps)
            handle = _process_comm(comm) if comm != "local" else None
            r = L.ccg_comm_rank(handle) if handle else 0
            if handle and L.ccg_comm_size(handle) != world:
                raise BadInput(f"comm={comm!r}: the job has "
                               f"{L.ccg_comm_size(handle)} processes and the "
                               f"model's mesh {world} ranks; start one "
                               "process per rank", "INVALID_ARG")
            row, orow, keep = _rank_rows(graphs[r], inputs, r)
            dev = _lib.DEVICE_CUDA if device == "cuda" else _lib.DEVICE_CPU
            out, secs = _run_own(graphs[r], r, handle, dev, steps, row,
                                 L.ccg_graph_num_inputs(graphs[r]), orow)
            if out is None:
                _drop_comm(comm)
                raise secs
            self.last_ranks, self.last_step_seconds = [r], secs
            return [out]

    def _run_local(self, graphs: List[int], inputs: Mapping[str, np.ndarray],
                   steps: int) -> List[Dict[str, np.ndarray]]:
        """Every rank as a thread of this process (the local communicator);
        each rank is fed the inputs its model declares and returns its own
        outputs (pipeline stages differ in both)."""
        world = len(graphs)
        keep: List[Any] = []  # everything C borrows during the call
        in_rows = (ctypes.POINTER(_lib.ExecTensor) * world)()
        out_rows = (ctypes.POINTER(_lib.ExecTensor) * world)()
        n_in = (ctypes.c_size_t * world)()
        n_out = (ctypes.c_size_t * world)()
        outs = []
        for r, g in enumerate(graphs):
            row, orow, k = _rank_rows(g, inputs, r)
            keep += k
            in_rows[r] = row
            out_rows[r] = orow
            n_in[r] = L.ccg_graph_num_inputs(g)
            n_out[r] = L.ccg_graph_num_outputs(g)
            outs.append(orow)
        garr = (c_void_p * world)(*graphs)
        status = (c_int * world)()
        secs = c_double(0.0)
        st = L.ccg_exec_run_local_program(garr, world, None, steps, in_rows,
                                          n_in, out_rows, n_out, status,
                                          byref(secs))
        msg = _lib.text(L.ccg_last_error(None)) if st else ""
        result = []
        try:
            for r in range(world):
                d = {}
                for i in range(n_out[r]):
                    t = outs[r][i].tensor
                    if st == 0:
                        d[_lib.text(outs[r][i].name)] = _array(t)
                result.append(d)
        finally:
            for r in range(world):
                for i in range(n_out[r]):
                    if outs[r][i].tensor.data:
                        _lib.libc.free(outs[r][i].tensor.data)
        if st:
            raise from_status(st, msg)
        self.last_ranks = list(range(world))
        self.last_step_seconds = secs.value
        return result


def _rank_rows(g: int, inputs: Mapping[str, np.ndarray],
               r: int) -> Tuple[Any, Any, List[Any]]:
    """Rank r's input row (its parts of the global inputs) and output row
    (names only), with what C borrows during the call."""
    n_in, n_out = L.ccg_graph_num_inputs(g), L.ccg_graph_num_outputs(g)
    keep: List[Any] = []
    row = (_lib.ExecTensor * max(n_in, 1))()
    for i in range(n_in):
        v = L.ccg_graph_input(g, i)
        name = _lib.text(L.ccg_value_name(g, v))
        if name not in inputs:
            raise BadInput(f"input '{name}' is not given", "INVALID_ARG")
        a = _rank_input(g, v, name, inputs[name], r)
        keep.append(a)
        row[i].name = L.ccg_value_name(g, v)
        row[i].tensor = _tensor(a, L.ccg_value_dtype(g, v))
    orow = (_lib.ExecTensor * max(n_out, 1))()
    for i in range(n_out):
        orow[i].name = L.ccg_value_name(g, L.ccg_graph_output(g, i))
    keep += [row, orow]
    return row, orow, keep


def _run_own(g: int, r: int, comm: Optional[int], device: int, steps: int,
             row: Any, n_in: int, orow: Any) -> Tuple[Any, Any]:
    """Rank r on this thread (a process per rank, or a lone rank on a GPU):
    compiles, runs `steps` steps and copies the outputs before the executor
    goes. Returns (outputs, seconds per step), or (None, the exception)."""
    n_out = L.ccg_graph_num_outputs(g)
    o = _lib.ExecOptions.make(r, comm, device)
    o.input_shapes = ctypes.cast(row, ctypes.POINTER(_lib.ExecTensor))
    o.n_input_shapes = n_in
    x = c_void_p()
    st = L.ccg_exec_create(g, byref(o), byref(x))
    if st:
        return None, from_status(st, f"rank {r}: " +
                                 _lib.text(L.ccg_last_error(g)))
    try:
        t0 = time.perf_counter()
        for _ in range(steps):
            st = L.ccg_exec_run(x, row, n_in, orow, n_out)
            if st:
                return None, from_status(st, _lib.text(L.ccg_last_error(x)))
        secs = (time.perf_counter() - t0) / steps
        return {_lib.text(orow[i].name): _array(orow[i].tensor)
                for i in range(n_out)}, secs
    finally:
        L.ccg_exec_free(x)


# One communicator per kind for the process: MPI is initialized once, and
# every process of the job must create its communicators in the same order.
_COMMS: Dict[str, int] = {}
_COMMS_LOCK = threading.Lock()


def _process_comm(kind: str) -> int:
    with _COMMS_LOCK:
        if kind in _COMMS:
            return _COMMS[kind]
        available = (L.ccg_comm_mpi_available() if kind == "mpi" else
                     L.ccg_comm_nccl_available())
        if not available:
            raise BadInput(f"comm={kind!r}: this build of the library has no "
                           f"{kind} communicator", "UNSUPPORTED")
        h = c_void_p()
        st = (L.ccg_comm_mpi_new(byref(h)) if kind == "mpi" else
              L.ccg_comm_nccl_new(None, byref(h)))
        check(st, None, f"comm={kind!r}: ")
        _COMMS[kind] = h.value
        return h.value


def _drop_comm(kind: str) -> None:
    """A communicator stays failed after a failure: the next run makes a
    new one."""
    with _COMMS_LOCK:
        h = _COMMS.pop(kind, None)
    if h:
        L.ccg_comm_free(h)


def _node_axes(g: int, n: int) -> List[str]:
    """The mesh axes of a collective node's group."""
    a = L.ccg_node_attr(g, n, b"mesh_axes")
    if a and a.contents.type == _lib.ATTR_STRINGS:
        return [_lib.text(a.contents.strings[i]) for i in range(a.contents.n)]
    a = L.ccg_node_attr(g, n, b"mesh_axis")
    if a and a.contents.type == _lib.ATTR_STRING:
        return [_lib.text(a.contents.s)]
    return []


def _rank_input(g: int, v: int, name: str, a: Any, rank: int) -> np.ndarray:
    dt = _lib.DTYPE_NAMES[L.ccg_value_dtype(g, v)]
    want = np.dtype(_NUMPY[dt])
    arr = np.asarray(a)
    shape = _shape(g, v)
    if arr.dtype != want or arr.ndim != len(shape):
        raise BadInput(f"input '{name}' needs {dt} ({want.name}) of rank "
                       f"{len(shape)}; the array is {arr.dtype.name} of rank "
                       f"{arr.ndim}", "DTYPE" if arr.dtype != want else "SHAPE")
    part = _part(g, name, arr, rank, strict=True)
    for d, want_d in enumerate(shape):
        if isinstance(want_d, int) and part.shape[d] != want_d:
            raise BadInput(f"input '{name}' dim {d} is {part.shape[d]} on "
                           f"rank {rank}; the model needs {want_d}", "SHAPE")
    return np.ascontiguousarray(part)


def _tensor(a: np.ndarray, dtype: int) -> _lib.Tensor:
    t = _lib.Tensor()
    t.dtype = dtype
    t.rank = a.ndim
    for d in range(a.ndim):
        t.dims[d] = a.shape[d]
    t.data = a.ctypes.data
    return t


def _array(t: _lib.Tensor) -> np.ndarray:
    """A numpy copy of a tensor's data."""
    dt = np.dtype(_NUMPY[_lib.DTYPE_NAMES[t.dtype]])
    shape = tuple(int(t.dims[d]) for d in range(t.rank))
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    buf = ctypes.string_at(t.data, n) if n else b""
    return np.frombuffer(buf, dtype=dt).reshape(shape).copy()
