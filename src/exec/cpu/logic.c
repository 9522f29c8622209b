/* CPU kernels of the logic family: comparisons, logic, bitwise ops, variadic
 * Min/Max/Sum/Mean, Mod, PRelu. The arithmetic is logic_math.h, shared with
 * the CUDA kernels. Variadic ops run as a chain of broadcast binary steps
 * into the output: out = in0 op in1, then out = out op in_k. */
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/logic_math.h"

typedef struct bin_ctx {
  ccg_exec *x;
  const ccg__xnode *n;
  const ccg__bcast *b;
  ccg_dtype dt, dout;
  const void *a, *bb;
  void *o;
  ccg_value_id bname; /* the second operand, for messages */
} bin_ctx;

static ccg_status bin_row(void *vctx, size_t oo, const int64_t *off,
                          size_t inner) {
  const bin_ctx *c = vctx;
  size_t sa = (size_t)c->b->st[0][c->b->rank - 1];
  size_t sb = (size_t)c->b->st[1][c->b->rank - 1];
  ccg_op op = c->n->op;
  int64_t param = c->n->p.i0;
  for (size_t i = 0; i < inner; i++) {
    size_t ia = (size_t)off[0] + i * sa, ib = (size_t)off[1] + i * sb;
    if (!ccg__logic_bin_elem(op, param, c->dt, c->a, ia, c->bb, ib, c->dout,
                             c->o, oo + i))
      return ccg__xfail(c->x, c->n, CCG_STATUS_INVALID_ARG,
                        "integer division by zero (element %zu of '%s')", ib,
                        ccg_value_name(c->x->g, c->bname));
  }
  return CCG_STATUS_OK;
}

/* o = a op b with broadcasting (a may be o itself). */
static ccg_status bin_step(ccg_exec *x, const ccg__xnode *n, const ccg__xval *a,
                           const ccg__xval *b, ccg_value_id bid) {
  const ccg__xval *o = ccg__out(x, n, 0);
  const ccg__xval *ins[2] = {a, b};
  ccg__bcast bc;
  ccg__bcast_init(&bc, o, ins, 2);
  bin_ctx c = {x, n, &bc, b->dtype, o->dtype, a->ptr, b->ptr, o->ptr, bid};
  return ccg__bcast_walk(&bc, bin_row, &c);
}

static ccg_status run_nary(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *o = ccg__out(x, n, 0);
  if (n->n_in == 1) {
    if (o->ptr != ccg__in(x, n, 0)->ptr)
      memcpy(o->ptr, ccg__in(x, n, 0)->ptr, o->nbytes);
  } else {
    CCG_CHECK(bin_step(x, n, ccg__in(x, n, 0), ccg__in(x, n, 1), n->in[1]));
    for (uint32_t k = 2; k < n->n_in; k++)
      CCG_CHECK(bin_step(x, n, o, ccg__in(x, n, k), n->in[k]));
  }
  if (n->op == CCG_OP_MEAN && n->n_in > 1)
    for (size_t i = 0; i < o->numel; i++)
      ccg__logic_un_elem(CCG_OP_MEAN, n->n_in, o->dtype, o->ptr, o->dtype,
                         o->ptr, i);
  return CCG_STATUS_OK;
}

static ccg_status run_unary(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  for (size_t i = 0; i < o->numel; i++)
    ccg__logic_un_elem(n->op, n->p.i0, a->dtype, a->ptr, o->dtype, o->ptr, i);
  return CCG_STATUS_OK;
}

/* The dtypes each op's kernel takes: what its shape rule lets through. */
static unsigned kernel_dtypes(ccg_op op) {
  const unsigned f = (1u << CCG_DTYPE_F32) | (1u << CCG_DTYPE_F16) |
                     (1u << CCG_DTYPE_BF16) | (1u << CCG_DTYPE_F64);
  const unsigned i = (1u << CCG_DTYPE_I64) | (1u << CCG_DTYPE_I32) |
                     (1u << CCG_DTYPE_I8) | (1u << CCG_DTYPE_U8);
  const unsigned b = 1u << CCG_DTYPE_BOOL;
  switch (op) {
  case CCG_OP_EQUAL:
    return f | i | b;
  case CCG_OP_NOT:
  case CCG_OP_AND:
  case CCG_OP_OR:
  case CCG_OP_XOR:
    return b;
  case CCG_OP_IS_NAN:
  case CCG_OP_IS_INF:
  case CCG_OP_SUM:
  case CCG_OP_MEAN:
    return f;
  case CCG_OP_BIT_SHIFT:
    return 1u << CCG_DTYPE_U8;
  case CCG_OP_BITWISE_AND:
  case CCG_OP_BITWISE_OR:
  case CCG_OP_BITWISE_XOR:
  case CCG_OP_BITWISE_NOT:
    return i;
  case CCG_OP_PRELU:
    return f | (1u << CCG_DTYPE_I64) | (1u << CCG_DTYPE_I32);
  default: /* comparisons, Min, Max, Mod */
    return f | i;
  }
}

/* Attributes into n->p.i0: Mod's fmod, BitShift's direction (1: left),
 * IsInf's detect flags (CCG__ISINF_*). */
static ccg_status read_param(ccg_exec *x, ccg__xnode *n) {
  int64_t v = 0;
  const char *s;
  switch (n->op) {
  case CCG_OP_MOD:
    CCG_CHECK(ccg__xattr_i(x, n, "fmod", &v));
    break;
  case CCG_OP_BIT_SHIFT:
    CCG_CHECK(ccg__xattr_s(x, n, "direction", &s));
    v = strcmp(s, "LEFT") == 0;
    break;
  case CCG_OP_IS_INF: {
    int64_t neg, pos;
    CCG_CHECK(ccg__xattr_i(x, n, "detect_negative", &neg));
    CCG_CHECK(ccg__xattr_i(x, n, "detect_positive", &pos));
    v = (neg ? CCG__ISINF_NEG : 0) | (pos ? CCG__ISINF_POS : 0);
    break;
  }
  default:
    break;
  }
  n->p.i0 = v;
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_logic(ccg_exec *x, ccg__xnode *n) {
  ccg_dtype dt = ccg__in(x, n, 0)->dtype;
  if (!(kernel_dtypes(n->op) & (1u << dt)))
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "no CPU kernel for dtype %s", ccg_dtype_name(dt));
  CCG_CHECK(read_param(x, n));
  switch (n->op) {
  case CCG_OP_NOT:
  case CCG_OP_IS_NAN:
  case CCG_OP_IS_INF:
  case CCG_OP_BITWISE_NOT:
    n->run = run_unary;
    break;
  default:
    n->run = run_nary;
    break;
  }
  return CCG_STATUS_OK;
}
