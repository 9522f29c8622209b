/* Overlap of communication and compute: the collectives of a rank run, in
 * schedule order, on one communication thread of its executor, while the
 * calling thread goes on with the compute nodes that do not read their
 * results. The communicator sees the same calls in the same order as
 * without overlap, so ranks still match and results are the same bits. The
 * memory plan keeps a collective's buffers alive until the main thread has
 * waited for it (plan.c reads n->join). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "exec/comm/comm.h"
#include "exec/internal.h"

#define SPINS 64       /* pauses before yielding */
#define IDLE_YIELDS 16 /* yields before the idle thread sleeps */

struct ccg__overlap {
  ccg_exec *x;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* apart, so that the two threads do not share a cache line (the arena
   * gives no 64-byte alignment to ask for) */
  _Atomic uint64_t posted; /* written by the main thread */
  char pad[64];
  _Atomic uint64_t done; /* written by the comm thread */
  char pad2[64];
  _Atomic int sleeping, quit, failed;
  ccg_ctx err;    /* the first failure */
  uint32_t *ring; /* step of post i at [i % cap] */
  size_t cap;
  /* this run: how many of the comm nodes numbered below k the calling
   * thread ran itself (not posted) */
  uint32_t *inlined;
};

/* ---- whether to overlap ------------------------------------------------- */

bool ccg__overlap_wanted(int option, const char *env, int cores,
                         int ranks_here) {
  if (env && (strcmp(env, "0") == 0 || strcmp(env, "1") == 0))
    return env[0] == '1';
  if (option >= 0)
    return option != 0;
  /* local ranks are threads of this process, and their collectives copies
   * and additions on CPU threads: without a core to spare, the
   * communication thread takes one from a rank's compute and every
   * hand-over to it waits for the scheduler (16-68% slower steps with 2
   * ranks on 2 busy cores, docs/parallelism.md) */
  int r = ranks_here > 0 ? ranks_here : 1;
  return cores >= 2 * r;
}

/* ---- the schedule ------------------------------------------------------- */

static bool is_coll(const ccg_graph *g, ccg_node_id id) {
  ccg_op op = ccg_node_op(g, id);
  return ccg_op_is_collective(op) && op != CCG_OP_SHARD_SLICE;
}

