/* Run-time specialization: an executor compiled for one set of input
 * shapes runs others by compiling a program for them the first time they
 * come and keeping it. Symbolic dims are bound from the shapes fed; where a
 * dim is set by data (a Reshape, Slice or Expand whose target is a graph
 * input), the graph is copied with the fed sizes and the fed contents of
 * its small integer inputs and every shape rule runs again, so that the
 * copy's dims are numbers. docs/exec.md says what is kept and when. */
#include <string.h>

#include "exec/internal.h"
#include "graph/specialize.h"

/* Small integer inputs (shapes, starts, ends, axes) whose contents may set
 * dims: i64 or i32, rank 0 or 1, at most this many elements (the graph's
 * known-contents limit). */
#define KN CCG_MAX_RANK
#define SLOT (KN + 1) /* a count (-1: not read) and the elements */
#define DEFAULT_KEPT 4

typedef struct xspec {
  ccg_exec *prog;
  ccg_graph *graph;  /* the specialized copy prog runs, or NULL */
  int64_t *contents; /* SLOT per graph input; NULL: compiled without any */
  uint64_t used;
} xspec;

struct ccg__xdyn {
  ccg_graph *g;
  ccg_exec_options opts; /* no input shapes; dims and allocator the root's */
  const ccg__backend_vt *backend;
  size_t cap, n;
  xspec *cache;
  int cur; /* the program that ran last: -1 the root, -2 none, else cache */
  uint64_t clock;
  ccg_exec_specs stats;
  /* scratch of one run or one compile */
  size_t n_in;
  const ccg_exec_tensor **fed; /* per graph input: the tensor given */
  ccg_exec_tensor *shapes;
  ccg__spec_value *sv;
  ccg_shape *sv_shape;
  int64_t *contents; /* SLOT per graph input */
};

/* ---- what a run feeds ---------------------------------------------------- */

static bool small_int(const ccg_tensor *t) {
  return (t->dtype == CCG_DTYPE_I64 || t->dtype == CCG_DTYPE_I32) &&
         (t->rank == 0 ||
          (t->rank == 1 && t->dims[0] >= 0 && t->dims[0] <= KN));
}

/* The contents of a small integer tensor into slot (count, elements); the
 * count is -1 when it is not one or has no data. */
static void read_contents(const ccg_tensor *t, int64_t *slot) {
  slot[0] = -1;
  if (!small_int(t) || !t->data)
    return;
  int64_t n = t->rank == 0 ? 1 : t->dims[0];
  for (int64_t i = 0; i < n; i++)
    slot[1 + i] = t->dtype == CCG_DTYPE_I64 ? ((const int64_t *)t->data)[i]
                                            : ((const int32_t *)t->data)[i];
  slot[0] = n;
}

/* d->fed[k]: the tensor given for graph input k, or NULL. */
static void gather_fed(ccg__xdyn *d, const ccg_exec_tensor *in, size_t n) {
  memset(d->fed, 0, d->n_in * sizeof *d->fed);
  for (size_t j = 0; j < n; j++) {
    uint32_t id;
    if (!in[j].name || !ccg__strmap_get(&d->g->value_names, in[j].name, &id) ||
        d->g->values[id].kind != CCG_VALUE_INPUT)
      continue; /* initializers fed for this call; unknown names fail later */
    for (size_t k = 0; k < d->n_in; k++)
      if (d->g->inputs[k] == id) {
        d->fed[k] = &in[j];
        break;
      }
  }
}

/* Program p (compiled with `contents`) serves what d->fed holds: every
 * input given has p's rank and dims and, where p read an input's contents,
 * those contents. Dtypes are left to the run, which names the input. */
static bool serves(const ccg__xdyn *d, const ccg_exec *p,
                   const int64_t *contents) {
  for (size_t k = 0; k < d->n_in; k++) {
    const ccg_exec_tensor *t = d->fed[k];
    if (!t)
      continue;
    const ccg__xval *v = &p->vals[d->g->inputs[k]];
    if (t->tensor.rank != v->rank ||
        memcmp(t->tensor.dims, v->dims, (size_t)v->rank * sizeof v->dims[0]))
      return false;
    const int64_t *want = contents ? contents + k * SLOT : NULL;
    if (want && want[0] >= 0) {
      int64_t got[SLOT];
      read_contents(&t->tensor, got);
      if (got[0] != want[0] ||
          memcmp(got + 1, want + 1, (size_t)want[0] * sizeof got[0]))
        return false;
    }
  }
  return true;
}

