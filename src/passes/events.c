/* A program's communication calls per rank: which graph each rank runs, the
 * executor's order of its nodes (ccg_graph_topo_order), and for every node
 * that communicates its group, dtype and shapes evaluated on that rank.
 * Groups of one rank do not communicate (the executor copies), nor does
 * ShardSlice; Send and Recv always do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/internal.h"
#include "passes/events.h"

bool ccg__is_p2p(ccg_op op) { return op == CCG_OP_SEND || op == CCG_OP_RECV; }

static bool mesh_equal(const ccg_mesh *a, const ccg_mesh *b) {
  if (!a || !b)
    return a == b;
  if (a->ndims != b->ndims)
    return false;
  for (int i = 0; i < a->ndims; i++)
    if (a->sizes[i] != b->sizes[i] || strcmp(a->names[i], b->names[i]) != 0)
      return false;
  return true;
}

/* What loading one rank's calls keeps: the dims it evaluated, by symbol (a
 * graph interns each symbol's text once, and on one rank a symbol always
 * evaluates alike: a large graph has few symbols but many shapes), the
 * shapes it evaluated, by the graph's interned shape (values of one shape
 * share it: the calls of a rank point at one evaluated copy, so that a
 * call record stays small), and its group on each set of mesh axes. */
#define DIM_MEMO 64
#define SHAPE_MEMO 64
typedef struct rank_load {
  ccg__program *p;
  int rank;
  ccg__dim_binds binds;
  const char *sym[DIM_MEMO];
  ccg__vdim dim[DIM_MEMO];
  const ccg_shape *shape[SHAPE_MEMO];
  const ccg__vshape *vshape[SHAPE_MEMO];
  int64_t *group[1u << CCG_MAX_MESH_AXES];
  int64_t keypos[1u << CCG_MAX_MESH_AXES]; /* calls so far per group */
} rank_load;

static ccg_status eval_dim(rank_load *l, ccg_dim d, ccg__vdim *out) {
  if (!ccg_dim_is_sym(d)) {
    out->n = d.size;
    out->s = "";
    return CCG_STATUS_OK;
  }
  size_t h = ((uintptr_t)d.sym >> 3) % DIM_MEMO;
  if (l->sym[h] == d.sym) {
    *out = l->dim[h];
    return CCG_STATUS_OK;
  }
  char buf[CCG__VSYM_MAX];
  ccg__vdim v = {0, ""};
  if (!ccg__dim_at_rank(l->p->mesh, l->rank, &l->binds, d, &v.n, buf,
                        sizeof buf)) {
    v.n = -1;
    if (!(v.s = ccg__arena_strdup(&l->p->arena, buf)))
      return ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
  }
  l->sym[h] = d.sym;
  l->dim[h] = v;
  *out = v;
  return CCG_STATUS_OK;
}

/* s on l's rank (NULL: no shape, rank 0), shared by the calls whose value
 * has the same interned shape; a shape that lost its memo slot to another
 * is evaluated again into a new copy. */
static ccg_status eval_shape(rank_load *l, const ccg_shape *s,
                             const ccg__vshape **out) {
  static const ccg__vshape none = {0};
  if (!s) {
    *out = &none;
    return CCG_STATUS_OK;
  }
  size_t h = ((uintptr_t)s >> 4) % SHAPE_MEMO;
  if (l->shape[h] == s) {
    *out = l->vshape[h];
    return CCG_STATUS_OK;
  }
  ccg__vshape *v = ccg__arena_calloc(&l->p->arena, 1, sizeof *v);
  if (!v)
    return ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
  v->rank = s->rank;
  for (int d = 0; d < s->rank; d++)
    CCG_CHECK(eval_dim(l, s->dims[d], &v->d[d]));
  l->shape[h] = s;
  l->vshape[h] = v;
  *out = v;
  return CCG_STATUS_OK;
}

const char *ccg__vshape_str(const ccg__vshape *s, char *buf, size_t size) {
  size_t used = 0;
  used += (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < s->rank && used < size; d++) {
    if (s->d[d].n >= 0)
      used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "",
                               (long long)s->d[d].n);
    else
      used += (size_t)snprintf(buf + used, size - used, "%s%s", d ? "," : "",
                               s->d[d].s);
  }
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

static bool vdim_equal(const ccg__vdim *a, const ccg__vdim *b) {
  if (a->n >= 0 || b->n >= 0)
    return a->n == b->n;
  return strcmp(a->s, b->s) == 0;
}

