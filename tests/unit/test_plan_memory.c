/* The memory planner (src/exec/plan.c) on lifetimes given directly: a case
 * where placing buffers as they are born fragments the arena (the offline
 * plan reaches the max-live bound), and random schedules, small (both
 * plans) and past the offline plan's limit (the online one alone), where no
 * two buffers alive at one step may share a byte, nor a step's scratch a
 * byte of what is alive at its step. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "exec/internal.h"

/* Buffer i: `size` units of CCG__ALIGN bytes, born at step `start` (its
 * producer) and read last at step `last` (no reader when last == start). */
typedef struct life {
  size_t size;
  int start, last;
} life;

typedef struct fake {
  ccg_exec x;
  ccg__xnode *steps;
  ccg__xval *vals;
} fake;

/* An executor with only what the planner reads: every node a MatMul (never
 * in place), outputs the buffers born at its step, inputs those read last
 * there. */
static void make(fake *f, const life *b, size_t n, int n_steps) {
  memset(f, 0, sizeof *f);
  ccg__ctx_init(&f->x.ctx);
  ccg__arena_init(&f->x.arena, &f->x.alloc, 0);
  f->vals = calloc(n + 1, sizeof *f->vals);
  f->steps = calloc((size_t)n_steps + 1, sizeof *f->steps);
  assert_non_null(f->vals);
  assert_non_null(f->steps);
  for (size_t i = 0; i < n; i++) {
    ccg__xval *v = &f->vals[i];
    v->dtype = CCG_DTYPE_U8;
    v->kind = CCG__V_ARENA;
    v->nbytes = v->numel = b[i].size * CCG__ALIGN;
    v->first = b[i].start;
    v->last = -1;
    v->buffer = -1;
  }
  for (size_t i = 0; i < n; i++) {
    f->steps[b[i].start].n_out++;
    if (b[i].last > b[i].start)
      f->steps[b[i].last].n_in++;
  }
  for (int s = 0; s < n_steps; s++) {
    ccg__xnode *nd = &f->steps[s];
    nd->op = CCG_OP_MATMUL;
    nd->inplace = -1;
    nd->join = n_steps;
    nd->in = calloc(nd->n_in + 1, sizeof *nd->in);
    nd->out = calloc(nd->n_out + 1, sizeof *nd->out);
    assert_non_null(nd->in);
    assert_non_null(nd->out);
    nd->n_in = nd->n_out = 0;
  }
  for (size_t i = 0; i < n; i++) {
    ccg__xnode *p = &f->steps[b[i].start];
    p->out[p->n_out++] = (ccg_value_id)i;
    if (b[i].last > b[i].start) {
      ccg__xnode *c = &f->steps[b[i].last];
      c->in[c->n_in++] = (ccg_value_id)i;
    }
  }
  f->x.vals = f->vals;
  f->x.n_vals = n;
  f->x.steps = f->steps;
  f->x.n_steps = (size_t)n_steps;
}

static void drop(fake *f) {
  for (size_t s = 0; s < f->x.n_steps; s++) {
    free(f->steps[s].in);
    free(f->steps[s].out);
  }
  free(f->steps);
  free(f->vals);
  ccg__arena_free(&f->x.arena);
}

typedef struct extent {
  size_t off, size;
} extent;

static int by_offset(const void *a, const void *b) {
  const extent *x = a, *y = b;
  return (x->off > y->off) - (x->off < y->off);
}

/* No two buffers alive at one step overlap, a step's scratch included;
 * every one inside the arena. */
static void check_plan(const fake *f) {
  size_t n = f->x.n_vals;
  extent *live = calloc(n + 2, sizeof *live);
  assert_non_null(live);
  for (size_t s = 0; s < f->x.n_steps; s++) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (f->vals[i].first <= (int)s && (int)s <= f->vals[i].last)
        live[k++] = (extent){f->vals[i].offset, f->vals[i].nbytes};
    if (f->steps[s].scratch)
      live[k++] = (extent){f->steps[s].scratch_off, f->steps[s].scratch};
    qsort(live, k, sizeof *live, by_offset);
    for (size_t i = 0; i < k; i++) {
      assert_true(live[i].off + live[i].size <= f->x.mem.peak_bytes);
      assert_int_equal(live[i].off % CCG__ALIGN, 0);
      if (i)
        assert_true(live[i - 1].off + live[i - 1].size <= live[i].off);
    }
  }
  free(live);
}

/* Stands for a kernel: the planner places scratch only for steps that run. */
static ccg_status no_kernel(ccg_exec *x, const ccg__xnode *n) {
  (void)x;
  (void)n;
  return CCG_STATUS_OK;
}

static void fragmenting_order(void **state) {
  (void)state;
  /* Born as they come, the 3-unit buffer of step 4 finds no hole and the
   * arena grows to 8 units; at most 7 are ever alive. */
  const life b[] = {{1, 2, 3}, {1, 2, 4}, {3, 3, 4}, {3, 4, 4}};
  fake f;
  make(&f, b, 4, 5);
  assert_int_equal(ccg__plan_memory(&f.x), CCG_STATUS_OK);
  assert_int_equal(f.x.mem.max_live_bytes, 7 * CCG__ALIGN);
  assert_int_equal(f.x.mem.peak_bytes, 7 * CCG__ALIGN);
  assert_int_equal(f.x.mem.naive_bytes, 8 * CCG__ALIGN);
  check_plan(&f);
  drop(&f);
}

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static void random_plans(size_t n, int n_steps, int trials, uint32_t seed) {
  life *b = calloc(n, sizeof *b);
  assert_non_null(b);
  for (int t = 0; t < trials; t++) {
    for (size_t i = 0; i < n; i++) {
      b[i].start = (int)(lcg(&seed) % (uint32_t)n_steps);
      int span = (int)(lcg(&seed) % 6);
      b[i].last = b[i].start + span < n_steps ? b[i].start + span : b[i].start;
      b[i].size = 1 + lcg(&seed) % 9;
    }
    fake f;
    make(&f, b, n, n_steps);
    /* every other trial: scratch at a third of the steps, of sizes that
     * are not multiples of the alignment */
    for (int s = 0; s < n_steps && t % 2; s++)
      if (lcg(&seed) % 3 == 0) {
        f.steps[s].run = no_kernel;
        f.steps[s].scratch = (1 + lcg(&seed) % 5) * CCG__ALIGN - 8;
      }
    assert_int_equal(ccg__plan_memory(&f.x), CCG_STATUS_OK);
    assert_true(f.x.mem.peak_bytes >= f.x.mem.max_live_bytes);
    assert_true(f.x.mem.peak_bytes <= f.x.mem.naive_bytes);
    check_plan(&f);
    drop(&f);
  }
  free(b);
}

static void random_small(void **state) {
  (void)state;
  random_plans(40, 25, 60, 7);
}

/* Past the offline plan's limit (8192 buffers): the online plan alone. */
static void random_large(void **state) {
  (void)state;
  random_plans(9000, 3000, 1, 11);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fragmenting_order),
      cmocka_unit_test(random_small),
      cmocka_unit_test(random_large),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
