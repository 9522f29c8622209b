/* Fused elementwise chains (docs/exec.md, "Fused kernels"): at create, on
 * the CPU backend, a run of f32 elementwise steps where each step's output
 * is read by the next step only (and is no graph output) becomes one step
 * that walks the tensor in blocks of FUSE_BLOCK elements, taking every
 * step of the chain over a block while it sits in L1. The steps call the
 * arithmetic the unfused kernels call on the same elements (vecmath.h maps
 * are elementwise), so fused and unfused runs give the same bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/norm.h"

/* Elements per block: the running value and two broadcast operands,
 * 4 KiB each. */
#define FUSE_BLOCK 1024

typedef enum opd_kind {
  OPD_PREV,   /* the previous step's result */
  OPD_DENSE,  /* a value of the chain's shape */
  OPD_ROW,    /* a value of the shape's trailing dims, repeated */
  OPD_SCALAR, /* one element */
} opd_kind;

typedef struct fopd {
  opd_kind kind;
  ccg_value_id v;
  size_t row; /* OPD_ROW: its elements */
} fopd;

typedef struct fstep {
  ccg_op op;
  ccg__unp p;
  uint32_t n_in; /* 1: unary, 2: binary */
  fopd in[2];
} fstep;

/* A chain (steps), or RMSNorm written out (rms: x, w, eps, recip). */
struct ccg__fused {
  uint32_t n_steps;
  fstep *steps;
  size_t numel;
  ccg_value_id out;
  bool rms;
  bool softmax;      /* a chain, then Softmax over rows of `len` (the output) */
  ccg_value_id x, w; /* w: CCG_NONE without the scale */
  float eps;
  bool recip; /* x * (1 / s) rather than x / s */
  size_t len; /* elements per row (rms, softmax, add_ln) */
  /* Add(x, b) -> s, LayerNormalization(s, w, bias) -> out over rows of
   * len (normalized from dim `axis`) */
  bool add_ln;
  ccg_value_id b, bias, s;
  int axis;
};

static bool fusable_op(ccg_op op, uint32_t *n_in) {
  switch (op) {
  case CCG_OP_ADD:
  case CCG_OP_SUB:
  case CCG_OP_MUL:
  case CCG_OP_DIV:
  case CCG_OP_POW:
    *n_in = 2;
    return true;
  case CCG_OP_NEG:
  case CCG_OP_RELU:
  case CCG_OP_GELU:
  case CCG_OP_TANH:
  case CCG_OP_ERF:
  case CCG_OP_SIGMOID:
  case CCG_OP_EXP:
  case CCG_OP_LOG:
  case CCG_OP_SQRT:
  case CCG_OP_RECIPROCAL:
  case CCG_OP_ABS:
  case CCG_OP_SOFTPLUS:
  case CCG_OP_SOFTSIGN:
  case CCG_OP_LEAKY_RELU:
  case CCG_OP_ELU:
  case CCG_OP_SELU:
  case CCG_OP_CELU:
  case CCG_OP_HARD_SIGMOID:
  case CCG_OP_HARD_SWISH:
    *n_in = 1;
    return true;
  default:
    return false;
  }
}

/* How step input v reads against the chain's shape o; false when it
 * broadcasts any other way. */
static bool classify(const ccg__xval *v, const ccg__xval *o, fopd *out) {
  if (v->dtype != CCG_DTYPE_F32)
    return false;
  if (v->numel == o->numel) {
    out->kind = OPD_DENSE;
    return true;
  }
  if (v->numel == 1) {
    out->kind = OPD_SCALAR;
    return true;
  }
  /* its dims, leading 1s dropped, are the output's last dims */
  int lead = 0;
  while (lead < v->rank && v->dims[lead] == 1)
    lead++;
  int m = v->rank - lead;
  if (m > o->rank || v->numel == 0)
    return false;
  for (int d = 0; d < m; d++)
    if (v->dims[lead + d] != o->dims[o->rank - m + d])
      return false;
  out->kind = OPD_ROW;
  out->row = v->numel;
  return true;
}

/* Step n can join a chain of o's shape: an f32 elementwise op the CPU runs
 * with each input read one of the ways above. */
