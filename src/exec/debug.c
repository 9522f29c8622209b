/* Run-time collective checks and the flight recorder.
 *
 * Checks: before a collective, every rank of its group contributes a
 * fingerprint (op, group, dtype, reduce_op, root, axes, bound shapes, chunk
 * counts, node name) to an all-gather over the same group, through the
 * communicator's own vtable, so any communicator carries it. Each rank then
 * holds every fingerprint and compares them all against group rank 0's: all
 * ranks reach the same verdict and fail in the same collective.
 *
 * Recorder: a ring of the last N calls with their state and times; on a
 * communication failure it goes to the log and its tail to the message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/debug.h"

enum {
  FP_OP,
  FP_KEY,
  FP_DTYPE,
  FP_ROP,
  FP_ROOT,
  FP_AXIS,
  FP_AXIS2,
  FP_GSIZE,
  FP_RANK,
  FP_IN_RANK,
  FP_IN_DIMS,
  FP_OUT_RANK = FP_IN_DIMS + CCG_MAX_RANK,
  FP_OUT_DIMS,
  FP_NODE = FP_OUT_DIMS + CCG_MAX_RANK,
  FP_NODE_WORDS = 12, /* 96 bytes of the node name */
  FP_FIXED = FP_NODE + FP_NODE_WORDS,
};

/* One recorded call; the rest of its entry (shape, dtype, group) is fixed
 * per node and filled in only when read, keeping the hot path to two clock
 * reads and a few stores. */
typedef struct rec {
  uint64_t seq;
  const ccg__xnode *n;
  ccg_flight_state state;
  double t_issued_s, t_done_s;
} rec;

typedef struct ccg__debug {
  bool check;
  size_t cap, count;
  uint64_t seq;
  struct rec *ring;
  int64_t *mine, *all; /* fingerprints: this rank's, the group's */
  size_t *counts;      /* words per group rank */
  /* per step: a Send's fingerprint, which must outlive the call (a send
   * may complete after it returns) */
  int64_t **sent;
} ccg__debug;

static const char *const state_names[] = {"issued", "completed", "failed"};
_Static_assert(sizeof state_names / sizeof state_names[0] ==
                   CCG_FLIGHT_STATE_COUNT,
               "one name per flight state");

