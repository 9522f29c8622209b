/* The intra-op thread pool (pool.h). One loop at a time: the caller
 * publishes it under the mutex and takes chunks itself; workers join it
 * while it is open and take chunks from one counter. The caller closes the
 * loop once every chunk is taken and waits only for the workers that
 * joined, so a worker the system has not scheduled yet never delays it. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "exec/cpu/pool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/error.h"

/* How long a worker polls for the next loop before it sleeps, and the
 * caller for the joined workers: longer than the serial kernels between
 * two parallel loops of a step (a Softmax or a GELU chain of a small block,
 * up to ~100 us), since waking a sleeping thread costs tens of
 * microseconds on a virtual machine, often more than the loop it joins.
 * Timed by the clock, not counted in pauses: a pause takes from 10 to 60 ns
 * across CPUs. On a crowded machine (more runnable threads than
 * processors, CROWD_CHECK_NS apart) the spin is SPIN_CROWDED_NS: there a
 * spinning thread spends the share of the processor the scheduler gives
 * it, while one that sleeps keeps it for the loop that wakes it
 * (docs/performance.md, "Two threads"). */
#define SPIN_NS 300000
#define SPIN_CROWDED_NS 50000
#define CROWD_CHECK_NS 50000000
/* Pauses between two reads of the clock (~1-2 us). */
#define SPIN_BATCH 32
/* A gap between two reads of the clock that says the thread was
 * descheduled: the spin ends. */
#define PREEMPTED_NS 50000
#define MAX_THREADS 1024

/* The join word: generation in the high 32 bits, OPEN while workers may
 * join, the number that joined in the low bits. */
#define OPEN ((uint64_t)1 << 31)
#define COUNT_MASK (OPEN - 1)

struct ccg__pool {
  ccg_allocator alloc;
  int threads;
  double min_work;
  int started; /* workers running; -1: starting failed, run serially */
  pthread_t *th;
  pthread_mutex_t mu;
  pthread_cond_t wake, done_cv;
  char pad0[64];
  _Atomic uint64_t join;
  char pad1[64];
  _Atomic size_t next; /* the next chunk to take */
  char pad2[64];
  _Atomic size_t left; /* joined workers that finished the loop */
  char pad3[64];
  _Atomic int busy, quit;
  int cpus;                    /* processors this process may use */
  uint64_t crowd_checked;      /* now_ns() of the last look; the caller's */
  _Atomic uint64_t spin_limit; /* ns: SPIN_NS, or SPIN_CROWDED_NS */
  /* the loop; written before its generation is published */
  ccg__range_fn fn;
  void *ctx;
  size_t n, grain, chunks;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Polls done(arg) for the pool's spin limit at most; true once it holds.
 * A gap in the clock (the thread lost its core) ends the spin. */
static bool spin_until(bool (*done)(ccg__pool *, uint32_t), ccg__pool *p,
                       uint32_t arg) {
  uint64_t start = now_ns(), last = start;
  uint64_t limit = atomic_load_explicit(&p->spin_limit, memory_order_relaxed);
  for (;;) {
    for (int i = 0; i < SPIN_BATCH; i++) {
      if (done(p, arg))
        return true;
      cpu_relax();
    }
    uint64_t t = now_ns();
    if (t - start > limit || t - last > PREEMPTED_NS)
      return done(p, arg);
    last = t;
  }
}

/* Runnable threads of the whole system (the fourth field of
 * /proc/loadavg, "running/total"); 0 where it cannot be read. */
static int runnable_threads(void) {
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f)
    return 0;
  double l1, l5, l15;
  int running = 0;
  if (fscanf(f, "%lf %lf %lf %d", &l1, &l5, &l15, &running) != 4)
    running = 0;
  fclose(f);
  return running;
}

/* Sets the spin limit from how crowded the machine is, at most once per
 * CROWD_CHECK_NS. The caller's alone (one loop at a time). */
static void check_crowd(ccg__pool *p) {
  uint64_t t = now_ns();
  if (p->crowd_checked && t - p->crowd_checked < CROWD_CHECK_NS)
    return;
  p->crowd_checked = t;
  atomic_store_explicit(
      &p->spin_limit, runnable_threads() > p->cpus ? SPIN_CROWDED_NS : SPIN_NS,
      memory_order_relaxed);
}

static void take_chunks(ccg__pool *p) {
  size_t k;
  while ((k = atomic_fetch_add(&p->next, 1)) < p->chunks) {
    size_t b = k * p->grain, e = b + p->grain < p->n ? b + p->grain : p->n;
    p->fn(p->ctx, b, e);
  }
}

/* Joins the loop of generation gen if it is still open. */
static bool try_join(ccg__pool *p, uint32_t gen) {
  uint64_t w = atomic_load(&p->join);
  while ((uint32_t)(w >> 32) == gen && (w & OPEN))
    if (atomic_compare_exchange_weak(&p->join, &w, w + 1))
      return true;
  return false;
}

static uint32_t generation(const ccg__pool *p) {
  return (uint32_t)(atomic_load(&p->join) >> 32);
}

static bool new_loop(ccg__pool *p, uint32_t seen) {
  return generation(p) != seen || atomic_load(&p->quit);
}

static bool all_left(ccg__pool *p, uint32_t joined) {
  return atomic_load(&p->left) >= joined;
}

