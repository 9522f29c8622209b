/* Collectives (domain "ccgraph"): the only nodes whose behaviour depends on
 * the rank. Shapes are per-rank; a group is every rank that shares the other
 * mesh coordinates, W ranks in all. Every attribute is written by the
 * builders (collective_build.c) and checked against the graph's mesh here,
 * so a graph read back from a file is held to the same rules as one built
 * in memory. */
#include <stdio.h>
#include <string.h>

#include "graph/internal.h"

/* Longest symbol text the graph keeps (canonicalization buffers). */
#define SYM_TEXT_MAX 256

/* Attribute specs: required (always written) and optional. */
#define REQ(nm, t)                                                             \
  { nm, CCG_ATTR_##t, true, 0, 0, NULL }
#define OPT(nm, t)                                                             \
  { nm, CCG_ATTR_##t, false, 0, 0, NULL }
#define MESH_AXES REQ("mesh_axes", STRINGS)
#define GROUP_SIZE REQ("group_size", INT)

/* The group of a collective node, read from its attributes. */
typedef struct group {
  int64_t size;   /* W */
  char list[64];  /* "dp,tp": for messages */
  char label[64]; /* "dp.tp": names rank-dependent symbols */
} group;

/* A split-size list; v == NULL when absent (even split). */
typedef struct splits {
  const char *name;
  const int64_t *v;
  size_t n;
  int64_t sum;
  bool equal;
} splits;

/* ---- the group ---------------------------------------------------------- */

static ccg_status need_mesh(ccg__infer *ix, const ccg_mesh **m) {
  *m = ccg_graph_mesh(ix->g);
  if (*m)
    return CCG_STATUS_OK;
  return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                   "graph '%s' has no device mesh; collectives need one "
                   "(ccg_graph_set_mesh)",
                   ccg_graph_name(ix->g));
}

static const char *mesh_str(const ccg_mesh *m, char *buf, size_t size) {
  ccg_mesh_format(m, buf, size);
  return buf;
}

static ccg_status unknown_axis(ccg__infer *ix, const ccg_mesh *m,
                               const char *name) {
  char mb[128];
  return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                   "mesh axis '%s' is not in the mesh [%s]", name,
                   mesh_str(m, mb, sizeof mb));
}

/* Appends name to both texts; unique axes (at most 4 names of at most 15
 * characters) always fit. */
static void append(char *dst, size_t size, char sep, const char *name) {
  size_t n = strlen(dst), m = strlen(name);
  if (sep && n + 1 < size)
    dst[n++] = sep;
  if (m > size - 1 - n)
    m = size - 1 - n;
  memcpy(dst + n, name, m);
  dst[n + m] = '\0';
}

static void add_axis_name(group *gr, size_t i, const char *name) {
  append(gr->list, sizeof gr->list, i ? ',' : 0, name);
  append(gr->label, sizeof gr->label, i ? '.' : 0, name);
}

static ccg_status read_group(ccg__infer *ix, group *gr) {
  const ccg_mesh *m;
  CCG_CHECK(need_mesh(ix, &m));
  memset(gr, 0, sizeof *gr);
  const char *const *names;
  size_t n = ccg__attr_strings(ix, "mesh_axes", &names);
  if (n == 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "mesh_axes is empty; name at least one mesh axis");
  unsigned mask = 0;
  for (size_t i = 0; i < n; i++) {
    int a = ccg_mesh_axis(m, names[i]);
    if (a < 0)
      return unknown_axis(ix, m, names[i]);
    if (mask & (1u << a))
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "mesh axis '%s' is named twice in mesh_axes", names[i]);
    mask |= 1u << a;
    add_axis_name(gr, i, names[i]);
  }
  gr->size = ccg_mesh_group_size(m, mask);
  int64_t want = ccg__attr_i(ix, "group_size");
  if (want != gr->size) {
    char mb[128];
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "group_size is %lld but mesh axes [%s] of mesh [%s] "
                     "hold %lld ranks",
                     (long long)want, gr->list, mesh_str(m, mb, sizeof mb),
                     (long long)gr->size);
  }
  return CCG_STATUS_OK;
}