const char *ccg_flight_state_name(ccg_flight_state s) {
  return (unsigned)s < CCG_FLIGHT_STATE_COUNT ? state_names[s] : "invalid";
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bool env_on(void) {
  const char *v = getenv("CCG_DEBUG_COLLECTIVES");
  return v && *v && strcmp(v, "0") != 0;
}

static bool is_p2p(const ccg__xnode *n) {
  return n->op == CCG_OP_SEND || n->op == CCG_OP_RECV;
}

/* Group collectives that communicate (the executor copies for groups of
 * one; ShardSlice never communicates). */
static bool communicates(const ccg__xnode *n) {
  return n->p.gsize > 1 && n->op != CCG_OP_SHARD_SLICE && !is_p2p(n);
}

ccg_status ccg__debug_init(ccg_exec *x, const ccg_exec_options *o) {
  ccg__debug *d = ccg__arena_calloc(&x->arena, 1, sizeof *d);
  if (!d)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  x->debug = d;
  d->check = o->debug_collectives || env_on();
  d->cap = o->flight_records;
  if (d->cap) {
    d->ring = ccg__arena_calloc(&x->arena, d->cap, sizeof *d->ring);
    if (!d->ring)
      return ccg__error(&x->ctx, CCG_STATUS_OOM,
                        "out of memory for a flight recorder of %zu entries",
                        d->cap);
  }
  if (!d->check)
    return CCG_STATUS_OK;
  size_t gmax = 1;
  for (size_t s = 0; s < x->n_steps; s++)
    if (ccg_op_is_collective(x->steps[s].op) &&
        (size_t)x->steps[s].p.gsize > gmax)
      gmax = (size_t)x->steps[s].p.gsize;
  size_t words = FP_FIXED + 2 * gmax;
  d->mine = ccg__arena_calloc(&x->arena, words, sizeof(int64_t));
  d->all = ccg__arena_calloc(&x->arena, words * gmax, sizeof(int64_t));
  d->counts = ccg__arena_calloc(&x->arena, gmax, sizeof(size_t));
  d->sent = ccg__arena_calloc(&x->arena, x->n_steps + 1, sizeof *d->sent);
  if (!d->mine || !d->all || !d->counts || !d->sent)
    return ccg__error(&x->ctx, CCG_STATUS_OOM,
                      "out of memory for collective fingerprints");
  for (size_t s = 0; s < x->n_steps; s++) {
    if (x->steps[s].op != CCG_OP_SEND)
      continue;
    d->sent[s] = ccg__arena_calloc(&x->arena, FP_FIXED, sizeof(int64_t));
    if (!d->sent[s])
      return ccg__error(&x->ctx, CCG_STATUS_OOM,
                        "out of memory for collective fingerprints");
  }
  return CCG_STATUS_OK;
}

/* ---- flight recorder ------------------------------------------------------
 */

size_t ccg__flight_begin(ccg_exec *x, const ccg__xnode *n) {
  ccg__debug *d = x->debug;
  if (!d)
    return SIZE_MAX;
  if (!communicates(n) && !is_p2p(n))
    return SIZE_MAX;
  uint64_t seq = d->seq++; /* counted even with no recorder: messages use it */
  if (!d->cap)
    return SIZE_MAX;
  size_t slot = (size_t)(seq % d->cap);
  d->ring[slot] = (rec){seq, n, CCG_FLIGHT_ISSUED, now_s(), 0.0};
  if (d->count < d->cap)
    d->count++;
  return slot;
}

ccg_status ccg__flight_end(ccg_exec *x, size_t slot, ccg_status st) {
  ccg__debug *d = x->debug;
  if (d && slot < d->cap) {
    d->ring[slot].state =
        st == CCG_STATUS_OK ? CCG_FLIGHT_COMPLETED : CCG_FLIGHT_FAILED;
    d->ring[slot].t_done_s = now_s();
  }
  return st;
}

static void to_entry(const ccg_exec *x, const rec *r, ccg_flight_entry *e) {
  const ccg__xnode *n = r->n;
  const ccg__xval *v = n->n_in ? ccg__in(x, n, 0) : ccg__out(x, n, 0);
  memset(e, 0, sizeof *e);
  e->seq = r->seq;
  e->op = ccg_op_name(n->op);
  e->node = n->name;
  ccg_shape s = ccg_shape_make(v->rank, v->dims);
  ccg_shape_format(&s, e->shape, sizeof e->shape);
  e->dtype = v->dtype;
  e->group_size = n->p.gsize;
  e->state = r->state;
  e->t_issued_s = r->t_issued_s;
  e->t_done_s = r->t_done_s;
}

size_t ccg_exec_flight_record(const ccg_exec *x, ccg_flight_entry *out,
                              size_t max) {
  x = x ? ccg__dyn_current(x) : NULL;
  if (!x || !x->debug || !out)
    return 0;
  const ccg__debug *d = x->debug;
  size_t n = d->count < max ? d->count : max;
  for (size_t i = 0; i < n; i++)
    to_entry(x, &d->ring[(d->seq - n + i) % d->cap], &out[i]);
  return n;
}

void ccg__flight_report(ccg_exec *x, ccg_status st) {
  ccg__debug *d = x->debug;
  if (!d || !d->count || (st != CCG_STATUS_COMM && st != CCG_STATUS_TIMEOUT))
    return;
  double t = now_s();
  ccg_log_printf(CCG_LOG_ERROR,
                 "rank %d: flight recorder, last %zu calls:", x->rank,
                 d->count);
  char tail[512];
  size_t used = 0, show = d->count < 4 ? d->count : 4;
  for (size_t i = 0; i < d->count; i++) {
    ccg_flight_entry ent, *e = &ent;
    to_entry(x, &d->ring[(d->seq - d->count + i) % d->cap], e);
    double took =
        (e->state == CCG_FLIGHT_ISSUED ? t : e->t_done_s) - e->t_issued_s;
    ccg_log_printf(CCG_LOG_ERROR,
                   "rank %d:   #%llu %s '%s' %s %s over %d ranks: %s after "
                   "%.6f s%s",
                   x->rank, (unsigned long long)e->seq, e->op, e->node,
                   e->shape, ccg_dtype_name(e->dtype), e->group_size,
                   ccg_flight_state_name(e->state), took,
                   e->state == CCG_FLIGHT_ISSUED ? " (still waiting)" : "");
    if (i + show >= d->count && used < sizeof tail)
      used += (size_t)snprintf(tail + used, sizeof tail - used,
                               "%s#%llu %s '%s' %s %s", used ? "; " : "",
                               (unsigned long long)e->seq, e->op, e->node,
                               e->shape, ccg_flight_state_name(e->state));
  }
  char msg[CCG__ERRMSG_MAX];
  snprintf(msg, sizeof msg, "%s", ccg_last_error(x));
  ccg__error(&x->ctx, st, "%s [flight recorder of rank %d: %s]", msg, x->rank,
             tail);
}

/* ---- fingerprints -----------------------------------------------------------
 */

static void fingerprint(const ccg_exec *x, const ccg__xnode *n, int64_t *fp) {
  const ccg__xval *a = n->n_in ? ccg__in(x, n, 0) : NULL;
  const ccg__xval *o = n->n_out ? ccg__out(x, n, 0) : NULL;
  int W = n->p.gsize;
  /* p2p fingerprints are FP_FIXED words; a group's carry the counts too */
  memset(fp, 0, (FP_FIXED + (is_p2p(n) ? 0 : 2 * (size_t)W)) * sizeof *fp);
  fp[FP_OP] = n->op;
  fp[FP_KEY] = n->p.mask;
  fp[FP_DTYPE] = a ? a->dtype : o->dtype;
  bool rop = n->op == CCG_OP_ALL_REDUCE || n->op == CCG_OP_REDUCE_SCATTER ||
             n->op == CCG_OP_REDUCE;
  bool rooted = n->op == CCG_OP_BROADCAST || n->op == CCG_OP_REDUCE;
  bool axes = n->op == CCG_OP_ALL_GATHER || n->op == CCG_OP_REDUCE_SCATTER ||
              n->op == CCG_OP_ALL_TO_ALL;
  fp[FP_ROP] = rop ? (int64_t)n->p.rop : -1;
  fp[FP_ROOT] = rooted ? n->p.i0 : -1;
  fp[FP_AXIS] = axes ? n->p.axis : -1;
  fp[FP_AXIS2] = n->op == CCG_OP_ALL_TO_ALL ? n->p.axis2 : -1;
  fp[FP_GSIZE] = W;
  fp[FP_RANK] = x->rank;
  if (a) {
    fp[FP_IN_RANK] = a->rank;
    memcpy(&fp[FP_IN_DIMS], a->dims, (size_t)a->rank * sizeof(int64_t));
  }
  if (o) {
    fp[FP_OUT_RANK] = o->rank;
    memcpy(&fp[FP_OUT_DIMS], o->dims, (size_t)o->rank * sizeof(int64_t));
  }
  strncpy((char *)&fp[FP_NODE], n->name, FP_NODE_WORDS * 8 - 1);
  for (int r = 0; r < W && n->p.counts && !is_p2p(n); r++)
    fp[FP_FIXED + r] = (int64_t)n->p.counts[r];
  for (int r = 0; r < W && n->p.counts2 && !is_p2p(n); r++)
    fp[FP_FIXED + W + r] = (int64_t)n->p.counts2[r];
}

static const char *dims_str(const int64_t *fp, int at, char *buf, size_t size) {
  int64_t rank = fp[at];
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int64_t d = 0; d < rank && d < CCG_MAX_RANK && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "",
                             (long long)fp[at + 1 + d]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

/* "AllReduce 'n' f32 [4,8] on rank 1" */
static const char *describe(const int64_t *fp, char *buf, size_t size) {
  char node[FP_NODE_WORDS * 8 + 1] = {0}, in[96];
  memcpy(node, &fp[FP_NODE], FP_NODE_WORDS * 8);
  node[sizeof node - 1] = '\0';
  ccg_op op = (ccg_op)fp[FP_OP];
  snprintf(
      buf, size, "%s '%s' %s %s on rank %lld",
      (unsigned)op < CCG_OP_COUNT ? ccg_op_name(op) : "?", node,
      ccg_dtype_name((ccg_dtype)fp[FP_DTYPE]),
      dims_str(fp, fp[FP_IN_RANK] ? FP_IN_RANK : FP_OUT_RANK, in, sizeof in),
      (long long)fp[FP_RANK]);
  return buf;
}

static bool dims_equal(const int64_t *a, const int64_t *b, int at, int skip) {
  if (a[at] != b[at])
    return false;
  for (int64_t d = 0; d < a[at] && d < CCG_MAX_RANK; d++)
    if (d != skip && a[at + 1 + d] != b[at + 1 + d])
      return false;
  return true;
}

/* What b disagrees with a on, or NULL. */
static const char *differs(const int64_t *a, const int64_t *b, int W) {
  static const struct {
    int at;
    const char *what;
  } fields[] = {{FP_OP, "op"},       {FP_KEY, "group"},     {FP_GSIZE, "group"},
                {FP_DTYPE, "dtype"}, {FP_ROP, "reduce_op"}, {FP_ROOT, "root"},
                {FP_AXIS, "axis"},   {FP_AXIS2, "axis"}};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (a[fields[i].at] != b[fields[i].at])
      return fields[i].what;
  ccg_op op = (ccg_op)a[FP_OP];
  int skip = -1;
  if (op == CCG_OP_ALL_GATHER || op == CCG_OP_ALL_TO_ALL)
    skip = (int)a[FP_AXIS]; /* each rank's own share */
  if (!dims_equal(a, b, FP_IN_RANK, skip))
    return "shape";
  if (op == CCG_OP_ALL_TO_ALL &&
      !dims_equal(a, b, FP_OUT_RANK, (int)a[FP_AXIS2]))
    return "shape";
  if ((op == CCG_OP_ALL_GATHER || op == CCG_OP_REDUCE_SCATTER) &&
      memcmp(&a[FP_FIXED], &b[FP_FIXED], (size_t)W * sizeof *a) != 0)
    return "split sizes";
  return NULL;
}

static ccg_status mismatch(ccg_exec *x, const ccg__xnode *n, const int64_t *a,
                           const int64_t *b, const char *what) {
  char da[256], db[256];
  return ccg__xfail(x, n, CCG_STATUS_COMM,
                    "collective check (call #%llu): %s differs: %s, but %s",
                    (unsigned long long)(x->debug->seq - 1), what,
                    describe(a, da, sizeof da), describe(b, db, sizeof db));
}

/* A Send first sends its fingerprint (same peer and tag); the Recv takes it
 * and compares dtype and shape with its own. */
static ccg_status check_p2p(ccg_exec *x, const ccg__xnode *n,
                            const ccg__coll *k) {
  ccg__debug *d = x->debug;
  ccg__coll c = *k;
  c.dtype = CCG_DTYPE_I64;
  ccg_comm *comm = x->comm;
  int peer = (int)n->p.i0;
  if (n->op == CCG_OP_SEND) {
    int64_t *fp = d->sent[n - x->steps];
    fingerprint(x, n, fp);
    return comm->vt->send(comm, &c, fp, FP_FIXED, peer, n->p.i1);
  }
  int64_t *got = d->mine, want[FP_FIXED];
  fingerprint(x, n, want);
  CCG_CHECK(comm->vt->recv(comm, &c, got, FP_FIXED, peer, n->p.i1));
  if (got[FP_DTYPE] == want[FP_DTYPE] && got[FP_IN_RANK] == want[FP_OUT_RANK] &&
      memcmp(&got[FP_IN_DIMS], &want[FP_OUT_DIMS],
             CCG_MAX_RANK * sizeof *got) == 0)
    return CCG_STATUS_OK;
  char ds[256], dr[256];
  return ccg__xfail(x, n, CCG_STATUS_COMM,
                    "collective check (call #%llu): %s differs: %s sends it, "
                    "but %s receives it",
                    (unsigned long long)(d->seq - 1),
                    got[FP_DTYPE] != want[FP_DTYPE] ? "dtype" : "shape",
                    describe(got, ds, sizeof ds),
                    describe(want, dr, sizeof dr));
}

ccg_status ccg__debug_check(ccg_exec *x, const ccg__xnode *n,
                            const ccg__coll *k) {
  ccg__debug *d = x->debug;
  if (d && d->check && is_p2p(n))
    return check_p2p(x, n, k);
  if (!d || !d->check || !communicates(n))
    return CCG_STATUS_OK;
  int W = n->p.gsize;
  size_t words = FP_FIXED + 2 * (size_t)W;
  fingerprint(x, n, d->mine);
  for (int r = 0; r < W; r++)
    d->counts[r] = words;
  ccg__coll c = *k;
  c.op = "CollectiveCheck";
  c.dtype = CCG_DTYPE_I64;
  ccg_comm *comm = x->comm;
  CCG_CHECK(comm->vt->all_gatherv(comm, &c, d->mine, d->all, d->counts));
  const int64_t *first = d->all;
  for (int r = 1; r < W; r++) {
    const int64_t *fp = d->all + (size_t)r * words;
    const char *what = differs(first, fp, W);
    if (what)
      return mismatch(x, n, first, fp, what);
  }
  if (n->op != CCG_OP_ALL_TO_ALL)
    return CCG_STATUS_OK;
  /* group rank i sends counts[j] to j, which expects counts2[i] */
  for (int i = 0; i < W; i++)
    for (int j = 0; j < W; j++) {
      const int64_t *fi = d->all + (size_t)i * words;
      const int64_t *fj = d->all + (size_t)j * words;
      if (fi[FP_FIXED + j] != fj[FP_FIXED + W + i]) {
        char di[256], dj[256];
        return ccg__xfail(
            x, n, CCG_STATUS_COMM,
            "collective check (call #%llu): split sizes differ: %s sends "
            "%lld elements to group rank %d, but %s expects %lld from group "
            "rank %d",
            (unsigned long long)(d->seq - 1), describe(fi, di, sizeof di),
            (long long)fi[FP_FIXED + j], j, describe(fj, dj, sizeof dj),
            (long long)fj[FP_FIXED + W + i], i);
      }
    }
  return CCG_STATUS_OK;
}
