/* Fused attention (docs/exec.md, "Fused kernels"): at create, on the CPU
 * backend, MatMul(Q, Kt) [-> Div or Mul by a constant scalar] [-> Add of
 * a mask] -> Softmax over the last axis [-> f32 Casts] -> MatMul(., V),
 * each intermediate read by the next step alone, runs as one step. Per batch
 * entry (batch and head), blocks of query rows: their scores into a scratch
 * block of `rows` x T, scaled, masked and normalized in place while in cache,
 * then times V into the output. The full scores tensor is never written. A
 * Transpose feeding Q, Kt or V (read by it alone) becomes a strided read,
 * and a Transpose that alone reads the output a strided write: the GEMMs
 * take any operand whose rows or columns are contiguous. Where K's or V's
 * rows fall 4 KiB apart (1024 floats of heads), the entry's matrix is
 * first packed contiguous in the scratch, once per entry. The row
 * arithmetic is the unfused kernels' (vecmath's bin, the Softmax row);
 * the products are the same GEMM over fewer rows. */
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/norm.h"

/* Scores per block: 16384 floats (64 KiB) stay in L2 beside Q's and V's
 * rows. */
#define ATTN_BLOCK 16384
/* Scratch slots: entries are taken in this many slices at most, each with
 * its own scores block and packed K and V (320 KiB for h1024), so that the
 * scratch does not grow with the batch; a pool of more threads than this
 * runs the attention no faster. */
#define ATTN_SLOTS 8

/* An operand read through strides over the scores' rank: batch dims (0
 * where broadcast), then its two matrix dims. */
typedef struct aview {
  ccg_value_id v;
  int64_t st[CCG_MAX_RANK];
  bool pack; /* rows 4 KiB apart: copied contiguous per entry */
} aview;

struct ccg__fattn {
  int rank;                      /* of the scores */
  int64_t bdims[CCG_MAX_RANK];   /* batch dims (rank - 2) */
  int64_t nb, S, T, D, Dv, rows; /* batch entries; block of query rows */
  int64_t slots, slot;           /* scratch slots; floats in each */
  aview q, k, v, o, mask;        /* mask.v: CCG_NONE without one */
  ccg_op scale_op;               /* CCG_OP_COUNT: no scale */
  float scale;
};

typedef struct ajob {
  ccg_exec *x;
  const struct ccg__fattn *f;
  float *scratch;
} ajob;

/* Row-major GEMM operand of r x c from a view's last two strides: rows
 * contiguous (no transpose) or columns contiguous (transposed). */
static bool gemm_side(int64_t r, int64_t c, int64_t rs, int64_t cs, bool *t,
                      int64_t *ld) {
  if (cs == 1 || c == 1) {
    *t = false;
    *ld = r == 1 ? (c > rs ? c : rs) : rs;
    return *ld >= c;
  }
  if (rs == 1 || r == 1) {
    *t = true;
    *ld = cs;
    return *ld >= r;
  }
  return false;
}

/* Floats of n rounded up to a cache line. */
static int64_t line(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* An operand's matrix: its r x c elements at a with strides rs, cs. Packed
 * (into *buf, which then moves past it), its contiguous dim stays so: the
 * GEMM reads it as before, from lines that do not share cache sets. */
typedef struct amat {
  const float *a;
  int64_t rs, cs;
} amat;

static amat operand_at(const aview *w, int r, const float *base, int64_t off,
                       int64_t rows, int64_t cols, bool as_rows, float **buf) {
  amat m = {base + off, w->st[r - 2], w->st[r - 1]};
  if (!w->pack)
    return m;
  float *dst = *buf;
  if (as_rows && m.cs != 1 && cols != 1) {
    /* transposed into rows, 16 columns at a time: the 16 source lines stay
     * in cache while every row takes its 16 floats */
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      int64_t jn = cols - j0 < 16 ? cols - j0 : 16;
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = j0; j < j0 + jn; j++)
          dst[i * cols + j] = m.a[i * m.rs + j * m.cs];
    }
    m.rs = cols;
    m.cs = 1;
  } else if (m.cs == 1 || cols == 1) {
    for (int64_t i = 0; i < rows; i++)
      memcpy(dst + i * cols, m.a + i * m.rs, (size_t)cols * sizeof *dst);
    m.rs = cols;
    m.cs = 1;
  } else {
    for (int64_t i = 0; i < cols; i++)
      memcpy(dst + i * rows, m.a + i * m.cs, (size_t)rows * sizeof *dst);
    m.rs = 1;
    m.cs = rows;
  }
  m.a = dst;
  *buf += line(rows * cols);
  return m;
}

