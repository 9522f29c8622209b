/* The `local` communicator: ranks are threads of one process sharing this
 * context. A collective publishes each rank's buffers in its slot, meets the
 * group at a barrier, moves or reduces straight from the peers' buffers, and
 * meets again before anyone may reuse them. Waits spin with a pause, then
 * yield; none sleeps on a futex. Every wait checks the deadline and the
 * shared failure flag. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/comm/comm.h"

#define KEYS (1u << CCG_MAX_MESH_AXES) /* one barrier per mesh-axis mask */
#define RING 16                        /* sends in flight per channel */
#define SPINS 64                       /* pauses before yielding */
#define SMALL_BYTES 16384 /* all-reduce: whole on every rank up to this */

typedef struct slot {
  _Alignas(64) _Atomic uint64_t phase[KEYS];
  /* set while this rank reads peers' buffers: a failing rank waits for it
   * to clear before its buffers go away (see local_abort) */
  _Atomic int busy;
  uint64_t mine[KEYS]; /* owner's count of barriers per key */
  /* published before arriving at a barrier */
  const void *in;
  void *out;
  const size_t *counts;
  size_t sig; /* must be equal across the group */
  const char *op, *node;
  ccg_dtype dtype;
} slot;

typedef struct msg {
  const void *buf;
  size_t bytes;
  int64_t tag;
  const char *node;
} msg;

typedef struct chan {
  _Alignas(64) _Atomic uint64_t posted;
  _Alignas(64) _Atomic uint64_t taken;
  msg ring[RING];
} chan;

typedef struct local_comm {
  ccg_comm base; /* first */
  slot *slots;
  chan *chans; /* [from * nranks + to] */
  _Atomic int aborted;
  pthread_mutex_t abort_lock;
  int abort_rank;
  char abort_msg[512];
} local_comm;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Marks the communicator failed, then waits until no other rank is still
 * reading this rank's buffers. A reader sets its busy flag and then checks
 * the failure flag; this side sets the failure flag and then checks busy
 * flags (both sequentially consistent), so either the reader backs off or
 * this side sees it and waits for its copy to end. */
static void local_abort(ccg_comm *c, int rank, const char *text) {
  local_comm *L = (local_comm *)c;
  pthread_mutex_lock(&L->abort_lock);
  if (!atomic_load(&L->aborted)) {
    L->abort_rank = rank;
    snprintf(L->abort_msg, sizeof L->abort_msg, "%s", text);
    atomic_store(&L->aborted, 1);
  }
  pthread_mutex_unlock(&L->abort_lock);
  atomic_store(&L->slots[rank].busy, 0);
  for (int r = 0; r < c->nranks; r++)
    while (r != rank && atomic_load(&L->slots[r].busy))
      sched_yield();
}

static ccg_status aborted_error(local_comm *L, const ccg__coll *k) {
  pthread_mutex_lock(&L->abort_lock);
  ccg_status st = ccg__error(
      k->err, CCG_STATUS_COMM, "%s at node '%s' on rank %d: rank %d failed: %s",
      k->op, k->node, k->rank, L->abort_rank, L->abort_msg);
  pthread_mutex_unlock(&L->abort_lock);
  return st;
}

/* Waits until *ctr >= want; `peer` is named when the deadline passes. */
static ccg_status wait_ge(local_comm *L, const ccg__coll *k,
                          _Atomic uint64_t *ctr, uint64_t want, int64_t peer,
                          const char *what) {
  double start = 0.0;
  for (unsigned spins = 0;; spins++) {
    if (atomic_load_explicit(ctr, memory_order_acquire) >= want)
      return CCG_STATUS_OK;
    if (atomic_load(&L->aborted))
      return aborted_error(L, k);
    if (spins < SPINS) {
      ccg__cpu_pause();
      continue;
    }
    sched_yield();
    if (spins == SPINS) {
      start = now_s();
    } else if ((spins & 31) == 0 && now_s() - start > k->deadline_s) {
      ccg_status st = ccg__error(
          k->err, CCG_STATUS_TIMEOUT,
          "%s at node '%s' on rank %d: rank %lld did not %s within the "
          "deadline of %g s",
          k->op, k->node, k->rank, (long long)peer, what, k->deadline_s);
      local_abort(&L->base, k->rank, ccg_last_error(k->err));
      return st;
    }
  }
}

