/* Collective nodes: the group from the mesh, per-rank chunk sizes, packing
 * of non-leading axes into rank-major flat buffers (and back), and the call
 * into the communicator. A group of one rank needs no communicator. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/comm/comm.h"
#include "exec/cpu/cpu.h"
#include "exec/debug.h"

/* ---- helpers ------------------------------------------------------------ */

static void make_coll(ccg_exec *x, const ccg__xnode *n, ccg_dtype dt,
                      ccg_ctx *err, ccg__coll *k) {
  *k = (ccg__coll){ccg_op_name(n->op), n->name,       x->rank,   n->p.group,
                   n->p.gsize,         n->p.gidx,     n->p.mask, dt,
                   n->p.rop,           x->deadline_s, err};
}

/* outer (dims before axis) and inner (elements after it). */
static void split_dims(const ccg__xval *v, int axis, size_t *outer,
                       size_t *inner) {
  int64_t o, i;
  ccg__xval_around(v, axis, &o, NULL, &i);
  *outer = (size_t)o;
  *inner = (size_t)i;
}

void ccg__chunk_copy(void *packed, void *full, size_t es, size_t outer,
                     size_t inner, const int64_t *sizes, int n, bool unpack) {
  size_t total = 0;
  for (int r = 0; r < n; r++)
    total += (size_t)sizes[r];
  size_t at = 0, before = 0;
  for (int r = 0; r < n; r++) {
    size_t row = (size_t)sizes[r] * inner * es;
    for (size_t o = 0; o < outer && row; o++) {
      char *f = (char *)full + (o * total + before) * inner * es;
      char *p = (char *)packed + at;
      if (unpack)
        memcpy(f, p, row);
      else
        memcpy(p, f, row);
      at += row;
    }
    before += (size_t)sizes[r];
  }
}

/* ---- kernels ------------------------------------------------------------ */

/* Host memory: the values' pointers, memcpy and memset. */
static ccg_status host_copy(ccg_exec *x, const ccg__xnode *n, void *dst,
                            const void *src, size_t bytes) {
  (void)x;
  (void)n;
  if (dst != src && bytes)
    memcpy(dst, src, bytes);
  return CCG_STATUS_OK;
}

static ccg_status host_zero(ccg_exec *x, const ccg__xnode *n, void *dst,
                            size_t bytes) {
  (void)x;
  (void)n;
  memset(dst, 0, bytes);
  return CCG_STATUS_OK;
}

static ccg_status host_rows(ccg_exec *x, const ccg__xnode *n, void *dst,
                            size_t dpitch, const void *src, size_t spitch,
                            size_t row, size_t outer) {
  (void)x;
  (void)n;
  for (size_t o = 0; o < outer && row; o++)
    memcpy((char *)dst + o * dpitch, (const char *)src + o * spitch, row);
  return CCG_STATUS_OK;
}

static ccg_status host_chunks(ccg_exec *x, const ccg__xnode *n, int which,
                              void *packed, void *full, size_t es, size_t outer,
                              size_t inner, const int64_t *sizes, int nr,
                              bool unpack) {
  (void)x;
  (void)n;
  (void)which;
  ccg__chunk_copy(packed, full, es, outer, inner, sizes, nr, unpack);
  return CCG_STATUS_OK;
}

static const ccg__xmem host_mem = {ccg__host_ptr, host_copy, host_zero,
                                   host_rows, host_chunks};