static bool fusable(const ccg_exec *x, const ccg__xnode *n,
                    const ccg__xval *o) {
  uint32_t n_in;
  if (!n->run || n->comm || n->fused || n->n_out != 1 ||
      !fusable_op(n->op, &n_in) || n->n_in != n_in)
    return false;
  const ccg__xval *out = ccg__out(x, n, 0);
  if (out->dtype != CCG_DTYPE_F32 || out->rank != o->rank ||
      memcmp(out->dims, o->dims, (size_t)o->rank * sizeof(int64_t)) != 0)
    return false;
  for (uint32_t i = 0; i < n->n_in; i++) {
    fopd d;
    if (n->in[i] == CCG_NONE || !classify(ccg__in(x, n, i), o, &d))
      return false;
  }
  return true;
}

/* Per value: how many steps read it, and the last of them. */
typedef ccg__xuse use;

/* The step that follows step s in a chain, or -1. */
static long next_in_chain(const ccg_exec *x, const use *u, size_t s) {
  const ccg__xnode *n = &x->steps[s];
  ccg_value_id v = n->out[0];
  const ccg__xval *o = &x->vals[v];
  if (o->is_output || o->kind != CCG__V_ARENA || u[v].count != 1)
    return -1;
  const ccg__xnode *m = &x->steps[u[v].step];
  return fusable(x, m, o) ? (long)u[v].step : -1;
}

static const float *operand(const ccg_exec *x, const fopd *d, size_t i,
                            size_t k, const float *cur, float *tmp,
                            size_t *stride) {
  const float *p = d->kind == OPD_PREV ? cur : x->vals[d->v].ptr;
  *stride = 1;
  switch (d->kind) {
  case OPD_PREV:
    return p;
  case OPD_DENSE:
    return p + i;
  case OPD_SCALAR:
    *stride = 0;
    return p;
  default: { /* OPD_ROW: in place when the block stays in one row */
    size_t at = i % d->row;
    if (at + k <= d->row)
      return p + at;
    for (size_t done = 0; done < k;) {
      size_t piece = d->row - at < k - done ? d->row - at : k - done;
      memcpy(tmp + done, p + at, piece * sizeof(float));
      done += piece;
      at = 0;
    }
    return tmp;
  }
  }
}

/* The chain's steps over elements [i, i + k) (k <= FUSE_BLOCK), the last
 * step's results into dst. */
static void chain_block(ccg_exec *x, const struct ccg__fused *f, size_t i,
                        size_t k, float *dst, float *cur, float *t0,
                        float *t1) {
  for (uint32_t s = 0; s < f->n_steps; s++) {
    const fstep *st = &f->steps[s];
    float *o = s + 1 == f->n_steps ? dst : cur;
    size_t sa, sb;
    const float *a = operand(x, &st->in[0], i, k, cur, t0, &sa);
    if (st->n_in == 1) {
      ccg__un_f32_block(x->vm, st->op, st->p, a, o, k);
      continue;
    }
    const float *b = operand(x, &st->in[1], i, k, cur, t1, &sb);
    x->vm->bin(st->op, a, sa, b, sb, o, k);
  }
}

/* Blocks [begin, end) of the chain (the pool's split: every element is
 * computed the same way in any chunk). */
static void fused_blocks(ccg_exec *x, const ccg__xnode *n, size_t begin,
                         size_t end) {
  const struct ccg__fused *f = n->fused;
  float *out = x->vals[f->out].ptr;
  _Alignas(64) float cur[FUSE_BLOCK], t0[FUSE_BLOCK], t1[FUSE_BLOCK];
  for (size_t b = begin; b < end; b++) {
    size_t i = b * FUSE_BLOCK;
    size_t k = f->numel - i < FUSE_BLOCK ? f->numel - i : FUSE_BLOCK;
    chain_block(x, f, i, k, out + i, cur, t0, t1);
  }
}

static ccg_status run_fused(ccg_exec *x, const ccg__xnode *n) {
  const struct ccg__fused *f = n->fused;
  ccg__par_rows(x, n, (f->numel + FUSE_BLOCK - 1) / FUSE_BLOCK,
                FUSE_BLOCK * f->n_steps, fused_blocks);
  return CCG_STATUS_OK;
}