/* Point-to-point ops name one axis; *size is its length. */
static ccg_status read_p2p_axis(ccg__infer *ix, int64_t *size,
                                const char **name) {
  const ccg_mesh *m;
  CCG_CHECK(need_mesh(ix, &m));
  *name = ccg__attr_s(ix, "mesh_axis");
  if (strchr(*name, ','))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "mesh_axis '%s' names more than one axis; %s works "
                     "along exactly one",
                     *name, ccg_op_name(ix->op));
  int a = ccg_mesh_axis(m, *name);
  if (a < 0)
    return unknown_axis(ix, m, *name);
  *size = m->sizes[a];
  return CCG_STATUS_OK;
}

/* A step along a ring of `size` ranks: |off| < size, and 0 (talking to
 * oneself) only where the axis has one rank. */
static ccg_status check_offset(ccg__infer *ix, const char *attr,
                               const char *axis, int64_t size) {
  int64_t off = ccg__attr_i(ix, attr);
  if (off > -size && off < size && (off != 0 || size == 1))
    return CCG_STATUS_OK;
  if (size == 1)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "%s is %lld; mesh axis '%s' has 1 rank, so it must be 0",
                     attr, (long long)off, axis);
  return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                   "%s is %lld; on mesh axis '%s' of size %lld it must be in "
                   "%lld..%lld and not 0",
                   attr, (long long)off, axis, (long long)size,
                   (long long)(1 - size), (long long)(size - 1));
}

/* The peer: peer_offset (a step along the axis' ring) or peer (its index
 * on the axis, for per-rank graphs such as pipeline stages), one of them. */
static ccg_status check_p2p(ccg__infer *ix) {
  int64_t size;
  const char *axis;
  CCG_CHECK(read_p2p_axis(ix, &size, &axis));
  bool has_off = ccg__attr(ix, "peer_offset") != NULL;
  bool has_peer = ccg__attr(ix, "peer") != NULL;
  if (has_off == has_peer)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "give exactly one of peer_offset and peer (%s)",
                     has_off ? "both are set" : "neither is set");
  if (has_off)
    CCG_CHECK(check_offset(ix, "peer_offset", axis, size));
  int64_t peer = ccg__attr_i(ix, "peer");
  if (has_peer && (peer < 0 || peer >= size))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "peer is %lld; mesh axis '%s' has ranks 0..%lld",
                     (long long)peer, axis, (long long)(size - 1));
  int64_t tag = ccg__attr_i(ix, "tag");
  if (tag < 0 || tag > INT32_MAX) /* MPI tags are non-negative ints */
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "tag is %lld; expected 0..%d",
                     (long long)tag, INT32_MAX);
  return CCG_STATUS_OK;
}

static ccg_status check_root(ccg__infer *ix, const group *gr) {
  int64_t root = ccg__attr_i(ix, "root");
  if (root >= 0 && root < gr->size)
    return CCG_STATUS_OK;
  return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                   "root is %lld; the group over [%s] has %lld ranks "
                   "(valid: 0..%lld)",
                   (long long)root, gr->list, (long long)gr->size,
                   (long long)(gr->size - 1));
}

static ccg_status check_reduce_op(ccg__infer *ix) {
  const char *s = ccg__attr_s(ix, "reduce_op");
  ccg_reduce_op op;
  if (ccg_reduce_op_parse(s, &op) != CCG_STATUS_OK)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "reduce_op is '%s'; expected sum, prod, min, max or avg",
                     s);
  ccg_dtype dt = ccg__in_dtype(ix, 0);
  /* NCCL and MPI average only floating-point data. */
  if (op == CCG_REDUCE_AVG && !ccg_dtype_is_float(dt))
    return ccg__fail(ix, CCG_STATUS_DTYPE,
                     "reduce_op avg needs a float type; input 0 '%s' is %s",
                     ccg__in_name(ix, 0), ccg_dtype_name(dt));
  return CCG_STATUS_OK;
}