ccg_status ccg__collective_body(ccg_exec *x, const ccg__xnode *n, ccg_ctx *err,
                                void *scratch, const ccg__xmem *m) {
  const ccg__xval *a = n->n_in ? ccg__in(x, n, 0) : NULL;
  const ccg__xval *o = n->n_out ? ccg__out(x, n, 0) : NULL;
  void *ap = a ? m->ptr(x, n->in[0]) : NULL;
  void *op = o ? m->ptr(x, n->out[0]) : NULL;
  ccg_dtype dt = a ? a->dtype : o->dtype;
  size_t es = ccg_dtype_size(dt);
  ccg__coll k;
  make_coll(x, n, dt, err, &k);
  ccg_comm *c = x->comm;
  int W = n->p.gsize;
  bool solo = W == 1 && n->op != CCG_OP_SEND && n->op != CCG_OP_RECV;
  switch (n->op) {
  case CCG_OP_ALL_REDUCE:
    if (solo)
      break;
    return c->vt->all_reduce(c, &k, ap, op, a->numel);
  case CCG_OP_BROADCAST:
    if (solo)
      break;
    return c->vt->broadcast(c, &k, ap, op, a->numel, (int)n->p.i0);
  case CCG_OP_REDUCE:
    if (solo)
      break;
    return c->vt->reduce(c, &k, ap, op, a->numel, (int)n->p.i0);
  case CCG_OP_ALL_GATHER: {
    if (solo)
      break;
    size_t outer, inner;
    split_dims(o, n->p.axis, &outer, &inner);
    void *dst = outer == 1 ? op : scratch;
    CCG_CHECK(c->vt->all_gatherv(c, &k, ap, dst, n->p.counts));
    if (dst != op)
      return m->chunks(x, n, 1, dst, op, es, outer, inner, n->p.chunk, W, true);
    return CCG_STATUS_OK;
  }
  case CCG_OP_REDUCE_SCATTER: {
    if (solo)
      break;
    size_t outer, inner;
    split_dims(a, n->p.axis, &outer, &inner);
    const void *src = ap;
    if (outer > 1) {
      CCG_CHECK(m->chunks(x, n, 0, scratch, ap, es, outer, inner, n->p.chunk, W,
                          false));
      src = scratch;
    }
    return c->vt->reduce_scatterv(c, &k, src, op, n->p.counts);
  }
  case CCG_OP_ALL_TO_ALL: {
    if (solo)
      break;
    size_t so, si, co, ci;
    split_dims(a, n->p.axis, &so, &si);
    split_dims(o, n->p.axis2, &co, &ci);
    const void *src = ap;
    char *scr = scratch;
    if (so > 1) {
      CCG_CHECK(m->chunks(x, n, 0, scr, ap, es, so, si, n->p.chunk, W, false));
      src = scr;
      scr += a->nbytes;
    }
    void *dst = co == 1 ? op : scr;
    CCG_CHECK(c->vt->all_to_allv(c, &k, src, n->p.counts, dst, n->p.counts2));
    if (dst != op)
      return m->chunks(x, n, 1, dst, op, es, co, ci, n->p.chunk2, W, true);
    return CCG_STATUS_OK;
  }
  case CCG_OP_SHARD_SLICE: {
    size_t outer, inner;
    split_dims(a, n->p.axis, &outer, &inner);
    size_t before = 0, total = 0;
    for (int r = 0; r < W; r++) {
      total += (size_t)n->p.chunk[r];
      if (r < n->p.gidx)
        before += (size_t)n->p.chunk[r];
    }
    size_t row = (size_t)n->p.chunk[n->p.gidx] * inner * es;
    return m->rows(x, n, op, row, (const char *)ap + before * inner * es,
                   total * inner * es, row, outer);
  }
  case CCG_OP_COLLECTIVE_PERMUTE: {
    int dst = (int)n->p.i0, src = (int)n->p.i1;
    if (src < 0)
      CCG_CHECK(m->zero(x, n, op, o->nbytes));
    if (W == 1)
      return src >= 0 ? m->copy(x, n, op, ap, o->nbytes) : CCG_STATUS_OK;
    return c->vt->shift(c, &k, ap, dst, op, src, a->numel);
  }
  case CCG_OP_SEND:
    return c->vt->send(c, &k, ap, a->numel, (int)n->p.i0, n->p.i1);
  case CCG_OP_RECV:
    return c->vt->recv(c, &k, op, o->numel, (int)n->p.i0, n->p.i1);
  default:
    return ccg__error(err, CCG_STATUS_INTERNAL,
                      "node '%s' (%s): not a collective", n->name,
                      ccg_op_name(n->op));
  }
  /* one rank: the data stays as it is */
  return m->copy(x, n, op, ap, o->nbytes);
}

/* ---- messages a size guard received ------------------------------------ */