/* Rows [begin, end): the chain into the output, each row's Softmax while
 * it is still in cache. */
static void fused_softmax_rows(ccg_exec *x, const ccg__xnode *n, size_t begin,
                               size_t end) {
  const struct ccg__fused *f = n->fused;
  float *out = x->vals[f->out].ptr;
  _Alignas(64) float cur[FUSE_BLOCK], t0[FUSE_BLOCK], t1[FUSE_BLOCK];
  for (size_t r = begin * f->len; r < end * f->len; r += f->len) {
    for (size_t i = r; i < r + f->len; i += FUSE_BLOCK) {
      size_t k = r + f->len - i < FUSE_BLOCK ? r + f->len - i : FUSE_BLOCK;
      chain_block(x, f, i, k, out + i, cur, t0, t1);
    }
    ccg__softmax_row_f32(x->vm, out + r, f->len);
  }
}

static ccg_status run_fused_softmax(ccg_exec *x, const ccg__xnode *n) {
  const struct ccg__fused *f = n->fused;
  if (f->len)
    ccg__par_rows(x, n, f->numel / f->len, f->len * (f->n_steps + 4),
                  fused_softmax_rows);
  return CCG_STATUS_OK;
}

/* Makes steps chain[0..len) one step: the last runs them all and reads
 * every outside input (so liveness keeps those until then); the others
 * run nothing and their outputs take no memory. */
static ccg_status fuse_chain(ccg_exec *x, const size_t *chain, uint32_t len) {
  ccg__xnode *last = &x->steps[chain[len - 1]];
  const ccg__xval *o = ccg__out(x, last, 0);
  struct ccg__fused *f = ccg__arena_calloc(&x->arena, 1, sizeof *f);
  fstep *steps = ccg__arena_calloc(&x->arena, len, sizeof *steps);
  ccg_value_id *ins = ccg__arena_calloc(&x->arena, 2 * len + 1, sizeof *ins);
  if (!f || !steps || !ins)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory fusing");
  uint32_t n_ins = 0;
  for (uint32_t s = 0; s < len; s++) {
    const ccg__xnode *n = &x->steps[chain[s]];
    fstep *st = &steps[s];
    st->op = n->op;
    st->p = ccg__unp_of(n);
    st->n_in = n->n_in;
    ccg_value_id prev = s ? x->steps[chain[s - 1]].out[0] : CCG_NONE;
    for (uint32_t i = 0; i < n->n_in; i++) {
      fopd *d = &st->in[i];
      d->v = n->in[i];
      if (d->v == prev) {
        d->kind = OPD_PREV;
        continue;
      }
      classify(&x->vals[d->v], o, d);
      bool seen = false;
      for (uint32_t k = 0; k < n_ins; k++)
        seen = seen || ins[k] == d->v;
      if (!seen)
        ins[n_ins++] = d->v;
    }
  }
  f->n_steps = len;
  f->steps = steps;
  f->numel = o->numel;
  f->out = last->out[0];
  for (uint32_t s = 0; s + 1 < len; s++) {
    ccg__xnode *n = &x->steps[chain[s]];
    x->vals[n->out[0]].kind = CCG__V_UNUSED;
    n->run = NULL;
    n->n_in = n->n_out = 0;
    n->fused = f;
  }
  last->in = ins;
  last->n_in = n_ins;
  last->fused = f;
  last->run = run_fused;
  return CCG_STATUS_OK;
}

/* ---- RMSNorm written out ------------------------------------------------
 * Pow(x, 2) or Mul(x, x) -> ReduceMean over the last axis (kept) -> Add eps
 * -> Sqrt -> Div(x, s), or Reciprocal or Div(1, s) -> Mul(x, r) ->
 * optionally a Cast to f32 and Mul by a row w: one pass per row. The mean of
 * squares comes from the vector sum (the scalar table: the float squares summed
 * in double in order, as ReduceMean does); the rest is the unfused arithmetic
 * on the same elements. */