bool ccg__vshape_equal(const ccg__vshape *a, const ccg__vshape *b,
                       int skip_axis) {
  if (a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (d != skip_axis && !vdim_equal(&a->d[d], &b->d[d]))
      return false;
  return true;
}

bool ccg__vshape_numel(const ccg__vshape *s, int skip_axis, int64_t *num,
                       char *buf, size_t size) {
  int64_t n = 1;
  size_t used = 0;
  bool numeric = true;
  if (size)
    buf[0] = '\0';
  for (int d = 0; d < s->rank; d++) {
    if (d == skip_axis)
      continue;
    if (s->d[d].n >= 0) {
      if (__builtin_mul_overflow(n, s->d[d].n, &n))
        n = INT64_MAX;
    } else {
      numeric = false;
      if (used < size)
        used += (size_t)snprintf(buf + used, size - used, "%s%s",
                                 used ? "*" : "", s->d[d].s);
    }
  }
  *num = n;
  return numeric;
}

const char *ccg__group_str(const ccg__program *p, const ccg__cev *e, char *buf,
                           size_t size) {
  size_t used = 0;
  for (int a = 0; a < p->mesh->ndims && used < size; a++)
    if (e->key & (1u << a))
      used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? "," : "",
                               p->mesh->names[a]);
  for (int i = 0; i < e->gsize && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? " " : " [",
                             (long long)e->group[i]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

/* ---- one node ------------------------------------------------------------ */

static ccg_status node_error(ccg_graph *g, ccg_node_id n, int rank,
                             const char *what) {
  return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                    "graph '%s', node '%s' (%s) on rank %d: %s",
                    ccg_graph_name(g), ccg_node_name(g, n),
                    ccg_op_name(ccg_node_op(g, n)), rank, what);
}

static ccg_status read_mask(ccg_graph *g, ccg_node_id n, const ccg_mesh *m,
                            int rank, unsigned *mask) {
  const ccg_attr *axes = ccg_node_attr(g, n, "mesh_axes");
  const ccg_attr *axis = ccg_node_attr(g, n, "mesh_axis");
  size_t na = axes && axes->type == CCG_ATTR_STRINGS ? axes->n : 0;
  bool one = axis && axis->type == CCG_ATTR_STRING;
  *mask = 0;
  if (!m)
    return node_error(g, n, rank, "the graph has no device mesh");
  if (na + (one ? 1 : 0) == 0)
    return node_error(g, n, rank, "no mesh_axes or mesh_axis");
  for (size_t i = 0; i < na + (one ? 1 : 0); i++) {
    const char *name = i < na ? axes->strings[i] : axis->s;
    int ax = name ? ccg_mesh_axis(m, name) : -1;
    if (ax < 0)
      return node_error(g, n, rank, "a mesh axis is not in the mesh");
    *mask |= 1u << ax;
  }
  return CCG_STATUS_OK;
}

static int64_t attr_i(ccg_graph *g, ccg_node_id n, const char *name,
                      int64_t dflt) {
  int64_t v;
  if (ccg_node_attr_int(g, n, name, &v) != CCG_STATUS_OK) {
    ccg_clear_error(g);
    return dflt;
  }
  return v;
}

static const int64_t *attr_list(ccg_graph *g, ccg_node_id n, const char *name,
                                int W) {
  const ccg_attr *a = ccg_node_attr(g, n, name);
  if (!a || a->type != CCG_ATTR_INTS || a->n != (size_t)W)
    return NULL;
  return a->ints;
}

static int norm_axis(int64_t axis, int rank) {
  if (axis < 0)
    axis += rank;
  return axis >= 0 && axis < rank ? (int)axis : -1;
}

static ccg_status read_rop(ccg_graph *g, ccg_node_id n, int rank, int *rop) {
  const ccg_attr *a = ccg_node_attr(g, n, "reduce_op");
  ccg_reduce_op op = CCG_REDUCE_SUM;
  if (a && a->type == CCG_ATTR_STRING &&
      ccg_reduce_op_parse(a->s, &op) != CCG_STATUS_OK)
    return node_error(g, n, rank, "unknown reduce_op");
  *rop = (int)op;
  return CCG_STATUS_OK;
}

static ccg_status read_params(ccg_graph *g, ccg_node_id n, int rank,
                              ccg__cev *e) {
  int W = e->gsize;
  switch (e->op) {
  case CCG_OP_ALL_REDUCE:
    return read_rop(g, n, rank, &e->rop);
  case CCG_OP_REDUCE:
    CCG_CHECK(read_rop(g, n, rank, &e->rop));
    /* fall through */
  case CCG_OP_BROADCAST:
    e->root = attr_i(g, n, "root", 0);
    return CCG_STATUS_OK;
  case CCG_OP_ALL_GATHER:
    e->axis = norm_axis(attr_i(g, n, "axis", 0), e->out->rank);
    e->split = attr_list(g, n, "split_sizes", W);
    return CCG_STATUS_OK;
  case CCG_OP_REDUCE_SCATTER:
    CCG_CHECK(read_rop(g, n, rank, &e->rop));
    e->axis = norm_axis(attr_i(g, n, "axis", 0), e->in->rank);
    e->split = attr_list(g, n, "split_sizes", W);
    return CCG_STATUS_OK;
  case CCG_OP_ALL_TO_ALL:
    e->axis = norm_axis(attr_i(g, n, "split_axis", 0), e->in->rank);
    e->axis2 = norm_axis(attr_i(g, n, "concat_axis", 0), e->out->rank);
    e->split = attr_list(g, n, "in_splits", W);
    e->split2 = attr_list(g, n, "out_splits", W);
    if (e->axis < 0 || e->axis2 < 0)
      return node_error(g, n, rank, "split_axis or concat_axis out of range");
    return CCG_STATUS_OK;
  case CCG_OP_COLLECTIVE_PERMUTE:
    e->shift = attr_i(g, n, "shift", 1);
    e->rotate = attr_i(g, n, "rotate", 1);
    return CCG_STATUS_OK;
  case CCG_OP_SEND:
  case CCG_OP_RECV: {
    e->tag = attr_i(g, n, "tag", 0);
    if (ccg_node_attr(g, n, "peer")) { /* the peer's index on the axis */
      int64_t p = attr_i(g, n, "peer", 0);
      if (p < 0 || p >= W || p == e->gidx) {
        const ccg_attr *ax = ccg_node_attr(g, n, "mesh_axis");
        char why[160];
        snprintf(why, sizeof why, "peer %lld is %s on axis '%s' (0..%d)",
                 (long long)p,
                 p == e->gidx ? "the rank's own index" : "out of range",
                 ax && ax->s ? ax->s : "?", W - 1);
        return node_error(g, n, rank, why);
      }
      e->peer = e->group[p];
      return CCG_STATUS_OK;
    }
    int64_t off = attr_i(g, n, "peer_offset", 1);
    e->peer = e->group[((e->gidx + off) % W + W) % W];
    return CCG_STATUS_OK;
  }
  default:
    return CCG_STATUS_OK;
  }
}

/* The global ranks of l's group on the mesh axes `key`, in group order:
 * made once per rank and key, shared by the calls. */
static int64_t *group_of(rank_load *l, unsigned key, int64_t size) {
  if (!l->group[key]) {
    l->group[key] =
        ccg__arena_calloc(&l->p->arena, (size_t)size, sizeof(int64_t));
    if (l->group[key])
      ccg_mesh_group_ranks(l->p->mesh, l->rank, key, l->group[key]);
  }
  return l->group[key];
}

/* Fills e for node n of g on l's rank; *skip when it does not
 * communicate. */
static ccg_status make_event(rank_load *l, ccg_graph *g, ccg_node_id n,
                             ccg__cev *e, bool *skip) {
  ccg__program *p = l->p;
  int rank = l->rank;
  ccg_op op = ccg_node_op(g, n);
  *skip = true;
  if (!ccg_op_is_collective(op) || op == CCG_OP_SHARD_SLICE)
    return CCG_STATUS_OK;
  memset(e, 0, sizeof *e);
  e->op = op;
  e->node = ccg_node_name(g, n);
  e->rank = rank;
  e->rop = -1;
  e->root = -1;
  e->axis = e->axis2 = -1;
  e->peer = -1;
  CCG_CHECK(read_mask(g, n, p->mesh, rank, &e->key));
  int64_t W = ccg_mesh_group_size(p->mesh, e->key);
  if (W == 1 && !ccg__is_p2p(op))
    return CCG_STATUS_OK;
  *skip = false;
  e->gsize = (int)W;
  e->gidx = (int)ccg_mesh_rank_in_group(p->mesh, rank, e->key);
  if (!(e->group = group_of(l, e->key, W)))
    return ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
  ccg_value_id in =
      ccg_node_num_inputs(g, n) ? ccg_node_input(g, n, 0) : CCG_NONE;
  ccg_value_id out =
      ccg_node_num_outputs(g, n) ? ccg_node_output(g, n, 0) : CCG_NONE;
  e->dtype = in != CCG_NONE ? ccg_value_dtype(g, in) : ccg_value_dtype(g, out);
  CCG_CHECK(
      eval_shape(l, in != CCG_NONE ? ccg_value_shape(g, in) : NULL, &e->in));
  CCG_CHECK(
      eval_shape(l, out != CCG_NONE ? ccg_value_shape(g, out) : NULL, &e->out));
  return read_params(g, n, rank, e);
}

/* ---- the program --------------------------------------------------------- */

static ccg_status pick_graphs(ccg__program *p, ccg_graph *const *graphs,
                              size_t n, const char *stage_axis) {
  if (stage_axis) {
    int ax = ccg_mesh_axis(p->mesh, stage_axis);
    if (ax < 0)
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "stage axis '%s' is not in the mesh", stage_axis);
    if ((int64_t)n != p->mesh->sizes[ax])
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "%zu stage graphs for a stage axis '%s' of size %lld",
                        n, stage_axis, (long long)p->mesh->sizes[ax]);
    for (int r = 0; r < p->world; r++) {
      int64_t c[CCG_MAX_MESH_AXES];
      ccg_mesh_coords(p->mesh, r, c);
      p->graph_of[r] = graphs[c[ax]];
    }
    return CCG_STATUS_OK;
  }
  if (n != 1 && n != (size_t)p->world)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "%zu graphs for a mesh of %d ranks: give one SPMD graph, "
                      "one per rank, or one per stage with a stage axis",
                      n, p->world);
  for (int r = 0; r < p->world; r++)
    p->graph_of[r] = graphs[n == 1 ? 0 : (size_t)r];
  return CCG_STATUS_OK;
}

