/* The executor's intra-op pool (src/exec/cpu/pool.h) on its own: every
 * chunk of a loop runs exactly once and covers its range, through the
 * workers' spin, their sleep after loops far apart, a loop called from
 * inside a chunk, and a loop under the least work (on the caller alone);
 * freeing a pool whose workers spin or sleep joins them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "exec/cpu/pool.h"

#define N 1000

typedef struct counts {
  _Atomic int hits[N];
  _Atomic int bad_ranges;
  pthread_t caller;
  _Atomic int off_caller; /* chunks another thread ran */
  ccg__pool *pool;        /* for nested loops; NULL: none */
} counts;

static void count_range(void *vctx, size_t begin, size_t end) {
  counts *c = vctx;
  if (begin >= end || end > N)
    atomic_fetch_add(&c->bad_ranges, 1);
  for (size_t i = begin; i < end && i < N; i++)
    atomic_fetch_add(&c->hits[i], 1);
  if (!pthread_equal(pthread_self(), c->caller))
    atomic_fetch_add(&c->off_caller, 1);
}

/* Chunks of 7 (the last one short); each runs a nested loop of its own
 * range's elements into a second array when c->pool is set. */
static void run_loop(ccg__pool *p, counts *c, double work) {
  for (int i = 0; i < N; i++)
    atomic_store(&c->hits[i], 0);
  c->caller = pthread_self();
  ccg__parallel_for(p, N, 7, work, count_range, c);
  for (int i = 0; i < N; i++)
    assert_int_equal(atomic_load(&c->hits[i]), 1);
  assert_int_equal(atomic_load(&c->bad_ranges), 0);
}

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static counts *new_counts(void) {
  counts *c = calloc(1, sizeof *c);
  assert_non_null(c);
  return c;
}

/* Back to back (the workers spin between loops) at 2 and 3 threads. */
static void test_every_chunk_once(void **state) {
  (void)state;
  counts *c = new_counts();
  for (int t = 2; t <= 3; t++) {
    ccg__pool *p = ccg__pool_new(NULL, t, 0);
    assert_non_null(p);
    assert_int_equal(ccg__pool_threads(p), t);
    for (int k = 0; k < 100; k++)
      run_loop(p, c, 1e9);
    ccg__pool_free(p);
  }
  free(c);
}

/* Loops 2 ms apart, longer than any spin: the workers sleep and are
 * woken; then a pool freed while its workers sleep. */
static void test_loops_far_apart(void **state) {
  (void)state;
  counts *c = new_counts();
  ccg__pool *p = ccg__pool_new(NULL, 2, 0);
  assert_non_null(p);
  for (int k = 0; k < 10; k++) {
    run_loop(p, c, 1e9);
    sleep_us(2000);
  }
  ccg__pool_free(p);
  free(c);
}

typedef struct nested {
  ccg__pool *p;
  counts *inner;
} nested;

static void nested_range(void *vctx, size_t begin, size_t end) {
  nested *n = vctx;
  /* on a chunk's thread: runs in order there, whichever thread it is */
  for (size_t i = begin; i < end; i++) {
    counts one = {0};
    one.caller = pthread_self();
    ccg__parallel_for(n->p, N, 7, 1e9, count_range, &one);
    for (int k = 0; k < N; k++)
      if (atomic_load(&one.hits[k]) != 1)
        atomic_fetch_add(&n->inner->bad_ranges, 1);
    /* the nested loop never left its thread */
    atomic_fetch_add(&n->inner->off_caller, atomic_load(&one.off_caller));
  }
}

static void test_nested_loop(void **state) {
  (void)state;
  counts *c = new_counts();
  ccg__pool *p = ccg__pool_new(NULL, 2, 0);
  assert_non_null(p);
  nested n = {p, c};
  ccg__parallel_for(p, 8, 1, 1e9, nested_range, &n);
  assert_int_equal(atomic_load(&c->bad_ranges), 0);
  assert_int_equal(atomic_load(&c->off_caller), 0);
  ccg__pool_free(p);
  free(c);
}

/* Under the pool's least work, with one thread or no pool: the caller
 * runs every chunk. */
static void test_serial_cases(void **state) {
  (void)state;
  counts *c = new_counts();
  ccg__pool *p = ccg__pool_new(NULL, 2, 1000);
  ccg__pool *one = ccg__pool_new(NULL, 1, 0);
  assert_non_null(p);
  assert_non_null(one);
  run_loop(p, c, 999);
  run_loop(one, c, 1e9);
  run_loop(NULL, c, 1e9);
  assert_int_equal(atomic_load(&c->off_caller), 0);
  assert_int_equal(ccg__pool_threads(NULL), 1);
  /* a pool freed right after its first loop, its workers spinning */
  run_loop(p, c, 1e9);
  ccg__pool_free(p);
  ccg__pool_free(one);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_chunk_once),
      cmocka_unit_test(test_loops_far_apart),
      cmocka_unit_test(test_nested_loop),
      cmocka_unit_test(test_serial_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