static void attn_entry(const ajob *j, int64_t e, float *sc) {
  const struct ccg__fattn *f = j->f;
  ccg_exec *x = j->x;
  int r = f->rank;
  int64_t qo = 0, ko = 0, vo = 0, oo = 0, mo = 0, t = e;
  for (int d = r - 3; d >= 0; d--) {
    int64_t i = t % f->bdims[d];
    t /= f->bdims[d];
    qo += i * f->q.st[d];
    ko += i * f->k.st[d];
    vo += i * f->v.st[d];
    oo += i * f->o.st[d];
    mo += i * f->mask.st[d];
  }
  const float *mask = f->mask.v != CCG_NONE ? x->vals[f->mask.v].ptr : NULL;
  float *buf = sc + line(f->rows * f->T);
  bool rows = ccg__gemm_lib_own(x->gemm_lib);
  amat q =
      operand_at(&f->q, r, x->vals[f->q.v].ptr, qo, f->S, f->D, rows, &buf);
  amat k =
      operand_at(&f->k, r, x->vals[f->k.v].ptr, ko, f->D, f->T, rows, &buf);
  amat v =
      operand_at(&f->v, r, x->vals[f->v.v].ptr, vo, f->T, f->Dv, rows, &buf);
  float *o = (float *)x->vals[f->o.v].ptr + oo;
  for (int64_t r0 = 0; r0 < f->S; r0 += f->rows) {
    int64_t m = f->S - r0 < f->rows ? f->S - r0 : f->rows;
    ccg__gemm g = CCG__GEMM_INIT;
    g.m = m;
    g.n = f->T;
    g.k = f->D;
    gemm_side(m, f->D, q.rs, q.cs, &g.ta, &g.lda);
    gemm_side(f->D, f->T, k.rs, k.cs, &g.tb, &g.ldb);
    g.a = q.a + r0 * q.rs;
    g.b = k.a;
    g.c = sc;
    g.ldc = f->T;
    ccg__sgemm(x, &g);
    for (int64_t i = 0; i < m; i++) {
      float *row = sc + i * f->T;
      if (f->scale_op != CCG_OP_COUNT)
        x->vm->bin(f->scale_op, row, 1, &f->scale, 0, row, (size_t)f->T);
      if (mask)
        x->vm->bin(CCG_OP_ADD, row, 1, mask + mo + (r0 + i) * f->mask.st[r - 2],
                   (size_t)f->mask.st[r - 1], row, (size_t)f->T);
      ccg__softmax_row_f32(x->vm, row, (size_t)f->T);
    }
    ccg__gemm h = CCG__GEMM_INIT;
    h.m = m;
    h.n = f->Dv;
    h.k = f->T;
    h.a = sc;
    h.lda = f->T;
    gemm_side(f->T, f->Dv, v.rs, v.cs, &h.tb, &h.ldb);
    h.b = v.a;
    h.c = o + r0 * f->o.st[r - 2];
    h.ldc = f->o.st[r - 2];
    ccg__sgemm(x, &h);
  }
}

/* Slices [begin, end) of the batch entries, each with its own slot of the
 * scratch. */
static void attn_range(void *ctx, size_t begin, size_t end) {
  const ajob *j = ctx;
  const struct ccg__fattn *f = j->f;
  for (size_t s = begin; s < end; s++) {
    int64_t e0 = f->nb * (int64_t)s / f->slots;
    int64_t e1 = f->nb * (int64_t)(s + 1) / f->slots;
    for (int64_t e = e0; e < e1; e++)
      attn_entry(j, e, j->scratch + (int64_t)s * f->slot);
  }
}

