/* Einsum: the equation parser, the shape rule and the gradient rule. Any
 * equation numpy takes (repeated labels for diagonals, "..." broadcast
 * dims, implicit output) runs; the gradient of an operand is an Einsum of
 * the other operands and dy. */
#include <stdio.h>
#include <string.h>

#include "graph/einsum.h"
#include "graph/internal.h"

#define BUF 192

/* ---- parsing ------------------------------------------------------------ */

static int letter_id(char c) {
  if (c >= 'a' && c <= 'z')
    return c - 'a';
  if (c >= 'A' && c <= 'Z')
    return 26 + (c - 'A');
  return -1;
}

/* One term (an operand's or the output's subscripts, [p, end)): letter ids
 * into ids (at most CCG_MAX_RANK), where "..." was into *ell (-1: none). */
static bool parse_term(const char *p, const char *end, int8_t *ids, int *n,
                       int *ell, char *err, size_t es) {
  *n = 0;
  *ell = -1;
  while (p < end) {
    if (*p == ' ') {
      p++;
      continue;
    }
    if (*p == '.') {
      if (end - p < 3 || p[1] != '.' || p[2] != '.' || *ell >= 0) {
        snprintf(err, es, "a '.' that is not one '...'");
        return false;
      }
      *ell = *n;
      p += 3;
      continue;
    }
    int id = letter_id(*p);
    if (id < 0) {
      snprintf(err, es, "character '%c' is not a letter", *p);
      return false;
    }
    if (*n >= CCG_MAX_RANK) {
      snprintf(err, es, "a term has more than %d subscripts", CCG_MAX_RANK);
      return false;
    }
    ids[(*n)++] = (int8_t)id;
    p++;
  }
  return true;
}

/* The labels of a term of rank `rank`: its letters with the ellipsis
 * expanded into right-aligned ellipsis labels. */
static bool expand_term(const int8_t *ids, int n, int ell, int rank,
                        int8_t *lab, char *err, size_t es) {
  int ne = rank - n;
  if (ell < 0 ? ne != 0 : ne < 0) {
    snprintf(err, es,
             "a term with %d subscripts%s is given an operand of rank %d", n,
             ell < 0 ? "" : " and '...'", rank);
    return false;
  }
  int k = 0;
  for (int i = 0; i <= n; i++) {
    if (i == ell)
      for (int j = 0; j < ne; j++)
        lab[k++] = (int8_t)(CCG__EIN_LABELS - ne + j);
    if (i < n)
      lab[k++] = ids[i];
  }
  return true;
}

static void implicit_output(ccg__einsum *e, int n_ell) {
  int count[CCG__EIN_LABELS] = {0};
  for (int i = 0; i < e->n_in; i++)
    for (int d = 0; d < e->rank[i]; d++)
      count[e->lab[i][d]]++;
  e->out_rank = 0;
  for (int j = 0; j < n_ell; j++)
    e->out_lab[e->out_rank++] = (int8_t)(CCG__EIN_LABELS - n_ell + j);
  /* numpy orders them by character code: capitals first */
  for (int o = 0; o < CCG__EIN_LETTERS; o++) {
    int id = o < 26 ? o + 26 : o - 26;
    if (count[id] == 1 && e->out_rank < CCG_MAX_RANK)
      e->out_lab[e->out_rank++] = (int8_t)id;
  }
}

static bool parse_output(const char *p, ccg__einsum *e, int n_ell, char *err,
                         size_t es) {
  int8_t ids[CCG_MAX_RANK];
  int n, ell;
  if (!parse_term(p, p + strlen(p), ids, &n, &ell, err, es))
    return false;
  if (n + (ell >= 0 ? n_ell : 0) > CCG_MAX_RANK) {
    snprintf(err, es, "the output has more than %d dims", CCG_MAX_RANK);
    return false;
  }
  bool used[CCG__EIN_LABELS] = {false};
  for (int i = 0; i < e->n_in; i++)
    for (int d = 0; d < e->rank[i]; d++)
      used[e->lab[i][d]] = true;
  for (int i = 0; i < n; i++) {
    if (!used[ids[i]]) {
      snprintf(err, es, "output subscript %d is in no input term", i);
      return false;
    }
    for (int j = 0; j < i; j++)
      if (ids[j] == ids[i]) {
        snprintf(err, es, "output subscript %d repeats", i);
        return false;
      }
  }
  e->out_rank = n + (ell >= 0 ? n_ell : 0);
  return expand_term(ids, n, ell, e->out_rank, e->out_lab, err, es);
}