static void rms_rows(ccg_exec *x, const ccg__xnode *n, size_t begin,
                     size_t end) {
  const struct ccg__fused *f = n->fused;
  const float *in = x->vals[f->x].ptr;
  const float *w = f->w != CCG_NONE ? x->vals[f->w].ptr : NULL;
  float *out = x->vals[f->out].ptr;
  size_t len = f->len;
  for (size_t i = begin; i < end; i++) {
    const float *r = in + i * len;
    float *y = out + i * len;
    double sq = 0.0;
    if (x->vm->sum_sqdev)
      sq = x->vm->sum_sqdev(r, 0.0, len);
    else
      for (size_t k = 0; k < len; k++)
        sq += (double)(r[k] * r[k]);
    float s = sqrtf((float)(sq / (double)len) + f->eps);
    float d = f->recip ? 1.0f / s : s;
    x->vm->bin(f->recip ? CCG_OP_MUL : CCG_OP_DIV, r, 1, &d, 0, y, len);
    if (w)
      x->vm->bin(CCG_OP_MUL, y, 1, w, 1, y, len);
  }
}

static ccg_status run_rms(ccg_exec *x, const ccg__xnode *n) {
  const struct ccg__fused *f = n->fused;
  if (f->len)
    ccg__par_rows(x, n, f->numel / f->len, 4 * f->len, rms_rows);
  return CCG_STATUS_OK;
}

/* The step that alone reads step s's output (an f32 value that is no graph
 * output) when its op is `op`, else NULL. */
static ccg__xnode *only_reader(ccg_exec *x, const use *u, const ccg__xnode *n,
                               ccg_op op) {
  if (!n || n->n_out != 1 || n->fused)
    return NULL;
  ccg_value_id v = n->out[0];
  const ccg__xval *o = &x->vals[v];
  if (o->is_output || o->kind != CCG__V_ARENA || o->dtype != CCG_DTYPE_F32 ||
      u[v].count != 1)
    return NULL;
  ccg__xnode *m = &x->steps[u[v].step];
  return m->op == op && m->run && !m->fused ? m : NULL;
}

/* The other input of binary step n (one of whose inputs is v). */
static ccg_value_id other_in(const ccg__xnode *n, ccg_value_id v) {
  return n->in[0] == v ? n->in[1] : n->in[0];
}

