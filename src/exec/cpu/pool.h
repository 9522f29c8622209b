/* Private: the intra-op thread pool of one executor. Work is cut into
 * chunks whose bounds depend on the work alone, never on the thread count,
 * and each chunk runs on one thread: results are the same bytes whatever
 * the number of threads. */
#ifndef CCG_EXEC_CPU_POOL_H
#define CCG_EXEC_CPU_POOL_H

#include <stddef.h>

#include "ccgraph/core.h"

typedef struct ccg__pool ccg__pool;

/* A pool of `threads` threads, the caller's included (threads - 1 workers,
 * started at the first parallel loop that has more than one chunk; with
 * threads <= 1 none ever runs). Workers spin after a loop (300 us, 50
 * where the machine has more runnable threads than processors), then
 * sleep on a condition variable. Loops with less than `min_work` (the
 * units of ccg__parallel_for) run on the caller. "new": free with
 * ccg__pool_free, which joins the workers. NULL on out of memory. */
ccg__pool *ccg__pool_new(const ccg_allocator *alloc, int threads,
                         double min_work);
void ccg__pool_free(ccg__pool *p);
/* Threads of the pool (1 for NULL). */
int ccg__pool_threads(const ccg__pool *p);

/* The least work a loop must have to wake the workers, in units of one
 * simple f32 element operation (about a nanosecond or less at one thread):
 * waking a sleeping worker and waiting for it costs tens of microseconds,
 * more than a loop of a few ten thousand elements takes on the caller. */
#define CCG__PAR_MIN_WORK 65536.0
/* GEMM flops per unit of work (a core does tens of flops per ns). */
#define CCG__PAR_FLOPS_PER_WORK 32.0

/* The least work of a parallel loop: the environment's CCG_PAR_MIN_WORK
 * (to measure the wake-up cost), else CCG__PAR_MIN_WORK. One that is not an
 * integer from 0 to 10^12 is CCG_STATUS_INVALID_ARG naming it, on err. */
ccg_status ccg__pool_min_work(ccg_ctx *err, double *out);

/* Calls fn(ctx, begin, end) for the chunks [k*grain, min(n, (k+1)*grain))
 * of [0, n), each on one thread, the caller's among them, and returns when
 * all are done. fn must not touch what another chunk writes. `work` is the
 * loop's whole cost in the units of CCG__PAR_MIN_WORK. A NULL pool, one
 * thread, a single chunk, work under the pool's least, a call from inside
 * a chunk or from a second thread while a loop runs: the same chunks run in
 * order on the caller. */
typedef void (*ccg__range_fn)(void *ctx, size_t begin, size_t end);
void ccg__parallel_for(ccg__pool *p, size_t n, size_t grain, double work,
                       ccg__range_fn fn, void *ctx);

/* The processors this process may run on (sched_getaffinity; else those
 * online), at least 1. */
int ccg__online_cpus(void);

/* The number of threads an executor gets: `requested` (> 0), else the
 * environment's CCG_THREADS, else the processors this process may use
 * divided by `ranks_here` (the ranks this process runs), at least 1. A
 * CCG_THREADS that is not a positive integer up to 1024 is
 * CCG_STATUS_INVALID_ARG naming it, on err. */
ccg_status ccg__pool_threads_for(int requested, int ranks_here, ccg_ctx *err,
                                 int *out);

#endif
