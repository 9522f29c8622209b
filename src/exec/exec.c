/* The executor: create (schedule, bound shapes, kernels, memory plan), run
 * (no allocation), free, and the plan's figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "exec/comm/comm.h"
#include "exec/cpu/vecmath.h"
#include "exec/cpu/cpu.h"
#include "exec/cpu/pool.h"
#include "exec/debug.h"
#include "exec/exec_create.h"

ccg_status ccg__xfail(ccg_exec *x, const ccg__xnode *n, ccg_status st,
                      const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (x->comm)
    return ccg__error(&x->ctx, st, "rank %d: node '%s' (%s): %s", x->rank,
                      n->name, ccg_op_name(n->op), msg);
  return ccg__error(&x->ctx, st, "node '%s' (%s): %s", n->name,
                    ccg_op_name(n->op), msg);
}

/* ---- create ------------------------------------------------------------- */

static ccg_status init_values(ccg_exec *x) {
  ccg_graph *g = x->g;
  x->n_vals = ccg_graph_num_values(g);
  x->vals = ccg__arena_calloc(&x->arena, x->n_vals + 1, sizeof(ccg__xval));
  if (!x->vals)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  for (size_t i = 0; i < x->n_vals; i++) {
    ccg__xval *v = &x->vals[i];
    ccg_value_id id = (ccg_value_id)i;
    v->dtype = ccg_value_dtype(g, id);
    v->buffer = -1;
    v->first = v->last = -1;
    switch (ccg_value_kind_of(g, id)) {
    case CCG_VALUE_INPUT:
      v->kind = CCG__V_INPUT;
      break;
    case CCG_VALUE_INITIALIZER:
      v->kind = CCG__V_STATIC;
      /* This rank's own shard where the graph holds per-rank data. */
      v->init = ccg_value_rank_data(g, id, x->rank)->data;
      break;
    default:
      v->kind = CCG__V_ARENA;
      break;
    }
    ccg_shape s = *ccg_value_shape(g, id);
    v->rank = s.rank;
    size_t numel = 1;
    for (int d = 0; d < s.rank; d++) {
      char missing[256];
      if (!ccg__eval_dim(x, s.dims[d], &v->dims[d], missing, sizeof missing))
        return ccg__unbound_dim(x, id, d, missing);
      if (v->dims[d] < 0 || !ccg__mul_size(numel, (size_t)v->dims[d], &numel))
        return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                          "value '%s' dim %d: size %lld is negative or "
                          "overflows",
                          ccg_value_name(g, id), d, (long long)v->dims[d]);
    }
    v->numel = numel;
    if (!ccg__mul_size(numel, ccg_dtype_size(v->dtype), &v->nbytes))
      return ccg__error(&x->ctx, CCG_STATUS_SHAPE, "value '%s' is too large",
                        ccg_value_name(g, id));
  }
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++)
    x->vals[ccg_graph_output(g, i)].is_output = true;
  return CCG_STATUS_OK;
}