static ccg_status run_attn(ccg_exec *x, const ccg__xnode *n) {
  const struct ccg__fattn *f = n->attn;
  ajob j = {x, f, x->scratch};
  double flops = 2.0 * (double)f->nb * (double)f->S * (double)f->T *
                 (double)(f->D + f->Dv + 8);
  ccg__parallel_for(x->pool, (size_t)f->slots, 1,
                    flops / CCG__PAR_FLOPS_PER_WORK, attn_range, &j);
  return CCG_STATUS_OK;
}

/* ---- the pattern --------------------------------------------------------- */

typedef ccg__xuse use;

/* v is an f32 arena value, no graph output, read by one step. */
static bool private_val(const ccg_exec *x, const use *u, ccg_value_id v) {
  const ccg__xval *a = &x->vals[v];
  return a->kind == CCG__V_ARENA && !a->is_output &&
         a->dtype == CCG_DTYPE_F32 && u[v].count == 1 && a->first >= 0;
}

/* The step that made v, when it is a live op-`op` step with one output. */
static ccg__xnode *maker(ccg_exec *x, ccg_value_id v, ccg_op op) {
  int s = x->vals[v].first;
  if (s < 0)
    return NULL;
  ccg__xnode *n = &x->steps[s];
  return n->op == op && n->run && !n->fused && !n->attn && !n->epi &&
                 n->n_out == 1 && n->out[0] == v
             ? n
             : NULL;
}

static bool same_dims(const ccg__xval *a, const ccg__xval *b) {
  return a->rank == b->rank &&
         memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0;
}

/* Rows `ld` floats apart fall in the same L1 sets when that is a multiple
 * of 4 KiB. The GEMM packs its right operand again for every block of
 * query rows, so K and V read that way cost more than a Transpose (h1024
 * attention: 10.7 ms CPU against 7.4 with the Transposes) and are packed
 * once per entry instead (7.6); Q, read once per block, and the output,
 * written once, stay strided (packing them too: 8.0). */
static bool aliased(int64_t ld) { return ld * 4 % 4096 == 0; }

/* The view of value v (dims a suffix of the scores' batch dims, each 1 or
 * equal, then two matrix dims) over rank r with strides st of v's own
 * dims; false when v does not broadcast that way. */
static bool embed(const ccg__xval *val, const int64_t *st, int r,
                  const int64_t *bdims, aview *out) {
  if (val->rank < 2 || val->rank > r)
    return false;
  int lead = r - val->rank;
  memset(out->st, 0, sizeof out->st);
  for (int d = 0; d < val->rank; d++) {
    int od = lead + d;
    if (od < r - 2 && val->dims[d] != bdims[od] && val->dims[d] != 1)
      return false;
    out->st[od] = val->dims[d] == 1 && od < r - 2 ? 0 : st[d];
  }
  return true;
}

/* The view of MatMul operand v: through the Transpose that made it when
 * v is read by the MatMul alone and the strided matrix suits the GEMM;
 * else v itself. *tr: the folded Transpose (or NULL). `right`: the GEMM's
 * right operand (K, V), packed where its rows are aliased. */
static bool operand(ccg_exec *x, const use *u, ccg_value_id v, int r,
                    const int64_t *bdims, bool right, aview *out,
                    ccg__xnode **tr) {
  const ccg__xval *val = &x->vals[v];
  *tr = NULL;
  if (val->dtype != CCG_DTYPE_F32)
    return false;
  ccg__xnode *t = private_val(x, u, v) ? maker(x, v, CCG_OP_TRANSPOSE) : NULL;
  if (t && t->n_in == 1 && ccg__in(x, t, 0)->dtype == CCG_DTYPE_F32 &&
      embed(val, t->p.chunk, r, bdims, out)) {
    bool tt;
    int64_t ld;
    if (gemm_side(val->dims[val->rank - 2], val->dims[val->rank - 1],
                  out->st[r - 2], out->st[r - 1], &tt, &ld)) {
      /* ccgraph's own GEMM reads a right operand whose rows are
       * contiguous in place and packs a transposed one for every block
       * of query rows: K is then packed once per entry, as rows */
      out->pack =
          right && (aliased(ld) || (tt && ccg__gemm_lib_own(x->gemm_lib)));
      out->v = t->in[0];
      *tr = t;
      return true;
    }
  }
  int64_t st[CCG_MAX_RANK];
  ccg__strides(val->rank, val->dims, st);
  out->v = v;
  return embed(val, st, r, bdims, out);
}

