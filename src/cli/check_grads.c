/* run --check for the gradients of per-rank models: a rank's weights are
 * renamed and cut by the shard pass, so its "grad/<weight>" outputs are
 * matched with the reference's "grad/<parameter>" through the models'
 * provenance metadata (CCG_SHARD_PROVENANCE, docs/shard.md). The uses of
 * one parameter (tied or folded weights, a weight copied for two modules)
 * are summed where they all hold it, and that sum is compared with the
 * reference gradient's same elements. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/check_grads.h"

typedef struct use {
  const char *name; /* the rank's weight */
  bool transposed;
  int dim;    /* of the parameter; -1: whole */
  int dp_dim; /* ZeRO: the dim of the parameter the rank's part is cut
                 from again (-1: none), at [dp_start, dp_end) of the part */
  int64_t dp_start, dp_end;
  int64_t starts[64], ends[64];
  size_t n_ranges;
} use;

static int bad(const command *self, const char *what, int r, const char *msg,
               const char *name) {
  return cli_fail(self, EXIT_BAD_INPUT, "%s rank %d: metadata '%s': %s%s%s%s",
                  what, r, CCG_SHARD_PROVENANCE, msg, name ? " ('" : "",
                  name ? name : "", name ? "')" : "");
}

static const ccg_exec_tensor *find(const ccg_exec_tensor *t, size_t n,
                                   const char *name) {
  for (size_t i = 0; i < n; i++)
    if (t[i].name && strcmp(t[i].name, name) == 0)
      return &t[i];
  return NULL;
}

static bool is_float(const ccg_tensor *t) {
  return t->dtype == CCG_DTYPE_F32 || t->dtype == CCG_DTYPE_F64;
}

static double elem(const ccg_tensor *t, size_t i) {
  return t->dtype == CCG_DTYPE_F32 ? ((const float *)t->data)[i]
                                   : ((const double *)t->data)[i];
}

static size_t numel(const ccg_tensor *t) {
  size_t n = 1;
  for (int d = 0; d < t->rank; d++)
    n *= (size_t)t->dims[d];
  return n;
}

/* Reads one entry of the metadata; a message naming what is wrong, or
 * NULL. */
static const char *read_use(json_t *e, int r, use *u) {
  json_t *dim = json_object_get(e, "dim");
  u->name = json_string_value(json_object_get(e, "name"));
  u->transposed = json_is_true(json_object_get(e, "transposed"));
  if (!u->name || !json_is_string(json_object_get(e, "param")))
    return "an entry without a 'name' or 'param'";
  u->n_ranges = 0;
  u->dp_dim = -1;
  u->dp_start = u->dp_end = 0;
  json_t *dd = json_object_get(e, "dp_dim");
  if (dd) {
    json_t *pr = json_array_get(json_object_get(e, "dp_ranks"), (size_t)r);
    json_t *a = json_array_get(pr, 0), *b = json_array_get(pr, 1);
    if (!json_is_integer(dd) || json_integer_value(dd) < 0 ||
        json_integer_value(dd) >= CCG_MAX_RANK || !json_is_integer(a) ||
        !json_is_integer(b) || json_integer_value(a) < 0 ||
        json_integer_value(b) <= json_integer_value(a))
      return "an entry whose 'dp_dim' or 'dp_ranks' is not a dim and a "
             "[start, end) range for this rank";
    u->dp_dim = (int)json_integer_value(dd);
    u->dp_start = json_integer_value(a);
    u->dp_end = json_integer_value(b);
  }
  if (json_is_null(dim)) {
    u->dim = -1;
    return NULL;
  }
  if (!json_is_integer(dim) || json_integer_value(dim) < 0 ||
      json_integer_value(dim) >= CCG_MAX_RANK)
    return "an entry whose 'dim' is neither null nor a dim";
  u->dim = (int)json_integer_value(dim);
  json_t *ranges = json_array_get(json_object_get(e, "ranks"), (size_t)r);
  if (!json_is_array(ranges) || json_array_size(ranges) == 0 ||
      json_array_size(ranges) > 64)
    return "an entry without this rank's ranges";
  size_t i;
  json_t *pr;
  json_array_foreach(ranges, i, pr) {
    json_t *a = json_array_get(pr, 0), *b = json_array_get(pr, 1);
    if (!json_is_integer(a) || !json_is_integer(b) ||
        json_integer_value(a) < 0 ||
        json_integer_value(b) <= json_integer_value(a))
      return "an entry with a range that is not [start, end)";
    u->starts[i] = json_integer_value(a);
    u->ends[i] = json_integer_value(b);
  }
  u->n_ranges = json_array_size(ranges);
  return NULL;
}