/* Every rank's calls: make_event for each of `calls[gi]`, its graph's
 * collectives in the executor's order. The ranks that run one graph are
 * loaded together, node by node: a node's attributes and shapes are read
 * once for all of them, not again for each rank after the others' nodes
 * evicted them. A failure is the one the ranks in turn would give: the
 * first of the lowest rank that has one. */
static ccg_status load_ranks(ccg__program *p, ccg_graph *const *graphs,
                             size_t n, ccg_node_id *const *calls,
                             const size_t *n_calls) {
  int W = p->world, bad = W;
  rank_load *l = calloc((size_t)W, sizeof *l);
  int *ranks = calloc((size_t)W, sizeof *ranks);
  ccg_ctx err = {0};
  if (!l || !ranks) {
    bad = -1;
    ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
  }
  for (size_t gi = 0; gi < n && bad > 0; gi++) {
    ccg_graph *g = graphs[gi];
    size_t same = 0, nc = n_calls[gi];
    while (same < gi && graphs[same] != g)
      same++;
    if (same < gi) /* loaded with graph `same` */
      continue;
    int nr = 0;
    for (int r = 0; r < bad; r++) {
      if (p->graph_of[r] != g)
        continue;
      ranks[nr++] = r;
      l[r].p = p;
      l[r].rank = r;
      l[r].binds = (ccg__dim_binds){p->opts->dim_names, p->opts->dim_values,
                                    p->opts->dim_names ? p->opts->n_dims : 0};
      p->ev[r] = ccg__arena_calloc(&p->arena, nc ? nc : 1, sizeof(ccg__cev));
      if (!p->ev[r]) {
        bad = -1;
        ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
        break;
      }
    }
    for (size_t i = 0; i < nc && bad > 0; i++) {
      /* the calls' records a few places on are loaded meanwhile: on a
       * large graph each would be a cache miss in turn */
      ccg__nodes_prefetch(g, calls[gi], nc, i);
      for (int k = 0; k < nr && ranks[k] < bad; k++) {
        int r = ranks[k];
        bool skip;
        ccg__cev *e = &p->ev[r][p->n_ev[r]];
        if (make_event(&l[r], g, calls[gi][i], e, &skip) != CCG_STATUS_OK) {
          bad = r; /* the ranks after it in ranks[] are higher */
          ccg__error_copy(&err, NULL);
          break;
        }
        if (skip)
          continue;
        if (!ccg__is_p2p(e->op))
          e->pos = l[r].keypos[e->key]++;
        p->n_ev[r]++;
      }
    }
  }
  free(l);
  free(ranks);
  if (bad < 0)
    return CCG_STATUS_OOM;
  if (bad < W) /* a higher rank's failure may have come after it */
    return ccg__error_copy(NULL, &err);
  return CCG_STATUS_OK;
}

