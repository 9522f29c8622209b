/* Run-time specialization: an executor compiled for one set of input
 * shapes runs others by compiling a program for them the first time they
 * come and keeping it. Symbolic dims are bound from the shapes fed. Where
 * a dim is set by data, the graph is copied with the fed sizes, the fed
 * contents of its small integer inputs and the fed data of its small float
 * ones, and every shape rule runs again, so that the copy's dims are
 * numbers; a dim set by data the graph computes (a Reshape to a computed
 * shape, NonZero's count) is found by running the part of the graph it
 * needs first (a guard, run again by every later run that the program
 * serves, unless the program checks the guard's values itself as it
 * runs). docs/exec.md says what is kept and when. */
#include <string.h>

#include "exec/internal.h"
#include "exec/select_math.h"
#include "graph/specialize.h"

/* Small integer inputs (shapes, starts, ends, axes, k) whose contents may
 * set dims: i64 or i32, rank 0 or 1, at most this many elements (the
 * graph's known-contents limit). */
#define KN CCG_MAX_RANK
#define SLOT (KN + 1) /* a count (-1: not read) and the elements */
#define DEFAULT_KEPT 4
#define MAX_ROUNDS 8 /* guards of one program */
#define MAX_EVAL 16  /* values one guard computes */

/* ---- dims that only data gives ------------------------------------------ */

/* An op whose output dim (the one its shape rule left a fresh symbol) is
 * a count of the data of one of its inputs: NonZero's of its input,
 * Compress's of its condition (whose length the shape rule checked against
 * the axis). The count is taken on the host from the input as a guard
 * computed it, with the kernels' own test of an element (select_math.h),
 * so a program's kernels run with the exact count as their capacity. */
typedef struct xrule {
  const char *op; /* its ONNX name: a table, not a dependency on the op */
  int in;
} xrule;

static int64_t count_nonzero(const ccg_tensor *t) {
  size_t bytes = 0, es = ccg_dtype_size(t->dtype);
  if (!t->data || !es || ccg_tensor_nbytes(t, &bytes) != CCG_STATUS_OK)
    return -1;
  size_t n = bytes / es;
  int64_t c = 0;
  for (size_t i = 0; i < n; i++)
    c += ccg__is_nonzero(t->dtype, t->data, i);
  return c;
}

static const xrule rules[] = {
    {"NonZero", 0},
    {"Compress", 1},
};

static const xrule *rule_of(ccg_op op) {
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
    if (strcmp(ccg_op_name(op), rules[i].op) == 0)
      return &rules[i];
  return NULL;
}

/* ---- the cache's entries ------------------------------------------------- */

/* A part of the graph run before a program to find sizes its data sets;
 * the program serves a run only where they come out as `want`. Where the
 * values are all graph inputs (a NonZero of a fed mask) there is no part
 * to run (prog NULL): the fed tensors are measured. */
typedef struct xguard {
  ccg_exec *prog;
  ccg_graph *graph;
  size_t n;
  ccg_value_id *ids;      /* the values (the graph's ids) */
  ccg_exec_tensor *outs;  /* the values, graph outputs of prog */
  const xrule **rule;     /* per value: NULL its contents, else a count */
  int64_t *want;          /* SLOT per value */
  const char *node, *dim; /* what it sizes, for messages */
} xguard;

typedef struct xspec {
  ccg_exec *prog;
  ccg_graph *graph;  /* the specialized copy prog runs, or NULL */
  int64_t *contents; /* SLOT per graph input; NULL: compiled without any */
  xguard *guards;
  size_t n_guards;
  bool checked;    /* prog checks what every guard with a part computes */
  ccg_arena arena; /* contents, guards, checks */
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
  size_t n_in;                 /* graph inputs */
  const ccg_exec_tensor **fed; /* per graph input: the tensor of this run */
  ccg_exec_tensor *shapes;     /* input shapes of a compile */
};

static bool small(const ccg_tensor *t) {
  return t->rank == 0 || (t->rank == 1 && t->dims[0] >= 0 && t->dims[0] <= KN);
}