/* A size guard (specialize.c) runs the part of the graph a data-dependent
 * dim needs before its program, on this rank alone; where that part holds
 * a Recv, the peer sends once, for the program. The guard's Recv keeps
 * what it took, in order, on the root's list; the program's Recv of the
 * same peer, tag and size takes it from there, as do later guards of the
 * run (they read it and leave it). The collective check of debug mode
 * went with the first receipt. Host memory only: the CUDA path sends its
 * own Recvs (gpu_coll.c). */
typedef struct ccg__stashed {
  struct ccg__stashed *next;
  int peer;
  int64_t tag;
  size_t bytes;
  max_align_t data[];
} ccg__stashed;

static ccg__stashed **stashed_at(ccg_exec *x, const ccg__xnode *n,
                                 size_t bytes) {
  ccg__stashed **at = x->stash;
  while (*at && ((*at)->peer != (int)n->p.i0 || (*at)->tag != n->p.i1 ||
                 (*at)->bytes != bytes))
    at = &(*at)->next;
  return at;
}

static ccg_status keep_received(ccg_exec *x, const ccg__xnode *n,
                                ccg_ctx *err) {
  size_t bytes = ccg__out(x, n, 0)->nbytes;
  ccg__stashed **at = x->stash;
  while (*at)
    at = &(*at)->next;
  ccg__stashed *e = malloc(sizeof *e + bytes);
  if (!e)
    return ccg__error(err, CCG_STATUS_OOM,
                      "out of memory keeping the message of node '%s'",
                      n->name);
  *e = (ccg__stashed){NULL, (int)n->p.i0, n->p.i1, bytes};
  memcpy(e->data, ccg__host_ptr(x, n->out[0]), bytes);
  *at = e;
  return CCG_STATUS_OK;
}

/* true when n's message was kept: copied to its output (and, for the
 * program, dropped from the list) */
static bool take_kept(ccg_exec *x, const ccg__xnode *n) {
  size_t bytes = ccg__out(x, n, 0)->nbytes;
  ccg__stashed **at = stashed_at(x, n, bytes), *e = *at;
  if (!e)
    return false;
  memcpy(ccg__host_ptr(x, n->out[0]), e->data, bytes);
  if (!x->guard) {
    *at = e->next;
    free(e);
  }
  return true;
}

void ccg__stash_free(ccg_exec *x) {
  for (ccg__stashed *e = x->stashed, *next; e; e = next) {
    next = e->next;
    free(e);
  }
  x->stashed = NULL;
}

/* Every collective goes through the flight recorder and, in debug mode,
 * the fingerprint check of its group (debug.c). Called on the
 * communication thread under overlap (one collective at a time, in
 * schedule order): it touches only n's buffers, `scratch`, `err` and the
 * executor's debug state, which only collectives use. */
ccg_status ccg__collective_exec(ccg_exec *x, const ccg__xnode *n, ccg_ctx *err,
                                void *scratch) {
  size_t slot = ccg__flight_begin(x, n);
  if (n->op == CCG_OP_RECV && *x->stash && take_kept(x, n))
    return ccg__flight_end(x, slot, CCG_STATUS_OK);
  ccg__coll k;
  make_coll(x, n, n->n_in ? ccg__in(x, n, 0)->dtype : ccg__out(x, n, 0)->dtype,
            err, &k);
  ccg_status st = ccg__debug_check(x, n, &k);
  if (st == CCG_STATUS_OK)
    st = ccg__collective_body(x, n, err, scratch, &host_mem);
  if (st == CCG_STATUS_OK && n->op == CCG_OP_RECV && x->guard)
    st = keep_received(x, n, err);
  return ccg__flight_end(x, slot, st);
}

ccg_status ccg__collective_reserve(ccg_exec *x) {
  ccg_comm *c = x->comm;
  if (!c || !c->vt->reserve)
    return CCG_STATUS_OK;
  for (size_t s = 0; s < x->n_steps; s++) {
    const ccg__xnode *n = &x->steps[s];
    bool reducing = n->op == CCG_OP_ALL_REDUCE ||
                    n->op == CCG_OP_REDUCE_SCATTER || n->op == CCG_OP_REDUCE;
    if (!reducing || n->p.gsize < 2)
      continue;
    const ccg__xval *a = ccg__in(x, n, 0);
    ccg__coll k;
    make_coll(x, n, a->dtype, &x->ctx, &k);
    CCG_CHECK(
        c->vt->reserve(c, &k, n->op, a->numel, n->p.counts, (int)n->p.i0));
  }
  return CCG_STATUS_OK;
}