/* ---- dims --------------------------------------------------------------- */

static ccg_status read_splits(ccg__infer *ix, const group *gr, const char *name,
                              splits *s) {
  memset(s, 0, sizeof *s);
  s->name = name;
  s->equal = true;
  if (!ccg__attr(ix, name))
    return CCG_STATUS_OK;
  s->n = ccg__attr_ints(ix, name, &s->v);
  if ((int64_t)s->n != gr->size)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "%s has %zu entries; the group over [%s] has %lld ranks",
                     name, s->n, gr->list, (long long)gr->size);
  for (size_t i = 0; i < s->n; i++) {
    if (s->v[i] < 0)
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "%s[%zu] is %lld; split sizes must be >= 0", name, i,
                       (long long)s->v[i]);
    if (__builtin_add_overflow(s->sum, s->v[i], &s->sum))
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "%s: the sizes overflow int64 when summed", name);
    s->equal = s->equal && s->v[i] == s->v[0];
  }
  return CCG_STATUS_OK;
}

/* The dim that is s->v[r] on group rank r: the number when all are equal,
 * else the rank-dependent symbol "tp{3,5,4,4}" (interned in the graph). */
static ccg_status per_rank_dim(ccg__infer *ix, const group *gr, const splits *s,
                               ccg_dim *d) {
  if (s->equal) {
    *d = ccg_dim_num(s->v[0]);
    return CCG_STATUS_OK;
  }
  char buf[SYM_TEXT_MAX];
  size_t used = (size_t)snprintf(buf, sizeof buf, "%s{", gr->label);
  for (size_t i = 0; i < s->n && used < sizeof buf; i++)
    used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%lld",
                             i ? "," : "", (long long)s->v[i]);
  if (used < sizeof buf)
    used += (size_t)snprintf(buf + used, sizeof buf - used, "}");
  if (used >= sizeof buf)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "%s of %zu entries is too long for a rank-dependent "
                     "symbol (at most %d characters)",
                     s->name, s->n, SYM_TEXT_MAX - 1);
  const char *sym = ccg__intern(ix->g, buf);
  if (!sym)
    return ccg__fail(ix, CCG_STATUS_OOM, "out of memory naming %s", buf);
  *d = ccg_dim_sym(sym);
  return CCG_STATUS_OK;
}

/* Split sizes must add up to the dim they split. */
static ccg_status check_sum(ccg__infer *ix, const splits *s, int axis) {
  ccg_dim d = ccg__in_shape(ix, 0)->dims[axis];
  if (!ccg_dim_is_sym(d) && d.size == s->sum)
    return CCG_STATUS_OK;
  char xd[64];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "%s sum to %lld but dim %d of input '%s' is %s", s->name,
                   (long long)s->sum, axis, ccg__in_name(ix, 0),
                   ccg__dim_str(d, xd, sizeof xd));
}

/* A gathered dim: each rank holds its own entry of the list. */
static ccg_status check_shard(ccg__infer *ix, const group *gr, const splits *s,
                              int axis) {
  ccg_dim d = ccg__in_shape(ix, 0)->dims[axis], want;
  CCG_CHECK(per_rank_dim(ix, gr, s, &want));
  if (ccg_dim_equal(d, want))
    return CCG_STATUS_OK;
  char xd[64], xw[SYM_TEXT_MAX];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "dim %d of input '%s' is %s but %s gives this rank %s", axis,
                   ccg__in_name(ix, 0), ccg__dim_str(d, xd, sizeof xd), s->name,
                   ccg__dim_str(want, xw, sizeof xw));
}

/* d / W, exact for numbers; a symbol no rule divides gets a fresh name. */
static ccg_status div_dim(ccg__infer *ix, const group *gr, int axis,
                          ccg_dim *d) {
  ccg_dim in = *d;
  if (!ccg_dim_is_sym(in)) {
    if (in.size % gr->size == 0) {
      *d = ccg_dim_num(in.size / gr->size);
      return CCG_STATUS_OK;
    }
    char sb[128];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input '%s' %s: dim %d of size %lld is not divisible by "
                     "group size %lld",
                     ccg__in_name(ix, 0),
                     ccg__shape_str(ccg__in_shape(ix, 0), sb, sizeof sb), axis,
                     (long long)in.size, (long long)gr->size);
  }
  if (ccg__dim_div(ix->g, in, ccg_dim_num(gr->size), d))
    return CCG_STATUS_OK;
  return ccg__fresh_dim(ix, 0, axis, d);
}

