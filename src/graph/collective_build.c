/* The collective builders (ccg_all_reduce, ...): mesh axes split into the
 * attributes every collective writes, then the node through ccg__build;
 * the shape rules and checks are in collective.c. */
#include <stdio.h>
#include <string.h>

#include "graph/internal.h"

/* Axis names a builder accepts in one list ("dp,tp"). */
#define MAX_AXIS_NAMES 8

/* ---- builders ----------------------------------------------------------- */

/* mesh_axes and group_size from "dp,tp". Names are only split here: the
 * shape rule reports an unknown or repeated axis naming node, op and mesh,
 * so group_size counts the known axes once each. */
typedef struct group_attrs {
  char buf[128];
  const char *names[MAX_AXIS_NAMES];
  size_t n;
  int64_t size;
} group_attrs;

static ccg_status split_axes(ccg_graph *g, ccg_op op, const char *axes,
                             group_attrs *ga) {
  memset(ga, 0, sizeof *ga);
  size_t len = axes ? strlen(axes) : 0;
  if (len >= sizeof ga->buf)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: mesh axes '%.40s...' are too long (%zu characters)",
                      ccg_op_name(op), axes, len);
  if (len)
    memcpy(ga->buf, axes, len + 1);
  for (char *p = len ? ga->buf : NULL; p;) {
    if (ga->n == MAX_AXIS_NAMES)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "%s: '%s' names more than %d mesh axes",
                        ccg_op_name(op), axes, MAX_AXIS_NAMES);
    ga->names[ga->n++] = p;
    char *comma = strchr(p, ',');
    if (comma)
      *comma++ = '\0';
    p = comma;
  }
  const ccg_mesh *m = ccg_graph_mesh(g);
  unsigned mask = 0;
  for (size_t i = 0; m && i < ga->n; i++) {
    int a = ccg_mesh_axis(m, ga->names[i]);
    if (a >= 0)
      mask |= 1u << a;
  }
  ga->size = m ? ccg_mesh_group_size(m, mask) : 0;
  return CCG_STATUS_OK;
}

/* The lists hold one entry per rank of the group (NULL = even). */
static size_t list_len(const group_attrs *ga, const int64_t *v) {
  return v && ga->size > 0 ? (size_t)ga->size : 0;
}

#define MAX_EXTRA 4

static ccg_status build_grouped(ccg_graph *g, ccg_op op, ccg_value_id x,
                                const group_attrs *ga, const ccg_attr *extra,
                                size_t n_extra, ccg_value_id *out) {
  ccg_attr attrs[2 + MAX_EXTRA];
  attrs[0] = CCG_ATTR_SS("mesh_axes", ga->names, ga->n);
  attrs[1] = CCG_ATTR_I("group_size", ga->size);
  memcpy(attrs + 2, extra, n_extra * sizeof *extra);
  return ccg__build(g, op, &x, 1, attrs, 2 + n_extra, 1, out, NULL);
}

ccg_status ccg_all_reduce(ccg_graph *g, ccg_value_id x, const char *axes,
                          ccg_reduce_op op, ccg_value_id *out) {
  group_attrs ga;
  CCG_CHECK(split_axes(g, CCG_OP_ALL_REDUCE, axes, &ga));
  ccg_attr a = CCG_ATTR_S("reduce_op", ccg_reduce_op_name(op));
  return build_grouped(g, CCG_OP_ALL_REDUCE, x, &ga, &a, 1, out);
}

ccg_status ccg_all_gather(ccg_graph *g, ccg_value_id x, const char *axes,
                          int64_t axis, const int64_t *split_sizes,
                          ccg_value_id *out) {
  group_attrs ga;
  CCG_CHECK(split_axes(g, CCG_OP_ALL_GATHER, axes, &ga));
  ccg_attr a[2] = {
      CCG_ATTR_I("axis", axis),
      CCG_ATTR_IS("split_sizes", split_sizes, list_len(&ga, split_sizes))};
  return build_grouped(g, CCG_OP_ALL_GATHER, x, &ga, a, split_sizes ? 2 : 1,
                       out);
}

ccg_status ccg_reduce_scatter(ccg_graph *g, ccg_value_id x, const char *axes,
                              int64_t axis, ccg_reduce_op op,
                              const int64_t *split_sizes, ccg_value_id *out) {
  group_attrs ga;
  CCG_CHECK(split_axes(g, CCG_OP_REDUCE_SCATTER, axes, &ga));
  ccg_attr a[3] = {
      CCG_ATTR_I("axis", axis), CCG_ATTR_S("reduce_op", ccg_reduce_op_name(op)),
      CCG_ATTR_IS("split_sizes", split_sizes, list_len(&ga, split_sizes))};
  return build_grouped(g, CCG_OP_REDUCE_SCATTER, x, &ga, a, split_sizes ? 3 : 2,
                       out);
}

ccg_status ccg_all_to_all(ccg_graph *g, ccg_value_id x, const char *axes,
                          int64_t split_axis, int64_t concat_axis,
                          const int64_t *in_splits, const int64_t *out_splits,
                          ccg_value_id *out) {
  group_attrs ga;
  CCG_CHECK(split_axes(g, CCG_OP_ALL_TO_ALL, axes, &ga));
  ccg_attr a[4] = {CCG_ATTR_I("split_axis", split_axis),
                   CCG_ATTR_I("concat_axis", concat_axis)};
  size_t n = 2;
  if (in_splits)
    a[n++] = CCG_ATTR_IS("in_splits", in_splits, list_len(&ga, in_splits));
  if (out_splits)
    a[n++] = CCG_ATTR_IS("out_splits", out_splits, list_len(&ga, out_splits));
  return build_grouped(g, CCG_OP_ALL_TO_ALL, x, &ga, a, n, out);
}