/* ---- the cache ------------------------------------------------------------
 */

static void drop(ccg_exec *x, xspec *e) {
  ccg_exec_free(e->prog);
  ccg_graph_free(e->graph);
  if (e->contents)
    ccg__free(&x->alloc, e->contents, x->dyn->n_in * SLOT * sizeof(int64_t));
  memset(e, 0, sizeof *e);
}

/* Keeps p (and the copy it runs) as the current program, dropping the
 * least recently used one when full. */
static ccg_status keep(ccg_exec *x, ccg_exec *p, ccg_graph *copy,
                       bool with_contents) {
  ccg__xdyn *d = x->dyn;
  int64_t *contents = NULL;
  if (with_contents) {
    contents = ccg__calloc(&x->alloc, d->n_in * SLOT, sizeof *contents);
    if (!contents) {
      ccg_exec_free(p);
      ccg_graph_free(copy);
      return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
    }
    memcpy(contents, d->contents, d->n_in * SLOT * sizeof *contents);
  }
  size_t at = d->n;
  if (d->n == d->cap) {
    at = 0;
    for (size_t i = 1; i < d->n; i++)
      if (d->cache[i].used < d->cache[at].used)
        at = i;
    drop(x, &d->cache[at]);
    d->stats.evicted++;
  } else {
    d->n++;
  }
  d->cache[at] = (xspec){p, copy, contents, ++d->clock};
  d->cur = (int)at;
  d->stats.compiles++;
  return CCG_STATUS_OK;
}

/* ---- compiling a program for a run ------------------------------------- */

/* A fed input against the graph's: the rank, and every dim that is a
 * number in the graph. */
static ccg_status check_fed(ccg_exec *x, const char *name, const ccg_shape *gs,
                            const ccg_tensor *t) {
  if (t->rank != gs->rank)
    return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                      "input '%s' has rank %d in the graph but %d is given",
                      name, gs->rank, t->rank);
  for (int i = 0; i < gs->rank; i++) {
    if (t->dims[i] < 0)
      return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                        "input '%s' dim %d: given %lld", name, i,
                        (long long)t->dims[i]);
    if (!ccg_dim_is_sym(gs->dims[i]) && gs->dims[i].size != t->dims[i])
      return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                        "input '%s' dim %d: given %lld but the graph's size "
                        "is %lld",
                        name, i, (long long)t->dims[i],
                        (long long)gs->dims[i].size);
  }
  return CCG_STATUS_OK;
}

/* The fed sizes replace an input's dims, except rank-dependent ones
 * ("tp{3,5,4,4}"), which the copy keeps so that collectives still see every
 * rank's size; fed small integer inputs give their contents. */
static ccg_status describe_fed(ccg_exec *x, size_t *n_sv) {
  ccg__xdyn *d = x->dyn;
  *n_sv = 0;
  for (size_t k = 0; k < d->n_in; k++) {
    d->contents[k * SLOT] = -1;
    const ccg_exec_tensor *t = d->fed[k];
    if (!t)
      continue;
    ccg_value_id v = d->g->inputs[k];
    ccg_shape s = *ccg_value_shape(d->g, v);
    CCG_CHECK(check_fed(x, ccg_value_name(d->g, v), &s, &t->tensor));
    for (int i = 0; i < s.rank; i++)
      if (!ccg_dim_is_sym(s.dims[i]) || !strchr(s.dims[i].sym, '{'))
        s.dims[i] = ccg_dim_num(t->tensor.dims[i]);
    d->sv_shape[k] = s;
    int64_t *slot = d->contents + k * SLOT;
    read_contents(&t->tensor, slot);
    d->sv[(*n_sv)++] =
        (ccg__spec_value){v, &d->sv_shape[k], (int)slot[0], slot + 1};
  }
  return CCG_STATUS_OK;
}