/* Step s (a ReduceMean) starts the pattern: fuses it and returns true. */
static ccg_status fuse_rms(ccg_exec *x, const use *u, size_t s, bool *done) {
  *done = false;
  ccg__xnode *red = &x->steps[s];
  const ccg__xval *sq = ccg__in(x, red, 0), *m = ccg__out(x, red, 0);
  if (red->n_in != 1 || sq->first < 0 || sq->kind != CCG__V_ARENA ||
      u[red->in[0]].count != 1 || sq->is_output)
    return CCG_STATUS_OK;
  ccg__xnode *pw = &x->steps[sq->first];
  float two;
  bool is_sq = pw->n_in == 2 && pw->run && !pw->fused &&
               ((pw->op == CCG_OP_POW &&
                 ccg__const_scalar(x, pw->in[1], &two) && two == 2.0f) ||
                (pw->op == CCG_OP_MUL && pw->in[0] == pw->in[1]));
  if (!is_sq)
    return CCG_STATUS_OK;
  ccg_value_id xv = pw->in[0];
  const ccg__xval *xs = &x->vals[xv];
  int r = xs->rank;
  if (xs->dtype != CCG_DTYPE_F32 || r < 1 || m->rank != r ||
      m->dims[r - 1] != 1 || red->p.i0 != xs->dims[r - 1] ||
      m->numel * (size_t)xs->dims[r - 1] != xs->numel || sq->numel != xs->numel)
    return CCG_STATUS_OK;
  ccg__xnode *add = only_reader(x, u, red, CCG_OP_ADD);
  float eps;
  if (!add || !ccg__const_scalar(x, other_in(add, red->out[0]), &eps))
    return CCG_STATUS_OK;
  ccg__xnode *root = only_reader(x, u, add, CCG_OP_SQRT);
  ccg__xnode *div = only_reader(x, u, root, CCG_OP_DIV), *rec = NULL;
  float one;
  if (div && div->in[1] == root->out[0] &&
      ccg__const_scalar(x, div->in[0], &one) && one == 1.0f)
    rec = div, div = NULL; /* Div(1, s): 1 / s, as Reciprocal */
  else if (!div)
    rec = only_reader(x, u, root, CCG_OP_RECIPROCAL);
  ccg__xnode *mul = rec ? only_reader(x, u, rec, CCG_OP_MUL) : NULL;
  ccg__xnode *last = div ? div : mul;
  if (!last || (div && (div->in[0] != xv || div->in[1] != root->out[0])) ||
      (mul && other_in(mul, rec->out[0]) != xv))
    return CCG_STATUS_OK;
  /* the scale row, maybe after a Cast to f32 (an f32 copy) */
  ccg__xnode *cast = only_reader(x, u, last, CCG_OP_CAST);
  if (cast && ccg__out(x, cast, 0)->dtype != CCG_DTYPE_F32)
    cast = NULL;
  ccg__xnode *scale = only_reader(x, u, cast ? cast : last, CCG_OP_MUL);
  ccg_value_id w =
      scale ? other_in(scale, (cast ? cast : last)->out[0]) : CCG_NONE;
  fopd d;
  if (scale && (!classify(&x->vals[w], xs, &d) || d.kind != OPD_ROW ||
                d.row != (size_t)xs->dims[r - 1] ||
                ccg__out(x, scale, 0)->numel != xs->numel))
    scale = cast = NULL, w = CCG_NONE;
  if (scale)
    last = scale;
  else
    cast = NULL;
  struct ccg__fused *f = ccg__arena_calloc(&x->arena, 1, sizeof *f);
  ccg_value_id *ins = ccg__arena_calloc(&x->arena, 3, sizeof *ins);
  if (!f || !ins)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory fusing");
  *f = (struct ccg__fused){.numel = xs->numel,
                           .out = last->out[0],
                           .rms = true,
                           .x = xv,
                           .w = w,
                           .eps = eps,
                           .recip = rec != NULL,
                           .len = (size_t)xs->dims[r - 1]};
  ccg__xnode *steps[8] = {pw,  red,  add,  root, div ? div : rec,
                          mul, cast, scale};
  for (int k = 0; k < 8; k++) {
    if (!steps[k] || steps[k] == last)
      continue;
    x->vals[steps[k]->out[0]].kind = CCG__V_UNUSED;
    steps[k]->run = NULL;
    steps[k]->n_in = steps[k]->n_out = 0;
    steps[k]->fused = f;
  }
  ins[0] = xv;
  ins[1] = w;
  last->in = ins;
  last->n_in = w != CCG_NONE ? 2 : 1;
  last->fused = f;
  last->run = run_rms;
  *done = true;
  return CCG_STATUS_OK;
}

/* ---- residual Add, then LayerNormalization --------------------------------
 * Add(x, b) of two f32 values of one shape whose sum s (kept: the residual
 * stream reads it again) a LayerNormalization over its last dims reads:
 * both at the Add's step, row by row, the sum normalized while in L1.
 * The same arithmetic as the two kernels (vecmath's bin, the row of the
 * LayerNormalization kernel): the same bits. */

static void add_ln_rows(ccg_exec *x, const ccg__xnode *n, size_t begin,
                        size_t end) {
  const struct ccg__fused *f = n->fused;
  const float *a = x->vals[f->x].ptr, *b = x->vals[f->b].ptr;
  float *s = x->vals[f->s].ptr, *y = x->vals[f->out].ptr;
  const float *scale = x->scratch, *bias = scale + f->len;
  for (size_t i = begin; i < end; i++) {
    size_t o = i * f->len;
    x->vm->bin(CCG_OP_ADD, a + o, 1, b + o, 1, s + o, f->len);
    ccg__layer_norm_row_f32(x->vm, s + o, y + o, f->len, scale, bias, f->eps);
  }
}