/* d * W; numbers must not overflow. */
static ccg_status mul_dim(ccg__infer *ix, const group *gr, int axis,
                          ccg_dim *d) {
  ccg_dim in = *d;
  if (ccg__dim_mul(ix->g, in, ccg_dim_num(gr->size), d))
    return CCG_STATUS_OK;
  if (ccg_dim_is_sym(in))
    return ccg__fresh_dim(ix, 0, axis, d);
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "dim %d of size %lld times group size %lld overflows int64",
                   axis, (long long)in.size, (long long)gr->size);
}

static ccg_status read_axis(ccg__infer *ix, const char *attr, int *axis) {
  return ccg__axis(ix, ccg__attr_i(ix, attr), ccg__in_shape(ix, 0)->rank, attr,
                   axis);
}

static void set_output(ccg__infer *ix, const ccg_shape *s) {
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *s;
}

/* ---- shape-keeping collectives ------------------------------------------ */

static const ccg__attr_spec all_reduce_attrs[] = {
    MESH_AXES,
    GROUP_SIZE,
    REQ("reduce_op", STRING),
};

static ccg_status infer_all_reduce(ccg__infer *ix) {
  group gr;
  CCG_CHECK(read_group(ix, &gr));
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  CCG_CHECK(check_reduce_op(ix));
  set_output(ix, ccg__in_shape(ix, 0));
  return CCG_STATUS_OK;
}

static const ccg__attr_spec broadcast_attrs[] = {
    MESH_AXES,
    GROUP_SIZE,
    REQ("root", INT),
};

static ccg_status infer_broadcast(ccg__infer *ix) {
  group gr;
  CCG_CHECK(read_group(ix, &gr));
  CCG_CHECK(check_root(ix, &gr));
  set_output(ix, ccg__in_shape(ix, 0));
  return CCG_STATUS_OK;
}

static const ccg__attr_spec reduce_attrs[] = {
    MESH_AXES,
    GROUP_SIZE,
    REQ("root", INT),
    REQ("reduce_op", STRING),
};

static ccg_status infer_reduce(ccg__infer *ix) {
  group gr;
  CCG_CHECK(read_group(ix, &gr));
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  CCG_CHECK(check_reduce_op(ix));
  CCG_CHECK(check_root(ix, &gr));
  set_output(ix, ccg__in_shape(ix, 0));
  return CCG_STATUS_OK;
}

/* ---- gather, scatter, slice --------------------------------------------- */

static const ccg__attr_spec all_gather_attrs[] = {
    MESH_AXES,
    GROUP_SIZE,
    REQ("axis", INT),
    OPT("split_sizes", INTS),
};

static ccg_status infer_all_gather(ccg__infer *ix) {
  group gr;
  int axis;
  splits s;
  CCG_CHECK(read_group(ix, &gr));
  CCG_CHECK(read_axis(ix, "axis", &axis));
  CCG_CHECK(read_splits(ix, &gr, "split_sizes", &s));
  ccg_shape out = *ccg__in_shape(ix, 0);
  if (s.v) {
    CCG_CHECK(check_shard(ix, &gr, &s, axis));
    out.dims[axis] = ccg_dim_num(s.sum);
  } else {
    CCG_CHECK(mul_dim(ix, &gr, axis, &out.dims[axis]));
  }
  set_output(ix, &out);
  return CCG_STATUS_OK;
}