static ccg_status run_collective(ccg_exec *x, const ccg__xnode *n) {
  return ccg__collective_exec(x, n, &x->ctx, x->comm_scratch);
}

/* ---- preparation -------------------------------------------------------- */

static ccg_status read_group(ccg_exec *x, ccg__xnode *n) {
  const ccg_mesh *m = x->mesh;
  unsigned mask = 0;
  if (!m)
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "the graph has no device mesh");
  const ccg_attr *axes = ccg_node_attr(x->g, n->id, "mesh_axes");
  const ccg_attr *axis = ccg_node_attr(x->g, n->id, "mesh_axis");
  size_t na = axes && axes->type == CCG_ATTR_STRINGS ? axes->n : 0;
  for (size_t i = 0; i < na + (axis ? 1 : 0); i++) {
    const char *name = i < na ? axes->strings[i] : axis->s;
    int ax = name ? ccg_mesh_axis(m, name) : -1;
    if (ax < 0)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                        "mesh axis '%s' is not in the mesh",
                        name ? name : "(null)");
    mask |= 1u << ax;
  }
  int64_t size = ccg_mesh_group_size(m, mask);
  n->p.mask = mask;
  n->p.gsize = (int)size;
  n->p.gidx = (int)ccg_mesh_rank_in_group(m, x->rank, mask);
  n->p.group = ccg__arena_calloc(&x->arena, (size_t)size, sizeof(int64_t));
  if (!n->p.group)
    return ccg__xfail(x, n, CCG_STATUS_OOM, "out of memory");
  if (ccg_mesh_group_ranks(m, x->rank, mask, n->p.group) != CCG_STATUS_OK)
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "rank %d is not in the mesh", x->rank);
  bool needs_comm = (size > 1 && n->op != CCG_OP_SHARD_SLICE) ||
                    n->op == CCG_OP_SEND || n->op == CCG_OP_RECV;
  if (needs_comm && !x->comm)
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "a group of %lld ranks needs a communicator "
                      "(ccg_exec_options.comm)",
                      (long long)size);
  return CCG_STATUS_OK;
}

static ccg_status read_reduce_op(ccg_exec *x, ccg__xnode *n) {
  const char *s;
  CCG_CHECK(ccg__xattr_s(x, n, "reduce_op", &s));
  if (ccg_reduce_op_parse(s, &n->p.rop) != CCG_STATUS_OK)
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "unknown reduce_op '%s'",
                      s);
  return CCG_STATUS_OK;
}

/* Per group rank sizes along `axis` of v: the list attribute `name`, or
 * v's dim `each` times for all. Also the element counts (times the other
 * dims of v with that axis removed). */
static ccg_status read_sizes(ccg_exec *x, ccg__xnode *n, const char *name,
                             const ccg__xval *v, int axis, int64_t each,
                             int64_t **sizes, size_t **counts) {
  int W = n->p.gsize;
  const int64_t *list;
  size_t nl = ccg__xattr_ints(x, n, name, &list);
  if (nl && nl != (size_t)W)
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "%s has %zu entries for a group of %d", name, nl, W);
  *sizes = ccg__arena_calloc(&x->arena, (size_t)W, sizeof(int64_t));
  *counts = ccg__arena_calloc(&x->arena, (size_t)W, sizeof(size_t));
  if (!*sizes || !*counts)
    return ccg__xfail(x, n, CCG_STATUS_OOM, "out of memory");
  size_t outer, inner;
  split_dims(v, axis, &outer, &inner);
  for (int r = 0; r < W; r++) {
    (*sizes)[r] = nl ? list[r] : each;
    (*counts)[r] = outer * (size_t)(*sizes)[r] * inner;
  }
  return CCG_STATUS_OK;
}

static ccg_status prep_axis(ccg_exec *x, ccg__xnode *n, const char *name,
                            const ccg__xval *v, int *out) {
  int64_t axis;
  CCG_CHECK(ccg__xattr_i(x, n, name, &axis));
  return ccg__xaxis(x, n, axis, v->rank, out);
}