static ccg_status run_add_ln(ccg_exec *x, const ccg__xnode *n) {
  const struct ccg__fused *f = n->fused;
  const ccg__xval *sv = &x->vals[f->s];
  float *scale = x->scratch, *bias = scale + f->len;
  ccg__norm_expand_param(&x->vals[f->w], sv, f->axis, scale);
  if (f->bias != CCG_NONE)
    ccg__norm_expand_param(&x->vals[f->bias], sv, f->axis, bias);
  else
    memset(bias, 0, f->len * sizeof(float));
  ccg__par_rows(x, n, f->numel / f->len, f->len, add_ln_rows);
  return CCG_STATUS_OK;
}

/* v can be read at step s: data of the graph or the run, or made before. */
static bool ready_at(const ccg_exec *x, ccg_value_id v, size_t s) {
  const ccg__xval *a = &x->vals[v];
  return a->kind == CCG__V_STATIC || a->kind == CCG__V_INPUT ||
         (a->kind == CCG__V_ARENA && a->first >= 0 && (size_t)a->first < s);
}

/* Step s (an Add) and the LayerNormalization that reads its sum. */
static ccg_status fuse_add_ln(ccg_exec *x, size_t s) {
  ccg__xnode *add = &x->steps[s];
  if (add->op != CCG_OP_ADD || !add->run || add->fused || add->n_in != 2 ||
      add->n_out != 1)
    return CCG_STATUS_OK;
  ccg_value_id sv = add->out[0];
  const ccg__xval *o = &x->vals[sv];
  const ccg__xval *a = ccg__in(x, add, 0), *b = ccg__in(x, add, 1);
  if (o->kind != CCG__V_ARENA || o->dtype != CCG_DTYPE_F32 || !a || !b ||
      a->dtype != CCG_DTYPE_F32 || b->dtype != CCG_DTYPE_F32 ||
      a->numel != o->numel || b->numel != o->numel || o->numel == 0)
    return CCG_STATUS_OK;
  ccg__xnode *ln = NULL;
  for (size_t k = s + 1; k < x->n_steps && !ln; k++) {
    ccg__xnode *m = &x->steps[k];
    if (m->op == CCG_OP_LAYER_NORM && m->run && !m->fused && m->n_in >= 2 &&
        m->in[0] == sv)
      ln = m;
  }
  bool stats = ln && ((ln->n_out > 1 && ln->out[1] != CCG_NONE) ||
                      (ln->n_out > 2 && ln->out[2] != CCG_NONE));
  if (!ln || stats || ccg__out(x, ln, 0)->dtype != CCG_DTYPE_F32 ||
      ln->p.i1 <= 0 || ln->in[1] == CCG_NONE || !ready_at(x, ln->in[1], s) ||
      (ln->n_in > 2 && ln->in[2] != CCG_NONE && !ready_at(x, ln->in[2], s)))
    return CCG_STATUS_OK;
  struct ccg__fused *f = ccg__arena_calloc(&x->arena, 1, sizeof *f);
  ccg_value_id *ins = ccg__arena_calloc(&x->arena, 4, sizeof *ins);
  ccg_value_id *outs = ccg__arena_calloc(&x->arena, 2, sizeof *outs);
  if (!f || !ins || !outs)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory fusing");
  ccg_value_id bias = ln->n_in > 2 ? ln->in[2] : CCG_NONE;
  *f = (struct ccg__fused){.numel = o->numel,
                           .out = ln->out[0],
                           .x = add->in[0],
                           .w = ln->in[1],
                           .eps = ln->p.f0,
                           .len = (size_t)ln->p.i1,
                           .add_ln = true,
                           .b = add->in[1],
                           .bias = bias,
                           .s = sv,
                           .axis = ln->p.axis};
  ins[0] = add->in[0];
  ins[1] = add->in[1];
  ins[2] = ln->in[1];
  ins[3] = bias;
  outs[0] = sv;
  outs[1] = ln->out[0];
  x->vals[ln->out[0]].first = (int)s;
  add->in = ins;
  add->n_in = bias != CCG_NONE ? 4 : 3;
  add->out = outs;
  add->n_out = 2;
  add->fused = f;
  add->run = run_add_ln;
  add->scratch = 2 * f->len * sizeof(float);
  ln->run = NULL;
  ln->n_in = ln->n_out = 0;
  ln->fused = f;
  return CCG_STATUS_OK;
}