/* Adds the rank's gradient g of use u into acc (the parameter's shape,
 * `ref`'s dims), counting each element it reaches in cnt. A message when
 * g's shape is not the part u describes. */
static const char *scatter(const use *u, const ccg_tensor *g,
                           const ccg_tensor *ref, double *acc, int *cnt) {
  int rank = ref->rank;
  if (!is_float(g) || g->rank != rank || (u->transposed && rank != 2) ||
      u->dim >= rank)
    return "its gradient is not a float tensor of the parameter's rank";
  int64_t want[CCG_MAX_RANK];
  for (int d = 0; d < rank; d++)
    want[d] = ref->dims[d];
  int64_t k = 0;
  for (size_t i = 0; u->dim >= 0 && i < u->n_ranges; i++) {
    if (u->ends[i] > ref->dims[u->dim])
      return "a range past the parameter's dim";
    k += u->ends[i] - u->starts[i];
  }
  if (u->dim >= 0)
    want[u->dim] = k;
  if (u->dp_dim >= rank || (u->dp_dim >= 0 && u->dp_end > want[u->dp_dim]))
    return "a dp range past the part's dim";
  if (u->dp_dim >= 0)
    want[u->dp_dim] = u->dp_end - u->dp_start;
  for (int d = 0; d < rank; d++) {
    int64_t have = g->dims[u->transposed ? rank - 1 - d : d];
    if (have != want[d])
      return "its gradient's shape is not the part the metadata names";
  }
  /* the part's index along u->dim -> the parameter's */
  int64_t *map = malloc((size_t)k * sizeof *map + 1);
  if (!map)
    return "out of memory";
  for (size_t i = 0, j = 0; u->dim >= 0 && i < u->n_ranges; i++)
    for (int64_t x = u->starts[i]; x < u->ends[i]; x++)
      map[j++] = x;
  size_t n = numel(g);
  int64_t c[CCG_MAX_RANK] = {0}; /* coordinates in g */
  for (size_t i = 0; i < n; i++) {
    size_t flat = 0;
    for (int d = 0; d < rank; d++) {
      int64_t x = c[u->transposed ? rank - 1 - d : d];
      if (d == u->dp_dim)
        x += u->dp_start;
      if (d == u->dim)
        x = map[x];
      flat = flat * (size_t)ref->dims[d] + (size_t)x;
    }
    acc[flat] += elem(g, i);
    cnt[flat]++;
    for (int d = rank - 1; d >= 0 && ++c[d] == g->dims[d]; d--)
      c[d] = 0;
  }
  free(map);
  return NULL;
}

/* Rank r's gradient of one parameter: the sum of its uses, compared with
 * the reference where every use reaches. */
static int check_param(const command *self, const char *what, int r,
                       json_t *weights, const char *param,
                       const ccg_exec_tensor *have, size_t n_have,
                       const ccg_tensor *ref, bool *handled,
                       const cli_tolerance *tol, double *worst, size_t *n_cmp) {
  size_t n = numel(ref), i, uses = 0;
  double *acc = calloc(n + 1, sizeof *acc);
  int *cnt = calloc(n + 1, sizeof *cnt);
  if (!acc || !cnt) {
    free(acc);
    free(cnt);
    return cli_fail(self, EXIT_RUNTIME, "out of memory");
  }
  int rc = EXIT_OK;
  json_t *e;
  json_array_foreach(weights, i, e) {
    const char *of = json_string_value(json_object_get(e, "param"));
    json_t *per = json_object_get(e, "params");
    if (per) /* checked by check_params */
      of = json_string_value(json_array_get(per, (size_t)r));
    if (!of) {
      rc = bad(self, what, r, "an entry without a 'param'", NULL);
      break;
    }
    if (strcmp(of, param) != 0)
      continue;
    use u;
    const char *msg = read_use(e, r, &u);
    if (msg) {
      rc = bad(self, what, r, msg, param);
      break;
    }
    char gname[600];
    snprintf(gname, sizeof gname, "grad/%s", u.name);
    const ccg_exec_tensor *g = find(have, n_have, gname);
    if (!g) {
      uses = 0; /* a use without its gradient: the sum is not whole */
      break;
    }
    handled[g - have] = true;
    msg = scatter(&u, &g->tensor, ref, acc, cnt);
    if (msg) {
      rc = bad(self, what, r, msg, gname);
      break;
    }
    uses++;
  }
  double m = 0, scale = 0;
  size_t reached = 0;
  for (size_t k = 0; rc == EXIT_OK && uses && k < n; k++) {
    if (cnt[k] != (int)uses)
      continue;
    double x = acc[k], y = elem(ref, k), d = x - y;
    d = d < 0 ? -d : d;
    /* a NaN on both sides agrees (as the outputs' comparison has it); on
     * one side it is the worst difference there is */
    if (d != d)
      d = x != x && y != y ? 0 : INFINITY;
    m = d > m ? d : m;
    y = y < 0 ? -y : y;
    y = y != y ? 0 : y;
    scale = y > scale ? y : scale;
    reached++;
  }
  m = cli_diff_measure(tol, m, scale);
  if (reached) {
    *worst = m > *worst || m != m ? m : *worst;
    (*n_cmp)++;
  }
  free(acc);
  free(cnt);
  return rc;
}