static ccg_status init_steps(ccg_exec *x) {
  ccg_graph *g = x->g;
  x->n_steps = ccg_graph_num_nodes(g);
  x->schedule =
      ccg__arena_calloc(&x->arena, x->n_steps + 1, sizeof(ccg_node_id));
  x->steps = ccg__arena_calloc(&x->arena, x->n_steps + 1, sizeof(ccg__xnode));
  if (!x->schedule || !x->steps)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  if (ccg_graph_topo_order(g, x->schedule) != CCG_STATUS_OK)
    return ccg__error(&x->ctx, ccg_last_status(g), "%s", ccg_last_error(g));
  if (x->overlap && x->comm)
    CCG_CHECK(ccg__overlap_schedule(x));
  for (size_t s = 0; s < x->n_steps; s++) {
    ccg__xnode *n = &x->steps[s];
    ccg_node_id id = x->schedule[s];
    n->id = id;
    n->op = ccg_node_op(g, id);
    n->name = ccg_node_name(g, id);
    n->n_in = (uint32_t)ccg_node_num_inputs(g, id);
    n->n_out = (uint32_t)ccg_node_num_outputs(g, id);
    n->in = ccg__arena_calloc(&x->arena, n->n_in + 1, sizeof(ccg_value_id));
    n->out = ccg__arena_calloc(&x->arena, n->n_out + 1, sizeof(ccg_value_id));
    if (!n->in || !n->out)
      return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
    for (uint32_t i = 0; i < n->n_in; i++)
      n->in[i] = ccg_node_input(g, id, i);
    for (uint32_t i = 0; i < n->n_out; i++) {
      n->out[i] = ccg_node_output(g, id, i);
      if (n->out[i] != CCG_NONE)
        x->vals[n->out[i]].first = (int)s;
    }
    if (n->op == CCG_OP_CONSTANT) {
      /* the output is the attribute's data: nothing to run or plan */
      const ccg_attr *a = ccg_node_attr(g, id, "value");
      ccg__xval *o = &x->vals[n->out[0]];
      if (!a || a->type != CCG_ATTR_TENSOR || a->t->dtype != o->dtype)
        return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                          "value must be a tensor of the output's dtype");
      o->kind = CCG__V_STATIC;
      o->init = a->t->data;
    }
    CCG_CHECK(ccg__prepare_node(x, n));
  }
  return CCG_STATUS_OK;
}

static ccg_status init_memory(ccg_exec *x) {
  /* fused nodes change what each step reads and writes: before liveness;
   * attention first, then the Transposes a MatMul can read through, the
   * GEMM epilogues (a bias Add and activation after a MatMul), then the
   * elementwise chains among what is left */
  CCG_CHECK(ccg__fuse_attention(x));
  if (ccg__exec_fuse_enabled())
    ccg__fuse_transposes(x);
  if (x->device == CCG_DEVICE_CPU && ccg__exec_fuse_enabled())
    ccg__fuse_epilogues(x);
  CCG_CHECK(ccg__fuse_plan(x));
  /* the overlap marks say what each node waits for (the communication
   * thread on the CPU, the communication stream on a GPU), and the plan
   * keeps a collective's buffers for as long */
  CCG_CHECK(ccg__overlap_mark(x));
  return ccg__plan_memory(x);
}