/* Step s's output is read by a Softmax alone (then a chain of one step is
 * worth making: the Softmax takes it in). */
static bool feeds_softmax(const ccg_exec *x, const use *u, size_t s) {
  ccg_value_id v = x->steps[s].out[0];
  const ccg__xval *o = &x->vals[v];
  return !o->is_output && o->kind == CCG__V_ARENA && u[v].count == 1 &&
         x->steps[u[v].step].op == CCG_OP_SOFTMAX;
}

/* ---- Softmax after a chain -----------------------------------------------
 * A Softmax over the last axis (f32) whose input is a fused chain's output
 * read by it alone (a scaled, masked attention score) takes the chain in:
 * each row is computed and normalized while in cache. The chain's last
 * step then runs nothing and its output takes no memory. */
static ccg_status fuse_softmax(ccg_exec *x, const use *u, ccg__xnode *sm) {
  const ccg__xval *a = ccg__in(x, sm, 0), *o = ccg__out(x, sm, 0);
  if (sm->op != CCG_OP_SOFTMAX || !sm->run || sm->fused || sm->n_in != 1 ||
      sm->p.i2 != 1 || sm->p.i1 < 1 || a->dtype != CCG_DTYPE_F32 ||
      o->dtype != CCG_DTYPE_F32 || a->first < 0 || a->is_output ||
      a->kind != CCG__V_ARENA || u[sm->in[0]].count != 1)
    return CCG_STATUS_OK;
  ccg__xnode *last = &x->steps[a->first];
  const struct ccg__fused *chain = last->fused;
  if (last->run != run_fused || chain->out != sm->in[0])
    return CCG_STATUS_OK;
  struct ccg__fused *f = ccg__arena_calloc(&x->arena, 1, sizeof *f);
  if (!f)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory fusing");
  *f = *chain;
  f->softmax = true;
  f->len = (size_t)sm->p.i1;
  f->out = sm->out[0];
  x->vals[sm->in[0]].kind = CCG__V_UNUSED;
  sm->in = last->in;
  sm->n_in = last->n_in;
  sm->fused = f;
  sm->run = run_fused_softmax;
  last->run = NULL;
  last->n_in = last->n_out = 0;
  return CCG_STATUS_OK;
}

ccg_status ccg__fuse_plan(ccg_exec *x) {
  if (x->backend != &ccg__cpu_backend || !ccg__exec_fuse_enabled())
    return CCG_STATUS_OK;
  use *u = ccg__arena_calloc(&x->arena, x->n_vals + 1, sizeof *u);
  size_t *chain = ccg__arena_calloc(&x->arena, x->n_steps + 1, sizeof *chain);
  if (!u || !chain)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory fusing");
  for (size_t s = 0; s < x->n_steps; s++)
    CCG_CHECK(fuse_add_ln(x, s));
  ccg__count_uses(x, u);
  for (size_t s = 0; s < x->n_steps; s++) {
    bool done;
    if (x->steps[s].op == CCG_OP_REDUCE_MEAN && x->steps[s].run &&
        !x->steps[s].fused)
      CCG_CHECK(fuse_rms(x, u, s, &done));
  }
  for (size_t s = 0; s < x->n_steps; s++) {
    ccg__xnode *n = &x->steps[s];
    if (n->n_out != 1 || n->out[0] == CCG_NONE ||
        !fusable(x, n, ccg__out(x, n, 0)))
      continue;
    uint32_t len = 1;
    chain[0] = s;
    for (long m = next_in_chain(x, u, s); m >= 0;
         m = next_in_chain(x, u, (size_t)m))
      chain[len++] = (size_t)m;
    if (len > 1 || feeds_softmax(x, u, chain[0]))
      CCG_CHECK(fuse_chain(x, chain, len));
  }
  for (size_t s = 0; s < x->n_steps; s++)
    CCG_CHECK(fuse_softmax(x, u, &x->steps[s]));
  return CCG_STATUS_OK;
}