bool ccg__einsum_parse(const char *eq, int n, const int *ranks, ccg__einsum *e,
                       char *err, size_t err_size) {
  memset(e, 0, sizeof *e);
  if (n < 1 || n > CCG__EIN_MAX_IN) {
    snprintf(err, err_size, "%d operands; 1..%d supported", n, CCG__EIN_MAX_IN);
    return false;
  }
  e->n_in = n;
  const char *arrow = strstr(eq, "->");
  const char *lhs_end = arrow ? arrow : eq + strlen(eq), *p = eq;
  int n_ell = 0;
  for (int i = 0; i < n; i++) {
    const char *comma = memchr(p, ',', (size_t)(lhs_end - p));
    const char *end = comma ? comma : lhs_end;
    if ((i < n - 1) != (comma != NULL)) {
      snprintf(err, err_size, "the equation has %s terms than the %d operands",
               comma ? "more" : "fewer", n);
      return false;
    }
    int8_t ids[CCG_MAX_RANK];
    int m, ell;
    if (!parse_term(p, end, ids, &m, &ell, err, err_size) ||
        !expand_term(ids, m, ell, ranks[i], e->lab[i], err, err_size))
      return false;
    e->rank[i] = ranks[i];
    if (ell >= 0 && ranks[i] - m > n_ell)
      n_ell = ranks[i] - m;
    p = end + 1;
  }
  if (!arrow) {
    implicit_output(e, n_ell);
    return true;
  }
  return parse_output(arrow + 2, e, n_ell, err, err_size);
}

/* ---- shape rule --------------------------------------------------------- */

static const ccg__attr_spec einsum_attrs[] = {
    {"equation", CCG_ATTR_STRING, true, 0, 0, NULL},
};

static ccg_status einsum_of(ccg__infer *ix, ccg__einsum *e) {
  int ranks[CCG__EIN_MAX_IN];
  if (ix->n_in > CCG__EIN_MAX_IN)
    return ccg__fail(ix, CCG_STATUS_UNSUPPORTED,
                     "%zu operands; at most %d supported", ix->n_in,
                     CCG__EIN_MAX_IN);
  for (size_t i = 0; i < ix->n_in; i++)
    ranks[i] = ccg__in_shape(ix, i)->rank;
  char err[BUF];
  const char *eq = ccg__attr_s(ix, "equation");
  if (!ccg__einsum_parse(eq, (int)ix->n_in, ranks, e, err, sizeof err))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "equation '%s': %s", eq, err);
  return CCG_STATUS_OK;
}

/* Every label's dim: equal wherever it appears, or 1 (broadcast). */
static ccg_status label_dims(ccg__infer *ix, const ccg__einsum *e,
                             ccg_dim *dims) {
  bool set[CCG__EIN_LABELS] = {false};
  for (int i = 0; i < e->n_in; i++) {
    const ccg_shape *s = ccg__in_shape(ix, (size_t)i);
    for (int d = 0; d < e->rank[i]; d++) {
      int l = e->lab[i][d];
      ccg_dim x = s->dims[d];
      if (!set[l] || ccg__is_num(dims[l], 1)) {
        dims[l] = x;
        set[l] = true;
      } else if (!ccg_dim_equal(dims[l], x) && !ccg__is_num(x, 1)) {
        char b[BUF];
        return ccg__fail(ix, CCG_STATUS_SHAPE,
                         "operand %d '%s' %s: dim %d does not match the "
                         "other dims of its subscript",
                         i, ccg__in_name(ix, (size_t)i),
                         ccg__shape_str(s, b, BUF), d);
      }
    }
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_einsum(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  for (size_t i = 1; i < ix->n_in; i++)
    CCG_CHECK(ccg__same_dtype(ix, 0, i));
  ccg__einsum e;
  CCG_CHECK(einsum_of(ix, &e));
  ccg_dim dims[CCG__EIN_LABELS];
  CCG_CHECK(label_dims(ix, &e, dims));
  ccg_shape *out = &ix->out_shape[0];
  out->rank = e.out_rank;
  for (int d = 0; d < e.out_rank; d++)
    out->dims[d] = dims[e.out_lab[d]];
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  return CCG_STATUS_OK;
}

/* ---- gradient ----------------------------------------------------------- */

/* Writes the labels of a term as letters (map: label -> letter). */
static size_t put_term(char *p, const int8_t *lab, int n, const char *map) {
  for (int d = 0; d < n; d++)
    p[d] = map[lab[d]];
  return (size_t)n;
}

/* Letters for every label: the letters keep theirs, ellipsis dims take
 * letters the equation does not use. */
static void letter_map(const ccg__einsum *e, char *map) {
  bool used[CCG__EIN_LABELS] = {false};
  for (int i = 0; i < e->n_in; i++)
    for (int d = 0; d < e->rank[i]; d++)
      used[e->lab[i][d]] = true;
  int next = 0;
  for (int l = 0; l < CCG__EIN_LABELS; l++) {
    if (l < CCG__EIN_LETTERS) {
      map[l] = (char)(l < 26 ? 'a' + l : 'A' + l - 26);
      continue;
    }
    while (next < CCG__EIN_LETTERS && used[next])
      next++;
    map[l] = (char)(next < 26 ? 'a' + next : 'A' + next - 26);
    next++;
  }
}

/* Ones of x's dtype and shape: stands in for x's labels that neither dy
 * nor another operand has. */
static ccg_status ones_like(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  ccg_value_id shape;
  float one = 1.0f;
  double oned = 1.0;
  ccg_dtype dt = ccg_value_dtype(g, x);
  ccg_tensor t = {dt == CCG_DTYPE_F64 ? CCG_DTYPE_F64 : CCG_DTYPE_F32,
                  1,
                  {1},
                  dt == CCG_DTYPE_F64 ? (const void *)&oned : &one};
  CCG_CHECK(ccg__grad_shape_of(g, x, &shape));
  CCG_CHECK(ccg_constant_of_shape(g, shape, &t, out));
  return t.dtype == dt ? CCG_STATUS_OK : ccg_cast(g, *out, dt, out);
}

/* Operand k must have distinct labels and no broadcast (1) dims. */
static ccg_status grad_operand_ok(ccg__grad *gx, const ccg__einsum *e, int k,
                                  bool *alone) {
  ccg_graph *g = gx->g;
  bool other[CCG__EIN_LABELS] = {false};
  for (int i = 0; i < e->n_in; i++)
    for (int d = 0; d < e->rank[i] && i != k; d++)
      other[e->lab[i][d]] = true;
  for (int d = 0; d < e->out_rank; d++)
    other[e->out_lab[d]] = true;
  const ccg_shape *ys = ccg_value_shape(g, gx->out[0]);
  *alone = false;
  for (int d = 0; d < e->rank[k]; d++) {
    int l = e->lab[k][d];
    for (int j = 0; j < d; j++)
      if (e->lab[k][j] == l)
        return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                              "operand %d repeats a subscript (a diagonal); "
                              "no gradient rule for that",
                              k);
    *alone = *alone || !other[l];
    ccg_dim xd = ccg_value_shape(g, gx->in[k])->dims[d];
    for (int o = 0; o < e->out_rank; o++)
      if (e->out_lab[o] == l && ccg__is_num(xd, 1) &&
          !ccg__is_num(ys->dims[o], 1))
        return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                              "operand %d is broadcast along dim %d; no "
                              "gradient rule for that",
                              k, d);
  }
  return CCG_STATUS_OK;
}

