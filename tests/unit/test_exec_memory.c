/* Where the executor's create-time structures live: its arena takes its
 * chunks from the caller's allocator when one is given (every byte of it
 * back at ccg_exec_free), else from malloc rather than as huge pages
 * (src/exec/exec.c, ccg__exec_arena_init); a program of a few thousand
 * steps (an arena of several chunks, the last over 2 MiB) runs and gives
 * the same result either way. And a process that makes no mpi
 * communicator does not map the MPI library (loaded on first use:
 * src/exec/comm/mpi_dl.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "exec/internal.h"

/* Adds to x [4] one at a time, N times: y = x + N (every step its own
 * node, so the program's arena holds N steps). */
#define N_ADDS 4000

static ccg_graph *chain(ccg_value_id *out) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id v = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), one;
  const float c = 1.0f;
  ccg_tensor t = {CCG_DTYPE_F32, 1, {1}, &c};
  assert_ok(g, ccg_graph_add_initializer(g, "one", &t, &one));
  for (int i = 0; i < N_ADDS; i++)
    assert_ok(g, ccg_add(g, v, one, &v));
  assert_ok(g, ccg_graph_add_output(g, v));
  *out = v;
  return g;
}

static void run_chain(ccg_graph *g, ccg_value_id y, ccg_exec *x) {
  const float xv[4] = {0.0f, 1.0f, -2.5f, 100.0f};
  float got[4];
  ccg_exec_tensor in = XT_F32("x", xv, 4);
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
  assert_ok(x, ccg_exec_run(x, &in, 1, &out, 1));
  for (int i = 0; i < 4; i++) /* whole numbers: every sum is exact */
    assert_true(got[i] == xv[i] + (float)N_ADDS);
}

/* Live bytes through a caller's allocator (sizes kept in a header). */
typedef struct live {
  size_t bytes, peak;
} live;

static void *live_alloc(void *u, size_t n) {
  live *l = u;
  size_t *p = malloc(n + sizeof(max_align_t));
  if (!p)
    return NULL;
  *p = n;
  l->bytes += n;
  l->peak = l->bytes > l->peak ? l->bytes : l->peak;
  return (char *)p + sizeof(max_align_t);
}

static void live_free(void *u, void *q, size_t n) {
  live *l = u;
  size_t *p = (size_t *)((char *)q - sizeof(max_align_t));
  assert_int_equal(*p, n); /* the executor gives back the size it took */
  l->bytes -= n;
  free(p);
}

static void test_arena_from_malloc(void **state) {
  (void)state;
  ccg_value_id y;
  ccg_graph *g = chain(&y);
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, NULL, &x));
  /* the arena's allocator is malloc's wrapper, not libc's default (with
   * which core/arena.c maps chunks of 2 MiB and more as huge pages) */
  assert_non_null(x->arena.alloc.alloc);
  assert_non_null(x->arena.alloc.free);
  assert_true(x->arena.reserved > ((size_t)2 << 20));
  run_chain(g, y, x);
  run_chain(g, y, x);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

static void test_arena_from_caller(void **state) {
  (void)state;
  ccg_value_id y;
  ccg_graph *g = chain(&y);
  live l = {0, 0};
  ccg_allocator al = {live_alloc, NULL, live_free, &l};
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.allocator = &al;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  assert_ptr_equal(x->arena.alloc.alloc, live_alloc);
  /* the arena's chunks are among the caller's bytes */
  assert_true(l.bytes >= x->arena.reserved);
  run_chain(g, y, x);
  ccg_exec_free(x);
  assert_int_equal(l.bytes, 0);
  ccg_graph_free(g);
}

#ifdef __linux__
/* Whether a mapping of this process names `lib`. */
static bool mapped(const char *lib) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[1024];
  bool found = false;
  assert_non_null(f);
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, lib) != NULL;
  fclose(f);
  return found;
}
#endif

static void test_no_mpi_mapped(void **state) {
  (void)state;
  ccg_value_id y;
  ccg_graph *g = chain(&y);
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, NULL, &x));
  run_chain(g, y, x);
#ifdef __linux__
  assert_false(mapped("/libmpi.so"));
#endif
  ccg_exec_free(x);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arena_from_malloc),
      cmocka_unit_test(test_arena_from_caller),
      cmocka_unit_test(test_no_mpi_mapped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