/* Stops reading, meets the group, and with `then_read` announces reads of
 * the peers' buffers (refused once any rank has failed). */
static ccg_status barrier(local_comm *L, const ccg__coll *k, bool then_read) {
  slot *me = &L->slots[k->rank];
  atomic_store(&me->busy, 0);
  uint64_t ph = ++me->mine[k->key];
  atomic_store_explicit(&me->phase[k->key], ph, memory_order_release);
  for (int i = 0; i < k->gsize; i++) {
    int64_t p = k->group[i];
    if (p == k->rank)
      continue;
    CCG_CHECK(wait_ge(L, k, &L->slots[p].phase[k->key], ph, p,
                      "reach the same collective"));
  }
  if (!then_read)
    return CCG_STATUS_OK;
  atomic_store(&me->busy, 1);
  if (atomic_load(&L->aborted)) {
    atomic_store(&me->busy, 0);
    return aborted_error(L, k);
  }
  return CCG_STATUS_OK;
}

/* Publishes this rank's part and meets the group; then checks that every
 * peer is at the same kind of call. */
static ccg_status meet(local_comm *L, const ccg__coll *k, const void *in,
                       void *out, const size_t *counts, size_t sig) {
  slot *me = &L->slots[k->rank];
  me->in = in;
  me->out = out;
  me->counts = counts;
  me->sig = sig;
  me->op = k->op;
  me->node = k->node;
  me->dtype = k->dtype;
  CCG_CHECK(barrier(L, k, true));
  for (int i = 0; i < k->gsize; i++) {
    const slot *p = &L->slots[k->group[i]];
    if (strcmp(p->op, k->op) == 0 && p->sig == sig && p->dtype == k->dtype)
      continue;
    ccg_status st = ccg__error(
        k->err, CCG_STATUS_COMM,
        "%s at node '%s' on rank %d (%s, size %zu) does not match rank %lld, "
        "which is at %s node '%s' (%s, size %zu)",
        k->op, k->node, k->rank, ccg_dtype_name(k->dtype), sig,
        (long long)k->group[i], p->op, p->node, ccg_dtype_name(p->dtype),
        p->sig);
    local_abort(&L->base, k->rank, ccg_last_error(k->err));
    return st;
  }
  return CCG_STATUS_OK;
}

static size_t esize(const ccg__coll *k) { return ccg_dtype_size(k->dtype); }

static ccg_status local_all_reduce(ccg_comm *c, const ccg__coll *k,
                                   const void *in, void *out, size_t count) {
  local_comm *L = (local_comm *)c;
  size_t es = esize(k);
  CCG_CHECK(meet(L, k, in, out, NULL, count));
  const void *ins[64];
  int n = k->gsize;
  for (int r = 0; r < n; r++)
    ins[r] = L->slots[k->group[r]].in;
  if (count * es <= SMALL_BYTES && in != out) {
    /* small: every rank reduces everything (same order, same bits), one
     * barrier fewer */
    ccg__reduce_ordered(k->dtype, k->rop, ins, n, 0, count, out);
    return barrier(L, k, false);
  }
  /* Each rank reduces its share of the elements over the group, in group
   * order, and writes it into every rank's output: every element is
   * reduced once, in rank order, and read and written once per rank. A
   * rank touches only its share of any buffer, so outputs may alias
   * inputs. */
  size_t per = (count + (size_t)n - 1) / (size_t)n;
  size_t lo = per * (size_t)k->gidx < count ? per * (size_t)k->gidx : count;
  size_t hi = lo + per < count ? lo + per : count;
  void *outs[64];
  for (int r = 0; r < n; r++)
    outs[r] = L->slots[k->group[r]].out;
  ccg__reduce_ordered_to(k->dtype, k->rop, ins, n, lo, hi - lo, outs, n);
  return barrier(L, k, false);
}

static size_t sum_counts(const size_t *counts, int n) {
  size_t s = 0;
  for (int i = 0; i < n; i++)
    s += counts[i];
  return s;
}