/* The output's view: the Transpose that alone reads o, written through
 * its permutation when the rows stay contiguous; else o itself. */
static void output_view(ccg_exec *x, const use *u, ccg_value_id o, int r,
                        aview *out, ccg__xnode **tr) {
  const ccg__xval *ov = &x->vals[o];
  ccg__strides(r, ov->dims, out->st);
  out->v = o;
  *tr = NULL;
  if (!private_val(x, u, o))
    return;
  ccg__xnode *t = &x->steps[u[o].step];
  if (t->op != CCG_OP_TRANSPOSE || !t->run || t->fused || t->n_in != 1 ||
      t->n_out != 1 || ccg__out(x, t, 0)->dtype != CCG_DTYPE_F32)
    return;
  const int64_t *perm;
  size_t np = ccg__xattr_ints(x, t, "perm", &perm);
  if (np != 0 && np != (size_t)r)
    return;
  int64_t yst[CCG_MAX_RANK], st[CCG_MAX_RANK];
  ccg__strides(r, ccg__out(x, t, 0)->dims, yst);
  for (int j = 0; j < r; j++)
    st[np ? perm[j] : r - 1 - j] = yst[j];
  if (st[r - 1] != 1 && ov->dims[r - 1] != 1)
    return;
  if (st[r - 2] < ov->dims[r - 1])
    return;
  memcpy(out->st, st, sizeof st);
  out->v = t->out[0];
  *tr = t;
}

static void empty(ccg_exec *x, ccg__xnode *n) {
  if (!n)
    return;
  x->vals[n->out[0]].kind = CCG__V_UNUSED;
  n->run = NULL;
  n->n_in = n->n_out = 0;
}

/* The steps of one match: the MatMuls, scale, mask Add, Softmax and Casts
 * (NULL where absent). */
typedef struct amatch {
  ccg__xnode *mm1, *sc, *add, *sm, *casts[2], *mm2;
  ccg_value_id scores, mask;
  ccg_op scale_op;
  float scale;
} amatch;

/* Forward from the Softmax: f32 -> f32 Casts (copies: HF's
 * softmax(dtype=float32).to(q.dtype)), then MatMul(., V). */
static bool match_pv(ccg_exec *x, const use *u, amatch *m) {
  ccg_value_id p = m->sm->out[0];
  ccg__xnode *n = &x->steps[u[p].step];
  for (int i = 0; i < 2 && n->op == CCG_OP_CAST; i++) {
    if (!n->run || n->fused || n->n_in != 1 || n->n_out != 1 ||
        !private_val(x, u, n->out[0]))
      return false;
    m->casts[i] = n;
    p = n->out[0];
    n = &x->steps[u[p].step];
  }
  m->mm2 = n;
  return n->op == CCG_OP_MATMUL && n->run && !n->fused && !n->attn && !n->epi &&
         n->n_in == 2 && n->n_out == 1 && n->in[0] == p && n->in[1] != p;
}