/* The nodes of g that may communicate (make_event decides per rank), in the
 * executor's order, into *calls (n of them): one walk over the graph for
 * all the ranks that run it, in the nodes' own order when that is the
 * executor's (no order array to fill and read back). */
static ccg_status graph_calls(ccg__program *p, ccg_graph *g, size_t gi,
                              ccg_node_id **calls, size_t *n) {
  size_t nn = ccg_graph_num_nodes(g), k = 0, cap = 0;
  ccg_node_id *order = NULL, *found = NULL;
  ccg_status st = CCG_STATUS_OK;
  if (!ccg__graph_in_added_order(g)) {
    if (!(order = malloc((nn ? nn : 1) * sizeof *order)))
      return ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
    if (ccg_graph_topo_order(g, order) != CCG_STATUS_OK) {
      free(order);
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "graph %zu ('%s'): %s",
                        gi, ccg_graph_name(g), ccg_last_error(g));
    }
  }
  bool coll[CCG_OP_COUNT];
  for (int op = 0; op < CCG_OP_COUNT; op++)
    coll[op] = ccg_op_is_collective((ccg_op)op);
  for (size_t i = 0; i < nn; i++) {
    ccg_node_id id = order ? order[i] : (ccg_node_id)i;
    ccg_op op = ccg_node_op(g, id);
    if ((unsigned)op >= CCG_OP_COUNT || !coll[op])
      continue;
    if (k == cap) {
      cap = cap ? 2 * cap : 64;
      ccg_node_id *grown = realloc(found, cap * sizeof *grown);
      if (!grown) {
        st = ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
        goto out;
      }
      found = grown;
    }
    found[k++] = id;
  }
  *calls = ccg__arena_calloc(&p->arena, k ? k : 1, sizeof **calls);
  if (!*calls) {
    st = ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
    goto out;
  }
  if (k)
    memcpy(*calls, found, k * sizeof *found);
  *n = k;