ccg_status ccg__exec_create(ccg_graph *g, const ccg_exec_options *opts,
                            bool validate, ccg_ctx *err, ccg_exec **out) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  if (opts)
    memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
  if (!out || !g)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "ccg_exec_create: graph or out is NULL");
  *out = NULL;
  if (validate && ccg_graph_validate(g) != CCG_STATUS_OK)
    return ccg__error(err, ccg_last_status(g), "cannot compile: %s",
                      ccg_last_error(g));
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  int64_t world = mesh ? ccg_mesh_world_size(mesh) : 1;
  if (o.rank < 0 || o.rank >= world)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "rank %d is out of range for a world of %lld", o.rank,
                      (long long)world);
  if (o.comm && o.comm->nranks != world)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "the %s communicator has %d ranks but the graph's mesh "
                      "has %lld",
                      o.comm->vt->name, o.comm->nranks, (long long)world);
  if (o.max_specializations < -1 || o.max_specializations > 1024)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "max_specializations is %d; give -1 (none), 0 (the "
                      "default) or up to 1024",
                      o.max_specializations);
  if (!(o.deadline_s > 0.0))
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "deadline_s must be > 0 (got %g)", o.deadline_s);
  /* before anything that may differ between ranks: preparing may be
   * collective (the mpi communicator's sub-communicators) */
  if (o.comm && o.comm->vt->prepare)
    CCG_CHECK(o.comm->vt->prepare(o.comm, mesh, o.rank, o.deadline_s, err));
  if ((unsigned)o.device >= CCG_DEVICE_COUNT)
    return ccg__error(err, CCG_STATUS_INVALID_ARG, "unknown device %d",
                      (int)o.device);
  bool nccl = o.comm && strcmp(o.comm->vt->name, "nccl") == 0;
  if (nccl && o.device != CCG_DEVICE_CUDA)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "the nccl communicator moves GPU memory: create the "
                      "executor with device CCG_DEVICE_CUDA");
  if (o.comm && !nccl && o.device == CCG_DEVICE_CUDA)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "device cuda: the %s communicator moves host memory; "
                      "GPU ranks talk through the nccl communicator "
                      "(ccg_comm_nccl_new)",
                      o.comm->vt->name);
  if (o.device == CCG_DEVICE_CUDA && o.debug_collectives)
    return ccg__error(err, CCG_STATUS_UNSUPPORTED,
                      "device cuda: debug_collectives (fingerprints through "
                      "the communicator) runs on the cpu device only; check "
                      "the models with ccg_verify_program instead");
  const ccg__backend_vt *backend =
      o.device == CCG_DEVICE_CUDA ? &ccg__cuda_backend : &ccg__cpu_backend;
  if (backend->probe)
    CCG_CHECK(backend->probe(err, o.device_index));
  int threads = 1;
  double min_work = CCG__PAR_MIN_WORK;
  if (o.device == CCG_DEVICE_CPU) {
    bool local = o.comm && strcmp(o.comm->vt->name, "local") == 0;
    CCG_CHECK(ccg__pool_threads_for(o.threads, local ? o.comm->nranks : 1, err,
                                    &threads));
    CCG_CHECK(ccg__pool_min_work(err, &min_work));
    /* a bad CCG_GEMM fails here once, before any rank compiles */
    ccg__gemm_lib_kind lib;
    const ccg__vm *vm;
    CCG_CHECK(ccg__vm_select(err, &vm));
    CCG_CHECK(ccg__gemm_lib(err, vm->isa, &lib));
  }
  ccg__pool *pool = NULL;
  if (threads > 1 && !(pool = ccg__pool_new(o.allocator, threads, min_work)))
    return ccg__error(err, CCG_STATUS_OOM, "out of memory for a thread pool");
  bool dynamic = o.max_specializations >= 0;
  ccg_exec *x = NULL;
  ccg__xwhy why;
  ccg_status st = ccg__exec_compile(g, &o, backend, false, err, &x, &why);
  if (st == CCG_STATUS_OK && dynamic)
    st = ccg__dyn_create(g, &o, backend, x, err, out);
  else if (st != CCG_STATUS_OK && dynamic && why.unbound)
    /* a dim left unbound is bound by the runs (docs/exec.md) */
    st = ccg__dyn_create(g, &o, backend, x, err, out);
  else if (st == CCG_STATUS_OK)
    *out = x;
  if (st != CCG_STATUS_OK) {
    ccg__pool_free(pool);
    return st;
  }
  (*out)->pool = pool;
  (*out)->own_pool = true;
  return st;
}

/* A program's structures are written once at create, in an arena whose
 * chunks double up to 4 MiB; the newest chunk is up to half empty. From
 * libc's allocator the arena takes chunks of 2 MiB and more as huge pages
 * (core/arena.c), and a huge page is resident as a whole: the unused tail
 * of a chunk then costs memory for as long as the executor lives (1.8 of
 * the 8 MiB a 10,000-node chain's program held). From malloc, the pages
 * nothing wrote stay unmapped. */
static void *arena_malloc(void *user, size_t size) {
  (void)user;
  return malloc(size ? size : 1);
}

static void *arena_realloc(void *user, void *p, size_t old_size,
                           size_t new_size) {
  (void)user, (void)old_size;
  return realloc(p, new_size ? new_size : 1);
}

static void arena_free(void *user, void *p, size_t size) {
  (void)user, (void)size;
  free(p);
}

void ccg__exec_arena_init(const ccg_exec *x, ccg_arena *arena) {
  static const ccg_allocator from_malloc = {arena_malloc, arena_realloc,
                                            arena_free, NULL};
  bool libc = !x->alloc.alloc && !x->alloc.realloc && !x->alloc.free;
  ccg__arena_init(arena, libc ? &from_malloc : &x->alloc, 0);
}

