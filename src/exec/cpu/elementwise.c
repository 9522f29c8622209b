/* Elementwise kernels: unary and binary arithmetic (ONNX broadcasting),
 * Where, Cast, Identity and inference-mode Dropout. Floats compute in f32
 * (f16/bf16 are converted per block), f64 in double, integers in int64. */
#include <string.h>

#include "exec/cpu/cpu.h"

typedef enum math_kind { MATH_F32, MATH_F64, MATH_I64 } math_kind;

static math_kind math_of(ccg_dtype dt) {
  if (dt == CCG_DTYPE_F64)
    return MATH_F64;
  return ccg_dtype_is_float(dt) ? MATH_F32 : MATH_I64;
}

/* ---- f32 arithmetic ----------------------------------------------------- */

static void bin_f32(ccg_op op, const float *a, size_t sa, const float *b,
                    size_t sb, float *o, size_t n) {
  switch (op) {
  case CCG_OP_ADD:
    for (size_t i = 0; i < n; i++)
      o[i] = a[i * sa] + b[i * sb];
    break;
  case CCG_OP_SUB:
    for (size_t i = 0; i < n; i++)
      o[i] = a[i * sa] - b[i * sb];
    break;
  case CCG_OP_MUL:
    for (size_t i = 0; i < n; i++)
      o[i] = a[i * sa] * b[i * sb];
    break;
  case CCG_OP_DIV:
    for (size_t i = 0; i < n; i++)
      o[i] = a[i * sa] / b[i * sb];
    break;
  default: /* POW */
    for (size_t i = 0; i < n; i++)
      o[i] = ccg__powf(a[i * sa], b[i * sb]);
    break;
  }
}

static void un_f32(ccg_op op, bool tanh_gelu, const float *a, float *o,
                   size_t n) {
  switch (op) {
  case CCG_OP_NEG:
    for (size_t i = 0; i < n; i++)
      o[i] = -a[i];
    break;
  case CCG_OP_RELU:
    for (size_t i = 0; i < n; i++)
      o[i] = ccg__reluf(a[i]);
    break;
  case CCG_OP_GELU:
    if (tanh_gelu)
      for (size_t i = 0; i < n; i++)
        o[i] = ccg__gelu_tanhf(a[i]);
    else
      for (size_t i = 0; i < n; i++)
        o[i] = ccg__gelu_erff(a[i]);
    break;
  case CCG_OP_TANH:
    for (size_t i = 0; i < n; i++)
      o[i] = tanhf(a[i]);
    break;
  case CCG_OP_ERF:
    for (size_t i = 0; i < n; i++)
      o[i] = erff(a[i]);
    break;
  case CCG_OP_SIGMOID:
    for (size_t i = 0; i < n; i++)
      o[i] = ccg__sigmoidf(a[i]);
    break;
  case CCG_OP_EXP:
    for (size_t i = 0; i < n; i++)
      o[i] = expf(a[i]);
    break;
  case CCG_OP_LOG:
    for (size_t i = 0; i < n; i++)
      o[i] = logf(a[i]);
    break;
  default: /* SQRT */
    for (size_t i = 0; i < n; i++)
      o[i] = sqrtf(a[i]);
    break;
  }
}

/* ---- f64 and int64 arithmetic, one element at a time --------------------- */

static double bin_f64(ccg_op op, double a, double b) {
  switch (op) {
  case CCG_OP_ADD:
    return a + b;
  case CCG_OP_SUB:
    return a - b;
  case CCG_OP_MUL:
    return a * b;
  case CCG_OP_DIV:
    return a / b;
  default:
    return pow(a, b);
  }
}