static bool small_int(const ccg_tensor *t) {
  return (t->dtype == CCG_DTYPE_I64 || t->dtype == CCG_DTYPE_I32) && small(t);
}

/* Small float inputs (a float Range's bounds, Resize's scales, OneHot's
 * depth) set sizes too; the copy holds their data, not known contents. */
static bool small_float(const ccg_tensor *t) {
  return (t->dtype == CCG_DTYPE_F32 || t->dtype == CCG_DTYPE_F64) && small(t);
}

/* The contents of a small integer or float tensor into slot (count,
 * elements; a float's as the bits of its double, compared, never used as
 * a number); the count is -1 when it is not one or has no data. */
static void read_contents(const ccg_tensor *t, int64_t *slot) {
  slot[0] = -1;
  if (!(small_int(t) || small_float(t)) || !t->data)
    return;
  int64_t n = t->rank == 0 ? 1 : t->dims[0];
  for (int64_t i = 0; i < n; i++) {
    if (small_float(t)) {
      double f = t->dtype == CCG_DTYPE_F64 ? ((const double *)t->data)[i]
                                           : ((const float *)t->data)[i];
      memcpy(&slot[1 + i], &f, sizeof f);
    } else {
      slot[1 + i] = t->dtype == CCG_DTYPE_I64 ? ((const int64_t *)t->data)[i]
                                              : ((const int32_t *)t->data)[i];
    }
  }
  slot[0] = n;
}

static void measure(const xrule *r, const ccg_tensor *t, int64_t *slot) {
  if (!r) {
    read_contents(t, slot);
    return;
  }
  slot[1] = count_nonzero(t);
  slot[0] = slot[1] < 0 ? -1 : 1;
}

static bool same_slot(const int64_t *a, const int64_t *b) {
  return a[0] == b[0] &&
         (a[0] <= 0 || memcmp(a + 1, b + 1, (size_t)a[0] * sizeof a[0]) == 0);
}

static void discard(xspec *e) {
  for (size_t i = 0; i < e->n_guards; i++) {
    ccg_exec_free(e->guards[i].prog);
    ccg_graph_free(e->guards[i].graph);
  }
  ccg_exec_free(e->prog);
  ccg_graph_free(e->graph);
  ccg__arena_free(&e->arena);
  memset(e, 0, sizeof *e);
}

/* ---- what a run feeds ---------------------------------------------------- */

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

/* Does program p (compiled with `contents`) take what d->fed holds: every
 * input given with p's rank and dims and, where p read an input's
 * contents, those contents? Dtypes are left to the run, which names the
 * input. */
static bool takes(const ccg__xdyn *d, const ccg_exec *p,
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
      if (!same_slot(got, want))
        return false;
    }
  }
  return true;
}

/* The values of a guard without a program: the tensors this run feeds
 * (d->fed holds the run's inputs). */
static ccg_status read_fed(ccg_exec *x, xguard *gd) {
  const ccg__xdyn *d = x->dyn;
  for (size_t i = 0; i < gd->n; i++) {
    const ccg_exec_tensor *t = NULL;
    for (size_t k = 0; k < d->n_in && !t; k++)
      if (d->g->inputs[k] == gd->ids[i])
        t = d->fed[k];
    if (!t)
      return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                        "input '%s' was not given (it sizes node '%s' dim "
                        "%s)",
                        ccg_value_name(d->g, gd->ids[i]), gd->node, gd->dim);
    gd->outs[i].tensor = t->tensor;
  }
  return CCG_STATUS_OK;
}

/* Runs guard gd over the inputs; *ok when its values are what the
 * program was compiled for. */
