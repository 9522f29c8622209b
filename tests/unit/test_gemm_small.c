/* The small-product loop of the f32 GEMM (src/exec/cpu/gemm.c) against the
 * library's path on the same operands: transposes, padded leading
 * dimensions, alpha and beta, batches with offsets, the bias and activation
 * epilogue, each instruction set's build of the loop; its results are the
 * same bytes at 1 and 2 threads, C is not read where beta is 0, and the
 * automatic choice takes the loop for a tiny product.
 * Tolerance: |small - library| <= 1e-5 * (sum over k of |alpha a b| +
 * |beta c|) + 1e-6, a few float roundings of the terms' magnitude for the
 * k <= 64 of these shapes (the two round in different orders). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/pool.h"
#include "exec/cpu/vecmath.h"

typedef struct gcase {
  int64_t m, n, k, batch;
  bool ta, tb;
  int64_t pad; /* extra leading dimension of A, B and C */
  float alpha, beta;
  bool bias;
  ccg_op act;
} gcase;

/* batch entry t's operands follow the previous ones */
typedef struct offs {
  int64_t sa, sb;
} offs;

static void batch_off(const void *ctx, int64_t t, int64_t *ao, int64_t *bo) {
  const offs *o = ctx;
  *ao = t * o->sa;
  *bo = t * o->sb;
}