static double un_f64(ccg_op op, bool tanh_gelu, double a) {
  switch (op) {
  case CCG_OP_NEG:
    return -a;
  case CCG_OP_RELU:
    return a > 0 ? a : 0;
  case CCG_OP_GELU:
    if (tanh_gelu)
      return 0.5 * a *
             (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
    return 0.5 * a * (1.0 + erf(a * 0.7071067811865476));
  case CCG_OP_TANH:
    return tanh(a);
  case CCG_OP_ERF:
    return erf(a);
  case CCG_OP_SIGMOID:
    return a >= 0 ? 1.0 / (1.0 + exp(-a)) : exp(a) / (1.0 + exp(a));
  case CCG_OP_EXP:
    return exp(a);
  case CCG_OP_LOG:
    return log(a);
  default:
    return sqrt(a);
  }
}

/* Wrapping arithmetic (no undefined overflow); division truncates. */
static bool bin_i64(ccg_op op, int64_t a, int64_t b, int64_t *o) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case CCG_OP_ADD:
    *o = (int64_t)(ua + ub);
    return true;
  case CCG_OP_SUB:
    *o = (int64_t)(ua - ub);
    return true;
  case CCG_OP_MUL:
    *o = (int64_t)(ua * ub);
    return true;
  case CCG_OP_DIV:
    if (b == 0)
      return false;
    *o = (a == INT64_MIN && b == -1) ? INT64_MIN : a / b;
    return true;
  default:
    *o = ccg__powi(a, b);
    return true;
  }
}

/* ---- binary ------------------------------------------------------------- */

typedef struct bin_ctx {
  ccg_exec *x;
  const ccg__xnode *n;
  const ccg__bcast *b;
  ccg_dtype da, db, dout;
  const void *a, *bb;
  void *o;
  math_kind math;
} bin_ctx;

static ccg_status bin_row(void *vctx, size_t oo, const int64_t *off,
                          size_t inner) {
  bin_ctx *c = vctx;
  size_t sa = (size_t)c->b->st[0][c->b->rank - 1];
  size_t sb = (size_t)c->b->st[1][c->b->rank - 1];
  ccg_op op = c->n->op;
  if (c->math == MATH_F32) {
    if (c->da == CCG_DTYPE_F32 && c->db == CCG_DTYPE_F32 &&
        c->dout == CCG_DTYPE_F32) {
      bin_f32(op, (const float *)c->a + off[0], sa,
              (const float *)c->bb + off[1], sb, (float *)c->o + oo, inner);
      return CCG_STATUS_OK;
    }
    float fa[CCG__BLOCK], fb[CCG__BLOCK], fo[CCG__BLOCK];
    for (size_t i = 0; i < inner; i += CCG__BLOCK) {
      size_t k = inner - i < CCG__BLOCK ? inner - i : CCG__BLOCK;
      ccg__load_f32(c->da, c->a, (size_t)off[0] + i * sa, sa, k, fa);
      ccg__load_f32(c->db, c->bb, (size_t)off[1] + i * sb, sb, k, fb);
      bin_f32(op, fa, 1, fb, 1, fo, k);
      ccg__store_f32(c->dout, c->o, oo + i, k, fo);
    }
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < inner; i++) {
    size_t ia = (size_t)off[0] + i * sa, ib = (size_t)off[1] + i * sb;
    if (c->math == MATH_F64) {
      ccg__st_f64(c->dout, c->o, oo + i,
                  bin_f64(op, ccg__ld_f64(c->da, c->a, ia),
                          ccg__ld_f64(c->db, c->bb, ib)));
      continue;
    }
    int64_t r;
    if (op == CCG_OP_POW && ccg_dtype_is_float(c->db)) {
      /* an integer base to a float power: computed in double, truncated */
      double v =
          pow(ccg__ld_f64(c->da, c->a, ia), ccg__ld_f64(c->db, c->bb, ib));
      ccg__st_i64(c->dout, c->o, oo + i,
                  v != v                        ? 0
                  : v >= 9.2233720368547758e18  ? INT64_MAX
                  : v <= -9.2233720368547758e18 ? INT64_MIN
                                                : (int64_t)v);
      continue;
    }
    if (!bin_i64(op, ccg__ld_i64(c->da, c->a, ia),
                 ccg__ld_i64(c->db, c->bb, ib), &r))
      return ccg__xfail(c->x, c->n, CCG_STATUS_INVALID_ARG,
                        "integer division by zero (element %zu of '%s')", ib,
                        ccg_value_name(c->x->g, c->n->in[1]));
    ccg__st_i64(c->dout, c->o, oo + i, r);
  }
  return CCG_STATUS_OK;
}