ccg_status ccg__exec_compile(ccg_graph *g, const ccg_exec_options *opts,
                             const ccg__backend_vt *backend, bool spec,
                             ccg_ctx *err, ccg_exec **out, ccg__xwhy *why) {
  ccg_exec_options o = *opts;
  *out = NULL;
  *why = (ccg__xwhy){0, CCG_NONE, -1};
  ccg_exec *x = ccg__calloc(o.allocator, 1, sizeof *x);
  if (!x)
    return ccg__error(err, CCG_STATUS_OOM, "out of memory for an executor");
  ccg__ctx_init(&x->ctx);
  if (o.allocator)
    x->alloc = *o.allocator;
  ccg__exec_arena_init(x, &x->arena);
  x->g = g;
  x->mesh = ccg_graph_mesh(g);
  x->rank = o.rank;
  x->comm = o.comm;
  x->deadline_s = o.deadline_s;
  bool local = o.comm && strcmp(o.comm->vt->name, "local") == 0;
  x->overlap =
      ccg__overlap_wanted(o.overlap, getenv("CCG_EXEC_OVERLAP"),
                          ccg__online_cpus(), local ? o.comm->nranks : 1);
  x->device = o.device;
  x->device_index = o.device_index;
  x->cuda_graph = o.cuda_graph != 0;
  x->tf32 = o.tf32 != 0;
  x->spec = spec;
  x->stash = &x->stashed;
  x->backend = backend;
  if (backend->configure)
    backend->configure(x);
  ccg_status st;
  CCG_CHECK_GOTO(ccg__vm_select(&x->ctx, &x->vm), st, fail);
  if (backend == &ccg__cpu_backend) {
    ccg__gemm_lib_kind lib;
    CCG_CHECK_GOTO(ccg__gemm_lib(&x->ctx, x->vm->isa, &lib), st, fail);
    x->gemm_lib = (int)lib;
  }
  CCG_CHECK_GOTO(ccg__bind(x, &o), st, fail);
  CCG_CHECK_GOTO(init_values(x), st, fail);
  CCG_CHECK_GOTO(init_steps(x), st, fail);
  CCG_CHECK_GOTO(init_memory(x), st, fail);
  CCG_CHECK_GOTO(ccg__debug_init(x, &o), st, fail);
  CCG_CHECK_GOTO(backend->create(x), st, fail);
  x->compiled = true;
  /* The runs allocate no bulk blocks: those the graph passes freed and
   * keep for reuse (core/alloc.h) go back to the kernel rather than stay
   * resident beside the program's memory. */
  ccg__bulk_trim();
  *out = x;
  return CCG_STATUS_OK;
fail:
  *why = x->why;
  ccg__error_copy(err, &x->ctx);
  ccg_exec_free(x);
  return st;
}

ccg_status ccg_exec_create(ccg_graph *g, const ccg_exec_options *opts,
                           ccg_exec **out) {
  return ccg__exec_create(g, opts, true, g ? (ccg_ctx *)g : NULL, out);
}

void ccg_exec_free(ccg_exec *x) {
  if (!x)
    return;
  ccg__dyn_free(x);
  if (x->own_pool)
    ccg__pool_free(x->pool); /* joins its threads */
  ccg__stash_free(x);
  if (x->backend)
    x->backend->destroy(x);
  ccg__arena_free(&x->arena);
  ccg_allocator a = x->alloc;
  ccg__free(&a, x, sizeof *x);
}

/* ---- run ---------------------------------------------------------------- */

static bool name_is(const ccg_exec *x, ccg_value_id v, const char *name) {
  const char *vn = ccg_value_name(x->g, v);
  return vn && strcmp(vn, name) == 0;
}

/* A value by name: the graph's inputs, outputs and initializers first (what
 * runs name), then every value. */