/* A program from a copy of the graph re-inferred under what d->fed says. */
static ccg_status compile_copy(ccg_exec *x, const ccg_exec_options *o,
                               ccg_exec **p, ccg_graph **copy) {
  ccg__xdyn *d = x->dyn;
  size_t n_sv;
  CCG_CHECK(describe_fed(x, &n_sv));
  CCG_CHECK(ccg__graph_specialize(d->g, d->sv, n_sv, &x->ctx, copy));
  int unbound;
  ccg_status st =
      ccg__exec_compile(*copy, o, d->backend, true, &x->ctx, p, &unbound);
  if (st != CCG_STATUS_OK) {
    ccg_graph_free(*copy);
    *copy = NULL;
  }
  return st;
}

static ccg_status specialize(ccg_exec *x, ccg_exec **prog) {
  ccg__xdyn *d = x->dyn;
  size_t m = 0;
  for (size_t k = 0; k < d->n_in; k++) {
    ccg_value_id v = d->g->inputs[k];
    const ccg_exec_tensor *t = d->fed[k];
    if (t) {
      d->shapes[m] = *t;
      d->shapes[m++].name = ccg_value_name(d->g, v);
    } else if (!ccg_shape_is_static(ccg_value_shape(d->g, v))) {
      return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                        "input '%s' was not given", ccg_value_name(d->g, v));
    }
  }
  ccg_exec_options o = d->opts;
  o.input_shapes = d->shapes;
  o.n_input_shapes = m;
  ccg_exec *p = NULL;
  ccg_graph *copy = NULL;
  /* The graph itself first: binding checks the fed sizes against the named
   * dims and the graph's numbers, and where a dim is set by data it stops
   * at the first value's shapes, before kernels or memory. */
  int unbound;
  ccg_status st =
      ccg__exec_compile(d->g, &o, d->backend, false, &x->ctx, &p, &unbound);
  if (st == CCG_STATUS_OK) {
    CCG_CHECK(keep(x, p, NULL, false));
    *prog = p;
    return CCG_STATUS_OK;
  }
  if (unbound != 2)
    return st;
  CCG_CHECK(compile_copy(x, &o, &p, &copy));
  CCG_CHECK(keep(x, p, copy, true));
  *prog = p;
  return CCG_STATUS_OK;
}

ccg_status ccg__dyn_select(ccg_exec *x, const ccg_exec_tensor *inputs,
                           size_t n_inputs, ccg_exec **prog) {
  ccg__xdyn *d = x->dyn;
  if (n_inputs && !inputs)
    return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                      "ccg_exec_run: inputs is NULL");
  gather_fed(d, inputs, n_inputs);
  /* the last program first: a loop over one shape costs one comparison */
  if (d->cur >= 0 &&
      serves(d, d->cache[d->cur].prog, d->cache[d->cur].contents)) {
    d->cache[d->cur].used = ++d->clock;
    *prog = d->cache[d->cur].prog;
    return CCG_STATUS_OK;
  }
  if (x->compiled && serves(d, x, NULL)) {
    d->cur = -1;
    *prog = x;
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < d->n; i++)
    if (serves(d, d->cache[i].prog, d->cache[i].contents)) {
      d->cache[i].used = ++d->clock;
      d->cur = (int)i;
      *prog = d->cache[i].prog;
      return CCG_STATUS_OK;
    }
  return specialize(x, prog);
}

/* ---- the root -------------------------------------------------------------
 */

/* An executor that runs programs only: what runs need of it. */
static ccg_exec *shell(ccg_graph *g, const ccg_exec_options *o) {
  ccg_exec *x = ccg__calloc(o->allocator, 1, sizeof *x);
  if (!x)
    return NULL;
  ccg__ctx_init(&x->ctx);
  if (o->allocator)
    x->alloc = *o->allocator;
  ccg__arena_init(&x->arena, &x->alloc, 0);
  x->g = g;
  x->mesh = ccg_graph_mesh(g);
  x->rank = o->rank;
  x->comm = o->comm;
  x->deadline_s = o->deadline_s;
  x->device = o->device;
  x->device_index = o->device_index;
  return x;
}