static ccg_status run_binary(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *b = ccg__in(x, n, 1);
  const ccg__xval *o = ccg__out(x, n, 0);
  const ccg__xval *ins[2] = {a, b};
  ccg__bcast bc;
  ccg__bcast_init(&bc, o, ins, 2);
  bin_ctx c = {x,        n,      &bc,    a->dtype, b->dtype,
               o->dtype, a->ptr, b->ptr, o->ptr,   math_of(o->dtype)};
  return ccg__bcast_walk(&bc, bin_row, &c);
}

/* ---- unary -------------------------------------------------------------- */

static ccg_status run_unary(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  bool tanh_gelu = n->p.i0 != 0;
  size_t total = o->numel;
  math_kind m = math_of(o->dtype);
  if (m == MATH_F32 && o->dtype == CCG_DTYPE_F32) {
    un_f32(n->op, tanh_gelu, a->ptr, o->ptr, total);
    return CCG_STATUS_OK;
  }
  if (m == MATH_F32) {
    float fa[CCG__BLOCK];
    for (size_t i = 0; i < total; i += CCG__BLOCK) {
      size_t k = total - i < CCG__BLOCK ? total - i : CCG__BLOCK;
      ccg__load_f32(a->dtype, a->ptr, i, 1, k, fa);
      un_f32(n->op, tanh_gelu, fa, fa, k);
      ccg__store_f32(o->dtype, o->ptr, i, k, fa);
    }
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < total; i++) {
    if (m == MATH_F64) {
      ccg__st_f64(o->dtype, o->ptr, i,
                  un_f64(n->op, tanh_gelu, ccg__ld_f64(a->dtype, a->ptr, i)));
      continue;
    }
    int64_t v = ccg__ld_i64(a->dtype, a->ptr, i);
    v = n->op == CCG_OP_NEG ? (int64_t)(0u - (uint64_t)v) : (v > 0 ? v : 0);
    ccg__st_i64(o->dtype, o->ptr, i, v);
  }
  return CCG_STATUS_OK;
}

/* ---- copies, Where, Cast ------------------------------------------------ */

static ccg_status run_copy(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (o->ptr != a->ptr)
    memcpy(o->ptr, a->ptr, o->nbytes);
  if (n->n_out > 1 && n->out[1] != CCG_NONE) { /* Dropout's mask: all kept */
    const ccg__xval *mask = ccg__out(x, n, 1);
    memset(mask->ptr, 1, mask->nbytes);
  }
  return CCG_STATUS_OK;
}

/* Dropout runs in inference mode: training mode with a ratio above 0 draws
 * a random mask, which ccgraph does not support. training_mode and ratio
 * are read from the graph's data at create (static) or from the run's data
 * (`at_run`); NULL data means "not known yet". */
static ccg_status dropout_mode(ccg_exec *x, const ccg__xnode *n, bool at_run) {
  const ccg__xval *t = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *r = n->n_in > 1 ? ccg__in(x, n, 1) : NULL;
  const void *tp = !t ? NULL : at_run ? t->ptr : t->init;
  const void *rp = !r ? NULL : at_run ? r->ptr : r->init;
  if (!tp || *(const uint8_t *)tp == 0)
    return CCG_STATUS_OK; /* inference mode (or unknown before the run) */
  if (r && !rp)
    return CCG_STATUS_OK; /* the ratio comes with the run */
  double ratio = rp ? ccg__ld_f64(r->dtype, rp, 0) : 0.5;
  if (ratio == 0.0)
    return CCG_STATUS_OK;
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                    "training mode with ratio %g (a random mask) is not "
                    "supported; only inference mode runs (training_mode "
                    "false, or ratio 0)",
                    ratio);
}

static ccg_status run_dropout(ccg_exec *x, const ccg__xnode *n) {
  CCG_CHECK(dropout_mode(x, n, true));
  return run_copy(x, n);
}

typedef struct where_ctx {
  const ccg__bcast *b;
  const uint8_t *c;
  const char *xv, *yv;
  char *o;
  size_t es;
} where_ctx;