/* ReduceScatter and ShardSlice keep this rank's chunk along `axis`. */
static ccg_status infer_scatter(ccg__infer *ix, const group *gr) {
  int axis;
  splits s;
  CCG_CHECK(read_axis(ix, "axis", &axis));
  CCG_CHECK(read_splits(ix, gr, "split_sizes", &s));
  ccg_shape out = *ccg__in_shape(ix, 0);
  if (s.v) {
    CCG_CHECK(check_sum(ix, &s, axis));
    CCG_CHECK(per_rank_dim(ix, gr, &s, &out.dims[axis]));
  } else {
    CCG_CHECK(div_dim(ix, gr, axis, &out.dims[axis]));
  }
  set_output(ix, &out);
  return CCG_STATUS_OK;
}

static const ccg__attr_spec reduce_scatter_attrs[] = {
    MESH_AXES,
    GROUP_SIZE,
    REQ("axis", INT),
    REQ("reduce_op", STRING),
    OPT("split_sizes", INTS),
};

static ccg_status infer_reduce_scatter(ccg__infer *ix) {
  group gr;
  CCG_CHECK(read_group(ix, &gr));
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  CCG_CHECK(check_reduce_op(ix));
  return infer_scatter(ix, &gr);
}

static const ccg__attr_spec shard_slice_attrs[] = {
    MESH_AXES,
    GROUP_SIZE,
    REQ("axis", INT),
    OPT("split_sizes", INTS),
};

static ccg_status infer_shard_slice(ccg__infer *ix) {
  group gr;
  CCG_CHECK(read_group(ix, &gr));
  return infer_scatter(ix, &gr);
}

/* ---- AllToAll ----------------------------------------------------------- */

static const ccg__attr_spec all_to_all_attrs[] = {
    MESH_AXES,
    GROUP_SIZE,
    REQ("split_axis", INT),
    REQ("concat_axis", INT),
    OPT("in_splits", INTS),
    OPT("out_splits", INTS),
};

/* One axis: chunks leave and arrive along it. The dim becomes the sum of
 * what arrives; an even side (no list) needs the dim to divide by W. */
static ccg_status a2a_same_axis(ccg__infer *ix, const group *gr, int axis,
                                const splits *in, const splits *out,
                                ccg_shape *y) {
  if (!in->v || !out->v) {
    ccg_dim chunk = y->dims[axis];
    CCG_CHECK(div_dim(ix, gr, axis, &chunk));
  }
  if (out->v)
    y->dims[axis] = ccg_dim_num(out->sum);
  return CCG_STATUS_OK;
}

/* Two axes: a scatter along split_axis and a gather along concat_axis, so
 * the swapped op (the backward) gives the input shape back. */
static ccg_status a2a_two_axes(ccg__infer *ix, const group *gr, int sa, int ca,
                               const splits *in, const splits *out,
                               ccg_shape *y) {
  if (in->v)
    CCG_CHECK(per_rank_dim(ix, gr, in, &y->dims[sa]));
  else
    CCG_CHECK(div_dim(ix, gr, sa, &y->dims[sa]));
  if (!out->v)
    return mul_dim(ix, gr, ca, &y->dims[ca]);
  CCG_CHECK(check_shard(ix, gr, out, ca));
  y->dims[ca] = ccg_dim_num(out->sum);
  return CCG_STATUS_OK;
}

static ccg_status infer_all_to_all(ccg__infer *ix) {
  group gr;
  int sa, ca;
  splits in, out;
  CCG_CHECK(read_group(ix, &gr));
  CCG_CHECK(read_axis(ix, "split_axis", &sa));
  CCG_CHECK(read_axis(ix, "concat_axis", &ca));
  CCG_CHECK(read_splits(ix, &gr, "in_splits", &in));
  CCG_CHECK(read_splits(ix, &gr, "out_splits", &out));
  if (in.v)
    CCG_CHECK(check_sum(ix, &in, sa));
  ccg_shape y = *ccg__in_shape(ix, 0);
  if (sa == ca)
    CCG_CHECK(a2a_same_axis(ix, &gr, sa, &in, &out, &y));
  else
    CCG_CHECK(a2a_two_axes(ix, &gr, sa, ca, &in, &out, &y));
  set_output(ix, &y);
  return CCG_STATUS_OK;
}