static float val(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

typedef struct operands {
  float *a, *b, *c0, *bias;
  int64_t sa, sb, sc, rows_c;
  offs o;
} operands;

static void make(const gcase *t, operands *op, ccg__gemm *g) {
  int64_t batch = t->batch > 0 ? t->batch : 1;
  int64_t lda = (t->ta ? t->m : t->k) + t->pad;
  int64_t ldb = (t->tb ? t->k : t->n) + t->pad;
  int64_t ldc = t->n + t->pad;
  op->sa = (t->ta ? t->k : t->m) * lda;
  op->sb = (t->tb ? t->n : t->k) * ldb;
  op->sc = t->m * ldc;
  op->a = malloc((size_t)(batch * op->sa) * sizeof(float));
  op->b = malloc((size_t)(batch * op->sb) * sizeof(float));
  op->c0 = malloc((size_t)(batch * op->sc) * sizeof(float));
  op->bias = malloc((size_t)t->n * sizeof(float));
  assert_non_null(op->a);
  assert_non_null(op->b);
  assert_non_null(op->c0);
  assert_non_null(op->bias);
  uint32_t s = (uint32_t)(t->m * 131 + t->n * 17 + t->k);
  for (int64_t i = 0; i < batch * op->sa; i++)
    op->a[i] = val(&s);
  for (int64_t i = 0; i < batch * op->sb; i++)
    op->b[i] = val(&s);
  for (int64_t i = 0; i < batch * op->sc; i++)
    op->c0[i] = t->beta != 0.0f ? val(&s) : NAN; /* never read */
  for (int64_t i = 0; i < t->n; i++)
    op->bias[i] = val(&s);
  op->o = (offs){op->sa, op->sb};
  ccg__gemm z = CCG__GEMM_INIT;
  *g = z;
  g->ta = t->ta;
  g->tb = t->tb;
  g->m = t->m;
  g->n = t->n;
  g->k = t->k;
  g->lda = lda;
  g->ldb = ldb;
  g->ldc = ldc;
  g->alpha = t->alpha;
  g->beta = t->beta;
  g->a = op->a;
  g->b = op->b;
  g->batch = t->batch;
  g->stride_c = op->sc;
  if (t->batch > 1) {
    g->batch_off = batch_off;
    g->batch_ctx = &op->o;
  }
  g->bias = t->bias ? op->bias : NULL;
  g->act = t->act;
}

static float *run(ccg__pool *pool, ccg__gemm *g, const operands *op,
                  int64_t batch, ccg__gemm_path path) {
  float *c = malloc((size_t)(batch * op->sc) * sizeof(float));
  assert_non_null(c);
  memcpy(c, op->c0, (size_t)(batch * op->sc) * sizeof(float));
  g->c = c;
  ccg__sgemm_path(pool, g, path);
  return c;
}

/* |alpha| sum |a b| + |beta c| of C element (e, i, j), before the epilogue */
static double scale(const gcase *t, const ccg__gemm *g, const operands *op,
                    int64_t e, int64_t i, int64_t j) {
  const float *a = op->a + e * op->sa, *b = op->b + e * op->sb;
  double s = 0.0;
  for (int64_t k = 0; k < t->k; k++) {
    float x = t->ta ? a[k * g->lda + i] : a[i * g->lda + k];
    float y = t->tb ? b[j * g->ldb + k] : b[k * g->ldb + j];
    s += fabs((double)x * y);
  }
  s *= fabs(t->alpha);
  if (t->beta != 0.0f)
    s += fabs(t->beta * op->c0[e * op->sc + i * g->ldc + j]);
  return s;
}

static const gcase cases[] = {
    {8, 8, 8, 0, false, false, 0, 1.0f, 0.0f, false, CCG_OP_COUNT},
    {8, 8, 8, 0, false, true, 0, 1.0f, 0.0f, false, CCG_OP_COUNT},
    {13, 37, 11, 0, false, false, 3, 0.5f, 0.0f, false, CCG_OP_COUNT},
    {13, 37, 11, 0, true, false, 2, 1.0f, 1.0f, false, CCG_OP_COUNT},
    {13, 37, 11, 0, false, true, 5, -1.5f, 0.25f, true, CCG_OP_COUNT},
    {7, 21, 9, 0, true, true, 1, 1.0f, 0.0f, true, CCG_OP_RELU},
    {16, 16, 32, 0, false, false, 0, 1.0f, 0.0f, true, CCG_OP_TANH},
    {4, 8, 1, 0, false, false, 0, 1.0f, 0.0f, false, CCG_OP_COUNT},
    {1, 64, 32, 0, false, true, 0, 1.0f, 0.0f, false, CCG_OP_COUNT},
    {5, 3, 6, 0, true, false, 1, 2.0f, -1.0f, false, CCG_OP_COUNT},
    {6, 24, 10, 4, false, false, 0, 1.0f, 0.0f, true, CCG_OP_COUNT},
    {6, 24, 10, 3, true, true, 2, 1.0f, 0.5f, false, CCG_OP_RELU},
    {33, 70, 64, 2, false, false, 1, 1.0f, 0.0f, false, CCG_OP_COUNT},
};

/* every case, through each build of the loop, within the tolerance of the
 * library's */
static void test_small_matches_library(void **state) {
  (void)state;
  const ccg__vm *vms[CCG__ISA_COUNT + 1];
  int nvm = 0;
  vms[nvm++] = NULL;
  for (int isa = 0; isa < CCG__ISA_COUNT; isa++)
    if (ccg__isa_supported((ccg__isa)isa))
      vms[nvm++] = ccg__vm_of((ccg__isa)isa);
  for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
    const gcase *tc = &cases[t];
    int64_t batch = tc->batch > 0 ? tc->batch : 1;
    for (int v = 0; v < nvm; v++) {
      operands op;
      ccg__gemm g;
      make(tc, &op, &g);
      /* the epilogue's activation needs the array math */
      g.vm = vms[v] ? vms[v] : ccg__vm_of(CCG__ISA_SCALAR);
      if (!vms[v] && tc->act == CCG_OP_COUNT)
        g.vm = NULL;
      float *lib = run(NULL, &g, &op, batch, CCG__GEMM_LIBRARY);
      float *sm = run(NULL, &g, &op, batch, CCG__GEMM_SMALL);
      for (int64_t e = 0; e < batch; e++)
        for (int64_t i = 0; i < tc->m; i++)
          for (int64_t j = 0; j < tc->n; j++) {
            int64_t at = e * op.sc + i * g.ldc + j;
            double tol = 1e-5 * scale(tc, &g, &op, e, i, j) + 1e-6;
            if (!(fabs((double)sm[at] - lib[at]) <= tol))
              fail_msg("case %zu vm %d: C[%lld,%lld,%lld] small %g library "
                       "%g (tolerance %g)",
                       t, v, (long long)e, (long long)i, (long long)j,
                       (double)sm[at], (double)lib[at], tol);
          }
      /* the padding between rows is left as it was */
      for (int64_t e = 0; e < batch; e++)
        for (int64_t i = 0; i < tc->m; i++)
          for (int64_t j = tc->n; j < g.ldc; j++) {
            int64_t at = e * op.sc + i * g.ldc + j;
            assert_memory_equal(&sm[at], &op.c0[at], sizeof(float));
          }
      free(lib);
      free(sm);
      free(op.a);
      free(op.b);
      free(op.c0);
      free(op.bias);
    }
  }
}

