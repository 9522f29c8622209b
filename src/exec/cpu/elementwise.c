/* Elementwise kernels: unary and binary arithmetic (ONNX broadcasting),
 * Where, Cast, Identity and inference-mode Dropout. Floats compute in f32
 * (f16/bf16 are converted per block), f64 in double, integers in int64. */
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/vecmath.h"

/* ---- f32 arithmetic -----------------------------------------------------
 * The arithmetic of ccg__bin_f32 and ccg__un_f32 (kernels_math.h): the
 * executor's array math (vecmath.h) where it has the op, else one loop per
 * op so that the compiler can vectorize it. */

/* One loop per op: x is a[i]. */
#define UN_LOOP(expr)                                                          \
  for (size_t i = 0; i < n; i++) {                                             \
    float x = a[i];                                                            \
    o[i] = (expr);                                                             \
  }                                                                            \
  break

void ccg__un_f32_block(const ccg__vm *vm, ccg_op op, ccg__unp p, const float *a,
                       float *o, size_t n) {
  float al = p.a, be = p.b;
  switch (op) {
  case CCG_OP_NEG:
    UN_LOOP(-x);
  case CCG_OP_RELU:
    UN_LOOP(ccg__reluf(x));
  case CCG_OP_GELU:
    (p.tanh_gelu ? vm->gelu_tanh : vm->gelu_erf)(a, o, n);
    break;
  case CCG_OP_TANH:
    vm->tanh(a, o, n);
    break;
  case CCG_OP_ERF:
    vm->erf(a, o, n);
    break;
  case CCG_OP_SIGMOID:
    vm->sigmoid(a, o, n);
    break;
  case CCG_OP_EXP:
    vm->exp(a, o, n);
    break;
  case CCG_OP_LOG:
    vm->log(a, o, n);
    break;
  case CCG_OP_SQRT:
    UN_LOOP(sqrtf(x));
  case CCG_OP_RECIPROCAL:
    UN_LOOP(1.0f / x);
  case CCG_OP_ABS:
    UN_LOOP(fabsf(x));
  case CCG_OP_FLOOR:
    UN_LOOP(floorf(x));
  case CCG_OP_CEIL:
    UN_LOOP(ceilf(x));
  case CCG_OP_ROUND:
    UN_LOOP(rintf(x));
  case CCG_OP_SIGN:
    UN_LOOP(ccg__signf(x));
  case CCG_OP_SOFTPLUS:
    UN_LOOP(ccg__softplusf(x));
  case CCG_OP_SOFTSIGN:
    UN_LOOP(ccg__softsignf(x));
  case CCG_OP_LEAKY_RELU:
    UN_LOOP(ccg__leaky_reluf(x, al));
  case CCG_OP_ELU:
    UN_LOOP(ccg__eluf(x, al));
  case CCG_OP_SELU:
    UN_LOOP(ccg__seluf(x, al, be));
  case CCG_OP_CELU:
    UN_LOOP(ccg__celuf(x, al));
  case CCG_OP_HARD_SIGMOID:
    UN_LOOP(ccg__hard_sigmoidf(x, al, be));
  case CCG_OP_HARD_SWISH:
    UN_LOOP(ccg__hard_swishf(x));
  case CCG_OP_THRESHOLDED_RELU:
    UN_LOOP(ccg__thresholded_reluf(x, al));
  case CCG_OP_SHRINK:
    UN_LOOP(ccg__shrinkf(x, al, be));
  default: /* the rest call libm per element anyway */
    UN_LOOP(ccg__un_f32(op, p, x));
  }
}

#undef UN_LOOP

/* ---- binary ------------------------------------------------------------- */

typedef struct bin_ctx {
  ccg_exec *x;
  const ccg__xnode *n;
  const ccg__bcast *b;
  ccg_dtype da, db, dout;
  const void *a, *bb;
  void *o;
  ccg__math math;
} bin_ctx;