static ccg__xval *find_named(ccg_exec *x, const char *name, ccg_value_id *id) {
  if (!name)
    return NULL;
  ccg_graph *g = x->g;
  size_t ni = ccg_graph_num_inputs(g), no = ccg_graph_num_outputs(g);
  size_t nz = ccg_graph_num_initializers(g);
  for (size_t i = 0; i < ni + no + nz; i++) {
    ccg_value_id v = i < ni        ? ccg_graph_input(g, i)
                     : i < ni + no ? ccg_graph_output(g, i - ni)
                                   : ccg_graph_initializer(g, i - ni - no);
    if (name_is(x, v, name)) {
      *id = v;
      return &x->vals[v];
    }
  }
  for (size_t i = 0; i < x->n_vals; i++)
    if (name_is(x, (ccg_value_id)i, name)) {
      *id = (ccg_value_id)i;
      return &x->vals[i];
    }
  return NULL;
}

static ccg_status bind_input(ccg_exec *x, const ccg_exec_tensor *t) {
  ccg_value_id id;
  ccg__xval *v = find_named(x, t->name, &id);
  if (!v || (v->kind != CCG__V_INPUT &&
             ccg_value_kind_of(x->g, id) != CCG_VALUE_INITIALIZER))
    return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                      "'%s' is not an input or initializer of graph '%s'",
                      t->name ? t->name : "(null)", ccg_graph_name(x->g));
  bool same = t->tensor.dtype == v->dtype && t->tensor.rank == v->rank;
  for (int d = 0; same && d < v->rank; d++)
    same = t->tensor.dims[d] == v->dims[d];
  if (!same) {
    char want[160], got[160];
    ccg_shape ws = ccg_shape_make(v->rank, v->dims);
    ccg_shape gs = ccg_shape_make(t->tensor.rank, t->tensor.dims);
    ccg_shape_format(&ws, want, sizeof want);
    ccg_shape_format(&gs, got, sizeof got);
    return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                      "input '%s': given %s %s but the executor was compiled "
                      "for %s %s",
                      t->name, ccg_dtype_name(t->tensor.dtype), got,
                      ccg_dtype_name(v->dtype), want);
  }
  if (!t->tensor.data && v->nbytes)
    return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG, "input '%s' has no data",
                      t->name);
  v->ptr = (void *)(uintptr_t)t->tensor.data;
  return CCG_STATUS_OK;
}

static ccg_status fill_output(ccg_exec *x, ccg_exec_tensor *t) {
  ccg_value_id id;
  ccg__xval *v = find_named(x, t->name, &id);
  if (!v)
    return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                      "graph '%s' has no value named '%s'",
                      ccg_graph_name(x->g), t->name ? t->name : "(null)");
  if (v->kind == CCG__V_ARENA && !v->is_output)
    return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                      "'%s' is not a graph output: its memory is reused "
                      "during the run (ccg_graph_add_output keeps it)",
                      t->name);
  t->tensor.dtype = v->dtype;
  t->tensor.rank = v->rank;
  memcpy(t->tensor.dims, v->dims, sizeof v->dims);
  t->tensor.data = v->ptr;
  if (t->dst) {
    if (t->dst_bytes < v->nbytes)
      return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                        "output '%s' needs %zu bytes but dst holds %zu",
                        t->name, v->nbytes, t->dst_bytes);
    if (v->nbytes)
      memcpy(t->dst, v->ptr, v->nbytes);
  }
  return CCG_STATUS_OK;
}

/* Marks (or clears) the outputs a run's caller names, for a backend that
 * copies only those off its device. */
static void mark_fetch(ccg_exec *x, const ccg_exec_tensor *outputs,
                       size_t n_outputs, bool on) {
  if (!x->backend->fetch_marked)
    return;
  for (size_t i = 0; i < n_outputs; i++) {
    ccg_value_id id;
    ccg__xval *v = find_named(x, outputs[i].name, &id);
    if (v)
      v->fetch = on;
  }
}

/* Runs program p of root x (p may be x), the error on x. */
static ccg_status run_on(ccg_exec *x, ccg_exec *p, const ccg_exec_tensor *in,
                         size_t n_in, ccg_exec_tensor *out, size_t n_out) {
  if (p == x)
    return ccg__exec_run_program(x, in, n_in, out, n_out);
  p->pool = x->pool;   /* borrowed: one pool per executor */
  p->stash = x->stash; /* what this run's guards received */
  ccg_status st = ccg__exec_run_program(p, in, n_in, out, n_out);
  if (st != CCG_STATUS_OK)
    ccg__error_copy(&x->ctx, &p->ctx);
  return st;
}

