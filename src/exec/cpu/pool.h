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
 * threads <= 1 none ever runs). Workers spin briefly after a loop, then
 * sleep on a condition variable. "new": free with ccg__pool_free, which
 * joins the workers. NULL on out of memory. */
ccg__pool *ccg__pool_new(const ccg_allocator *alloc, int threads);
void ccg__pool_free(ccg__pool *p);
/* Threads of the pool (1 for NULL). */
int ccg__pool_threads(const ccg__pool *p);

/* Calls fn(ctx, begin, end) for the chunks [k*grain, min(n, (k+1)*grain))
 * of [0, n), each on one thread, the caller's among them, and returns when
 * all are done. fn must not touch what another chunk writes. A NULL pool,
 * one thread, a single chunk, a call from inside a chunk or from a second
 * thread while a loop runs: the chunks run in order on the caller. */
typedef void (*ccg__range_fn)(void *ctx, size_t begin, size_t end);
void ccg__parallel_for(ccg__pool *p, size_t n, size_t grain, ccg__range_fn fn,
                       void *ctx);

/* The number of threads an executor gets: `requested` (> 0), else the
 * environment's CCG_THREADS, else the processors this process may use
 * divided by `ranks_here` (the ranks this process runs), at least 1. A
 * CCG_THREADS that is not a positive integer up to 1024 is
 * CCG_STATUS_INVALID_ARG naming it, on err. */
ccg_status ccg__pool_threads_for(int requested, int ranks_here, ccg_ctx *err,
                                 int *out);

#endif