static ccg_status where_row(void *vctx, size_t oo, const int64_t *off,
                            size_t inner) {
  where_ctx *w = vctx;
  int r = w->b->rank - 1;
  size_t sc = (size_t)w->b->st[0][r], sx = (size_t)w->b->st[1][r],
         sy = (size_t)w->b->st[2][r], es = w->es;
  for (size_t i = 0; i < inner; i++) {
    bool take_x = w->c[(size_t)off[0] + i * sc] != 0;
    const char *src = take_x ? w->xv + ((size_t)off[1] + i * sx) * es
                             : w->yv + ((size_t)off[2] + i * sy) * es;
    memcpy(w->o + (oo + i) * es, src, es);
  }
  return CCG_STATUS_OK;
}

static ccg_status run_where(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *ins[3] = {ccg__in(x, n, 0), ccg__in(x, n, 1),
                             ccg__in(x, n, 2)};
  const ccg__xval *o = ccg__out(x, n, 0);
  ccg__bcast bc;
  ccg__bcast_init(&bc, o, ins, 3);
  where_ctx w = {&bc,         ins[0]->ptr, ins[1]->ptr,
                 ins[2]->ptr, o->ptr,      ccg_dtype_size(o->dtype)};
  return ccg__bcast_walk(&bc, where_row, &w);
}

static ccg_status run_cast(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  ccg_dtype from = a->dtype, to = o->dtype;
  size_t total = o->numel;
  if (from == to) {
    memcpy(o->ptr, a->ptr, o->nbytes);
  } else if (to == CCG_DTYPE_BOOL) {
    for (size_t i = 0; i < total; i++)
      ((uint8_t *)o->ptr)[i] = ccg_dtype_is_float(from)
                                   ? ccg__ld_f64(from, a->ptr, i) != 0.0
                                   : ccg__ld_i64(from, a->ptr, i) != 0;
  } else if (ccg_dtype_is_float(to)) {
    for (size_t i = 0; i < total; i++)
      ccg__st_f64(to, o->ptr, i, ccg__ld_f64(from, a->ptr, i));
  } else {
    for (size_t i = 0; i < total; i++)
      ccg__st_i64(to, o->ptr, i, ccg__ld_i64(from, a->ptr, i));
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_elementwise(ccg_exec *x, ccg__xnode *n) {
  ccg_dtype dt = ccg__out(x, n, 0)->dtype;
  bool is_float = ccg_dtype_is_float(dt);
  switch (n->op) {
  case CCG_OP_IDENTITY:
    n->run = run_copy;
    return CCG_STATUS_OK;
  case CCG_OP_DROPOUT:
    CCG_CHECK(dropout_mode(x, n, false));
    n->run = run_dropout;
    return CCG_STATUS_OK;
  case CCG_OP_ADD:
  case CCG_OP_SUB:
  case CCG_OP_MUL:
  case CCG_OP_DIV:
  case CCG_OP_POW:
    if (!is_float && !ccg_dtype_is_int(dt))
      break;
    n->run = run_binary;
    return CCG_STATUS_OK;
  case CCG_OP_NEG:
  case CCG_OP_RELU:
    if (!is_float && !ccg_dtype_is_int(dt))
      break;
    n->run = run_unary;
    return CCG_STATUS_OK;
  case CCG_OP_GELU: {
    const char *approx;
    CCG_CHECK(ccg__xattr_s(x, n, "approximate", &approx));
    n->p.i0 = strcmp(approx, "tanh") == 0;
    if (!is_float)
      break;
    n->run = run_unary;
    return CCG_STATUS_OK;
  }
  case CCG_OP_TANH:
  case CCG_OP_ERF:
  case CCG_OP_SIGMOID:
  case CCG_OP_EXP:
  case CCG_OP_LOG:
  case CCG_OP_SQRT:
    if (!is_float)
      break;
    n->run = run_unary;
    return CCG_STATUS_OK;
  case CCG_OP_WHERE:
    n->run = run_where;
    return CCG_STATUS_OK;
  case CCG_OP_CAST:
    n->run = run_cast;
    return CCG_STATUS_OK;
  default:
    return ccg__xfail(x, n, CCG_STATUS_INTERNAL, "not an elementwise op");
  }
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel for dtype %s",
                    ccg_dtype_name(dt));
}