static int by_pos(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

ccg_status ccg__overlap_schedule(ccg_exec *x) {
  ccg_graph *g = x->g;
  size_t n = x->n_steps;
  for (size_t s = 0; s < n; s++)
    if (x->schedule[s] >= n)
      return CCG_STATUS_OK; /* ids are not dense: keep the order */
  uint32_t *pos = ccg__arena_calloc(&x->arena, n + 1, sizeof *pos);
  uint32_t *stack = ccg__arena_calloc(&x->arena, n + 1, sizeof *stack);
  uint32_t *found = ccg__arena_calloc(&x->arena, n + 1, sizeof *found);
  bool *done = ccg__arena_calloc(&x->arena, n + 1, sizeof *done);
  ccg_node_id *out = ccg__arena_calloc(&x->arena, n + 1, sizeof *out);
  if (!pos || !stack || !found || !done || !out)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  for (size_t s = 0; s < n; s++)
    pos[x->schedule[s]] = (uint32_t)s;
  size_t m = 0, swept = 0;
  for (size_t c = 0; c <= n; c++) {
    if (c < n && !is_coll(g, x->schedule[c]))
      continue;
    if (c < n) {
      /* what collective c needs and is not scheduled yet, in the old
       * order (positions: the old order is topological) */
      size_t sp = 0, nf = 0;
      stack[sp++] = (uint32_t)c;
      done[c] = true;
      while (sp) {
        uint32_t at = stack[--sp];
        found[nf++] = at;
        ccg_node_id id = x->schedule[at];
        for (size_t i = 0; i < ccg_node_num_inputs(g, id); i++) {
          ccg_value_id v = ccg_node_input(g, id, i);
          ccg_node_id p = v == CCG_NONE ? CCG_NONE : ccg_value_producer(g, v);
          if (p == CCG_NONE || p >= n || done[pos[p]])
            continue;
          done[pos[p]] = true;
          stack[sp++] = pos[p];
        }
      }
      qsort(found, nf, sizeof *found, by_pos);
      for (size_t i = 0; i < nf; i++)
        out[m++] = x->schedule[found[i]];
    }
    /* then what the old order ran before c and c does not need: it runs
     * while c is on the communication thread */
    for (; swept < c; swept++)
      if (!done[swept]) {
        done[swept] = true;
        out[m++] = x->schedule[swept];
      }
    swept = c < n ? c + 1 : c;
  }
  if (m != n)
    return ccg__error(&x->ctx, CCG_STATUS_INTERNAL,
                      "overlap schedule: %zu of %zu nodes", m, n);
  memcpy(x->schedule, out, n * sizeof *out);
  return CCG_STATUS_OK;
}

/* A node that needs the communicator (a group of one, and ShardSlice,
 * move data locally). */
static bool talks(const ccg_exec *x, const ccg__xnode *n) {
  return x->comm && ccg_op_is_collective(n->op) &&
         n->op != CCG_OP_SHARD_SLICE &&
         (n->p.gsize > 1 || n->op == CCG_OP_SEND || n->op == CCG_OP_RECV);
}

ccg_status ccg__overlap_mark(ccg_exec *x) {
  for (size_t s = 0; s < x->n_steps; s++) {
    x->steps[s].comm = x->overlap && talks(x, &x->steps[s]);
    x->steps[s].need = 0;
    x->steps[s].join = (int)x->n_steps;
  }
  uint32_t *ord = ccg__arena_calloc(&x->arena, x->n_steps + 1, 4);
  uint32_t *step_of = ccg__arena_calloc(&x->arena, x->n_steps + 1, 4);
  if (!ord || !step_of)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  uint32_t n_comm = 0;
  for (size_t s = 0; s < x->n_steps; s++)
    if (x->steps[s].comm) {
      ord[s] = x->steps[s].ord = n_comm;
      step_of[n_comm++] = (uint32_t)s;
    }
  x->n_comm = n_comm;
  /* A compute node waits for the posts that made its inputs; a comm node
   * waits for nothing: the thread runs posts in order, and what the main
   * thread made is ready when it posts. */
  uint32_t waited = 0;
  for (size_t s = 0; s < x->n_steps; s++) {
    ccg__xnode *n = &x->steps[s];
    if (n->comm)
      continue;
    for (uint32_t i = 0; i < n->n_in; i++) {
      const ccg__xval *v = ccg__in(x, n, i);
      if (v && v->first >= 0 && x->steps[v->first].comm &&
          ord[v->first] + 1 > n->need)
        n->need = ord[v->first] + 1;
    }
    /* from here on posts waited..need-1 are known to have ended */
    for (; waited < n->need; waited++)
      x->steps[step_of[waited]].join = (int)s;
  }
  return CCG_STATUS_OK;
}

/* ---- the communication thread ------------------------------------------ */

/* Waits for work; false when told to quit. Spins, then yields, then sleeps
 * on the condition variable (between runs, not on the hot path). */
static bool wait_work(ccg__overlap *ov, uint64_t d) {
  for (unsigned i = 0;; i++) {
    if (atomic_load_explicit(&ov->posted, memory_order_acquire) > d)
      return true;
    if (atomic_load(&ov->quit))
      return false;
    if (i < SPINS) {
      ccg__cpu_pause();
    } else if (i < SPINS + IDLE_YIELDS) {
      sched_yield();
    } else {
      pthread_mutex_lock(&ov->mu);
      atomic_store(&ov->sleeping, 1);
      while (atomic_load(&ov->posted) <= d && !atomic_load(&ov->quit))
        pthread_cond_wait(&ov->cv, &ov->mu);
      atomic_store(&ov->sleeping, 0);
      pthread_mutex_unlock(&ov->mu);
      i = 0;
    }
  }
}

static void *comm_main(void *arg) {
  ccg__overlap *ov = arg;
  ccg_exec *x = ov->x;
  for (uint64_t d = atomic_load(&ov->done); wait_work(ov, d); d++) {
    const ccg__xnode *n = &x->steps[ov->ring[d % ov->cap]];
    /* after a failure nothing more is issued: the peers learn of it from
     * the communicator's abort */
    if (!atomic_load(&ov->failed)) {
      if (ccg__collective_exec(x, n, &ov->err, x->comm_scratch) !=
          CCG_STATUS_OK)
        atomic_store(&ov->failed, 1);
    }
    atomic_store_explicit(&ov->done, d + 1, memory_order_release);
  }
  return NULL;
}

ccg_status ccg__overlap_start(ccg_exec *x) {
  if (!x->n_comm)
    return CCG_STATUS_OK;
  ccg__overlap *ov = ccg__arena_calloc(&x->arena, 1, sizeof *ov);
  uint32_t *ring = ccg__arena_calloc(&x->arena, x->n_comm, sizeof *ring);
  uint32_t *inl = ccg__arena_calloc(&x->arena, x->n_comm + 1, sizeof *inl);
  if (!ov || !ring || !inl)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  ov->x = x;
  ov->ring = ring;
  ov->cap = x->n_comm;
  ov->inlined = inl;
  ccg__ctx_init(&ov->err);
  if (pthread_mutex_init(&ov->mu, NULL) != 0)
    return ccg__error(&x->ctx, CCG_STATUS_INTERNAL, "cannot make a mutex");
  if (pthread_cond_init(&ov->cv, NULL) != 0) {
    pthread_mutex_destroy(&ov->mu);
    return ccg__error(&x->ctx, CCG_STATUS_INTERNAL,
                      "cannot make a condition variable");
  }
  if (pthread_create(&ov->thread, NULL, comm_main, ov) != 0) {
    pthread_cond_destroy(&ov->cv);
    pthread_mutex_destroy(&ov->mu);
    return ccg__error(&x->ctx, CCG_STATUS_INTERNAL,
                      "rank %d: cannot start the communication thread",
                      x->rank);
  }
  x->ov = ov;
  return CCG_STATUS_OK;
}

void ccg__overlap_free(ccg_exec *x) {
  ccg__overlap *ov = x->ov;
  if (!ov)
    return;
  pthread_mutex_lock(&ov->mu);
  atomic_store(&ov->quit, 1);
  pthread_cond_signal(&ov->cv);
  pthread_mutex_unlock(&ov->mu);
  pthread_join(ov->thread, NULL);
  pthread_cond_destroy(&ov->cv);
  pthread_mutex_destroy(&ov->mu);
  x->ov = NULL;
}

/* ---- the main thread ---------------------------------------------------- */

static void post(ccg__overlap *ov, size_t step) {
  uint64_t p = atomic_load_explicit(&ov->posted, memory_order_relaxed);
  ov->ring[p % ov->cap] = (uint32_t)step;
  /* sequentially consistent with `sleeping`: either the thread sees this
   * post before it sleeps, or this side sees it asleep and wakes it */
  atomic_store(&ov->posted, p + 1);
  if (atomic_load(&ov->sleeping)) {
    pthread_mutex_lock(&ov->mu);
    pthread_cond_signal(&ov->cv);
    pthread_mutex_unlock(&ov->mu);
  }
}

/* Waits until `want` posts have ended. No timer of its own: every wait of
 * the communication thread has the deadline, and after a failure it issues
 * nothing more, so this ends within the deadline of the collective being
 * waited on. */
static void wait_done(ccg__overlap *ov, uint64_t want) {
  for (unsigned i = 0;
       atomic_load_explicit(&ov->done, memory_order_acquire) < want; i++) {
    if (i < SPINS)
      ccg__cpu_pause();
    else
      sched_yield();
  }
}

/* The thread's failure, now on x (the caller's context). */
static ccg_status failure(ccg_exec *x) {
  return ccg__error_copy(&x->ctx, &x->ov->err);
}

ccg_status ccg__overlap_run(ccg_exec *x) {
  ccg__overlap *ov = x->ov;
  uint64_t base = atomic_load(&ov->posted);
  ccg_status st = CCG_STATUS_OK;
  for (size_t s = 0; s < x->n_steps && st == CCG_STATUS_OK; s++) {
    const ccg__xnode *n = &x->steps[s];
    if (n->need)
      wait_done(ov, base + n->need - ov->inlined[n->need]);
    if (atomic_load(&ov->failed))
      break;
    if (!n->comm) {
      if (n->run) {
        ccg__step_scratch(x, n);
        st = n->run(x, n);
      }
      continue;
    }
    /* Nothing to overlap with (the next node waits for it) and the thread
     * idle: run it here, sparing the hand-over. The thread has nothing
     * queued, so the communicator still sees the schedule's order. */
    bool here = n->join == (int)s + 1 &&
                atomic_load_explicit(&ov->done, memory_order_acquire) ==
                    atomic_load_explicit(&ov->posted, memory_order_relaxed);
    ov->inlined[n->ord + 1] = ov->inlined[n->ord] + (here ? 1 : 0);
    if (here)
      st = n->run(x, n);
    else
      post(ov, s);
  }
  /* The buffers of the run stay in use until the thread is done with
   * them. After a compute failure it still runs what was posted, as the
   * calling thread would have before reaching the failing node, so peers
   * fail at the same collective with overlap on or off. */
  wait_done(ov, atomic_load(&ov->posted));
  if (st == CCG_STATUS_OK && atomic_load(&ov->failed)) {
    atomic_store(&ov->failed, 0);
    return failure(x);
  }
  atomic_store(&ov->failed, 0);
  return st;
}