static ccg_status init_dyn(ccg_exec *x, ccg_graph *g, const ccg_exec_options *o,
                           const ccg__backend_vt *backend) {
  ccg__xdyn *d = ccg__arena_calloc(&x->arena, 1, sizeof *d);
  if (!d)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  x->dyn = d;
  d->g = g;
  d->backend = backend;
  d->opts = *o;
  d->opts.input_shapes = NULL;
  d->opts.n_input_shapes = 0;
  d->opts.allocator = &x->alloc;
  d->cur = x->compiled ? -1 : -2;
  d->stats.compiles = x->compiled ? 1 : 0;
  d->cap = o->max_specializations > 0 ? (size_t)o->max_specializations
                                      : DEFAULT_KEPT;
  d->n_in = ccg_graph_num_inputs(g);
  size_t m = d->n_in + 1;
  ccg_exec_dim *dims =
      ccg__arena_calloc(&x->arena, o->n_dims + 1, sizeof *dims);
  d->cache = ccg__arena_calloc(&x->arena, d->cap, sizeof *d->cache);
  d->fed = ccg__arena_calloc(&x->arena, m, sizeof *d->fed);
  d->shapes = ccg__arena_calloc(&x->arena, m, sizeof *d->shapes);
  d->sv = ccg__arena_calloc(&x->arena, m, sizeof *d->sv);
  d->sv_shape = ccg__arena_calloc(&x->arena, m, sizeof *d->sv_shape);
  d->contents = ccg__arena_calloc(&x->arena, m * SLOT, sizeof *d->contents);
  if (!dims || !d->cache || !d->fed || !d->shapes || !d->sv || !d->sv_shape ||
      !d->contents)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  /* the named dims outlive the caller's options */
  for (size_t i = 0; i < o->n_dims; i++) {
    dims[i].value = o->dims[i].value;
    if (o->dims[i].name &&
        !(dims[i].name = ccg__arena_strdup(&x->arena, o->dims[i].name)))
      return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  }
  d->opts.dims = dims;
  return CCG_STATUS_OK;
}

/* Do o's input shapes say everything a program needs: every graph input,
 * with the contents of the small integer ones? */
static bool shapes_complete(ccg__xdyn *d, const ccg_exec_options *o) {
  gather_fed(d, o->input_shapes, o->n_input_shapes);
  for (size_t k = 0; k < d->n_in; k++)
    if (!d->fed[k] ||
        (small_int(&d->fed[k]->tensor) && !d->fed[k]->tensor.data))
      return false;
  return true;
}

ccg_status ccg__dyn_create(ccg_graph *g, const ccg_exec_options *o,
                           const ccg__backend_vt *backend, ccg_exec *x,
                           ccg_ctx *err, ccg_exec **out) {
  *out = NULL;
  if (!x && !(x = shell(g, o)))
    return ccg__error(err, CCG_STATUS_OOM, "out of memory for an executor");
  ccg_status st = init_dyn(x, g, o, backend);
  ccg_exec *p;
  /* what create was given may already make a program; else the first
   * run makes one */
  if (st == CCG_STATUS_OK && !x->compiled && shapes_complete(x->dyn, o))
    st = ccg__dyn_select(x, o->input_shapes, o->n_input_shapes, &p);
  if (st != CCG_STATUS_OK) {
    ccg__error_copy(err, &x->ctx);
    ccg_exec_free(x);
    return st;
  }
  *out = x;
  return CCG_STATUS_OK;
}

const ccg_exec *ccg__dyn_current(const ccg_exec *x) {
  const ccg__xdyn *d = x->dyn;
  if (!d || d->cur == -1)
    return x;
  if (d->cur >= 0)
    return d->cache[d->cur].prog;
  return x->compiled ? x : NULL;
}

void ccg__dyn_free(ccg_exec *x) {
  ccg__xdyn *d = x->dyn;
  if (!d)
    return;
  for (size_t i = 0; i < d->n; i++)
    drop(x, &d->cache[i]);
  x->dyn = NULL;
}

ccg_status ccg_exec_specializations(const ccg_exec *x, ccg_exec_specs *out) {
  if (!x || !out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_exec_specializations: NULL argument");
  if (!x->dyn) {
    *out = (ccg_exec_specs){1, 1, 0};
    return CCG_STATUS_OK;
  }
  *out = x->dyn->stats;
  out->cached = x->dyn->n + (x->compiled ? 1 : 0);
  return CCG_STATUS_OK;
}