/* The entries' "params" lists (a weight holding another parameter on each
 * rank): one name per global rank, each the parameter of a reference
 * gradient. A message naming what is wrong, or NULL; *name the entry. */
static const char *check_params(json_t *doc, json_t *weights,
                                const ccg_exec_tensor *ref, size_t n_ref,
                                const char **name) {
  json_t *world = json_object_get(doc, "world");
  size_t i, k;
  json_t *e, *p;
  json_array_foreach(weights, i, e) {
    json_t *per = json_object_get(e, "params");
    *name = json_string_value(json_object_get(e, "name"));
    if (!per)
      continue;
    if (!json_is_array(per) || !json_is_integer(world) ||
        json_array_size(per) != (size_t)json_integer_value(world))
      return "an entry whose 'params' is not a list of one parameter per "
             "rank ('world' of them)";
    json_array_foreach(per, k, p) {
      const char *pn = json_string_value(p);
      char gname[600];
      snprintf(gname, sizeof gname, "grad/%s", pn ? pn : "");
      if (!pn || !find(ref, n_ref, gname)) {
        *name = pn ? pn : *name;
        return "an entry whose 'params' names a parameter the reference has "
               "no gradient of";
      }
    }
  }
  *name = NULL;
  return NULL;
}

double cli_diff_measure(const cli_tolerance *tol, double diff, double scale) {
  if (tol->rtol < 0)
    return diff;
  double room = tol->atol + tol->rtol * scale;
  return room > 0 ? diff / room : diff > 0 ? INFINITY : 0;
}

int cli_check_grads(const command *self, const char *what, ccg_graph *g, int r,
                    const ccg_exec_tensor *have, size_t n_have,
                    const ccg_exec_tensor *ref, size_t n_ref, bool *handled,
                    const cli_tolerance *tol, double *worst, size_t *n_cmp) {
  bool any_grad = false;
  for (size_t i = 0; i < n_have; i++)
    any_grad |= have[i].name && strncmp(have[i].name, "grad/", 5) == 0 &&
                !find(ref, n_ref, have[i].name);
  bool ref_grad = false;
  for (size_t i = 0; i < n_ref; i++)
    ref_grad |= strncmp(ref[i].name, "grad/", 5) == 0;
  const char *text = ccg_graph_meta(g, CCG_SHARD_PROVENANCE);
  if (!text) {
    if (any_grad && ref_grad)
      return cli_fail(self, EXIT_BAD_INPUT,
                      "%s rank %d: its gradients are not the reference's by "
                      "name and the model has no '%s' metadata saying which "
                      "parameter each weight is part of (make the per-rank "
                      "models with ccgraph shard)",
                      what, r, CCG_SHARD_PROVENANCE);
    return EXIT_OK;
  }
  json_error_t err;
  json_t *doc = json_loads(text, 0, &err);
  json_t *weights = json_object_get(doc, "weights");
  int rc = EXIT_OK;
  if (!json_is_array(weights))
    rc = bad(self, what, r, doc ? "no 'weights' array" : "not JSON",
             doc ? NULL : err.text);
  const char *pname = NULL, *msg = NULL;
  if (rc == EXIT_OK && ref_grad &&
      (msg = check_params(doc, weights, ref, n_ref, &pname)) != NULL)
    rc = bad(self, what, r, msg, pname);
  for (size_t i = 0; rc == EXIT_OK && i < n_ref; i++) {
    if (strncmp(ref[i].name, "grad/", 5) != 0 || !is_float(&ref[i].tensor))
      continue;
    rc = check_param(self, what, r, weights, ref[i].name + 5, have, n_have,
                     &ref[i].tensor, handled, tol, worst, n_cmp);
  }
  /* every gradient of a weight the metadata names is the provenance's to
   * check, compared or not: its name alone says nothing */
  size_t k;
  json_t *e;
  json_array_foreach(weights, k, e) {
    char gname[600];
    const char *nm = json_string_value(json_object_get(e, "name"));
    snprintf(gname, sizeof gname, "grad/%s", nm ? nm : "");
    const ccg_exec_tensor *t = find(have, n_have, gname);
    if (t)
      handled[t - have] = true;
  }
  json_decref(doc);
  return rc;
}
