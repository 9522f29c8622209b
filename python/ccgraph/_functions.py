"""The functions over models: load, shard, grad, verify, cost, part_of. Each
takes the Model's lock for the handles it reads; results are new Models
owning new handles."""
from __future__ import annotations

import ctypes
import json
import os
from ctypes import byref, c_char_p, c_double, c_int, c_int64, c_void_p
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _lib
from ._errors import BadInput, CheckFailed, check
from ._model import (_RANK_FILE, L, Model, PathLike, _b, _clone, _find,
                     _import_file, _is_model, _mesh_spec, _part, _world)

def load(path: PathLike, name: Optional[str] = None) -> Model:
    """Reads a model: an ONNX file (one SPMD graph), or a folder of per-rank
    models <name>.rank<r>.onnx (`name` picks the program in a folder holding
    several); a file <name>.rank<r>.onnx stands for every rank beside it, as
    for the tool. BadInput naming the file for anything missing or bad."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return _load_ranks(path, name)
    m = _RANK_FILE.match(os.path.basename(path))
    if m and name is None and os.path.exists(path):
        return _load_ranks(os.path.dirname(path) or ".", m.group(1))
    return Model([_import_file(path)], per_rank=False)


def _load_ranks(folder: str, name: Optional[str]) -> Model:
    found: Dict[str, List[int]] = {}
    for f in sorted(os.listdir(folder)):
        m = _RANK_FILE.match(f)
        if m and (name is None or m.group(1) == name):
            found.setdefault(m.group(1), []).append(int(m.group(2)))
    if not found:
        raise BadInput(f"no per-rank models {name or '<name>'}.rank<r>.onnx "
                       f"in '{folder}'", "IO")
    if len(found) > 1:
        a, b = sorted(found)[:2]
        raise BadInput(f"'{folder}' holds the models of several programs "
                       f"('{a}' and '{b}'); pick one with name=", "INVALID_ARG")
    prog, ranks = next(iter(found.items()))
    for r in range(max(ranks) + 1):
        if r not in ranks:
            raise BadInput(f"'{folder}/{prog}.rank{r}.onnx' is missing (found "
                           f"ranks up to {max(ranks)} of '{prog}')", "IO")
    graphs: List[int] = []
    try:
        for r in range(max(ranks) + 1):
            graphs.append(_import_file(os.path.join(folder,
                                                    f"{prog}.rank{r}.onnx")))
    except BaseException:
        for g in graphs:
            L.ccg_graph_free(g)
        raise
    return Model(graphs, per_rank=True)


def shard(model: Model, plan: Optional[Union[Mapping[str, Any], PathLike]],
          mesh: Union[str, Mapping[str, int]], sequence_parallel: bool = False,
          axis: Optional[str] = None, *, dp_axis: Optional[str] = None,
          zero: int = 0, dp_reduce: str = "mean", batch_dim: int = 0,
          dp_inputs: Optional[Sequence[str]] = None,
          pp_axis: Optional[str] = None, stages: Optional[str] = None,
          microbatches: int = 1, schedule: str = "1f1b",
          dims: Optional[Mapping[str, int]] = None) -> Model:
    """Applies a DTensor-style plan ({module-or-parameter pattern: style},
    a dict or a JSON file; docs/shard.md) to an unsharded model on `mesh`
    ("tp=2" or {"tp": 2}) and returns the per-rank models (each rank's
    weight shards, collectives inserted), as `ccgraph shard` writes them.
    `axis` is the mesh axis the plan shards over (default "tp").
    Data parallelism (docs/parallelism.md), as `ccgraph shard`'s options of
    the same names: a mesh axis named `dp_axis` (default "dp") has the data
    role: the inputs carrying the batch (`dp_inputs`, default every input
    whose `batch_dim` equals the first input's) are split over it, and
    every float parameter's gradient is all-reduced over it (`zero` 0),
    or the parameter stored as its dp shard and its gradient
    reduce-scattered (`zero` 1, or 3: gathered again in the backward);
    `dp_reduce` "mean" averages the gradients, "sum" sums them.
    Pipeline parallelism, as `ccgraph shard --pp-axis/--stages/
    --microbatches/--schedule`: a mesh axis named `pp_axis` (default "pp")
    splits the (sharded) model into stages of its layers ("h.0-h.5|h.6-h.11"
    in `stages`, default balanced by estimated cost) joined by Send/Recv,
    each rank running its stage; `microbatches` splits each rank's batch,
    scheduled "1f1b" or "gpipe"; shard_report["pipeline"] has the stages
    and the bubble fraction. `plan` may be None on a mesh with a data or a
    pipeline axis only. `dims` ({"batch": 8, "sequence": 16}, as `ccgraph
    shard --dims`) pins the inputs' symbolic dims to sizes first: a
    dynamic-axes export sharded as the static model of those sizes (the
    model itself is unchanged). BadInput
    for a bad plan or mesh, a pattern that matches nothing, a dim the mesh
    does not divide."""
    _is_model(model)
    with model._lock:
        if model.per_rank:
            raise BadInput("shard takes an unsharded model (one graph); this "
                           f"one has {len(model._graphs)} per-rank models",
                           "INVALID_ARG")
        pinned = _pinned(model._g(), dims) if dims else None
        try:
            return _shard_graph(pinned or model._g(), plan, mesh,
                                sequence_parallel, axis, dp_axis, zero,
                                dp_reduce, batch_dim, dp_inputs, pp_axis,
                                stages, microbatches, schedule)
        finally:
            if pinned:
                L.ccg_graph_free(pinned)


def _pinned(g: int, dims: Mapping[str, int]) -> int:
    """A copy of g with `dims` pinned (ccg_graph_pin_dims); BadInput naming
    an unknown dim, a size below 1 or one the model contradicts."""
    if not isinstance(dims, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int)
            and not isinstance(v, bool) for k, v in dims.items()):
        raise BadInput(f"dims={dims!r}: give {{name: size}} with whole sizes",
                       "INVALID_ARG")
    names = (c_char_p * len(dims))(*[_b(k) for k in dims])
    values = (c_int64 * len(dims))(*dims.values())
    c = c_void_p(_clone(g))
    st = L.ccg_graph_pin_dims(byref(c), names, values, len(dims))
    if st:
        try:
            check(st, c.value)
        finally:
            L.ccg_graph_free(c)
    return c.value


def _shard_graph(g: int, plan, mesh, sequence_parallel, axis, dp_axis, zero,
                 dp_reduce, batch_dim, dp_inputs, pp_axis, stages,
                 microbatches, schedule) -> Model:
    """shard()'s work on graph g (the caller holds the model's lock)."""
    m = _mesh_spec(mesh)
    p = c_void_p()
    if zero not in (0, 1, 3) or isinstance(zero, bool):
        raise BadInput(f"zero={zero!r}: give 0 (all-reduced gradients), "
                       "1 (sharded parameters) or 3 (FSDP); 2's "
                       "communication is 1's", "INVALID_ARG")
    if dp_reduce not in ("mean", "sum"):
        raise BadInput(f"dp_reduce={dp_reduce!r}: give 'mean' or 'sum'",
                       "INVALID_ARG")
    po = _pipeline_options(m, pp_axis, stages, microbatches, schedule,
                           dp_axis, axis)
    if plan is None:
        pass
    elif isinstance(plan, Mapping):
        try:
            text = json.dumps(plan)
        except (TypeError, ValueError) as e:
            raise BadInput(f"plan: not JSON: {e}", "PARSE") from None
        check(L.ccg_plan_parse(_b(text), byref(p)))
    elif isinstance(plan, (str, os.PathLike)):
        check(L.ccg_plan_load(_b(os.fspath(plan)), byref(p)))
    else:
        raise BadInput(f"plan: give a dict or a JSON file's path, not "
                       f"{type(plan).__name__}", "INVALID_ARG")
    out = c_void_p()
    rep = _lib.ShardReport()
    opts = _lib.ShardOptions(ctypes.sizeof(_lib.ShardOptions),
                             _b(axis) if axis else None,
                             bool(sequence_parallel), 1,
                             _b(dp_axis) if dp_axis else None, zero,
                             dp_reduce == "sum", batch_dim,
                             _b(",".join(dp_inputs)) if dp_inputs
                             else None)
    # as the tool: no plan and no data axis leaves a pipeline alone
    dp_in_mesh = L.ccg_mesh_axis(byref(m), _b(dp_axis or "dp")) >= 0
    try:
        if plan is not None or dp_in_mesh or po is None:
            check(L.ccg_shard_apply(g, p, byref(m), byref(opts),
                                    byref(out), byref(rep)), g)
        else:
            out.value = _clone(g)
            check(L.ccg_graph_set_mesh(out, byref(m)), out.value)
    except BaseException:
        if out.value:
            L.ccg_graph_free(out)
        raise
    finally:
        if p:
            L.ccg_plan_free(p)
    report = {
        "sharded_params": rep.n_sharded_params,
        "collectives": rep.n_collectives,
        "reshape_rewrites": rep.n_reshape_rewrites,
        "dp_inputs": rep.n_dp_inputs, "dp_params": rep.n_dp_params,
        "dp_sharded": rep.n_dp_sharded}
    try:
        if po is None:
            graphs = [_clone(out.value, rank=r)
                      for r in range(_world(out.value))]
        else:
            graphs = _split(out.value, po, report)
    finally:
        L.ccg_graph_free(out)
    return Model(graphs, per_rank=True, shard_report=report)


def _pipeline_options(m: _lib.Mesh, pp_axis: Optional[str],
                      stages: Optional[str], microbatches: int, schedule: str,
                      dp_axis: Optional[str],
                      axis: Optional[str]) -> Optional[_lib.PipelineOptions]:
    """The pipeline split's options, None when the mesh has no pipeline
    axis; BadInput for options that name no pipeline or clash."""
    name = pp_axis or "pp"
    if name in (dp_axis or "dp", axis or "tp"):
        role = "data" if name == (dp_axis or "dp") else "plan's"
        raise BadInput(f"mesh axis '{name}' cannot be both the pipeline axis "
                       f"and the {role} axis", "INVALID_ARG")
    if isinstance(microbatches, bool) or not isinstance(microbatches, int) \
            or not 1 <= microbatches <= 4096:
        raise BadInput(f"microbatches={microbatches!r}: give 1 to 4096",
                       "INVALID_ARG")
    sched = c_int()
    if not isinstance(schedule, str) or \
            L.ccg_pipeline_schedule_parse(_b(schedule), byref(sched)):
        raise BadInput(f"schedule={schedule!r}: give 'gpipe' or '1f1b'",
                       "INVALID_ARG")
    if L.ccg_mesh_axis(byref(m), _b(name)) < 0:
        if stages is not None or microbatches != 1 or schedule != "1f1b":
            raise BadInput("stages, microbatches and schedule need the "
                           f"pipeline axis '{name}' in the mesh",
                           "INVALID_ARG")
        return None
    return _lib.PipelineOptions(ctypes.sizeof(_lib.PipelineOptions),
                                _b(name), _b(stages) if stages else None,
                                microbatches, sched.value)


def _split(g: int, po: _lib.PipelineOptions,
           report: Dict[str, Any]) -> List[int]:
    """Rank r's model: the stage of its pipeline coordinate, with its
    per-rank weights (as `ccgraph shard` writes them)."""
    arr = ctypes.POINTER(c_void_p)()
    n = ctypes.c_size_t()
    rep = _lib.PipelineReport()
    check(L.ccg_pipeline_split(g, byref(po), byref(arr), byref(n),
                               byref(rep)), g)
    graphs: List[int] = []
    try:
        m = L.ccg_graph_mesh(g)
        ax = L.ccg_mesh_axis(m, po.axis)
        coords = (c_int64 * _lib.MAX_MESH_AXES)()
        for r in range(_world(g)):
            check(L.ccg_mesh_coords(m, r, coords))
            graphs.append(_clone(arr[coords[ax]], rank=r))
        p = rep.n_stages
        report["pipeline"] = {
            "stages": [{"first_layer": _lib.text(rep.first_layer[i]),
                        "last_layer": _lib.text(rep.last_layer[i]),
                        "cost": rep.stage_cost[i]} for i in range(p)],
            "microbatches": po.microbatches, "sends": rep.n_p2p,
            "bubble": L.ccg_pipeline_bubble(rep.stage_cost, p,
                                            po.microbatches)}
    except BaseException:
        for x in graphs:
            L.ccg_graph_free(x)
        raise
    finally:
        L.ccg_pipeline_stages_free(arr, n.value)
    return graphs


def plan(model: Model, mesh: Union[str, Mapping[str, int]],
         sequence_parallel: bool = False, axis: Optional[str] = None,
         notes: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """The Megatron-style plan `ccgraph plan` proposes for a transformer-
    shaped unsharded model on `mesh` (attention input projections colwise,
    its output rowwise, the MLP's first projections colwise and its last
    rowwise, embeddings vocab_parallel; LayerNorms sequence_parallel with
    `sequence_parallel`), as a dict that `shard` takes. `notes`, a list,
    receives one dict per finding (pattern, style, proposed, role, why).
    BadInput when the model is not transformer-shaped or nothing divides
    (the message says why), or for a mesh without the axis."""
    _is_model(model)
    with model._lock:
        if model.per_rank:
            raise BadInput("plan takes an unsharded model (one graph); this "
                           f"one has {len(model._graphs)} per-rank models",
                           "INVALID_ARG")
        g = model._g()
        m = _mesh_spec(mesh)
        opts = _lib.PlanProposeOptions(
            ctypes.sizeof(_lib.PlanProposeOptions),
            _b(axis) if axis else None, bool(sequence_parallel))
        p, rep = c_void_p(), c_void_p()
        status = L.ccg_plan_propose(g, byref(m), byref(opts), byref(p),
                                    byref(rep))
        try:
            if rep.value and notes is not None:
                for i in range(L.ccg_plan_report_num_notes(rep)):
                    n = L.ccg_plan_report_note(rep, i).contents
                    notes.append({
                        "pattern": _lib.text(n.pattern),
                        "style": _lib.text(L.ccg_plan_style_name(n.style)),
                        "proposed": bool(n.proposed),
                        "role": _lib.text(n.role), "why": _lib.text(n.why)})
            check(status, g)
            return json.loads(_lib.text(L.ccg_plan_report_json(rep)))
        finally:
            if p.value:
                L.ccg_plan_free(p)
            if rep.value:
                L.ccg_plan_report_free(rep)


def grad(model: Model, loss: str,
         wrt: Optional[Union[str, Sequence[str]]] = None,
         bucket_mb: float = 25) -> Model:
    """A new model with the backward added (to every rank's graph): the
    gradient of the sum of value `loss`'s elements with respect to the
    inputs and initializers `wrt` names (names or fnmatch patterns; default
    every float initializer), each as a graph output "grad/<name>". A
    pipeline stage without the loss is differentiated from the gradients
    its Sends' peers send back. A
    data-parallel model's gradient all-reduces (reduce-scatters under
    ZeRO 1 and 3) are grouped into buckets of at most `bucket_mb` MB (`ccgraph grad --bucket-mb`; 0: one per
    gradient). `model` is left unchanged. BadInput for an unknown loss or
    pattern, or an op without a gradient rule (the message names it)."""
    if isinstance(bucket_mb, bool) or not isinstance(bucket_mb, (int, float)) \
            or not 0 <= bucket_mb <= 1e6:
        raise BadInput(f"bucket_mb={bucket_mb!r}: give a size in MB, 0 to "
                       "1e6", "INVALID_ARG")
    _is_model(model)
    pats = [wrt] if isinstance(wrt, str) else list(wrt or [])
    with model._lock:
        src = model._graphs if model.per_rank else [model._g()]
        model._g()
        graphs: List[int] = []
        send = _lib.OP_NAMES.index("Send")

        def sends(g: int) -> bool:
            return any(L.ccg_node_op(g, n) == send
                       for n in range(L.ccg_graph_num_nodes(g)))
        if any(sends(g) for g in src) and \
                all(_find(g, loss) is None for g in src):
            raise BadInput(f"no value named '{loss}' to use as the loss on "
                           "any rank", "INVALID_ARG")
        try:
            for r, g0 in enumerate(src):
                g = _clone(g0)
                graphs.append(g)
                what = f"rank {r}: " if model.per_rank else ""
                v = _find(g, loss)
                # a pipeline stage before the loss's: differentiated from
                # what its Sends' peers send back (as `ccgraph grad`)
                if v is None and not sends(g):
                    raise BadInput(f"{what}no value named '{loss}' to use as "
                                   "the loss", "INVALID_ARG")
                o = _lib.BackwardOptions()
                o.size = ctypes.sizeof(o)
                o.loss = _lib.NONE_ID if v is None else v
                o.n_outputs = 0
                o.add_outputs = True
                o.p2p = True
                arr = (c_char_p * max(len(pats), 1))(*[_b(s) for s in pats])
                if pats:
                    o.wrt = arr
                    o.n_wrt = len(pats)
                check(L.ccg_backward(g, byref(o)), g, what)
                check(L.ccg_ddp_bucket_gradients(
                    g, int(bucket_mb * 1024 * 1024), None), g, what)
        except BaseException:
            for g in graphs:
                L.ccg_graph_free(g)
            raise
        return Model(graphs, per_rank=model.per_rank)


def _verify_options(dims: Optional[Mapping[str, int]], p2p_buffer: int,
                    keep: List[Any]) -> _lib.VerifyOptions:
    o = _lib.VerifyOptions(ctypes.sizeof(_lib.VerifyOptions), None,
                           p2p_buffer, None, None, 0)
    if dims:
        names = (c_char_p * len(dims))(*[_b(k) for k in dims])
        vals = (c_int64 * len(dims))(*[int(v) for v in dims.values()])
        keep += [names, vals]
        o.dim_names, o.dim_values, o.n_dims = names, vals, len(dims)
    return o


def verify(model: Model, dims: Optional[Mapping[str, int]] = None,
           p2p_buffer: int = 16) -> Dict[str, Any]:
    """Proves that the ranks' collectives and sends/recvs match, and that
    every declared placement agrees with its collective (`ccgraph verify`).
    Returns {"ok": True, "kind": "ok", "calls": n, "graphs": n, "ranks": n};
    raises CheckFailed (its `report` with the kind, ranks, nodes, position,
    group and message) on a mismatch. `dims` binds named dims
    ({"batch": 8})."""
    _is_model(model)
    with model._lock:
        graphs = model._all()
        keep: List[Any] = []
        o = _verify_options(dims, p2p_buffer, keep)
        arr = (c_void_p * len(graphs))(*graphs)
        rep = _lib.VerifyReport()
        comm = _lib.STATUS_NAMES.index("COMM")
        st = L.ccg_verify_program(arr, len(graphs), byref(o), byref(rep))
        if st not in (0, comm):
            check(st)  # cannot be replayed: a bad program, not a mismatch
        calls, prefix = rep.n_calls, ""
        for i, g in enumerate(graphs if st == 0 else []):
            pst = L.ccg_verify_placements(g, byref(rep))
            if pst and rep.kind != _lib.VERIFY_PLACEMENT:
                check(pst)
            if pst:
                st = comm
                rep.rank_a = i if model.per_rank else -1
                prefix = f"rank {i}: " if model.per_rank else ""
                break
        report: Dict[str, Any] = {
            "ok": st == 0, "kind": _lib.VERIFY_KINDS[rep.kind] if st else "ok",
            "calls": calls, "graphs": len(graphs), "ranks": model.ranks}
        if st:
            msg = prefix + _lib.text(rep.message)
            report["mismatch"] = {
                "rank_a": rep.rank_a, "rank_b": rep.rank_b,
                "node_a": _lib.text(rep.node_a), "node_b": _lib.text(rep.node_b),
                "position": rep.position, "group": _lib.text(rep.group),
                "message": msg}
            raise CheckFailed(msg, "COMM", report)
        return report


def cost(model: Model, link_gbps: float = 100.0,
         dims: Optional[Mapping[str, int]] = None) -> Dict[str, Any]:
    """The communication cost of one step (`ccgraph cost --json`): every
    collective once per group (op, node, first_rank, group_size, bytes,
    bus_factor, bus_bytes, time_s), each rank's bytes, and the step's bus
    bytes and time at a link of `link_gbps` Gbit/s. Every dim must be a
    number (`dims` binds named ones)."""
    _is_model(model)
    if not (isinstance(link_gbps, (int, float)) and 0 < link_gbps <= 1e9):
        raise BadInput(f"link_gbps {link_gbps!r} is not a positive number",
                       "INVALID_ARG")
    with model._lock:
        graphs = model._all()
        keep: List[Any] = []
        o = _verify_options(dims, 16, keep)
        arr = (c_void_p * len(graphs))(*graphs)
        rp = ctypes.POINTER(_lib.CostReport)()
        check(L.ccg_cost_program(arr, len(graphs), byref(o),
                                 c_double(link_gbps), byref(rp)))
        try:
            r = rp.contents
            items = [{"op": _lib.OP_NAMES[it.op], "node": _lib.text(it.node),
                      "first_rank": it.first_rank,
                      "group_size": it.group_size, "bytes": it.bytes,
                      "bus_factor": it.bus_factor, "bus_bytes": it.bus_bytes,
                      "time_s": it.time_s}
                     for it in (r.items[i] for i in range(r.n_items))]
            ranks = [{"rank": q, "bytes": r.rank_bytes[q],
                      "bus_bytes": r.rank_bus_bytes[q],
                      "time_s": r.rank_bus_bytes[q] / r.link_bytes_per_s}
                     for q in range(r.n_ranks)]
            return {"link_gbps": float(link_gbps),
                    "link_bytes_per_s": r.link_bytes_per_s,
                    "collectives": items, "ranks": ranks,
                    "step": {"bus_bytes": r.step_bus_bytes,
                             "time_s": r.step_time_s}}
        finally:
            L.ccg_cost_report_free(rp)


def part_of(model: Model, name: str, array: np.ndarray,
            rank: int) -> np.ndarray:
    """Rank `rank`'s part of a global (unsharded) array for the model's
    value `name`: where that value (or, for "grad/<x>", x) is Shard(d) on a
    mesh axis, the chunk of dim d at the rank's coordinate; the whole array
    elsewhere, or where the axis does not divide the dim (as `ccgraph run
    --check` compares a rank with its part of the reference)."""
    _is_model(model)
    with model._lock:
        return _part(model._g(rank), name, np.asarray(array), rank,
                     strict=False)


