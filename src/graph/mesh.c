/* Device meshes (named axes, row-major ranks, groups over sets of axes) and
 * the per-axis placements of values on them. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"

int64_t ccg_mesh_world_size(const ccg_mesh *m) {
  int64_t n = 1;
  for (int i = 0; i < m->ndims; i++)
    n *= m->sizes[i];
  return n;
}

int ccg_mesh_axis(const ccg_mesh *m, const char *name) {
  for (int i = 0; i < m->ndims; i++)
    if (strcmp(m->names[i], name) == 0)
      return i;
  return -1;
}

static bool valid_axis_name(const char *s, size_t n) {
  if (n == 0 || n >= CCG_MESH_NAME_MAX ||
      !(isalpha((unsigned char)s[0]) || s[0] == '_'))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
      return false;
  return true;
}

ccg_status ccg_mesh_parse(const char *spec, ccg_mesh *out) {
  ccg_mesh m;
  memset(&m, 0, sizeof m);
  if (!spec || !*spec)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "empty mesh (expected e.g. tp=4 or dp=2,tp=2)");
  const char *p = spec;
  int64_t world = 1;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *eq = memchr(p, '=', len);
    if (!eq)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "mesh '%s': '%.*s' is not NAME=SIZE", spec, (int)len,
                        p);
    size_t nlen = (size_t)(eq - p);
    if (!valid_axis_name(p, nlen))
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "mesh '%s': axis name '%.*s' must match "
                        "[A-Za-z_][A-Za-z0-9_]* and have at most %d characters",
                        spec, (int)nlen, p, CCG_MESH_NAME_MAX - 1);
    if (m.ndims == CCG_MAX_MESH_AXES)
      return ccg__error(NULL, CCG_STATUS_PARSE, "mesh '%s': more than %d axes",
                        spec, CCG_MAX_MESH_AXES);
    char name[CCG_MESH_NAME_MAX];
    memcpy(name, p, nlen);
    name[nlen] = '\0';
    if (ccg_mesh_axis(&m, name) >= 0)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "mesh '%s': axis '%s' appears twice", spec, name);
    const char *num = eq + 1;
    size_t numlen = len - nlen - 1;
    int64_t size = 0;
    bool ok = numlen > 0 && numlen < 12;
    for (size_t i = 0; ok && i < numlen; i++) {
      ok = isdigit((unsigned char)num[i]) != 0;
      size = size * 10 + (num[i] - '0');
    }
    if (!ok || size < 1)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "mesh '%s': size of axis '%s' must be a positive "
                        "integer, got '%.*s'",
                        spec, name, (int)numlen, num);
    world *= size;
    if (world > INT32_MAX)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "mesh '%s': more than %d ranks in all", spec,
                        INT32_MAX);
    memcpy(m.names[m.ndims], name, nlen + 1);
    m.sizes[m.ndims] = size;
    m.ndims++;
    if (!end)
      break;
    p = end + 1;
    if (!*p)
      return ccg__error(NULL, CCG_STATUS_PARSE, "mesh '%s': trailing comma",
                        spec);
  }
  *out = m;
  return CCG_STATUS_OK;
}

int ccg_mesh_format(const ccg_mesh *m, char *buf, size_t size) {
  size_t used = 0;
  int total = 0;
  for (int i = 0; i < m->ndims; i++) {
    int k = snprintf(used < size ? buf + used : NULL,
                     used < size ? size - used : 0, "%s%s=%lld", i ? "," : "",
                     m->names[i], (long long)m->sizes[i]);
    if (k < 0)
      return -1;
    used += (size_t)k;
    total += k;
  }
  if (m->ndims == 0 && size)
    buf[0] = '\0';
  return total;
}

ccg_status ccg_mesh_axes_mask(const ccg_mesh *m, const char *axes,
                              unsigned *mask) {
  unsigned out = 0;
  if (!axes || !*axes)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "no mesh axes given for the group");
  const char *p = axes;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char name[CCG_MESH_NAME_MAX];
    int axis = -1;
    if (len > 0 && len < sizeof name) {
      memcpy(name, p, len);
      name[len] = '\0';
      axis = ccg_mesh_axis(m, name);
    }
    if (axis < 0) {
      char mbuf[128];
      ccg_mesh_format(m, mbuf, sizeof mbuf);
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "mesh axis '%.*s' is not in the mesh [%s]", (int)len, p,
                        mbuf);
    }
    if (out & (1u << axis))
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "mesh axis '%s' named twice in '%s'", name, axes);
    out |= 1u << axis;
    if (!end)
      break;
    p = end + 1;
  }
  *mask = out;
  return CCG_STATUS_OK;
}

int64_t ccg_mesh_group_size(const ccg_mesh *m, unsigned mask) {
  int64_t n = 1;
  for (int i = 0; i < m->ndims; i++)
    if (mask & (1u << i))
      n *= m->sizes[i];
  return n;
}

ccg_status ccg_mesh_coords(const ccg_mesh *m, int64_t rank,
                           int64_t coords[CCG_MAX_MESH_AXES]) {
  if (rank < 0 || rank >= ccg_mesh_world_size(m))
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "rank %lld is outside the mesh of %lld ranks",
                      (long long)rank, (long long)ccg_mesh_world_size(m));
  for (int i = m->ndims - 1; i >= 0; i--) {
    coords[i] = rank % m->sizes[i];
    rank /= m->sizes[i];
  }
  return CCG_STATUS_OK;
}

int64_t ccg_mesh_rank_in_group(const ccg_mesh *m, int64_t rank, unsigned mask) {
  int64_t c[CCG_MAX_MESH_AXES];
  if (rank < 0 || rank >= ccg_mesh_world_size(m))
    return -1;
  ccg_mesh_coords(m, rank, c);
  int64_t r = 0;
  for (int i = 0; i < m->ndims; i++)
    if (mask & (1u << i))
      r = r * m->sizes[i] + c[i];
  return r;
}

ccg_status ccg_mesh_group_ranks(const ccg_mesh *m, int64_t rank, unsigned mask,
                                int64_t *ranks) {
  int64_t c[CCG_MAX_MESH_AXES];
  CCG_CHECK(ccg_mesh_coords(m, rank, c));
  int64_t n = ccg_mesh_group_size(m, mask);
  for (int64_t k = 0; k < n; k++) {
    /* Group position k -> coordinates along the masked axes, row-major. */
    int64_t rem = k;
    for (int i = m->ndims - 1; i >= 0; i--) {
      if (mask & (1u << i)) {
        c[i] = rem % m->sizes[i];
        rem /= m->sizes[i];
      }
    }
    int64_t r = 0;
    for (int i = 0; i < m->ndims; i++)
      r = r * m->sizes[i] + c[i];
    ranks[k] = r;
  }
  return CCG_STATUS_OK;
}

