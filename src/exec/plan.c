/* The memory plan: liveness over the schedule (under overlap a
 * collective's buffers live until the step that waits for it), outputs written
 * over dying inputs for elementwise ops, then offsets in one arena: the
 * smaller of an online best fit and an offline greedy-by-size plan. On the
 * CPU a compute step's scratch (n->scratch bytes) is a buffer of the plan
 * too, alive at its step alone: it lands in a hole of the arena where one
 * is free, and the plan's peak counts it where none is.
 * Also the figures to judge it by: the naive sum and the max-live lower bound.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/internal.h"

typedef struct buffer {
  size_t size;
  int start, last;
  size_t offset;
} buffer;

typedef struct block {
  size_t off, size;
} block;

typedef struct freelist {
  block *b;
  size_t n;
  size_t top; /* arena high-water mark */
} freelist;

static size_t round_up(size_t n) {
  return (n + CCG__ALIGN - 1) / CCG__ALIGN * CCG__ALIGN;
}

/* Smallest free block that fits, else the top (growing a free block that
 * ends there). */
static size_t fl_alloc(freelist *f, size_t need) {
  size_t best = f->n;
  for (size_t i = 0; i < f->n; i++)
    if (f->b[i].size >= need &&
        (best == f->n || f->b[i].size < f->b[best].size))
      best = i;
  if (best < f->n) {
    size_t off = f->b[best].off;
    f->b[best].off += need;
    f->b[best].size -= need;
    if (f->b[best].size == 0) {
      memmove(&f->b[best], &f->b[best + 1], (f->n - best - 1) * sizeof(block));
      f->n--;
    }
    return off;
  }
  if (f->n && f->b[f->n - 1].off + f->b[f->n - 1].size == f->top) {
    size_t off = f->b[f->n - 1].off;
    f->n--;
    f->top = off + need;
    return off;
  }
  size_t off = f->top;
  f->top += need;
  return off;
}

/* Returns a block, merging with its neighbours (the list stays sorted). */
static void fl_free(freelist *f, size_t off, size_t size) {
  size_t i = 0;
  while (i < f->n && f->b[i].off < off)
    i++;
  memmove(&f->b[i + 1], &f->b[i], (f->n - i) * sizeof(block));
  f->b[i] = (block){off, size};
  f->n++;
  if (i + 1 < f->n && f->b[i].off + f->b[i].size == f->b[i + 1].off) {
    f->b[i].size += f->b[i + 1].size;
    memmove(&f->b[i + 1], &f->b[i + 2], (f->n - i - 2) * sizeof(block));
    f->n--;
  }
  if (i > 0 && f->b[i - 1].off + f->b[i - 1].size == f->b[i].off) {
    f->b[i - 1].size += f->b[i].size;
    memmove(&f->b[i], &f->b[i + 1], (f->n - i - 1) * sizeof(block));
    f->n--;
  }
}

/* The offline plan (greedy by size): the largest buffers first, each at the
 * lowest offset where it overlaps no placed buffer alive at the same time.
 * Knowing every lifetime, it often packs tighter than the online best fit;
 * the planner keeps whichever is smaller. O(n^2): only up to
 * BY_SIZE_MAX buffers. Returns the arena size; offsets into `off`. */
#define BY_SIZE_MAX 8192

typedef struct size_key {
  size_t size, idx;
  int start;
} size_key;