ccg_status ccg_exec_run(ccg_exec *x, const ccg_exec_tensor *inputs,
                        size_t n_inputs, ccg_exec_tensor *outputs,
                        size_t n_outputs) {
  if (!x)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "ccg_exec_run: NULL");
  if (!x->dyn)
    return ccg__exec_run_program(x, inputs, n_inputs, outputs, n_outputs);
  ccg_exec *p = NULL;
  /* a stale run (a size came out other than the one the last program was
   * compiled for) is chosen for again, by the guards */
  for (int trust = 1; trust >= 0; trust--) {
    ccg_status st = ccg__dyn_select(x, inputs, n_inputs, trust, &p);
    if (st != CCG_STATUS_OK) {
      /* the other ranks fail instead of waiting for this one */
      if (x->comm)
        x->comm->vt->abort(x->comm, x->rank, ccg_last_error(x));
      return st;
    }
    st = run_on(x, p, inputs, n_inputs, outputs, n_outputs);
    if (!p->stale)
      return st;
  }
  /* a program the guards chose runs unchecked: it cannot come out stale */
  return ccg__error(&x->ctx, CCG_STATUS_INTERNAL,
                    "a run stopped at a size check after its guards had run");
}

ccg_status ccg__exec_run_program(ccg_exec *x, const ccg_exec_tensor *inputs,
                                 size_t n_inputs, ccg_exec_tensor *outputs,
                                 size_t n_outputs) {
  for (size_t i = 0; i < x->n_vals; i++) {
    ccg__xval *v = &x->vals[i];
    if (v->kind == CCG__V_INPUT)
      v->ptr = NULL;
    else if (v->kind == CCG__V_STATIC)
      v->ptr = (void *)(uintptr_t)v->init;
  }
  ccg_status st = CCG_STATUS_OK;
  for (size_t i = 0; i < n_inputs && st == CCG_STATUS_OK; i++)
    st = bind_input(x, &inputs[i]);
  for (size_t i = 0; i < x->n_vals && st == CCG_STATUS_OK; i++)
    if (x->vals[i].kind == CCG__V_INPUT && !x->vals[i].ptr && x->vals[i].nbytes)
      st = ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                      "input '%s' was not given",
                      ccg_value_name(x->g, (ccg_value_id)i));
  x->stale = false;
  mark_fetch(x, outputs, n_outputs, true);
  if (st == CCG_STATUS_OK) {
    x->first_run = !x->ran;
    st = x->backend->run(x);
    x->ran = true;
    x->first_run = false;
  }
  for (size_t i = 0; i < n_outputs && st == CCG_STATUS_OK && !x->stale; i++)
    st = fill_output(x, &outputs[i]);
  mark_fetch(x, outputs, n_outputs, false);
  if (st != CCG_STATUS_OK)
    ccg__flight_report(x, st);
  if (st != CCG_STATUS_OK && x->comm)
    x->comm->vt->abort(x->comm, x->rank, ccg_last_error(x));
  return st;
}

ccg_status ccg_exec_memory_info(const ccg_exec *x, ccg_exec_memory *out) {
  if (!x || !out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_exec_memory_info: NULL argument");
  const ccg_exec *p = ccg__dyn_current(x);
  if (!p)
    return ccg__error((ccg_ctx *)x, CCG_STATUS_INVALID_ARG,
                      "the executor has compiled nothing yet: its first run "
                      "binds the input shapes");
  *out = p->mem;
  return CCG_STATUS_OK;
}

const ccg_node_id *ccg_exec_schedule(const ccg_exec *x, size_t *n) {
  const ccg_exec *p = x ? ccg__dyn_current(x) : NULL;
  if (n)
    *n = p ? p->n_steps : 0;
  return p ? p->schedule : NULL;
}