/* ---- placements ---------------------------------------------------------- */

ccg_status ccg_value_set_placements(ccg_graph *g, ccg_value_id v,
                                    const ccg_placement *p, int n) {
  ccg_placement norm[CCG_MAX_MESH_AXES];
  CCG_CHECK(ccg__check_placements(g, v, p, n, norm));
  ccg__value *x = &g->values[v];
  /* out of line: most values have none, and a value record is read by
   * every pass */
  if (x->n_placements < n) {
    ccg_placement *p2 = ccg__arena_alloc(&g->arena, (size_t)n * sizeof *p2, 8);
    if (!p2)
      return ccg__graph_oom(g, "setting placements");
    x->placements = p2;
  }
  memcpy(x->placements, norm, (size_t)n * sizeof *norm);
  x->n_placements = n;
  return CCG_STATUS_OK;
}

ccg_status ccg__check_placements(ccg_graph *g, ccg_value_id v,
                                 const ccg_placement *p, int n,
                                 ccg_placement *norm) {
  if (!ccg__value_ok(g, v))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "placements: value id %u does not exist", v);
  const ccg__value *x = &g->values[v];
  if (!g->has_mesh)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "value '%s': placements need a mesh on graph '%s'",
                      x->name, g->name);
  if (n != g->mesh.ndims)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "value '%s': %d placements given, the mesh has %d axes",
                      x->name, n, g->mesh.ndims);
  for (int i = 0; i < n; i++) {
    norm[i] = p[i];
    switch (p[i].kind) {
    case CCG_PLACEMENT_REPLICATE:
      norm[i].dim = 0;
      norm[i].reduce = CCG_REDUCE_SUM;
      break;
    case CCG_PLACEMENT_SHARD: {
      int d = p[i].dim < 0 ? p[i].dim + x->shape->rank : p[i].dim;
      if (d < 0 || d >= x->shape->rank)
        return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                          "value '%s': Shard(%d) on mesh axis '%s' is outside "
                          "its rank %d",
                          x->name, p[i].dim, g->mesh.names[i], x->shape->rank);
      norm[i].dim = d;
      norm[i].reduce = CCG_REDUCE_SUM;
      break;
    }
    case CCG_PLACEMENT_PARTIAL:
      if ((unsigned)p[i].reduce >= CCG_REDUCE_OP_COUNT)
        return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                          "value '%s': Partial on mesh axis '%s' has no valid "
                          "reduce op",
                          x->name, g->mesh.names[i]);
      norm[i].dim = 0;
      break;
    default:
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "value '%s': placement kind %d on mesh axis '%s' is "
                        "not Replicate, Shard or Partial",
                        x->name, (int)p[i].kind, g->mesh.names[i]);
    }
  }
  return CCG_STATUS_OK;
}

int ccg_value_placements(const ccg_graph *g, ccg_value_id v, ccg_placement *p) {
  if (!ccg__value_ok(g, v))
    return 0;
  const ccg__value *x = &g->values[v];
  if (x->n_placements)
    memcpy(p, x->placements, (size_t)x->n_placements * sizeof *p);
  return x->n_placements;
}