static void *worker(void *arg) {
  ccg__pool *p = arg;
  uint32_t seen = generation(p);
  for (;;) {
    uint32_t gen = seen;
    if (spin_until(new_loop, p, seen))
      gen = generation(p);
    if (gen == seen && !atomic_load(&p->quit)) {
      pthread_mutex_lock(&p->mu);
      while ((gen = (uint32_t)(atomic_load(&p->join) >> 32)) == seen &&
             !atomic_load(&p->quit))
        pthread_cond_wait(&p->wake, &p->mu);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->quit))
      return NULL;
    seen = gen;
    if (!try_join(p, gen))
      continue;
    take_chunks(p);
    atomic_fetch_add(&p->left, 1);
    /* under the mutex: the caller checks `left` under it before sleeping */
    pthread_mutex_lock(&p->mu);
    pthread_cond_signal(&p->done_cv);
    pthread_mutex_unlock(&p->mu);
  }
}

int ccg__online_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int c = CPU_COUNT(&set);
    if (c > 0)
      return c;
  }
  long c = sysconf(_SC_NPROCESSORS_ONLN);
  return c > 0 ? (int)c : 1;
}

ccg__pool *ccg__pool_new(const ccg_allocator *alloc, int threads,
                         double min_work) {
  ccg__pool *p = ccg__calloc(alloc, 1, sizeof *p);
  if (!p)
    return NULL;
  if (alloc)
    p->alloc = *alloc;
  p->threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
  p->min_work = min_work;
  p->cpus = ccg__online_cpus();
  atomic_init(&p->spin_limit, SPIN_NS);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  return p;
}

/* Starts the workers; on failure the pool runs serially from then on. */
static bool start(ccg__pool *p) {
  if (p->started)
    return p->started > 0;
  size_t nw = (size_t)p->threads - 1;
  p->th = ccg__calloc(&p->alloc, nw, sizeof *p->th);
  if (!p->th) {
    p->started = -1;
    return false;
  }
  int ok = 0;
  for (size_t i = 0; i < nw; i++) {
    if (pthread_create(&p->th[i], NULL, worker, p) != 0)
      break;
    ok++;
  }
  /* fewer workers than asked still give the same results */
  p->started = ok > 0 ? ok : -1;
  return ok > 0;
}

void ccg__pool_free(ccg__pool *p) {
  if (!p)
    return;
  if (p->started > 0) {
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
      pthread_join(p->th[i], NULL);
  }
  if (p->th)
    ccg__free(&p->alloc, p->th, (size_t)(p->threads - 1) * sizeof *p->th);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done_cv);
  pthread_mutex_destroy(&p->mu);
  ccg_allocator a = p->alloc;
  ccg__free(&a, p, sizeof *p);
}

int ccg__pool_threads(const ccg__pool *p) { return p ? p->threads : 1; }

static void serial(size_t n, size_t grain, ccg__range_fn fn, void *ctx) {
  for (size_t b = 0; b < n; b += grain)
    fn(ctx, b, b + grain < n ? b + grain : n);
}

void ccg__parallel_for(ccg__pool *p, size_t n, size_t grain, double work,
                       ccg__range_fn fn, void *ctx) {
  if (n == 0)
    return;
  if (grain == 0)
    grain = 1;
  size_t chunks = (n - 1) / grain + 1;
  int expect = 0;
  if (!p || p->threads <= 1 || chunks == 1 || work < p->min_work ||
      !atomic_compare_exchange_strong(&p->busy, &expect, 1)) {
    serial(n, grain, fn, ctx);
    return;
  }
  if (!start(p)) {
    atomic_store(&p->busy, 0);
    serial(n, grain, fn, ctx);
    return;
  }
  check_crowd(p);
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->grain = grain;
  p->chunks = chunks;
  atomic_store(&p->next, 0);
  atomic_store(&p->left, 0);
  pthread_mutex_lock(&p->mu);
  uint32_t gen = (uint32_t)(atomic_load(&p->join) >> 32) + 1;
  atomic_store(&p->join, ((uint64_t)gen << 32) | OPEN);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  take_chunks(p);
  /* every chunk is taken: no one else may join */
  uint32_t joined = (uint32_t)(atomic_fetch_and(&p->join, ~OPEN) & COUNT_MASK);
  if (!spin_until(all_left, p, joined)) {
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->left) < joined)
      pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
  atomic_store(&p->busy, 0);
}

ccg_status ccg__pool_threads_for(int requested, int ranks_here, ccg_ctx *err,
                                 int *out) {
  const char *env = getenv("CCG_THREADS");
  if (env && *env) {
    char *end;
    errno = 0;
    long v = strtol(env, &end, 10);
    if (errno || *end || v < 1 || v > MAX_THREADS)
      return ccg__error(err, CCG_STATUS_INVALID_ARG,
                        "CCG_THREADS='%s': give a number of threads from 1 "
                        "to %d",
                        env, MAX_THREADS);
    *out = (int)v;
    return CCG_STATUS_OK;
  }
  if (requested < 0 || requested > MAX_THREADS)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "threads is %d; give 0 (the default) or 1 to %d",
                      requested, MAX_THREADS);
  if (requested > 0) {
    *out = requested;
    return CCG_STATUS_OK;
  }
  int per = ccg__online_cpus() / (ranks_here > 0 ? ranks_here : 1);
  *out = per > 0 ? per : 1;
  return CCG_STATUS_OK;
}

ccg_status ccg__pool_min_work(ccg_ctx *err, double *out) {
  const char *env = getenv("CCG_PAR_MIN_WORK");
  *out = CCG__PAR_MIN_WORK;
  if (!env || !*env)
    return CCG_STATUS_OK;
  char *end;
  errno = 0;
  long long v = strtoll(env, &end, 10);
  if (errno || *end || v < 0 || v > 1000000000000LL)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "CCG_PAR_MIN_WORK='%s': give an integer from 0 to "
                      "10^12 (element operations)",
                      env);
  *out = (double)v;
  return CCG_STATUS_OK;
}