/* ---- point-to-point ----------------------------------------------------- */

static const ccg__attr_spec send_attrs[] = {
    REQ("mesh_axis", STRING),
    OPT("peer_offset", INT),
    OPT("peer", INT),
    REQ("tag", INT),
};

static ccg_status infer_send(ccg__infer *ix) { return check_p2p(ix); }

static const ccg__attr_spec recv_attrs[] = {
    REQ("mesh_axis", STRING), OPT("peer_offset", INT), OPT("peer", INT),
    REQ("tag", INT),          REQ("dtype", STRING),    REQ("shape", INTS),
};

static ccg_status infer_recv(ccg__infer *ix) {
  CCG_CHECK(check_p2p(ix));
  ccg_dtype dt;
  CCG_CHECK(ccg__attr_dtype(ix, "dtype", &dt));
  const int64_t *dims;
  size_t n = ccg__attr_ints(ix, "shape", &dims);
  if (n > CCG_MAX_RANK)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "shape has %zu dims; at most %d are allowed", n,
                     CCG_MAX_RANK);
  for (size_t i = 0; i < n; i++)
    if (dims[i] < 0)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "shape dim %zu is %lld; Recv needs static dims >= 0", i,
                       (long long)dims[i]);
  ix->out_dtype[0] = dt;
  ix->out_shape[0] = ccg_shape_make((int)n, dims);
  return CCG_STATUS_OK;
}

static const ccg__attr_spec permute_attrs[] = {
    REQ("mesh_axis", STRING),
    REQ("shift", INT),
    REQ("rotate", INT),
};

static ccg_status infer_permute(ccg__infer *ix) {
  int64_t size;
  const char *axis;
  CCG_CHECK(read_p2p_axis(ix, &size, &axis));
  CCG_CHECK(check_offset(ix, "shift", axis, size));
  bool rotate;
  CCG_CHECK(ccg__attr_flag(ix, "rotate", &rotate));
  set_output(ix, ccg__in_shape(ix, 0));
  return CCG_STATUS_OK;
}

/* ---- gradients: the replicated-loss convention ------------------------- */
/* A collective without a mapping tag differentiates as Megatron and DTensor
 * do when the loss is replicated over the group: AllReduce(sum) -> the
 * identity, AllGather -> ShardSlice, ReduceScatter -> AllGather, AllToAll ->
 * AllToAll with the axes and split lists swapped, ShardSlice -> AllGather,
 * Broadcast -> kept at the root, Reduce -> Broadcast, Send <-> Recv with the
 * same peer and tag, CollectivePermute -> the inverse shift. */

/* "dp,tp" from the node's mesh_axes. */
static void axes_text(ccg__grad *gx, char *buf, size_t size) {
  const ccg_attr *a = ccg_node_attr(gx->g, gx->node, "mesh_axes");
  buf[0] = '\0';
  for (size_t i = 0; a && i < a->n; i++)
    append(buf, size, i ? ',' : 0, a->strings[i]);
}

/* sum passes the gradient through; avg scales it by 1/W. */
static ccg_status reduce_factor(ccg__grad *gx, double *k) {
  const char *op = ccg__grad_attr_s(gx, "reduce_op");
  *k = 1.0;
  if (strcmp(op, "sum") == 0)
    return CCG_STATUS_OK;
  if (strcmp(op, "avg") == 0) {
    *k = 1.0 / (double)ccg__grad_attr_i(gx, "group_size");
    return CCG_STATUS_OK;
  }
  return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                        "reduce_op '%s' has no gradient (sum and avg do)", op);
}

static ccg_status scaled(ccg__grad *gx, ccg_value_id v, double k,
                         ccg_value_id *out) {
  if (k == 1.0) {
    *out = v;
    return CCG_STATUS_OK;
  }
  return ccg__grad_scale(gx->g, v, k, out);
}

static const int64_t *splits_of(ccg__grad *gx, const char *name) {
  const int64_t *v;
  ccg__grad_attr_ints(gx, name, &v);
  return ccg_node_attr(gx->g, gx->node, name) ? v : NULL;
}