/* Back from the Softmax: [Add mask] <- [Div/Mul by a constant] <- MatMul. */
static bool match_qk(ccg_exec *x, const use *u, amatch *m) {
  ccg_value_id c = m->sm->in[0];
  m->mask = CCG_NONE;
  if ((m->add = maker(x, c, CCG_OP_ADD))) {
    const ccg__xnode *a = m->add;
    if (a->n_in != 2 || a->in[0] == a->in[1])
      return false;
    for (int side = 0; side < 2 && m->mask == CCG_NONE; side++) {
      ccg_value_id in = a->in[side];
      if (private_val(x, u, in) &&
          (maker(x, in, CCG_OP_MATMUL) || maker(x, in, CCG_OP_DIV) ||
           maker(x, in, CCG_OP_MUL))) {
        c = in;
        m->mask = a->in[1 - side];
      }
    }
    if (m->mask == CCG_NONE)
      return false;
  }
  m->scale_op = CCG_OP_COUNT;
  ccg__xnode *sc = maker(x, c, CCG_OP_DIV);
  sc = sc ? sc : maker(x, c, CCG_OP_MUL);
  if ((m->sc = sc)) {
    /* Div(s, c); Mul(s, c) or Mul(c, s) */
    int side = sc->n_in == 2 && sc->op == CCG_OP_MUL &&
                       ccg__const_scalar(x, sc->in[0], &m->scale)
                   ? 1
                   : 0;
    if (sc->n_in != 2 || !ccg__const_scalar(x, sc->in[1 - side], &m->scale) ||
        !private_val(x, u, sc->in[side]))
      return false;
    c = sc->in[side];
    m->scale_op = sc->op;
  }
  m->scores = c;
  m->mm1 = maker(x, c, CCG_OP_MATMUL);
  return m->mm1 && m->mm1->n_in == 2 && private_val(x, u, c);
}

/* The sizes of a match: scores [batch.., S, T] at every step between the
 * MatMuls, Q [.., S, D], Kt [.., D, T], V [.., T, Dv], the output
 * [batch.., S, Dv]; false for anything else or an empty dim. */
static bool match_dims(ccg_exec *x, const amatch *m, struct ccg__fattn *f) {
  const ccg__xval *s = &x->vals[m->scores], *ov = ccg__out(x, m->mm2, 0);
  const ccg__xval *qv = ccg__in(x, m->mm1, 0), *kv = ccg__in(x, m->mm1, 1);
  const ccg__xval *vv = ccg__in(x, m->mm2, 1);
  int r = s->rank;
  if (r < 2 || !same_dims(ccg__in(x, m->sm, 0), s) ||
      !same_dims(ccg__out(x, m->sm, 0), s) ||
      (m->sc && !same_dims(ccg__out(x, m->sc, 0), s)) ||
      (m->add && !same_dims(ccg__out(x, m->add, 0), s)) || ov->rank != r ||
      ov->dtype != CCG_DTYPE_F32 || qv->rank < 2 || kv->rank < 2 ||
      vv->rank < 2 || m->sm->p.i1 != s->dims[r - 1])
    return false;
  f->rank = r;
  f->nb = 1;
  for (int d = 0; d < r - 2; d++) {
    f->bdims[d] = s->dims[d];
    f->nb *= s->dims[d];
    if (ov->dims[d] != s->dims[d])
      return false;
  }
  f->S = s->dims[r - 2];
  f->T = s->dims[r - 1];
  f->D = qv->dims[qv->rank - 1];
  f->Dv = ov->dims[r - 1];
  return f->nb > 0 && f->S > 0 && f->T > 0 && f->D > 0 && f->Dv > 0 &&
         ov->dims[r - 2] == f->S && qv->dims[qv->rank - 2] == f->S &&
         kv->dims[kv->rank - 2] == f->D && kv->dims[kv->rank - 1] == f->T &&
         vv->dims[vv->rank - 2] == f->T && vv->dims[vv->rank - 1] == f->Dv;
}

/* The mask's view: f32, its dims 1 or the scores' (right-aligned), its
 * rows contiguous or one broadcast element. */
static bool mask_view(ccg_exec *x, ccg_value_id mask, const ccg__xval *s,
                      aview *out) {
  out->v = mask;
  if (mask == CCG_NONE)
    return true;
  const ccg__xval *mv = &x->vals[mask];
  int64_t st[CCG_MAX_RANK];
  int r = s->rank, lead = r - mv->rank;
  if (mv->dtype != CCG_DTYPE_F32 || lead < 0)
    return false;
  ccg__strides(mv->rank, mv->dims, st);
  for (int d = 0; d < mv->rank; d++) {
    if (mv->dims[d] != 1 && mv->dims[d] != s->dims[lead + d])
      return false;
    out->st[lead + d] = mv->dims[d] == 1 ? 0 : st[d];
  }
  return out->st[r - 1] <= 1;
}

/* Makes mm2 the one step of the match: it reads Q, K, V (through the
 * folded Transposes) and the mask, and writes the output (or the folded
 * Transpose's); the other steps run nothing. */