/* the loop's bytes at 1 and 2 threads (a batch of tiles the pool splits) */
static void test_small_same_at_any_threads(void **state) {
  (void)state;
  const ccg__vm *vm;
  assert_int_equal(ccg__vm_select(NULL, &vm), CCG_STATUS_OK);
  ccg__pool *p = ccg__pool_new(NULL, 2, 0);
  assert_non_null(p);
  gcase tc = {9, 40, 12, 16, false, true, 1, 1.0f, 0.0f, true, CCG_OP_RELU};
  operands op;
  ccg__gemm g;
  make(&tc, &op, &g);
  g.vm = vm;
  float *one = run(NULL, &g, &op, tc.batch, CCG__GEMM_SMALL);
  float *two = run(p, &g, &op, tc.batch, CCG__GEMM_SMALL);
  for (int64_t e = 0; e < tc.batch; e++)
    assert_memory_equal(one + e * op.sc, two + e * op.sc,
                        (size_t)(tc.m * g.ldc - tc.pad) * sizeof(float));
  free(one);
  free(two);
  free(op.a);
  free(op.b);
  free(op.c0);
  free(op.bias);
  ccg__pool_free(p);
}

/* ccg__sgemm takes the loop for a tiny product where the instruction set
 * has its fast build (x86: AVX2), the library for a large one */
static void test_auto_choice(void **state) {
  (void)state;
  const ccg__vm *vm;
  assert_int_equal(ccg__vm_select(NULL, &vm), CCG_STATUS_OK);
#if defined(__x86_64__) && defined(__GNUC__)
  if (vm->isa < CCG__ISA_AVX2)
    skip();
#endif
  const gcase sizes[] = {
      {8, 8, 8, 0, false, false, 0, 1.0f, 0.0f, false, CCG_OP_COUNT},
      {64, 64, 64, 0, false, false, 0, 1.0f, 0.0f, false, CCG_OP_COUNT},
  };
  for (int s = 0; s < 2; s++) {
    operands op;
    ccg__gemm g;
    make(&sizes[s], &op, &g);
    g.vm = vm;
    float *want =
        run(NULL, &g, &op, 1, s == 0 ? CCG__GEMM_SMALL : CCG__GEMM_LIBRARY);
    float *got = run(NULL, &g, &op, 1, CCG__GEMM_AUTO);
    assert_memory_equal(want, got, (size_t)op.sc * sizeof(float));
    free(want);
    free(got);
    free(op.a);
    free(op.b);
    free(op.c0);
    free(op.bias);
  }
}

int main(void) {
  /* where the library is OpenBLAS it is loaded (as at executor create) */
  ccg_ctx *ctx = ccg_ctx_new();
  ccg__gemm_lib_kind lib;
  if (!ctx || ccg__gemm_lib(ctx, CCG__ISA_SCALAR, &lib) != CCG_STATUS_OK) {
    ccg_ctx_free(ctx);
    return 1;
  }
  ccg_ctx_free(ctx);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_matches_library),
      cmocka_unit_test(test_small_same_at_any_threads),
      cmocka_unit_test(test_auto_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