out:
  free(found);
  free(order);
  return st;
}

void ccg__program_release(ccg__program *p) {
  ccg__arena_free(&p->arena);
  memset(p, 0, sizeof *p);
}

ccg_status ccg__program_load(ccg__program *p, ccg_graph *const *graphs,
                             size_t n, const ccg_verify_options *opts) {
  memset(p, 0, sizeof *p);
  ccg__arena_init(&p->arena, NULL, 0);
  p->opts = opts;
  if (opts->n_dims && (!opts->dim_names || !opts->dim_values))
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "%zu named dims but no names or values", opts->n_dims);
  if (!graphs || n == 0)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "no graphs to check");
  for (size_t i = 0; i < n; i++)
    if (!graphs[i])
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "graph %zu is NULL", i);
  p->mesh = ccg_graph_mesh(graphs[0]);
  static const ccg_mesh one = {1, {1}, {"world"}};
  if (!p->mesh)
    p->mesh = &one;
  for (size_t i = 1; i < n; i++)
    if (!mesh_equal(ccg_graph_mesh(graphs[i]), ccg_graph_mesh(graphs[0]))) {
      char a[128] = "none", b[128] = "none";
      if (ccg_graph_mesh(graphs[0]))
        ccg_mesh_format(ccg_graph_mesh(graphs[0]), a, sizeof a);
      if (ccg_graph_mesh(graphs[i]))
        ccg_mesh_format(ccg_graph_mesh(graphs[i]), b, sizeof b);
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "graph %zu ('%s') has mesh %s but graph 0 ('%s') has "
                        "%s",
                        i, ccg_graph_name(graphs[i]), b,
                        ccg_graph_name(graphs[0]), a);
    }
  p->world = (int)ccg_mesh_world_size(p->mesh);
  p->graph_of =
      ccg__arena_calloc(&p->arena, (size_t)p->world, sizeof *p->graph_of);
  p->n_ev = ccg__arena_calloc(&p->arena, (size_t)p->world, sizeof *p->n_ev);
  p->ev = ccg__arena_calloc(&p->arena, (size_t)p->world, sizeof *p->ev);
  ccg_node_id **calls = ccg__arena_calloc(&p->arena, n, sizeof *calls);
  size_t *n_calls = ccg__arena_calloc(&p->arena, n, sizeof *n_calls);
  if (!p->graph_of || !p->n_ev || !p->ev || !calls || !n_calls)
    return ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
  ccg_status st = pick_graphs(p, graphs, n, opts->stage_axis);
  for (size_t i = 0; i < n && st == CCG_STATUS_OK; i++) {
    size_t same = 0;
    while (same < i && graphs[same] != graphs[i])
      same++;
    if (same < i) { /* one graph given for several ranks: one walk */
      calls[i] = calls[same];
      n_calls[i] = n_calls[same];
      continue;
    }
    st = graph_calls(p, graphs[i], i, &calls[i], &n_calls[i]);
  }
  if (st == CCG_STATUS_OK)
    st = load_ranks(p, graphs, n, calls, n_calls);
  if (st != CCG_STATUS_OK)
    ccg__program_release(p);
  return st;
}