static ccg_status rewrite(ccg_exec *x, const amatch *m,
                          const struct ccg__fattn *f, ccg__xnode *const *tr,
                          ccg__xnode *to) {
  struct ccg__fattn *fa = ccg__arena_calloc(&x->arena, 1, sizeof *fa);
  ccg_value_id *ins = ccg__arena_calloc(&x->arena, 4, sizeof *ins);
  if (!fa || !ins)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory fusing");
  *fa = *f;
  ins[0] = f->q.v;
  ins[1] = f->k.v;
  ins[2] = f->v.v;
  ins[3] = f->mask.v;
  ccg__xnode *gone[9] = {m->mm1, m->sc, m->add,      m->sm,      tr[0],
                         tr[1],  tr[2], m->casts[0], m->casts[1]};
  for (int i = 0; i < 9; i++)
    empty(x, gone[i]);
  ccg__xnode *mm2 = m->mm2;
  if (to) { /* its output is the fused step's */
    x->vals[mm2->out[0]].kind = CCG__V_UNUSED;
    to->run = NULL;
    to->n_in = to->n_out = 0;
  }
  mm2->out[0] = f->o.v;
  x->vals[f->o.v].first = (int)(mm2 - x->steps);
  mm2->in = ins;
  mm2->n_in = f->mask.v != CCG_NONE ? 4 : 3;
  mm2->attn = fa;
  mm2->run = run_attn;
  mm2->scratch = (size_t)(f->slots * f->slot) * sizeof(float);
  return CCG_STATUS_OK;
}

/* Softmax step sm starts the pattern; fuses it when everything matches. */
static ccg_status try_attn(ccg_exec *x, const use *u, ccg__xnode *sm) {
  amatch m;
  memset(&m, 0, sizeof m);
  m.sm = sm;
  if (sm->n_in != 1 || sm->n_out != 1 || sm->p.i2 != 1 ||
      !private_val(x, u, sm->in[0]) || !private_val(x, u, sm->out[0]) ||
      !match_pv(x, u, &m) || !match_qk(x, u, &m))
    return CCG_STATUS_OK;
  struct ccg__fattn f;
  memset(&f, 0, sizeof f);
  ccg__xnode *tr[3], *to;
  if (!match_dims(x, &m, &f) ||
      !operand(x, u, m.mm1->in[0], f.rank, f.bdims, false, &f.q, &tr[0]) ||
      !operand(x, u, m.mm1->in[1], f.rank, f.bdims, true, &f.k, &tr[1]) ||
      !operand(x, u, m.mm2->in[1], f.rank, f.bdims, true, &f.v, &tr[2]) ||
      !mask_view(x, m.mask, &x->vals[m.scores], &f.mask))
    return CCG_STATUS_OK;
  output_view(x, u, m.mm2->out[0], f.rank, &f.o, &to);
  f.scale_op = m.scale_op;
  f.scale = m.scale;
  f.rows = ATTN_BLOCK / f.T;
  f.rows = f.rows < 1 ? 1 : f.rows > f.S ? f.S : f.rows;
  f.slots = f.nb < ATTN_SLOTS ? f.nb : ATTN_SLOTS;
  f.slot = line(f.rows * f.T) + (f.k.pack ? line(f.D * f.T) : 0) +
           (f.v.pack ? line(f.T * f.Dv) : 0);
  return rewrite(x, &m, &f, tr, to);
}

ccg_status ccg__fuse_attention(ccg_exec *x) {
  if (x->backend != &ccg__cpu_backend || !ccg__exec_fuse_enabled())
    return CCG_STATUS_OK;
  use *u = ccg__arena_calloc(&x->arena, x->n_vals + 1, sizeof *u);
  if (!u)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory fusing");
  ccg__count_uses(x, u);
  for (size_t s = 0; s < x->n_steps; s++) {
    ccg__xnode *n = &x->steps[s];
    if (n->op == CCG_OP_SOFTMAX && n->run && !n->fused && !n->attn)
      CCG_CHECK(try_attn(x, u, n));
  }
  return CCG_STATUS_OK;
}