static ccg_status bin_row(void *vctx, size_t oo, const int64_t *off,
                          size_t inner) {
  bin_ctx *c = vctx;
  size_t sa = (size_t)c->b->st[0][c->b->rank - 1];
  size_t sb = (size_t)c->b->st[1][c->b->rank - 1];
  ccg_op op = c->n->op;
  if (c->math == CCG__MATH_F32) {
    if (c->da == CCG_DTYPE_F32 && c->db == CCG_DTYPE_F32 &&
        c->dout == CCG_DTYPE_F32) {
      c->x->vm->bin(op, (const float *)c->a + off[0], sa,
                    (const float *)c->bb + off[1], sb, (float *)c->o + oo,
                    inner);
      return CCG_STATUS_OK;
    }
    float fa[CCG__BLOCK], fb[CCG__BLOCK], fo[CCG__BLOCK];
    for (size_t i = 0; i < inner; i += CCG__BLOCK) {
      size_t k = inner - i < CCG__BLOCK ? inner - i : CCG__BLOCK;
      ccg__load_f32(c->da, c->a, (size_t)off[0] + i * sa, sa, k, fa);
      ccg__load_f32(c->db, c->bb, (size_t)off[1] + i * sb, sb, k, fb);
      c->x->vm->bin(op, fa, 1, fb, 1, fo, k);
      ccg__store_f32(c->dout, c->o, oo + i, k, fo);
    }
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < inner; i++) {
    size_t ia = (size_t)off[0] + i * sa, ib = (size_t)off[1] + i * sb;
    if (!ccg__bin_elem(op, c->da, c->a, ia, c->db, c->bb, ib, c->dout, c->o,
                       oo + i))
      return ccg__xfail(c->x, c->n, CCG_STATUS_INVALID_ARG,
                        "integer division by zero (element %zu of '%s')", ib,
                        ccg_value_name(c->x->g, c->n->in[1]));
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
               o->dtype, a->ptr, b->ptr, o->ptr,   ccg__math_of(o->dtype)};
  /* f32 rows cannot fail (integer division can): they split over the pool */
  if (c.math == CCG__MATH_F32) {
    ccg__bcast_walk_par(x, &bc, bin_row, &c);
    return CCG_STATUS_OK;
  }
  return ccg__bcast_walk(&bc, bin_row, &c);
}

/* ---- unary -------------------------------------------------------------- */

ccg__unp ccg__unp_of(const ccg__xnode *n) {
  ccg__unp p = {n->p.f0, n->p.f1, n->p.i0 != 0};
  return p;
}

/* Elements [begin, end) of a unary node (rows of one element: the split of
 * ccg__par_rows). */
static void unary_range(ccg_exec *x, const ccg__xnode *n, size_t begin,
                        size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  ccg__unp p = ccg__unp_of(n);
  size_t total = end;
  ccg__math m = ccg__math_of(o->dtype);
  if (m == CCG__MATH_F32 && o->dtype == CCG_DTYPE_F32) {
    ccg__un_f32_block(x->vm, n->op, p, (const float *)a->ptr + begin,
                      (float *)o->ptr + begin, end - begin);
    return;
  }
  if (m == CCG__MATH_F32) {
    float fa[CCG__BLOCK];
    for (size_t i = begin; i < total; i += CCG__BLOCK) {
      size_t k = total - i < CCG__BLOCK ? total - i : CCG__BLOCK;
      ccg__load_f32(a->dtype, a->ptr, i, 1, k, fa);
      ccg__un_f32_block(x->vm, n->op, p, fa, fa, k);
      ccg__store_f32(o->dtype, o->ptr, i, k, fa);
    }
    return;
  }
  for (size_t i = begin; i < total; i++)
    ccg__un_elem(n->op, p, a->dtype, a->ptr, o->dtype, o->ptr, i);
}

static ccg_status run_unary(ccg_exec *x, const ccg__xnode *n) {
  ccg__par_rows(x, n, ccg__out(x, n, 0)->numel, 1, unary_range);
  return CCG_STATUS_OK;
}

/* Clip's bounds are inputs, read when the node runs (they may be computed
 * or fed); an absent one leaves that side open. Elements [begin, end). */