static ccg_status grad_all_reduce(ccg__grad *gx) {
  double k;
  CCG_CHECK(reduce_factor(gx, &k));
  if (k == 1.0)
    return ccg_identity(gx->g, gx->gout[0], &gx->gin[0]);
  return scaled(gx, gx->gout[0], k, &gx->gin[0]);
}

static ccg_status grad_all_gather(ccg__grad *gx) {
  char ax[64];
  axes_text(gx, ax, sizeof ax);
  return ccg_shard_slice(gx->g, gx->gout[0], ax, ccg__grad_attr_i(gx, "axis"),
                         splits_of(gx, "split_sizes"), &gx->gin[0]);
}

static ccg_status grad_reduce_scatter(ccg__grad *gx) {
  char ax[64];
  double k;
  axes_text(gx, ax, sizeof ax);
  CCG_CHECK(reduce_factor(gx, &k));
  ccg_value_id v;
  CCG_CHECK(ccg_all_gather(gx->g, gx->gout[0], ax, ccg__grad_attr_i(gx, "axis"),
                           splits_of(gx, "split_sizes"), &v));
  return scaled(gx, v, k, &gx->gin[0]);
}

static ccg_status grad_shard_slice(ccg__grad *gx) {
  char ax[64];
  axes_text(gx, ax, sizeof ax);
  return ccg_all_gather(gx->g, gx->gout[0], ax, ccg__grad_attr_i(gx, "axis"),
                        splits_of(gx, "split_sizes"), &gx->gin[0]);
}

static ccg_status grad_all_to_all(ccg__grad *gx) {
  char ax[64];
  axes_text(gx, ax, sizeof ax);
  return ccg_all_to_all(
      gx->g, gx->gout[0], ax, ccg__grad_attr_i(gx, "concat_axis"),
      ccg__grad_attr_i(gx, "split_axis"), splits_of(gx, "out_splits"),
      splits_of(gx, "in_splits"), &gx->gin[0]);
}

/* The gradient stays at the root: dy times this rank's entry of a one-hot
 * [W] constant (a ShardSlice hands each rank its entry). */
static ccg_status grad_broadcast(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  char ax[64];
  axes_text(gx, ax, sizeof ax);
  int64_t w = ccg__grad_attr_i(gx, "group_size");
  int64_t root = ccg__grad_attr_i(gx, "root");
  float *hot = ccg__arena_calloc(&g->arena, (size_t)w, sizeof *hot);
  if (!hot)
    return ccg__grad_fail(gx, CCG_STATUS_OOM, "out of memory");
  hot[root] = 1.0f;
  ccg_tensor t = {CCG_DTYPE_F32, 1, {w}, hot};
  ccg_value_id m;
  CCG_CHECK(ccg_constant(g, &t, &m));
  CCG_CHECK(ccg_shard_slice(g, m, ax, 0, NULL, &m));
  ccg_dtype dt = ccg_value_dtype(g, gx->gout[0]);
  if (dt != CCG_DTYPE_F32)
    CCG_CHECK(ccg_cast(g, m, dt, &m));
  return ccg_mul(g, gx->gout[0], m, &gx->gin[0]);
}

static ccg_status grad_reduce(ccg__grad *gx) {
  char ax[64];
  double k;
  axes_text(gx, ax, sizeof ax);
  CCG_CHECK(reduce_factor(gx, &k));
  ccg_value_id v;
  CCG_CHECK(
      ccg_broadcast(gx->g, gx->gout[0], ax, ccg__grad_attr_i(gx, "root"), &v));
  return scaled(gx, v, k, &gx->gin[0]);
}