ccg_status ccg__prep_collective(ccg_exec *x, ccg__xnode *n) {
  CCG_CHECK(read_group(x, n));
  const ccg__xval *a = n->n_in ? ccg__in(x, n, 0) : NULL;
  const ccg__xval *o = n->n_out ? ccg__out(x, n, 0) : NULL;
  int W = n->p.gsize;
  n->run = run_collective;
  switch (n->op) {
  case CCG_OP_ALL_REDUCE:
    return read_reduce_op(x, n);
  case CCG_OP_REDUCE:
    CCG_CHECK(read_reduce_op(x, n));
    /* fall through */
  case CCG_OP_BROADCAST:
    CCG_CHECK(ccg__xattr_i(x, n, "root", &n->p.i0));
    if (n->p.i0 < 0 || n->p.i0 >= W)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                        "root %lld is not in the group of %d",
                        (long long)n->p.i0, W);
    return CCG_STATUS_OK;
  case CCG_OP_ALL_GATHER:
    CCG_CHECK(prep_axis(x, n, "axis", o, &n->p.axis));
    CCG_CHECK(read_sizes(x, n, "split_sizes", a, n->p.axis, a->dims[n->p.axis],
                         &n->p.chunk, &n->p.counts));
    n->scratch = o->nbytes;
    return CCG_STATUS_OK;
  case CCG_OP_REDUCE_SCATTER:
    CCG_CHECK(read_reduce_op(x, n));
    /* fall through */
  case CCG_OP_SHARD_SLICE:
    CCG_CHECK(prep_axis(x, n, "axis", a, &n->p.axis));
    CCG_CHECK(read_sizes(x, n, "split_sizes", o, n->p.axis, o->dims[n->p.axis],
                         &n->p.chunk, &n->p.counts));
    n->scratch = n->op == CCG_OP_REDUCE_SCATTER ? a->nbytes : 0;
    return CCG_STATUS_OK;
  case CCG_OP_ALL_TO_ALL:
    CCG_CHECK(prep_axis(x, n, "split_axis", a, &n->p.axis));
    CCG_CHECK(prep_axis(x, n, "concat_axis", o, &n->p.axis2));
    CCG_CHECK(read_sizes(x, n, "in_splits", a, n->p.axis,
                         a->dims[n->p.axis] / (W ? W : 1), &n->p.chunk,
                         &n->p.counts));
    CCG_CHECK(read_sizes(x, n, "out_splits", o, n->p.axis2,
                         o->dims[n->p.axis2] / (W ? W : 1), &n->p.chunk2,
                         &n->p.counts2));
    n->scratch = a->nbytes + o->nbytes;
    return CCG_STATUS_OK;
  case CCG_OP_COLLECTIVE_PERMUTE: {
    int64_t shift, rotate;
    CCG_CHECK(ccg__xattr_i(x, n, "shift", &shift));
    CCG_CHECK(ccg__xattr_i(x, n, "rotate", &rotate));
    int64_t dst = n->p.gidx + shift, src = n->p.gidx - shift;
    if (rotate) {
      dst = ((dst % W) + W) % W;
      src = ((src % W) + W) % W;
    }
    n->p.i0 = dst >= 0 && dst < W ? dst : -1;
    n->p.i1 = src >= 0 && src < W ? src : -1;
    return CCG_STATUS_OK;
  }
  case CCG_OP_SEND:
  case CCG_OP_RECV: {
    int64_t off, p;
    CCG_CHECK(ccg__xattr_i(x, n, "tag", &n->p.i1));
    if (ccg_node_attr(x->g, n->id, "peer")) { /* the peer's index */
      CCG_CHECK(ccg__xattr_i(x, n, "peer", &p));
      if (p == n->p.gidx)
        return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                          "rank %d would talk to itself (peer %lld is its own "
                          "index on the axis)",
                          x->rank, (long long)p);
    } else {
      CCG_CHECK(ccg__xattr_i(x, n, "peer_offset", &off));
      p = ((n->p.gidx + off) % W + W) % W;
    }
    n->p.i0 = n->p.group[p];
    return CCG_STATUS_OK;
  }
  default:
    return ccg__xfail(x, n, CCG_STATUS_INTERNAL, "not a collective");
  }
}