static void clip_range(ccg_exec *x, const ccg__xnode *n, size_t begin,
                       size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  const void *lo = NULL, *hi = NULL;
  if (n->n_in > 1 && n->in[1] != CCG_NONE)
    lo = ccg__in(x, n, 1)->ptr;
  if (n->n_in > 2 && n->in[2] != CCG_NONE)
    hi = ccg__in(x, n, 2)->ptr;
  if (o->dtype == CCG_DTYPE_F32) {
    const float *ap = a->ptr;
    float *op = o->ptr;
    float l = lo ? *(const float *)lo : -INFINITY;
    float h = hi ? *(const float *)hi : INFINITY;
    for (size_t i = begin; i < end; i++)
      op[i] = ccg__clipf(ap[i], l, h);
    return;
  }
  for (size_t i = begin; i < end; i++)
    ccg__clip_elem(o->dtype, a->ptr, o->ptr, i, lo, hi);
}

static ccg_status run_clip(ccg_exec *x, const ccg__xnode *n) {
  ccg__par_rows(x, n, ccg__out(x, n, 0)->numel, 1, clip_range);
  return CCG_STATUS_OK;
}

/* Attributes into n->p (ccg__unp_of): alpha, beta / gamma / bias, lambd. */
static ccg_status prep_attrs(ccg_exec *x, ccg__xnode *n, const char *a,
                             const char *b) {
  if (a)
    CCG_CHECK(ccg__xattr_f(x, n, a, &n->p.f0));
  if (b)
    CCG_CHECK(ccg__xattr_f(x, n, b, &n->p.f1));
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
 * a random mask, which ccgraph does not support (cpu.h); NULL data means
 * "not known yet". */
ccg_status ccg__dropout_mode(ccg_exec *x, const ccg__xnode *n, bool at_run) {
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
  CCG_CHECK(ccg__dropout_mode(x, n, true));
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
  /* a row cannot fail: the rows split over the pool */
  ccg__bcast_walk_par(x, &bc, where_row, &w);
  return CCG_STATUS_OK;
}

/* Elements [begin, end) of a Cast. */
static void cast_range(ccg_exec *x, const ccg__xnode *n, size_t begin,
                       size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  for (size_t i = begin; i < end; i++)
    ccg__cast_elem(a->dtype, a->ptr, o->dtype, o->ptr, i);
}

static ccg_status run_cast(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (a->dtype == o->dtype) {
    memcpy(o->ptr, a->ptr, o->nbytes);
    return CCG_STATUS_OK;
  }
  ccg__par_rows(x, n, o->numel, 1, cast_range);
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
    CCG_CHECK(ccg__dropout_mode(x, n, false));
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
  case CCG_OP_ABS:
  case CCG_OP_SIGN:
    if (!is_float && !ccg_dtype_is_int(dt))
      break;
    n->run = run_unary;
    return CCG_STATUS_OK;
  case CCG_OP_CLIP:
    if (!is_float && !ccg_dtype_is_int(dt))
      break;
    n->run = run_clip;
    return CCG_STATUS_OK;
  case CCG_OP_SHRINK:
    CCG_CHECK(prep_attrs(x, n, "bias", "lambd"));
    if (!is_float && !ccg_dtype_is_int(dt))
      break;
    n->run = run_unary;
    return CCG_STATUS_OK;
  case CCG_OP_LEAKY_RELU:
  case CCG_OP_ELU:
  case CCG_OP_CELU:
  case CCG_OP_THRESHOLDED_RELU:
    CCG_CHECK(prep_attrs(x, n, "alpha", NULL));
    goto float_only;
  case CCG_OP_SELU:
    CCG_CHECK(prep_attrs(x, n, "alpha", "gamma"));
    goto float_only;
  case CCG_OP_HARD_SIGMOID:
    CCG_CHECK(prep_attrs(x, n, "alpha", "beta"));
    goto float_only;
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
  case CCG_OP_RECIPROCAL:
  case CCG_OP_FLOOR:
  case CCG_OP_CEIL:
  case CCG_OP_ROUND:
  case CCG_OP_COS:
  case CCG_OP_SIN:
  case CCG_OP_TAN:
  case CCG_OP_ASIN:
  case CCG_OP_ACOS:
  case CCG_OP_ATAN:
  case CCG_OP_SINH:
  case CCG_OP_COSH:
  case CCG_OP_ASINH:
  case CCG_OP_ACOSH:
  case CCG_OP_ATANH:
  case CCG_OP_SOFTPLUS:
  case CCG_OP_SOFTSIGN:
  case CCG_OP_HARD_SWISH:
  case CCG_OP_MISH:
  float_only:
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