static ccg_status check_guard(ccg_exec *x, xguard *gd,
                              const ccg_exec_tensor *in, size_t n, bool *ok) {
  if (gd->prog) { /* its Recvs keep their messages for the program */
    gd->prog->stash = x->stash;
    gd->prog->guard = true;
  }
  if (!gd->prog)
    CCG_CHECK(read_fed(x, gd));
  else if (ccg__exec_run_program(gd->prog, in, n, gd->outs, gd->n) !=
           CCG_STATUS_OK) {
    ccg__error_copy(&x->ctx, &gd->prog->ctx);
    return ccg__error_prefix(&x->ctx,
                             "computing the size of node '%s' dim %s at run "
                             "time",
                             gd->node, gd->dim);
  }
  *ok = true;
  for (size_t i = 0; i < gd->n && *ok; i++) {
    int64_t got[SLOT];
    measure(gd->rule[i], &gd->outs[i].tensor, got);
    *ok = same_slot(got, gd->want + i * SLOT);
  }
  return CCG_STATUS_OK;
}

/* Does e serve these inputs? `trust`: the guards whose values e's program
 * checks itself are not run (the program then runs checking). */
static ccg_status serves(ccg_exec *x, xspec *e, const ccg_exec_tensor *in,
                         size_t n, bool trust, bool *ok) {
  trust = trust && e->checked;
  *ok = takes(x->dyn, e->prog, e->contents);
  for (size_t i = 0; i < e->n_guards && *ok; i++)
    if (!(trust && e->guards[i].prog))
      CCG_CHECK(check_guard(x, &e->guards[i], in, n, ok));
  e->prog->checking = *ok && trust;
  return CCG_STATUS_OK;
}

/* ---- checks in the program ---------------------------------------------- */

bool ccg__dyn_check(const ccg_exec *p, const ccg__xcheck *c) {
  const ccg__xval *v = &p->vals[c->v];
  ccg_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = v->dtype;
  t.rank = v->rank;
  memcpy(t.dims, v->dims, sizeof t.dims);
  t.data = v->ptr;
  int64_t got[SLOT];
  measure(c->rule, &t, got);
  return same_slot(got, c->want);
}

/* The last step of p that runs and writes v (its value is complete after
 * it); -1 where none does (a value fused away, an alias). */
static int maker_of(const ccg_exec *p, ccg_value_id v) {
  if (v >= p->n_vals || p->vals[v].kind != CCG__V_ARENA)
    return -1;
  for (size_t s = p->n_steps; s-- > 0;) {
    const ccg__xnode *n = &p->steps[s];
    for (uint32_t i = 0; n->run && i < n->n_out; i++)
      if (n->out[i] == v)
        return (int)s;
  }
  return -1;
}

/* The guards' values are values of the copy e's program runs (a copy of
 * the whole graph keeps the ids), computed there on the way anyway: where
 * each is written by a step, the program checks it right after that step,
 * and a run that e serves again costs one pass of the graph instead of one
 * more per guard. A check that fails stops the run before any step reads
 * the value; the guards then choose. On the CPU, without a communicator
 * or overlap only: a run stopped half-way must have sent nothing. */
