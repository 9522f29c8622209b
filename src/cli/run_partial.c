/* ccgraph run --check for outputs that are Partial over a mesh axis: a
 * data-parallel rank's loss is the mean (or sum) over its batch chunk, so
 * what equals the reference is the mean (or sum) of the group's values. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Whether rank q is in rank r's group on the axes in `mask` (the same
 * coordinate on every other axis). */
static bool same_group(const ccg_mesh *m, int64_t r, int64_t q, unsigned mask) {
  int64_t a[CCG_MAX_MESH_AXES], b[CCG_MAX_MESH_AXES];
  if (ccg_mesh_coords(m, r, a) != CCG_STATUS_OK ||
      ccg_mesh_coords(m, q, b) != CCG_STATUS_OK)
    return false;
  for (int i = 0; i < m->ndims; i++)
    if (!(mask & (1u << i)) && a[i] != b[i])
      return false;
  return true;
}

static double elem(const ccg_tensor *t, size_t i) {
  return t->dtype == CCG_DTYPE_F32 ? ((const float *)t->data)[i]
                                   : ((const double *)t->data)[i];
}

static void set_elem(ccg_tensor *t, size_t i, double x) {
  if (t->dtype == CCG_DTYPE_F32)
    ((float *)t->data)[i] = (float)x;
  else
    ((double *)t->data)[i] = x;
}

int cli_partial_combine(ccg_graph *g, const char *name, int r,
                        const ccg_tensor *const *have, int world,
                        ccg_tensor *out, void **owned) {
  ccg_value_id v;
  ccg_placement pl[CCG_MAX_MESH_AXES];
  const ccg_mesh *m = ccg_graph_mesh(g);
  *owned = NULL;
  if (!m || ccg_graph_find_value(g, name, &v) != CCG_STATUS_OK) {
    ccg_clear_error(g);
    return 0;
  }
  int np = ccg_value_placements(g, v, pl);
  unsigned mask = 0;
  int n_avg = 0, n_sum = 0;
  for (int a = 0; a < np && a < m->ndims; a++)
    if (pl[a].kind == CCG_PLACEMENT_PARTIAL) {
      n_avg += pl[a].reduce == CCG_REDUCE_AVG;
      n_sum += pl[a].reduce == CCG_REDUCE_SUM;
      mask |= 1u << a;
    }
  bool avg = n_avg > 0;
  if (mask && (n_avg + n_sum != __builtin_popcount(mask) || (n_avg && n_sum)))
    return -1; /* max, min, prod, or sums and means mixed */
  const ccg_tensor *mine = have[r];
  if (!mask)
    return 0;
  if (!mine || (mine->dtype != CCG_DTYPE_F32 && mine->dtype != CCG_DTYPE_F64))
    return -1;
  size_t nbytes;
  if (ccg_tensor_nbytes(mine, &nbytes) != CCG_STATUS_OK)
    return -1;
  size_t n = nbytes / ccg_dtype_size(mine->dtype);
  double *acc = calloc(n + 1, sizeof *acc);
  void *data = malloc(nbytes + 1);
  int count = 0;
  if (!acc || !data) {
    free(acc);
    free(data);
    return -1;
  }
  for (int q = 0; q < world; q++) {
    if (!same_group(m, r, q, mask))
      continue;
    if (!have[q] || have[q]->dtype != mine->dtype ||
        have[q]->rank != mine->rank ||
        memcmp(have[q]->dims, mine->dims,
               (size_t)mine->rank * sizeof mine->dims[0]) != 0) {
      free(acc);
      free(data);
      return -1; /* a member another process ran, or another shape */
    }
    for (size_t i = 0; i < n; i++)
      acc[i] += elem(have[q], i);
    count++;
  }
  *out = *mine;
  out->data = data;
  for (size_t i = 0; i < n; i++)
    set_elem(out, i, avg ? acc[i] / count : acc[i]);
  free(acc);
  *owned = data;
  return 1;
}