static ccg_status local_all_gatherv(ccg_comm *c, const ccg__coll *k,
                                    const void *in, void *out,
                                    const size_t *counts) {
  local_comm *L = (local_comm *)c;
  size_t es = esize(k), at = 0;
  CCG_CHECK(meet(L, k, in, out, counts, sum_counts(counts, k->gsize)));
  for (int r = 0; r < k->gsize; r++) {
    if (counts[r])
      memcpy((char *)out + at * es, L->slots[k->group[r]].in, counts[r] * es);
    at += counts[r];
  }
  return barrier(L, k, false);
}

static ccg_status local_reduce_scatterv(ccg_comm *c, const ccg__coll *k,
                                        const void *in, void *out,
                                        const size_t *counts) {
  local_comm *L = (local_comm *)c;
  CCG_CHECK(meet(L, k, in, out, counts, sum_counts(counts, k->gsize)));
  const void *ins[64];
  size_t at = 0;
  for (int r = 0; r < k->gsize; r++) {
    ins[r] = L->slots[k->group[r]].in;
    if (r < k->gidx)
      at += counts[r];
  }
  ccg__reduce_ordered(k->dtype, k->rop, ins, k->gsize, at, counts[k->gidx],
                      out);
  return barrier(L, k, false);
}

static ccg_status local_all_to_allv(ccg_comm *c, const ccg__coll *k,
                                    const void *in, const size_t *send_counts,
                                    void *out, const size_t *recv_counts) {
  local_comm *L = (local_comm *)c;
  size_t es = esize(k), at = 0;
  CCG_CHECK(meet(L, k, in, out, send_counts, 0));
  for (int r = 0; r < k->gsize; r++) {
    const slot *p = &L->slots[k->group[r]];
    size_t from = 0;
    for (int j = 0; j < k->gidx; j++)
      from += p->counts[j];
    if (p->counts[k->gidx] != recv_counts[r]) {
      ccg_status st = ccg__error(
          k->err, CCG_STATUS_COMM,
          "%s at node '%s' on rank %d expects %zu elements from rank %lld, "
          "which sends %zu",
          k->op, k->node, k->rank, recv_counts[r], (long long)k->group[r],
          p->counts[k->gidx]);
      local_abort(c, k->rank, ccg_last_error(k->err));
      return st;
    }
    if (recv_counts[r])
      memcpy((char *)out + at * es, (const char *)p->in + from * es,
             recv_counts[r] * es);
    at += recv_counts[r];
  }
  return barrier(L, k, false);
}

static ccg_status local_broadcast(ccg_comm *c, const ccg__coll *k,
                                  const void *in, void *out, size_t count,
                                  int root) {
  local_comm *L = (local_comm *)c;
  CCG_CHECK(meet(L, k, in, out, NULL, count));
  const void *src = L->slots[k->group[root]].in;
  if (out != src && count)
    memcpy(out, src, count * esize(k));
  return barrier(L, k, false);
}

static ccg_status local_reduce(ccg_comm *c, const ccg__coll *k, const void *in,
                               void *out, size_t count, int root) {
  local_comm *L = (local_comm *)c;
  CCG_CHECK(meet(L, k, in, out, NULL, count));
  if (k->gidx == root) {
    const void *ins[64];
    for (int r = 0; r < k->gsize; r++)
      ins[r] = L->slots[k->group[r]].in;
    ccg__reduce_ordered(k->dtype, k->rop, ins, k->gsize, 0, count, out);
  } else if (out != in && count) {
    memcpy(out, in, count * esize(k));
  }
  return barrier(L, k, false);
}

static ccg_status local_shift(ccg_comm *c, const ccg__coll *k, const void *in,
                              int dst, void *out, int src, size_t count) {
  local_comm *L = (local_comm *)c;
  (void)dst; /* each rank pulls from its source */
  CCG_CHECK(meet(L, k, in, out, NULL, count));
  if (src >= 0 && count)
    memcpy(out, L->slots[k->group[src]].in, count * esize(k));
  return barrier(L, k, false);
}

static ccg_status local_send(ccg_comm *c, const ccg__coll *k, const void *in,
                             size_t count, int peer, int64_t tag) {
  local_comm *L = (local_comm *)c;
  chan *ch = &L->chans[(size_t)k->rank * (size_t)c->nranks + (size_t)peer];
  uint64_t seq = atomic_load_explicit(&ch->posted, memory_order_relaxed);
  if (seq >= RING)
    CCG_CHECK(wait_ge(L, k, &ch->taken, seq - RING + 1, peer,
                      "receive earlier sends"));
  ch->ring[seq % RING] = (msg){in, count * esize(k), tag, k->node};
  atomic_store_explicit(&ch->posted, seq + 1, memory_order_release);
  return CCG_STATUS_OK;
}