static void plan_checks(xspec *e) {
  ccg_exec *p = e->prog;
  size_t m = 0;
  for (size_t i = 0; i < e->n_guards; i++)
    m += e->guards[i].prog ? e->guards[i].n : 0;
  if (!m || p->backend != &ccg__cpu_backend || p->comm || p->ov)
    return;
  ccg__xcheck *c = ccg__arena_calloc(&e->arena, m, sizeof *c);
  if (!c)
    return; /* the guards run */
  size_t k = 0;
  for (size_t i = 0; i < e->n_guards; i++) {
    const xguard *gd = &e->guards[i];
    for (size_t j = 0; gd->prog && j < gd->n; j++) {
      int s = maker_of(p, gd->ids[j]);
      if (s < 0)
        return;
      ccg__xcheck ck = {(size_t)s, gd->ids[j], gd->rule[j],
                        gd->want + j * SLOT};
      size_t at = k++;
      for (; at > 0 && c[at - 1].step > ck.step; at--)
        c[at] = c[at - 1];
      c[at] = ck;
    }
  }
  p->checks = c;
  p->n_checks = k;
  e->checked = true;
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

/* What a copy is made under: the fed sizes and small integer contents,
 * then what guards found. */
typedef struct known {
  ccg__spec_value *sv;
  size_t n, cap;
} known;

/* The fed sizes replace an input's dims, except rank-dependent ones
 * ("tp{3,5,4,4}"), which the copy keeps so that collectives still see every
 * rank's size; fed small integer inputs give their contents. */
static ccg_status describe_fed(ccg_exec *x, xspec *e, known *k) {
  ccg__xdyn *d = x->dyn;
  ccg_shape *shapes = ccg__arena_calloc(&e->arena, d->n_in + 1, sizeof *shapes);
  e->contents =
      ccg__arena_calloc(&e->arena, (d->n_in + 1) * SLOT, sizeof(int64_t));
  k->cap = d->n_in + MAX_ROUNDS * MAX_EVAL;
  k->sv = ccg__arena_calloc(&e->arena, k->cap, sizeof *k->sv);
  if (!shapes || !e->contents || !k->sv)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  for (size_t i = 0; i < d->n_in; i++) {
    int64_t *slot = e->contents + i * SLOT;
    slot[0] = -1;
    const ccg_exec_tensor *t = d->fed[i];
    if (!t)
      continue;
    ccg_value_id v = d->g->inputs[i];
    ccg_shape s = *ccg_value_shape(d->g, v);
    CCG_CHECK(check_fed(x, ccg_value_name(d->g, v), &s, &t->tensor));
    for (int j = 0; j < s.rank; j++)
      if (!ccg_dim_is_sym(s.dims[j]) || !strchr(s.dims[j].sym, '{'))
        s.dims[j] = ccg_dim_num(t->tensor.dims[j]);
    shapes[i] = s;
    read_contents(&t->tensor, slot);
    bool f = small_float(&t->tensor);
    k->sv[k->n++] =
        (ccg__spec_value){v,  &shapes[i], f ? -1 : (int)slot[0], slot + 1,
                          -1, 0,          f ? &t->tensor : NULL};
  }
  return CCG_STATUS_OK;
}

/* One value a guard computes: its contents (rule NULL), or a count of its
 * data that sets dim `dim` of `target`. */
typedef struct need {
  ccg_value_id v;
  const xrule *rule;
  ccg_value_id target;
  int dim;
} need;

/* What to compute for node n of copy s, whose output `out` has dim `dim`
 * set by data: for an op with a count rule, the input it counts (even a
 * small integer one: its contents would not size the output); else the
 * node's small integer inputs whose contents s does not know. */
static size_t plan_guard(const ccg_graph *s, ccg_node_id n, ccg_value_id out,
                         int dim, need *nd) {
  const ccg__node *node = &s->nodes[n];
  const xrule *r = rule_of(node->op);
  if (r) {
    ccg_value_id u =
        (uint32_t)r->in < node->n_inputs ? node->inputs[r->in] : CCG_NONE;
    if (u == CCG_NONE || !ccg_shape_is_static(s->values[u].shape))
      return 0;
    nd[0] = (need){u, r, out, dim};
    return 1;
  }
  size_t m = 0;
  for (uint32_t i = 0; i < node->n_inputs && m < MAX_EVAL; i++) {
    ccg_value_id u = node->inputs[i];
    if (u == CCG_NONE || ccg__vn_known(&s->values[u]) >= 0)
      continue;
    const ccg__value *v = &s->values[u];
    int64_t numel;
    if ((v->dtype == CCG_DTYPE_I64 || v->dtype == CCG_DTYPE_I32) &&
        v->shape->rank <= 1 && ccg_shape_is_static(v->shape) &&
        ccg_shape_numel(v->shape, &numel) == CCG_STATUS_OK && numel <= KN)
      nd[m++] = (need){u, NULL, CCG_NONE, -1};
  }
  return m;
}

/* The nodes the needed values come from (ids are the graph's). */
static bool *ancestors(ccg_exec *x, xspec *e, const need *nd, size_t m) {
  const ccg_graph *g = x->dyn->g;
  bool *want = ccg__arena_calloc(&e->arena, g->n_values + 1, sizeof *want);
  bool *keep = ccg__arena_calloc(&e->arena, g->n_nodes + 1, sizeof *keep);
  if (!want || !keep)
    return NULL;
  for (size_t i = 0; i < m; i++)
    want[nd[i].v] = true;
  for (size_t n = g->n_nodes; n-- > 0;) {
    const ccg__node *node = &g->nodes[n];
    for (uint32_t i = 0; i < node->n_outputs && !keep[n]; i++)
      keep[n] = want[node->outputs[i]];
    for (uint32_t i = 0; keep[n] && i < node->n_inputs; i++)
      if (node->inputs[i] != CCG_NONE)
        want[node->inputs[i]] = true;
  }
  return keep;
}

/* Compiles and runs the part of the graph that gives the needed values,
 * records it as a guard of e and what it found in k. */
static ccg_status add_guard(ccg_exec *x, xspec *e, known *k,
                            const ccg_exec_options *o, const need *nd, size_t m,
                            const ccg_exec_tensor *in, size_t n_in,
                            const char *node, const char *dim) {
  ccg__xdyn *d = x->dyn;
  xguard *gd = &e->guards[e->n_guards];
  gd->ids = ccg__arena_calloc(&e->arena, m, sizeof *gd->ids);
  if (!gd->ids)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  bool fed = true;
  for (size_t i = 0; i < m; i++) {
    gd->ids[i] = nd[i].v;
    fed = fed && d->g->values[nd[i].v].kind == CCG_VALUE_INPUT;
  }
  const bool *keep = ancestors(x, e, nd, m);
  /* A guard runs its part ahead of the program on this rank alone: its
   * Recvs keep their messages for the program's (collective.c), on the
   * host; on a device the program would ask the peer again. */
  for (size_t n = 0;
       keep && d->backend != &ccg__cpu_backend && n < d->g->n_nodes; n++)
    if (keep[n] && d->g->nodes[n].op == CCG_OP_RECV)
      return ccg__error(&x->ctx, CCG_STATUS_UNSUPPORTED,
                        "node '%s' dim %s is set by data that comes through "
                        "Recv '%s': on %s a size computed from a received "
                        "message cannot be found before the program runs",
                        node, dim, ccg_node_name(d->g, (ccg_node_id)n),
                        d->backend->name);
  gd->outs = ccg__arena_calloc(&e->arena, m, sizeof *gd->outs);
  gd->rule = ccg__arena_calloc(&e->arena, m, sizeof *gd->rule);
  gd->want = ccg__arena_calloc(&e->arena, m * SLOT, sizeof *gd->want);
  gd->node = ccg__arena_strdup(&e->arena, node);
  gd->dim = ccg__arena_strdup(&e->arena, dim);
  if (!keep || !gd->outs || !gd->rule || !gd->want || !gd->node || !gd->dim)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  e->n_guards++; /* from here on discard() frees what it holds */
  ccg__spec_part part = {keep, gd->ids, m};
  ccg__xwhy why;
  if (!fed && (ccg__graph_specialize(d->g, k->sv, k->n, &part, &x->ctx,
                                     &gd->graph) != CCG_STATUS_OK ||
               ccg__exec_compile(gd->graph, o, d->backend, true, &x->ctx,
                                 &gd->prog, &why) != CCG_STATUS_OK))
    return ccg__error_prefix(&x->ctx,
                             "node '%s' dim %s is set by data: compiling "
                             "what computes it",
                             node, dim);
  gd->n = m;
  for (size_t i = 0; i < m; i++) {
    gd->outs[i].name = ccg_value_name(d->g, nd[i].v);
    gd->rule[i] = nd[i].rule;
  }
  bool ok;
  CCG_CHECK(check_guard(x, gd, in, n_in, &ok));
  for (size_t i = 0; i < m; i++) {
    int64_t *slot = gd->want + i * SLOT;
    measure(nd[i].rule, &gd->outs[i].tensor, slot);
    if (slot[0] < 0 || k->n == k->cap)
      return ccg__error(&x->ctx, CCG_STATUS_INTERNAL,
                        "node '%s': value '%s' gave no size", node,
                        gd->outs[i].name);
    k->sv[k->n++] =
        nd[i].rule
            ? (ccg__spec_value){nd[i].target, NULL,      -1,
                                NULL,         nd[i].dim, slot[1]}
            : (ccg__spec_value){nd[i].v, NULL, (int)slot[0], slot + 1, -1, 0};
  }
  return CCG_STATUS_OK;
}

static bool same_shapes(const ccg_graph *a, const ccg_graph *b) {
  if (a->n_values != b->n_values)
    return false;
  for (size_t v = 0; v < a->n_values; v++) {
    const ccg_shape *x = a->values[v].shape, *y = b->values[v].shape;
    if (x->rank != y->rank)
      return false;
    for (int i = 0; i < x->rank; i++) {
      ccg_dim p = x->dims[i], q = y->dims[i];
      if (ccg_dim_is_sym(p) != ccg_dim_is_sym(q) ||
          (ccg_dim_is_sym(p) ? strcmp(p.sym, q.sym) != 0 : p.size != q.size))
        return false;
    }
  }
  return true;
}

/* Takes out of e's key the fed contents that no shape depends on (an index
 * or a step counter): a copy made without them, and without those taken
 * out before, has the same shapes. Programs with guards keep them all (a
 * guard was compiled under them). */
static void prune_contents(ccg_exec *x, xspec *e, known *k) {
  ccg__xdyn *d = x->dyn;
  if (e->n_guards)
    return;
  for (size_t i = 0; i < k->n; i++) {
    ccg__spec_value *s = &k->sv[i];
    if (s->n_known < 0 && !s->data)
      continue;
    int saved = s->n_known;
    const ccg_tensor *saved_data = s->data;
    s->n_known = -1;
    s->data = NULL;
    ccg_ctx quiet; /* a copy that fails only says the contents matter */
    ccg__ctx_init(&quiet);
    ccg_graph *c = NULL;
    bool same = ccg__graph_specialize(d->g, k->sv, k->n, NULL, &quiet, &c) ==
                    CCG_STATUS_OK &&
                same_shapes(e->graph, c);
    ccg_graph_free(c);
    if (!same) {
      s->n_known = saved;
      s->data = saved_data;
      continue;
    }
    for (size_t j = 0; j < d->n_in; j++)
      if (d->g->inputs[j] == s->v)
        e->contents[j * SLOT] = -1;
  }
}

/* A program compiled from a copy of the graph made under what the run
 * feeds, and, where a dim is set by data the graph computes, what guards
 * computed. */
static ccg_status build_copy(ccg_exec *x, xspec *e, const ccg_exec_options *o,
                             const ccg_exec_tensor *in, size_t n_in) {
  ccg__xdyn *d = x->dyn;
  known k = {0};
  CCG_CHECK(describe_fed(x, e, &k));
  e->guards = ccg__arena_calloc(&e->arena, MAX_ROUNDS, sizeof *e->guards);
  if (!e->guards)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  for (;;) {
    ccg_graph *s = NULL;
    CCG_CHECK(ccg__graph_specialize(d->g, k.sv, k.n, NULL, &x->ctx, &s));
    ccg__xwhy why;
    ccg_status st =
        ccg__exec_compile(s, o, d->backend, true, &x->ctx, &e->prog, &why);
    if (st == CCG_STATUS_OK) {
      e->graph = s;
      prune_contents(x, e, &k);
      plan_checks(e);
      return st;
    }
    need nd[MAX_EVAL];
    size_t m = 0;
    char node[256] = "", dim[320] = "";
    if (why.unbound == 2 && e->n_guards < MAX_ROUNDS) {
      ccg_node_id n = ccg_value_producer(s, why.value);
      const ccg_dim dd = ccg_value_shape(s, why.value)->dims[why.dim];
      snprintf(node, sizeof node, "%s", ccg_node_name(s, n));
      snprintf(dim, sizeof dim, "%d ('%s')", why.dim, dd.sym ? dd.sym : "?");
      m = plan_guard(s, n, why.value, why.dim, nd);
    }
    ccg_graph_free(s);
    if (!m)
      return st; /* the compile's message names the node and dim */
    CCG_CHECK(add_guard(x, e, &k, o, nd, m, in, n_in, node, dim));
  }
}

/* Keeps e as the current program, dropping the least recently used one
 * when full. */
static void remember(ccg__xdyn *d, xspec *e) {
  size_t at = d->n;
  if (d->n == d->cap) {
    at = 0;
    for (size_t i = 1; i < d->n; i++)
      if (d->cache[i].used < d->cache[at].used)
        at = i;
    discard(&d->cache[at]);
    d->stats.evicted++;
  } else {
    d->n++;
  }
  e->used = ++d->clock;
  d->cache[at] = *e;
  d->cur = (int)at;
  d->stats.compiles++;
}

static ccg_status specialize(ccg_exec *x, const ccg_exec_tensor *in,
                             size_t n_in, ccg_exec **prog) {
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
  xspec e;
  memset(&e, 0, sizeof e);
  ccg__exec_arena_init(x, &e.arena);
  /* The graph itself first: binding checks the fed sizes against the named
   * dims and the graph's numbers, and where a dim is set by data it stops
   * at the values' shapes, before kernels or memory. */
  ccg__xwhy why;
  ccg_status st =
      ccg__exec_compile(d->g, &o, d->backend, false, &x->ctx, &e.prog, &why);
  if (st != CCG_STATUS_OK && why.unbound == 2)
    st = build_copy(x, &e, &o, in, n_in);
  if (st != CCG_STATUS_OK) {
    discard(&e);
    return st;
  }
  remember(d, &e);
  *prog = e.prog;
  return CCG_STATUS_OK;
}

ccg_status ccg__dyn_select(ccg_exec *x, const ccg_exec_tensor *inputs,
                           size_t n_inputs, bool trust, ccg_exec **prog) {
  ccg__xdyn *d = x->dyn;
  if (n_inputs && !inputs)
    return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                      "ccg_exec_run: inputs is NULL");
  gather_fed(d, inputs, n_inputs);
  bool ok = false;
  /* the last program first: a loop over one shape costs one comparison */
  if (d->cur >= 0)
    CCG_CHECK(serves(x, &d->cache[d->cur], inputs, n_inputs, trust, &ok));
  if (!ok && x->compiled && takes(d, x, NULL)) {
    d->cur = -1;
    *prog = x;
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < d->n && !ok; i++)
    if ((int)i != d->cur) {
      CCG_CHECK(serves(x, &d->cache[i], inputs, n_inputs, false, &ok));
      if (ok)
        d->cur = (int)i;
    }
  if (!ok)
    return specialize(x, inputs, n_inputs, prog);
  d->cache[d->cur].used = ++d->clock;
  *prog = d->cache[d->cur].prog;
  return CCG_STATUS_OK;
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
  ccg__exec_arena_init(x, &x->arena);
  x->g = g;
  x->mesh = ccg_graph_mesh(g);
  x->rank = o->rank;
  x->comm = o->comm;
  x->stash = &x->stashed;
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
  ccg_exec_dim *dims =
      ccg__arena_calloc(&x->arena, o->n_dims + 1, sizeof *dims);
  d->cache = ccg__arena_calloc(&x->arena, d->cap, sizeof *d->cache);
  d->fed = ccg__arena_calloc(&x->arena, d->n_in + 1, sizeof *d->fed);
  d->shapes = ccg__arena_calloc(&x->arena, d->n_in + 1, sizeof *d->shapes);
  if (!dims || !d->cache || !d->fed || !d->shapes)
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
        ((small_int(&d->fed[k]->tensor) || small_float(&d->fed[k]->tensor)) &&
         !d->fed[k]->tensor.data))
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
  /* what create was given may already make a program (data included,
   * where a guard runs part of the graph); else the first run makes one */
  if (st == CCG_STATUS_OK && !x->compiled && shapes_complete(x->dyn, o))
    st = ccg__dyn_select(x, o->input_shapes, o->n_input_shapes, false, &p);
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
    discard(&d->cache[i]);
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