/* A Send's input gets its gradient from the peer it was sent to. */
static ccg_status grad_send(ccg__grad *gx) {
  ccg_shape s = *ccg_value_shape(gx->g, gx->in[0]);
  if (!ccg_shape_is_static(&s))
    return ccg__grad_fail(gx, CCG_STATUS_SHAPE,
                          "the gradient of '%s' is received, which needs a "
                          "static shape",
                          ccg_value_name(gx->g, gx->in[0]));
  if (ccg_node_attr(gx->g, gx->node, "peer"))
    return ccg_recv_peer(gx->g, ccg__grad_attr_s(gx, "mesh_axis"),
                         ccg__grad_attr_i(gx, "peer"),
                         ccg__grad_attr_i(gx, "tag"),
                         ccg_value_dtype(gx->g, gx->in[0]), &s, &gx->gin[0]);
  return ccg_recv(gx->g, ccg__grad_attr_s(gx, "mesh_axis"),
                  ccg__grad_attr_i(gx, "peer_offset"),
                  ccg__grad_attr_i(gx, "tag"),
                  ccg_value_dtype(gx->g, gx->in[0]), &s, &gx->gin[0]);
}

/* A received value's gradient goes back to its sender. */
static ccg_status grad_recv(ccg__grad *gx) {
  ccg_node_id n;
  if (ccg_node_attr(gx->g, gx->node, "peer"))
    return ccg_send_peer(gx->g, gx->gout[0], ccg__grad_attr_s(gx, "mesh_axis"),
                         ccg__grad_attr_i(gx, "peer"),
                         ccg__grad_attr_i(gx, "tag"), &n);
  return ccg_send(gx->g, gx->gout[0], ccg__grad_attr_s(gx, "mesh_axis"),
                  ccg__grad_attr_i(gx, "peer_offset"),
                  ccg__grad_attr_i(gx, "tag"), &n);
}

static ccg_status grad_permute(ccg__grad *gx) {
  return ccg_collective_permute(
      gx->g, gx->gout[0], ccg__grad_attr_s(gx, "mesh_axis"),
      -ccg__grad_attr_i(gx, "shift"), ccg__grad_attr_i(gx, "rotate") != 0,
      &gx->gin[0]);
}

/* Reducing collectives take numbers; moving ones any dtype. */
#define COLLECTIVE(attrs, fn, gr, types)                                       \
  { CCG__ATTRS(attrs), CCG__OP_COLLECTIVE, fn, gr, .dtypes = (types) }

const ccg__op_def ccg__opdef_ALL_REDUCE = COLLECTIVE(
    all_reduce_attrs, infer_all_reduce, grad_all_reduce, CCG__NUM_TYPES);
const ccg__op_def ccg__opdef_ALL_GATHER = COLLECTIVE(
    all_gather_attrs, infer_all_gather, grad_all_gather, CCG__ALL_TYPES);
const ccg__op_def ccg__opdef_REDUCE_SCATTER =
    COLLECTIVE(reduce_scatter_attrs, infer_reduce_scatter, grad_reduce_scatter,
               CCG__NUM_TYPES);
const ccg__op_def ccg__opdef_ALL_TO_ALL = COLLECTIVE(
    all_to_all_attrs, infer_all_to_all, grad_all_to_all, CCG__ALL_TYPES);
const ccg__op_def ccg__opdef_SHARD_SLICE = COLLECTIVE(
    shard_slice_attrs, infer_shard_slice, grad_shard_slice, CCG__ALL_TYPES);
const ccg__op_def ccg__opdef_BROADCAST = COLLECTIVE(
    broadcast_attrs, infer_broadcast, grad_broadcast, CCG__ALL_TYPES);
const ccg__op_def ccg__opdef_REDUCE =
    COLLECTIVE(reduce_attrs, infer_reduce, grad_reduce, CCG__NUM_TYPES);
const ccg__op_def ccg__opdef_SEND =
    COLLECTIVE(send_attrs, infer_send, grad_send, CCG__ALL_TYPES);
const ccg__op_def ccg__opdef_RECV =
    COLLECTIVE(recv_attrs, infer_recv, grad_recv, CCG__ALL_TYPES);
const ccg__op_def ccg__opdef_COLLECTIVE_PERMUTE =
    COLLECTIVE(permute_attrs, infer_permute, grad_permute, CCG__ALL_TYPES);