static ccg_status local_recv(ccg_comm *c, const ccg__coll *k, void *out,
                             size_t count, int peer, int64_t tag) {
  local_comm *L = (local_comm *)c;
  chan *ch = &L->chans[(size_t)peer * (size_t)c->nranks + (size_t)k->rank];
  uint64_t seq = atomic_load_explicit(&ch->taken, memory_order_relaxed);
  CCG_CHECK(wait_ge(L, k, &ch->posted, seq + 1, peer, "send"));
  atomic_store(&L->slots[k->rank].busy, 1);
  if (atomic_load(&L->aborted)) {
    atomic_store(&L->slots[k->rank].busy, 0);
    return aborted_error(L, k);
  }
  const msg *m = &ch->ring[seq % RING];
  size_t bytes = count * esize(k);
  if (m->tag != tag || m->bytes != bytes) {
    ccg_status st = ccg__error(
        k->err, CCG_STATUS_COMM,
        "%s at node '%s' on rank %d expects tag %lld and %zu bytes from rank "
        "%d, which sent tag %lld and %zu bytes at node '%s'",
        k->op, k->node, k->rank, (long long)tag, bytes, peer, (long long)m->tag,
        m->bytes, m->node);
    local_abort(c, k->rank, ccg_last_error(k->err));
    return st;
  }
  if (bytes)
    memcpy(out, m->buf, bytes);
  atomic_store(&L->slots[k->rank].busy, 0);
  atomic_store_explicit(&ch->taken, seq + 1, memory_order_release);
  return CCG_STATUS_OK;
}

static ccg_status local_flush(ccg_comm *c, const ccg__coll *k) {
  local_comm *L = (local_comm *)c;
  for (int d = 0; d < c->nranks; d++) {
    chan *ch = &L->chans[(size_t)k->rank * (size_t)c->nranks + (size_t)d];
    uint64_t posted = atomic_load_explicit(&ch->posted, memory_order_relaxed);
    CCG_CHECK(wait_ge(L, k, &ch->taken, posted, d, "receive a send"));
  }
  return CCG_STATUS_OK;
}

static void local_destroy(ccg_comm *c) {
  local_comm *L = (local_comm *)c;
  pthread_mutex_destroy(&L->abort_lock);
  free(L->slots);
  free(L->chans);
  free(L);
}

static const ccg__comm_vt local_vt = {
    "local",           local_all_reduce,
    local_all_gatherv, local_reduce_scatterv,
    local_all_to_allv, local_broadcast,
    local_reduce,      local_shift,
    local_send,        local_recv,
    local_flush,       local_abort,
    local_destroy,
};

/* Groups are read through fixed arrays of this many entries. */
#define LOCAL_MAX_RANKS 64

ccg_status ccg_comm_local_new(int nranks, ccg_comm **out) {
  if (!out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_comm_local_new: out is NULL");
  *out = NULL;
  if (nranks < 1 || nranks > LOCAL_MAX_RANKS)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "local communicator: %d ranks; 1 to %d are supported",
                      nranks, LOCAL_MAX_RANKS);
  local_comm *L = calloc(1, sizeof *L);
  size_t n = (size_t)nranks;
  if (L) {
    L->slots = aligned_alloc(64, n * sizeof(slot));
    L->chans = aligned_alloc(64, n * n * sizeof(chan));
  }
  if (!L || !L->slots || !L->chans) {
    if (L) {
      free(L->slots);
      free(L->chans);
    }
    free(L);
    return ccg__error(NULL, CCG_STATUS_OOM,
                      "local communicator: out of memory for %d ranks", nranks);
  }
  memset(L->slots, 0, n * sizeof(slot));
  memset(L->chans, 0, n * n * sizeof(chan));
  ccg__ctx_init(&L->base.ctx);
  L->base.vt = &local_vt;
  L->base.nranks = nranks;
  L->base.rank = -1;
  pthread_mutex_init(&L->abort_lock, NULL);
  *out = &L->base;
  return CCG_STATUS_OK;
}