ccg_status ccg_shard_slice(ccg_graph *g, ccg_value_id x, const char *axes,
                           int64_t axis, const int64_t *split_sizes,
                           ccg_value_id *out) {
  group_attrs ga;
  CCG_CHECK(split_axes(g, CCG_OP_SHARD_SLICE, axes, &ga));
  ccg_attr a[2] = {
      CCG_ATTR_I("axis", axis),
      CCG_ATTR_IS("split_sizes", split_sizes, list_len(&ga, split_sizes))};
  return build_grouped(g, CCG_OP_SHARD_SLICE, x, &ga, a, split_sizes ? 2 : 1,
                       out);
}

ccg_status ccg_broadcast(ccg_graph *g, ccg_value_id x, const char *axes,
                         int64_t root, ccg_value_id *out) {
  group_attrs ga;
  CCG_CHECK(split_axes(g, CCG_OP_BROADCAST, axes, &ga));
  ccg_attr a = CCG_ATTR_I("root", root);
  return build_grouped(g, CCG_OP_BROADCAST, x, &ga, &a, 1, out);
}

ccg_status ccg_reduce(ccg_graph *g, ccg_value_id x, const char *axes,
                      int64_t root, ccg_reduce_op op, ccg_value_id *out) {
  group_attrs ga;
  CCG_CHECK(split_axes(g, CCG_OP_REDUCE, axes, &ga));
  ccg_attr a[2] = {CCG_ATTR_I("root", root),
                   CCG_ATTR_S("reduce_op", ccg_reduce_op_name(op))};
  return build_grouped(g, CCG_OP_REDUCE, x, &ga, a, 2, out);
}

ccg_status ccg_send(ccg_graph *g, ccg_value_id x, const char *axis,
                    int64_t peer_offset, int64_t tag, ccg_node_id *out_node) {
  ccg_attr a[3] = {CCG_ATTR_S("mesh_axis", axis ? axis : ""),
                   CCG_ATTR_I("peer_offset", peer_offset),
                   CCG_ATTR_I("tag", tag)};
  return ccg__build(g, CCG_OP_SEND, &x, 1, a, 3, 0, NULL, out_node);
}

ccg_status ccg_send_peer(ccg_graph *g, ccg_value_id x, const char *axis,
                         int64_t peer, int64_t tag, ccg_node_id *out_node) {
  ccg_attr a[3] = {CCG_ATTR_S("mesh_axis", axis ? axis : ""),
                   CCG_ATTR_I("peer", peer), CCG_ATTR_I("tag", tag)};
  return ccg__build(g, CCG_OP_SEND, &x, 1, a, 3, 0, NULL, out_node);
}

/* The receiver allocates before any data arrives, so the shape is static. */
static ccg_status static_dims(ccg_graph *g, const ccg_shape *s, int64_t *dims) {
  if (!s || s->rank < 0 || s->rank > CCG_MAX_RANK)
    return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                      "Recv: the shape is NULL or its rank is outside 0..%d",
                      CCG_MAX_RANK);
  for (int i = 0; i < s->rank; i++) {
    if (s->dims[i].size < 0) {
      char d[64];
      return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                        "Recv: dim %d is %s; Recv needs a static shape "
                        "(dims >= 0)",
                        i, ccg__dim_str(s->dims[i], d, sizeof d));
    }
    dims[i] = s->dims[i].size;
  }
  return CCG_STATUS_OK;
}

/* Recv with its peer given as `peer_attr` ("peer_offset" or "peer"). */
static ccg_status recv_of(ccg_graph *g, const char *axis, const char *peer_attr,
                          int64_t peer, int64_t tag, ccg_dtype dtype,
                          const ccg_shape *shape, ccg_value_id *out) {
  int64_t dims[CCG_MAX_RANK];
  CCG_CHECK(static_dims(g, shape, dims));
  ccg_attr a[5] = {CCG_ATTR_S("mesh_axis", axis ? axis : ""),
                   CCG_ATTR_I(peer_attr, peer), CCG_ATTR_I("tag", tag),
                   CCG_ATTR_S("dtype", ccg_dtype_name(dtype)),
                   CCG_ATTR_IS("shape", dims, (size_t)shape->rank)};
  return ccg__build(g, CCG_OP_RECV, NULL, 0, a, 5, 1, out, NULL);
}

ccg_status ccg_recv(ccg_graph *g, const char *axis, int64_t peer_offset,
                    int64_t tag, ccg_dtype dtype, const ccg_shape *shape,
                    ccg_value_id *out) {
  return recv_of(g, axis, "peer_offset", peer_offset, tag, dtype, shape, out);
}

ccg_status ccg_recv_peer(ccg_graph *g, const char *axis, int64_t peer,
                         int64_t tag, ccg_dtype dtype, const ccg_shape *shape,
                         ccg_value_id *out) {
  return recv_of(g, axis, "peer", peer, tag, dtype, shape, out);
}

ccg_status ccg_collective_permute(ccg_graph *g, ccg_value_id x,
                                  const char *axis, int64_t shift, bool rotate,
                                  ccg_value_id *out) {
  ccg_attr a[3] = {CCG_ATTR_S("mesh_axis", axis ? axis : ""),
                   CCG_ATTR_I("shift", shift),
                   CCG_ATTR_I("rotate", rotate ? 1 : 0)};
  return ccg__build(g, CCG_OP_COLLECTIVE_PERMUTE, &x, 1, a, 3, 1, out, NULL);
}