static int by_size(const void *a, const void *b) {
  const size_key *x = a, *y = b;
  if (x->size != y->size)
    return x->size < y->size ? 1 : -1;
  if (x->start != y->start)
    return (x->start > y->start) - (x->start < y->start);
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static size_t plan_by_size(const buffer *bufs, size_t nb, size_key *order,
                           size_t *placed, size_t *off) {
  for (size_t i = 0; i < nb; i++)
    order[i] = (size_key){bufs[i].size, i, bufs[i].start};
  qsort(order, nb, sizeof *order, by_size);
  size_t n_placed = 0, top = 0;
  for (size_t k = 0; k < nb; k++) {
    const buffer *b = &bufs[order[k].idx];
    /* placed is sorted by offset: the first gap that fits */
    size_t at = 0, pos = n_placed;
    for (size_t i = 0; i < n_placed; i++) {
      const buffer *p = &bufs[placed[i]];
      if (p->start > b->last || b->start > p->last || !p->size)
        continue;
      size_t p_off = off[placed[i]];
      if (p_off >= at + b->size)
        break;
      at = p_off + p->size > at ? p_off + p->size : at;
    }
    off[order[k].idx] = at;
    for (pos = 0; pos < n_placed && off[placed[pos]] <= at; pos++)
      ;
    memmove(&placed[pos + 1], &placed[pos], (n_placed - pos) * sizeof *placed);
    placed[pos] = order[k].idx;
    n_placed++;
    top = at + b->size > top ? at + b->size : top;
  }
  return top;
}

static void liveness(ccg_exec *x) {
  int end = (int)x->n_steps;
  for (size_t s = 0; s < x->n_steps; s++) {
    const ccg__xnode *n = &x->steps[s];
    for (uint32_t i = 0; i < n->n_in; i++) {
      if (n->in[i] == CCG_NONE)
        continue;
      ccg__xval *v = &x->vals[n->in[i]];
      /* a send's buffer is read until the run's final flush */
      int use = n->op == CCG_OP_SEND ? end : (int)s;
      v->last = use > v->last ? use : v->last;
    }
  }
  /* under overlap a collective reads and writes its buffers on the
   * communication thread until the main thread has waited for it */
  for (size_t s = 0; s < x->n_steps; s++) {
    const ccg__xnode *n = &x->steps[s];
    for (uint32_t i = 0; n->comm && i < n->n_in + n->n_out; i++) {
      ccg_value_id id = i < n->n_in ? n->in[i] : n->out[i - n->n_in];
      if (id != CCG_NONE && x->vals[id].last < n->join)
        x->vals[id].last = n->join;
    }
  }
  for (size_t i = 0; i < x->n_vals; i++) {
    ccg__xval *v = &x->vals[i];
    if (v->is_output)
      v->last = end;
    if (v->kind == CCG__V_ARENA && v->last < v->first)
      v->last = v->first;
  }
}

/* The buffer an output may take over: a dying arena input of the same
 * byte size that is not a graph output. */
static int inplace_input(ccg_exec *x, const ccg__xnode *n, int s,
                         const buffer *bufs) {
  if (!ccg__op_inplace_ok(n->op))
    return -1;
  const ccg__xval *o = &x->vals[n->out[0]];
  for (uint32_t i = 0; i < n->n_in; i++) {
    if (n->in[i] == CCG_NONE)
      continue;
    const ccg__xval *v = &x->vals[n->in[i]];
    if (v->kind == CCG__V_ARENA && v->last == s && !v->is_output &&
        v->nbytes == o->nbytes && v->numel == o->numel &&
        ccg_dtype_size(v->dtype) == ccg_dtype_size(o->dtype) &&
        bufs[v->buffer].last == s)
      return (int)i;
  }
  return -1;
}

/* Whether step n's scratch is planned in the arena: the CPU's compute
 * steps that run (collectives pack in a block of their own, which under
 * overlap the communication thread uses while compute steps run). */
static bool planned_scratch(const ccg_exec *x, const ccg__xnode *n) {
  return x->device == CCG_DEVICE_CPU && n->run && n->scratch &&
         !ccg_op_is_collective(n->op);
}

ccg_status ccg__plan_memory(ccg_exec *x) {
  liveness(x);
  size_t cap = x->n_vals + x->n_steps;
  buffer *bufs = ccg__arena_calloc(&x->arena, cap + 1, sizeof(buffer));
  block *blocks = ccg__arena_calloc(&x->arena, cap + 2, sizeof(block));
  int64_t *delta = ccg__arena_calloc(&x->arena, x->n_steps + 2, 8);
  size_t *sbuf = ccg__arena_calloc(&x->arena, x->n_steps + 1, sizeof(size_t));
  if (!bufs || !blocks || !delta || !sbuf)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory planning");
  size_t nb = 0;
  memset(&x->mem, 0, sizeof x->mem);
  for (size_t s = 0; s < x->n_steps; s++) {
    ccg__xnode *n = &x->steps[s];
    for (uint32_t k = 0; k < n->n_out; k++) {
      if (n->out[k] == CCG_NONE)
        continue;
      ccg__xval *v = &x->vals[n->out[k]];
      if (v->kind != CCG__V_ARENA)
        continue;
      x->mem.naive_bytes += v->nbytes;
      int in = k == 0 ? inplace_input(x, n, (int)s, bufs) : -1;
      if (in >= 0) {
        v->buffer = x->vals[n->in[in]].buffer;
        bufs[v->buffer].last = v->last;
        n->inplace = in;
        x->mem.n_inplace++;
        continue;
      }
      v->buffer = (int)nb;
      bufs[nb++] = (buffer){round_up(v->nbytes), (int)s, v->last, 0};
    }
    /* born and dead at s, after the step's outputs: bufs stay in order of
     * their first step */
    if (planned_scratch(x, n)) {
      x->mem.naive_bytes += n->scratch;
      sbuf[s] = nb;
      bufs[nb++] = (buffer){round_up(n->scratch), (int)s, (int)s, 0};
    }
  }
  /* offsets: at each step, place the buffers born there, then free those
   * that die there */
  /* buffers by the step they die at (counting sort) */
  size_t *first_dead = ccg__arena_calloc(&x->arena, x->n_steps + 2, 8);
  size_t *by_last = ccg__arena_calloc(&x->arena, nb + 1, 8);
  if (!first_dead || !by_last)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory planning");
  for (size_t b = 0; b < nb; b++)
    first_dead[bufs[b].last + 1]++;
  for (size_t s = 1; s <= x->n_steps + 1; s++)
    first_dead[s] += first_dead[s - 1];
  for (size_t b = 0; b < nb; b++)
    by_last[first_dead[bufs[b].last]++] = b;
  for (size_t s = x->n_steps + 1; s > 0; s--)
    first_dead[s] = first_dead[s - 1];
  first_dead[0] = 0;
  freelist fl = {blocks, 0, 0};
  size_t next = 0;
  for (size_t s = 0; s < x->n_steps; s++) {
    for (; next < nb && bufs[next].start == (int)s; next++)
      bufs[next].offset = bufs[next].size ? fl_alloc(&fl, bufs[next].size) : 0;
    for (size_t i = first_dead[s]; i < first_dead[s + 1]; i++) {
      const buffer *b = &bufs[by_last[i]];
      if (b->size)
        fl_free(&fl, b->offset, b->size);
    }
  }
  for (size_t b = 0; b < nb; b++) {
    delta[bufs[b].start] += (int64_t)bufs[b].size;
    delta[bufs[b].last + 1] -= (int64_t)bufs[b].size;
  }
  int64_t live = 0;
  for (size_t s = 0; s <= x->n_steps; s++) {
    live += delta[s];
    if ((size_t)live > x->mem.max_live_bytes)
      x->mem.max_live_bytes = (size_t)live;
  }
  x->mem.peak_bytes = fl.top;
  if (nb <= BY_SIZE_MAX) {
    size_key *order = ccg__arena_calloc(&x->arena, nb + 1, sizeof(size_key));
    size_t *placed = ccg__arena_calloc(&x->arena, nb + 1, sizeof(size_t));
    size_t *off = ccg__arena_calloc(&x->arena, nb + 1, sizeof(size_t));
    if (!order || !placed || !off)
      return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory planning");
    size_t top = plan_by_size(bufs, nb, order, placed, off);
    if (top < fl.top) {
      for (size_t b = 0; b < nb; b++)
        bufs[b].offset = off[b];
      x->mem.peak_bytes = top;
    }
  }
  for (size_t i = 0; i < x->n_vals; i++)
    if (x->vals[i].kind == CCG__V_ARENA && x->vals[i].buffer >= 0)
      x->vals[i].offset = bufs[x->vals[i].buffer].offset;
  for (size_t s = 0; s < x->n_steps; s++)
    if (planned_scratch(x, &x->steps[s]))
      x->steps[s].scratch_off = bufs[sbuf[s]].offset;
  return CCG_STATUS_OK;
}

/* ---- plan-time fusion ---------------------------------------------------- */

bool ccg__exec_fuse_enabled(void) {
  const char *env = getenv("CCG_EXEC_FUSE");
  return !(env && strcmp(env, "0") == 0);
}

/* Steps reading each value, and the step of the single read (-1 if none). */
void ccg__count_uses(const ccg_exec *x, ccg__xuse *u) {
  for (size_t s = 0; s < x->n_steps; s++) {
    const ccg__xnode *n = &x->steps[s];
    for (uint32_t i = 0; i < n->n_in; i++) {
      ccg_value_id v = n->in[i];
      if (v == CCG_NONE || (u[v].count && u[v].step == (uint32_t)s))
        continue;
      u[v].count++;
      u[v].step = (uint32_t)s;
    }
  }
}

/* v may disappear into a fused kernel: an f32 arena value read by one
 * step (*step), and not a graph output. */
static bool private_f32(const ccg_exec *x, ccg_value_id v, const ccg__xuse *u,
                        int *step) {
  const ccg__xval *val = &x->vals[v];
  *step = (int)u[v].step;
  return val->kind == CCG__V_ARENA && !val->is_output &&
         val->dtype == CCG_DTYPE_F32 && u[v].count == 1;
}

static bool same_shape(const ccg__xval *a, const ccg__xval *b) {
  return a->rank == b->rank &&
         memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0 &&
         a->dtype == b->dtype;
}

/* The Add at step s adds a 1-D f32 bias of v's last dim to v (either
 * side), from an input or initializer (alive at every step). */
static bool bias_add(const ccg_exec *x, const ccg__xnode *a, ccg_value_id v,
                     ccg_value_id *bias) {
  if (a->op != CCG_OP_ADD || a->n_in != 2 || a->n_out != 1 ||
      a->in[0] == a->in[1])
    return false;
  ccg_value_id b = a->in[0] == v ? a->in[1] : a->in[0];
  const ccg__xval *bv = &x->vals[b], *vv = &x->vals[v];
  if (!same_shape(&x->vals[a->out[0]], vv) || vv->rank < 1 ||
      bv->dtype != CCG_DTYPE_F32 || bv->rank != 1 ||
      bv->dims[0] != vv->dims[vv->rank - 1] ||
      (bv->kind != CCG__V_INPUT && bv->kind != CCG__V_STATIC))
    return false;
  *bias = b;
  return true;
}

bool ccg__const_scalar(const ccg_exec *x, ccg_value_id v, float *out) {
  if (v == CCG_NONE)
    return false;
  const ccg__xval *c = &x->vals[v];
  if (c->kind != CCG__V_STATIC || c->dtype != CCG_DTYPE_F32 || c->numel != 1 ||
      !c->init)
    return false;
  memcpy(out, c->init, sizeof *out);
  return true;
}

/* The step that alone reads v (a private f32 value of y's shape) when it
 * is a binary `op` whose other input is `other` (CCG_NONE: a constant
 * scalar within 1e-6 relative of c), or a unary `op`; else NULL. */
static ccg__xnode *gelu_step(ccg_exec *x, const ccg__xuse *u, ccg_value_id v,
                             ccg_value_id y, ccg_op op, ccg_value_id other,
                             float c) {
  int s;
  if (!private_f32(x, v, u, &s) || !same_shape(&x->vals[v], &x->vals[y]))
    return NULL;
  ccg__xnode *n = &x->steps[s];
  if (n->op != op || !n->run || n->fused || n->n_out != 1 ||
      !same_shape(&x->vals[n->out[0]], &x->vals[y]))
    return NULL;
  if (op == CCG_OP_ERF)
    return n->n_in == 1 ? n : NULL;
  if (n->n_in != 2 || (op == CCG_OP_DIV && n->in[0] != v))
    return NULL;
  ccg_value_id o = n->in[0] == v ? n->in[1] : n->in[0];
  float k;
  if (other != CCG_NONE)
    return o == other ? n : NULL;
  return ccg__const_scalar(x, o, &k) && fabsf(k - c) <= 1e-6f * c ? n : NULL;
}

/* Gelu written out as torch exports it over y (read twice: here and by
 * the product): Div(y, sqrt 2) or Mul(y, 1/sqrt 2), Erf, Add 1, Mul by y,
 * Mul 0.5 (operands in either order). Its five steps into st; false when
 * any differs. The Gelu kernel rounds differently (y * (1/sqrt 2) and
 * 0.5 y first): within a few ulp of the steps. */
static bool erf_gelu(ccg_exec *x, const ccg__xuse *u, ccg_value_id y,
                     size_t from, ccg__xnode **st) {
  const ccg__xval *yv = &x->vals[y];
  if (yv->kind != CCG__V_ARENA || yv->is_output || u[y].count != 2)
    return false;
  ccg__xnode *d = NULL;
  for (size_t s = from + 1; s < x->n_steps && !d; s++)
    for (uint32_t i = 0; i < x->steps[s].n_in; i++)
      if (x->steps[s].in[i] == y)
        d = &x->steps[s];
  if (!d || d->n_in != 2 || d->n_out != 1 || !d->run || d->fused)
    return false;
  ccg_value_id o = d->in[0] == y ? d->in[1] : d->in[0];
  float k;
  if (!ccg__const_scalar(x, o, &k) || !same_shape(&x->vals[d->out[0]], yv) ||
      !((d->op == CCG_OP_DIV && d->in[0] == y &&
         fabsf(k - 1.41421356f) <= 1e-6f) ||
        (d->op == CCG_OP_MUL && fabsf(k - 0.70710678f) <= 1e-6f)))
    return false;
  st[0] = d;
  st[1] = gelu_step(x, u, d->out[0], y, CCG_OP_ERF, CCG_NONE, 0.0f);
  st[2] = st[1] ? gelu_step(x, u, st[1]->out[0], y, CCG_OP_ADD, CCG_NONE, 1.0f)
                : NULL;
  st[3] = st[2] ? gelu_step(x, u, st[2]->out[0], y, CCG_OP_MUL, y, 0.0f) : NULL;
  st[4] = st[3] ? gelu_step(x, u, st[3]->out[0], y, CCG_OP_MUL, CCG_NONE, 0.5f)
                : NULL;
  return st[4] && u[y].step == (uint32_t)(st[3] - x->steps);
}

static bool fusable_act(const ccg__xnode *n) {
  return (n->op == CCG_OP_RELU || n->op == CCG_OP_GELU ||
          n->op == CCG_OP_TANH || n->op == CCG_OP_SIGMOID) &&
         n->n_in == 1 && n->n_out == 1 && n->run;
}

/* The step becomes ccg__step_empty. */
static void empty_step(ccg__xnode *n) {
  n->run = NULL;
  n->n_in = n->n_out = 0;
}

/* Each value's readers (ccg__count_uses), in the arena; NULL without the
 * memory. */
static ccg__xuse *readers(ccg_exec *x) {
  ccg__xuse *u = ccg__arena_calloc(&x->arena, x->n_vals + 1, sizeof *u);
  if (u)
    ccg__count_uses(x, u);
  return u;
}

/* The live Transpose step that made v (private to the step that reads it)
 * when it swaps the last two of r >= 2 dims and nothing else, over an f32
 * value; else NULL. */
static ccg__xnode *swap_last_maker(ccg_exec *x, const ccg__xuse *u,
                                   ccg_value_id v) {
  int s, r = x->vals[v].rank;
  if (!private_f32(x, v, u, &s) || x->vals[v].first < 0 || r < 2)
    return NULL;
  ccg__xnode *t = &x->steps[x->vals[v].first];
  if (t->op != CCG_OP_TRANSPOSE || !t->run || t->fused || t->attn ||
      t->n_in != 1 || t->n_out != 1 || t->out[0] != v ||
      x->vals[t->in[0]].dtype != CCG_DTYPE_F32)
    return NULL;
  const ccg_attr *a = ccg_node_attr(x->g, t->id, "perm");
  size_t np = a && a->type == CCG_ATTR_INTS ? a->n : 0;
  if (np != (size_t)r && !(np == 0 && r == 2)) /* none: reversed */
    return NULL;
  for (int d = 0; d < r && np; d++)
    if (a->ints[d] != (d < r - 2 ? d : d == r - 2 ? r - 1 : r - 2))
      return NULL;
  return t;
}

void ccg__fuse_transposes(ccg_exec *x) {
  ccg__xuse *u = readers(x);
  if (!u)
    return; /* no fusion: the same results, unfused */
  for (size_t s = 0; s < x->n_steps; s++) {
    ccg__xnode *n = &x->steps[s];
    if (n->op != CCG_OP_MATMUL || !n->run || n->attn || n->fused ||
        n->n_in != 2 || n->n_out != 1 || n->in[0] == n->in[1] ||
        x->vals[n->out[0]].dtype != CCG_DTYPE_F32)
      continue;
    for (int i = 0; i < 2; i++) {
      ccg__xnode *t = swap_last_maker(x, u, n->in[i]);
      if (!t || x->vals[n->in[1 - i]].dtype != CCG_DTYPE_F32)
        continue;
      x->vals[n->in[i]].kind = CCG__V_UNUSED;
      n->in[i] = t->in[0];
      if (i == 0) {
        n->mm_ta = true;
        n->p.axis = false; /* A's rows are no longer one run per batch */
      } else {
        n->mm_tb = true;
      }
      empty_step(t);
    }
  }
}

void ccg__fuse_epilogues(ccg_exec *x) {
  ccg__xuse *u = readers(x);
  if (!u)
    return; /* no fusion: the same results, unfused */
  for (size_t s = 0; s < x->n_steps; s++) {
    ccg__xnode *n = &x->steps[s];
    if ((n->op != CCG_OP_MATMUL && n->op != CCG_OP_GEMM) || !n->run ||
        n->n_out != 1)
      continue;
    bool f32 = true;
    for (uint32_t i = 0; i < n->n_in; i++)
      f32 = f32 &&
            (n->in[i] == CCG_NONE || x->vals[n->in[i]].dtype == CCG_DTYPE_F32);
    ccg_value_id v = n->out[0], bias, y;
    int s2, s3;
    if (!f32 || !private_f32(x, v, u, &s2) ||
        !bias_add(x, &x->steps[s2], v, &bias))
      continue;
    ccg__xnode *add = &x->steps[s2], *act = NULL, *gelu[5];
    y = add->out[0];
    n->epi_act = CCG_OP_COUNT;
    n->epi_tanh = false;
    if (private_f32(x, y, u, &s3) && fusable_act(&x->steps[s3]) &&
        same_shape(&x->vals[x->steps[s3].out[0]], &x->vals[y])) {
      act = &x->steps[s3];
      n->epi_act = act->op;
      n->epi_tanh = act->op == CCG_OP_GELU && act->p.i0 != 0;
    } else if (erf_gelu(x, u, y, (size_t)s2, gelu)) {
      act = gelu[4];
      n->epi_act = CCG_OP_GELU;
      for (int k = 0; k < 4; k++) {
        x->vals[gelu[k]->out[0]].kind = CCG__V_UNUSED;
        empty_step(gelu[k]);
      }
    }
    ccg_value_id last = act ? act->out[0] : y;
    n->out[0] = last;
    n->epi = true;
    n->epi_bias = bias;
    x->vals[last].first = (int)s;
    empty_step(add);
    if (act)
      empty_step(act);
  }
}