static ccg_status grad_operand(ccg__grad *gx, const ccg__einsum *e,
                               const char *map, int k) {
  bool alone;
  CCG_CHECK(grad_operand_ok(gx, e, k, &alone));
  char eq[CCG__EIN_MAX_IN * (CCG_MAX_RANK + 1) + CCG_MAX_RANK + 8];
  ccg_value_id in[CCG__EIN_MAX_IN + 2];
  size_t n = 0, p = 0;
  for (int i = 0; i < e->n_in; i++) {
    if (i == k)
      continue;
    p += put_term(eq + p, e->lab[i], e->rank[i], map);
    eq[p++] = ',';
    in[n++] = gx->in[i];
  }
  p += put_term(eq + p, e->out_lab, e->out_rank, map);
  in[n++] = gx->gout[0];
  if (alone) {
    eq[p++] = ',';
    p += put_term(eq + p, e->lab[k], e->rank[k], map);
    CCG_CHECK(ones_like(gx->g, gx->in[k], &in[n++]));
  }
  eq[p++] = '-';
  eq[p++] = '>';
  p += put_term(eq + p, e->lab[k], e->rank[k], map);
  eq[p] = '\0';
  ccg_attr a = CCG_ATTR_S("equation", eq);
  return ccg__build(gx->g, CCG_OP_EINSUM, in, n, &a, 1, 1, &gx->gin[k], NULL);
}

static ccg_status grad_einsum(ccg__grad *gx) {
  int ranks[CCG__EIN_MAX_IN];
  for (size_t i = 0; i < gx->n_in; i++)
    ranks[i] = ccg_value_shape(gx->g, gx->in[i])->rank;
  ccg__einsum e;
  char err[BUF], map[CCG__EIN_LABELS];
  if (gx->n_in > CCG__EIN_MAX_IN - 1 ||
      !ccg__einsum_parse(ccg__grad_attr_s(gx, "equation"), (int)gx->n_in, ranks,
                         &e, err, sizeof err))
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "the equation is not one the rule takes");
  letter_map(&e, map);
  for (size_t k = 0; k < gx->n_in; k++)
    if (gx->need[k])
      CCG_CHECK(grad_operand(gx, &e, map, (int)k));
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_EINSUM = {CCG__ATTRS(einsum_attrs),
                                       0,
                                       infer_einsum,
                                       grad_einsum,
                                       .shard = CCG_OP_SHARD_OWN,
                                       .dtypes = CCG__NUM_TYPES,
                                       .onnx_since = 12};
