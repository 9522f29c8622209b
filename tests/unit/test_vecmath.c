/* The CPU executor's array math (src/exec/cpu/vecmath.h) on every
 * instruction set this CPU runs (the program prints which): each function
 * against libm in double over every float magnitude, a dense sweep and the
 * edge cases, within the bounds vecmath.h states; results independent of
 * an element's position; the vector rows and binary ops against direct
 * sums and the scalar loops; CCG_CPU_ISA. Then fused elementwise chains
 * and RMSNorm written out (src/exec/cpu/fuse.c) against the same graphs
 * with CCG_EXEC_FUSE=0: the same bits (RMSNorm: within 2 ulp), no memory
 * for the intermediates. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "exec/cpu/vecmath.h"

/* ---- the functions against libm ----------------------------------------- */

/* Error of y in units of the last place of the exact result ref (2^-149 in
 * the denormals); exact agreement required where ref is NaN, infinite or
 * rounds past FLT_MAX. */
static double ulp_error(float y, double ref) {
  if (isnan(ref))
    return isnan(y) ? 0.0 : INFINITY;
  if (isinf(ref) || fabs(ref) > FLT_MAX)
    return (double)y == (double)(float)ref ? 0.0 : INFINITY;
  int e;
  frexp(fabs(ref) > 0x1p-126 ? fabs(ref) : 0x1p-126, &e);
  return fabs((double)y - ref) / ldexp(1.0, e - 24);
}

static double ref_sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}
static double ref_gelu_erf(double x) {
  return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
}
static double ref_gelu_tanh(double x) {
  return 0.5 * x *
         (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

typedef struct fn_case {
  const char *name;
  double (*ref)(double);
  double ulps; /* the vector tables' bound (vecmath.h) */
  size_t map;  /* offset of the map in ccg__vm */
} fn_case;

static const fn_case fns[] = {
    {"exp", exp, 2.0, offsetof(ccg__vm, exp)},
    {"log", log, 2.0, offsetof(ccg__vm, log)},
    {"erf", erf, 3.0, offsetof(ccg__vm, erf)},
    {"tanh", tanh, 2.0, offsetof(ccg__vm, tanh)},
    {"sigmoid", ref_sigmoid, 3.0, offsetof(ccg__vm, sigmoid)},
};

static ccg__vm_map map_of(const ccg__vm *vm, size_t off) {
  ccg__vm_map f;
  memcpy(&f, (const char *)vm + off, sizeof f);
  return f;
}

/* The points every function is checked at: floats of every magnitude (bit
 * patterns in steps), a dense sweep of [-12, 12], the edges. */
#define N_BITS 16384
#define N_DENSE 16384
static const float edges[] = {
    0.0f,     -0.0f,    INFINITY,    -INFINITY, NAN,     -NAN,   FLT_MAX,
    -FLT_MAX, FLT_MIN,  -FLT_MIN,    1e-40f,    -1e-40f, 1e-30f, -1e-30f,
    88.72f,   88.7228f, 88.73f,      89.0f,     100.0f,  -87.3f, -88.0f,
    -100.0f,  -103.0f,  -103.97f,    -104.0f,   -110.0f, 0.9f,   0.89999998f,
    -0.9f,    0.55f,    0.54999995f, -0.55f,    3.9f,    4.0f,   9.0f,
    9.01f,    10.0f,    -10.0f,      20.0f,     -80.0f,  0.5f,   1.0f,
    -1.0f,    1e-8f,    -1e-8f,
};
#define N_EDGES (sizeof edges / sizeof *edges)
#define N_POINTS (N_BITS + N_DENSE + N_EDGES)

static float *test_points(void) {
  float *x = malloc(N_POINTS * sizeof(float));
  assert_non_null(x);
  for (uint32_t i = 0; i < N_BITS; i++) {
    uint32_t b =
        i * 262139u + 12345u; /* odd step: every exponent, both signs */
    memcpy(&x[i], &b, sizeof b);
  }
  for (int i = 0; i < N_DENSE; i++)
    x[N_BITS + i] = -12.0f + 24.0f * (float)i / (float)N_DENSE;
  memcpy(x + N_BITS + N_DENSE, edges, sizeof edges);
  return x;
}

static int n_supported(void) {
  int n = 0;
  for (int i = 0; i < CCG__ISA_COUNT; i++)
    n += ccg__isa_supported((ccg__isa)i);
  return n;
}

static void functions_within_bounds(void **state) {
  (void)state;
  float *x = test_points(), *y = malloc(N_POINTS * sizeof(float));
  assert_non_null(y);
  assert_true(ccg__isa_supported(CCG__ISA_SCALAR));
  for (int isa = 0; isa < CCG__ISA_COUNT; isa++) {
    if (!ccg__isa_supported((ccg__isa)isa))
      continue;
    const ccg__vm *vm = ccg__vm_of((ccg__isa)isa);
    assert_int_equal(vm->isa, isa);
    printf("vecmath: checking the %s table\n", vm->name);
    for (size_t f = 0; f < sizeof fns / sizeof *fns; f++) {
      /* the scalar table is glibc's (its tanhf: 2.1 ulp) */
      double bound = fns[f].ulps + (isa == CCG__ISA_SCALAR ? 1.0 : 0.0);
      map_of(vm, fns[f].map)(x, y, N_POINTS);
      double worst = 0.0;
      float at = 0.0f;
      for (size_t i = 0; i < N_POINTS; i++) {
        double e = ulp_error(y[i], fns[f].ref((double)x[i]));
        if (!(e <= worst)) {
          worst = e;
          at = x[i];
        }
      }
      printf("  %-8s max error %.2f ulp at %.9g (bound %.0f)\n", fns[f].name,
             worst, (double)at, bound);
      if (!(worst <= bound))
        fail_msg("%s %s: %.3g ulp at %.9g, over the bound %.0f", vm->name,
                 fns[f].name, worst, (double)at, bound);
    }
    /* Gelu: 1 + erf(x / sqrt 2) cancels for x < 0 (libm's too), so its
     * error is bounded absolutely: erf's, scaled by x / 2 */
    for (int t = 0; t < 2; t++) {
      (t ? vm->gelu_tanh : vm->gelu_erf)(x, y, N_POINTS);
      for (size_t i = N_BITS; i < N_POINTS; i++) {
        double r = (t ? ref_gelu_tanh : ref_gelu_erf)((double)x[i]);
        if (isnan(r) || isinf(r) || fabs(x[i]) > 1e6f) {
          assert_true(isnan(r) ? isnan(y[i]) : y[i] == (float)r || isinf(r));
          continue;
        }
        double tol =
            4.0 * ldexp(1.0, -24) * fabs(r) + 2e-7 * fabs(x[i]) + 1e-30;
        if (!(fabs((double)y[i] - r) <= tol))
          fail_msg("%s gelu_%s(%.9g) = %.9g, expected %.9g", vm->name,
                   t ? "tanh" : "erf", (double)x[i], (double)y[i], r);
      }
    }
    /* the signs and limits the bounds do not pin down */
    float e[6] = {-0.0f, INFINITY, -INFINITY, NAN, 89.0f, -104.0f}, o[6];
    vm->exp(e, o, 6);
    assert_true(o[0] == 1.0f && isinf(o[1]) && o[2] == 0.0f && isnan(o[3]));
    assert_true(isinf(o[4]) && o[5] == 0.0f);
    float dn = -100.0f, dy;
    vm->exp(&dn, &dy, 1);
    assert_true(dy > 0.0f && dy < FLT_MIN); /* a denormal */
    float le[5] = {0.0f, -0.0f, INFINITY, -1.0f, 1e-45f};
    vm->log(le, o, 5);
    assert_true(isinf(o[0]) && o[0] < 0 && isinf(o[1]) && o[1] < 0 &&
                o[2] == INFINITY && isnan(o[3]));
    assert_true(fabs(o[4] - log((double)le[4])) <= 1e-5); /* denormal input */
    vm->erf(e, o, 4);
    assert_true(o[0] == 0.0f && signbit(o[0]) && o[1] == 1.0f &&
                o[2] == -1.0f && isnan(o[3]));
    vm->tanh(e, o, 4);
    assert_true(o[0] == 0.0f && signbit(o[0]) && o[1] == 1.0f &&
                o[2] == -1.0f && isnan(o[3]));
    vm->sigmoid(e, o, 4);
    assert_true(o[0] == 0.5f && o[1] == 1.0f && o[2] == 0.0f && isnan(o[3]));
  }
  printf("vecmath: %d instruction sets checked on this CPU\n", n_supported());
  free(x);
  free(y);
}

/* Each element's result is the one it gets alone, wherever it sits (tails
 * included): fused blocks then give the unfused bits. */
static void results_independent_of_position(void **state) {
  (void)state;
  float x[67], y[67], one;
  xt_fill(x, 67, 9);
  for (int i = 0; i < 67; i++)
    x[i] *= 6.0f;
  for (int isa = 0; isa < CCG__ISA_COUNT; isa++) {
    if (!ccg__isa_supported((ccg__isa)isa))
      continue;
    const ccg__vm *vm = ccg__vm_of((ccg__isa)isa);
    ccg__vm_map maps[7] = {vm->exp,     vm->log,      vm->erf,      vm->tanh,
                           vm->sigmoid, vm->gelu_erf, vm->gelu_tanh};
    for (int f = 0; f < 7; f++)
      for (size_t start = 0; start < 3; start++)
        for (size_t n = 0; n + start <= 67; n += 7) {
          maps[f](x + start, y, n);
          for (size_t i = 0; i < n; i++) {
            maps[f](x + start + i, &one, 1);
            assert_memory_equal(&one, &y[i], sizeof one);
          }
        }
  }
}

/* ---- binary ops and rows ------------------------------------------------ */

static void binary_ops_match_scalar(void **state) {
  (void)state;
  const ccg__vm *sc = ccg__vm_of(CCG__ISA_SCALAR);
  ccg_op ops[5] = {CCG_OP_ADD, CCG_OP_SUB, CCG_OP_MUL, CCG_OP_DIV, CCG_OP_POW};
  float a[53], b[53], want[53], got[53];
  xt_fill(a, 53, 1);
  xt_fill(b, 53, 2);
  for (int i = 0; i < 53; i++)
    a[i] = fabsf(a[i]) * 3.0f; /* Pow: a positive base */
  for (int isa = 1; isa < CCG__ISA_COUNT; isa++) {
    if (!ccg__isa_supported((ccg__isa)isa))
      continue;
    const ccg__vm *vm = ccg__vm_of((ccg__isa)isa);
    for (int k = 0; k < 5; k++)
      for (size_t st = 0; st < 3; st++) /* strides 1 1, 1 0, 0 1 */
        for (size_t n = 0; n <= 53; n += 5) {
          size_t sa = st != 2, sb = st != 1;
          sc->bin(ops[k], a, sa, b, sb, want, n);
          vm->bin(ops[k], a, sa, b, sb, got, n);
          assert_memory_equal(want, got, n * sizeof(float));
          memcpy(got, a, sizeof a); /* in place over a */
          vm->bin(ops[k], got, 1, b, sb, got, n);
          sc->bin(ops[k], a, 1, b, sb, want, n);
          assert_memory_equal(want, got, n * sizeof(float));
        }
  }
}

static void rows_match_direct_sums(void **state) {
  (void)state;
  const ccg__vm *sc = ccg__vm_of(CCG__ISA_SCALAR);
  assert_null(sc->max); /* the scalar kernels keep the shared lines */
  float x[1000], y[1000], scale[1000], bias[1000];
  xt_fill(x, 1000, 3);
  xt_fill(scale, 1000, 4);
  xt_fill(bias, 1000, 5);
  for (int isa = 1; isa < CCG__ISA_COUNT; isa++) {
    if (!ccg__isa_supported((ccg__isa)isa))
      continue;
    const ccg__vm *vm = ccg__vm_of((ccg__isa)isa);
    assert_non_null(vm->max);
    size_t lens[6] = {1, 7, 16, 33, 100, 1000};
    for (int l = 0; l < 6; l++) {
      size_t n = lens[l];
      float mx = x[0];
      double s = 0, e = 0, sq = 0;
      for (size_t i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
      for (size_t i = 0; i < n; i++) {
        s += x[i];
        e += exp((double)x[i] - mx);
        sq += ((double)x[i] - 0.25) * ((double)x[i] - 0.25);
      }
      assert_true(vm->max(x, n) == mx);
      /* sums in double: only the order differs */
      assert_true(fabs(vm->sum(x, n) - s) <= 1e-13 * (double)n);
      assert_true(fabs(vm->sum_sqdev(x, 0.25, n) - sq) <= 1e-13 * sq);
      assert_true(fabs(vm->exp_sum(x, mx, y, n) - e) <= 1e-6 * e);
      for (size_t i = 0; i < n; i++)
        assert_true(fabs(y[i] - exp((double)x[i] - mx)) <= 3e-7);
      vm->scale(y, 0.5f, n);
      assert_true(fabs(y[0] - 0.5 * exp((double)x[0] - mx)) <= 3e-7);
      vm->affine(x, y, n, 0.25f, 2.0f, scale, bias);
      for (size_t i = 0; i < n; i++)
        assert_true(fabs(y[i] - (((double)x[i] - 0.25) * 2.0 * scale[i] +
                                 bias[i])) <= 1e-6);
      vm->affine(x, y, n, 0.0f, 2.0f, scale, NULL);
      for (size_t i = 0; i < n; i++)
        assert_true(y[i] == x[i] * 2.0f * scale[i]);
    }
    float nan_row[20];
    memcpy(nan_row, x, sizeof nan_row);
    nan_row[17] = NAN; /* ignored by max, as `v > m ? v : m` */
    float mx = nan_row[0];
    for (int i = 0; i < 20; i++)
      mx = nan_row[i] > mx ? nan_row[i] : mx;
    assert_true(vm->max(nan_row, 20) == mx);
  }
}

/* CCG_CPU_ISA caps the choice; an unknown value is an error naming it. */
static void isa_from_environment(void **state) {
  (void)state;
  ccg_ctx ctx;
  ccg__ctx_init(&ctx);
  const ccg__vm *vm = NULL;
  assert_int_equal(unsetenv("CCG_CPU_ISA"), 0);
  assert_int_equal(ccg__vm_select(&ctx, &vm), CCG_STATUS_OK);
  int best = CCG__ISA_COUNT - 1;
  while (!ccg__isa_supported((ccg__isa)best))
    best--;
  assert_int_equal(vm->isa, best);
  const char *names[3] = {"scalar", "avx2", "avx512"};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(setenv("CCG_CPU_ISA", names[i], 1), 0);
    assert_int_equal(ccg__vm_select(&ctx, &vm), CCG_STATUS_OK);
    assert_int_equal(vm->isa, i <= best ? i : best);
  }
  assert_int_equal(setenv("CCG_CPU_ISA", "sse9", 1), 0);
  assert_int_equal(ccg__vm_select(&ctx, &vm), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ctx.msg, "'sse9'"));
  /* and so is creating an executor */
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), y;
  assert_ok(g, ccg_exp(g, x, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec *ex = NULL;
  assert_int_equal(ccg_exec_create(g, NULL, &ex), CCG_STATUS_INVALID_ARG);
  assert_null(ex);
  assert_non_null(strstr(ccg_last_error(g), "CCG_CPU_ISA is 'sse9'"));
  ccg_graph_free(g);
  assert_int_equal(unsetenv("CCG_CPU_ISA"), 0);
}

/* ---- fused chains ------------------------------------------------------- */

/* Compiles g (fusion on or off), runs it on the inputs and writes output
 * `name` into out; the plan's figures into m. */
static void run_fused(ccg_graph *g, bool fuse, const ccg_exec_tensor *in,
                      size_t n_in, const char *name, float *out, size_t n,
                      ccg_exec_memory *m) {
  assert_int_equal(setenv("CCG_EXEC_FUSE", fuse ? "1" : "0", 1), 0);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in;
  o.n_input_shapes = n_in;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  assert_ok(x, ccg_exec_memory_info(x, m));
  ccg_exec_tensor t = xt_out(name, out, n * sizeof(float));
  assert_ok(x, ccg_exec_run(x, in, n_in, &t, 1));
  ccg_exec_free(x);
  assert_int_equal(unsetenv("CCG_EXEC_FUSE"), 0);
}

static ccg_value_id scalar_const(ccg_graph *g, const float *v) {
  ccg_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = CCG_DTYPE_F32;
  t.data = v;
  ccg_value_id out;
  assert_ok(g, ccg_constant(g, &t, &out));
  return out;
}

/* Gelu as TorchScript writes it: x * 0.5 * (1 + erf(x / sqrt 2)), on a
 * shape that ends mid-block; for every instruction set the CPU has. */
static void fused_gelu_matches_unfused(void **state) {
  (void)state;
  static const float sqrt2 = 1.41421356f, one = 1.0f, half = 0.5f;
  enum { R = 64, C = 301, N = R * C };
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[64,301]"), v;
  assert_ok(g, ccg_div(g, x, scalar_const(g, &sqrt2), &v));
  assert_ok(g, ccg_erf(g, v, &v));
  assert_ok(g, ccg_add(g, v, scalar_const(g, &one), &v));
  assert_ok(g, ccg_mul(g, x, v, &v));
  assert_ok(g, ccg_mul(g, v, scalar_const(g, &half), &v));
  assert_ok(g, ccg_graph_add_output(g, v));
  const char *name = ccg_value_name(g, v);
  float *in = malloc(3 * N * sizeof(float)), *a = in + N, *b = a + N;
  assert_non_null(in);
  xt_fill(in, N, 7);
  for (int i = 0; i < N; i++)
    in[i] *= 5.0f;
  ccg_exec_tensor t = XT_F32("x", in, R, C);
  const char *names[3] = {"scalar", "avx2", "avx512"};
  for (int isa = 0; isa < CCG__ISA_COUNT; isa++) {
    if (!ccg__isa_supported((ccg__isa)isa))
      continue;
    assert_int_equal(setenv("CCG_CPU_ISA", names[isa], 1), 0);
    ccg_exec_memory mf, mu;
    run_fused(g, true, &t, 1, name, a, N, &mf);
    run_fused(g, false, &t, 1, name, b, N, &mu);
    assert_memory_equal(a, b, N * sizeof(float));
    /* fused, only the output takes memory */
    assert_int_equal(mf.naive_bytes, N * sizeof(float));
    assert_int_equal(mu.naive_bytes, 5 * N * sizeof(float));
    for (int i = 0; i < N; i++) {
      double r = ref_gelu_erf((double)in[i]);
      assert_true(fabs(a[i] - r) <= 1e-6 + 1e-5 * fabs(r));
    }
  }
  assert_int_equal(unsetenv("CCG_CPU_ISA"), 0);
  free(in);
  ccg_graph_free(g);
}

/* y = x + b; z = y * sigmoid(y) (SiLU); w = z * z - c with rows b and c
 * of 129 elements (blocks start mid-row), and an outside operand computed
 * between the chain's steps: only sigmoid .. sub fuse. */
static void fused_silu_rows_match_unfused(void **state) {
  (void)state;
  enum { R = 37, C = 129, N = R * C };
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[37,129]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[129]");
  ccg_value_id c = ccg_test_input(g, "c", CCG_DTYPE_F32, "[1,129]");
  ccg_value_id u = ccg_test_input(g, "u", CCG_DTYPE_F32, "[37,129]");
  ccg_value_id y, s, z, r, w;
  assert_ok(g, ccg_add(g, x, b, &y));
  assert_ok(g, ccg_sigmoid(g, y, &s));
  assert_ok(g, ccg_mul(g, y, s, &z));
  assert_ok(g, ccg_tanh(g, u, &r)); /* scheduled inside the chain */
  assert_ok(g, ccg_mul(g, z, z, &w));
  assert_ok(g, ccg_sub(g, w, c, &w));
  assert_ok(g, ccg_mul(g, w, r, &w));
  assert_ok(g, ccg_graph_add_output(g, w));
  static float xv[N], bv[C], cv[C], uv[N], a[N], want[N];
  xt_fill(xv, N, 1);
  xt_fill(bv, C, 2);
  xt_fill(cv, C, 3);
  xt_fill(uv, N, 4);
  ccg_exec_tensor in[4] = {XT_F32("x", xv, R, C), XT_F32("b", bv, C),
                           XT_F32("c", cv, 1, C), XT_F32("u", uv, R, C)};
  ccg_exec_memory mf, mu;
  const char *name = ccg_value_name(g, w);
  run_fused(g, true, in, 4, name, a, N, &mf);
  run_fused(g, false, in, 4, name, want, N, &mu);
  assert_memory_equal(a, want, sizeof a);
  /* y, r and the output take memory; s, z, z*z, -c do not */
  assert_int_equal(mf.naive_bytes, 3 * N * sizeof(float));
  assert_int_equal(mu.naive_bytes, 7 * N * sizeof(float));
  for (int i = 0; i < N; i++) {
    double yy = (double)xv[i] + bv[i % C], zz = yy * ref_sigmoid(yy);
    double ww = (zz * zz - cv[i % C]) * tanh((double)uv[i]);
    assert_true(fabs(a[i] - ww) <= 1e-6 + 1e-5 * fabs(ww));
  }
  ccg_graph_free(g);
}

/* A value that is also a graph output (or read twice) ends a chain. */
static void chain_stops_at_outputs(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[300]"), e, n, t;
  assert_ok(g, ccg_exp(g, x, &e));
  assert_ok(g, ccg_neg(g, e, &n));
  assert_ok(g, ccg_tanh(g, n, &t));
  assert_ok(g, ccg_graph_add_output(g, n));
  assert_ok(g, ccg_graph_add_output(g, t));
  float xv[300], nf[300], tf[300], nu[300], tu[300];
  xt_fill(xv, 300, 5);
  ccg_exec_tensor in = XT_F32("x", xv, 300);
  for (int fuse = 0; fuse < 2; fuse++) {
    assert_int_equal(setenv("CCG_EXEC_FUSE", fuse ? "1" : "0", 1), 0);
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    ccg_exec *x2 = NULL;
    o.input_shapes = &in;
    o.n_input_shapes = 1;
    assert_ok(g, ccg_exec_create(g, &o, &x2));
    ccg_exec_memory m;
    assert_ok(x2, ccg_exec_memory_info(x2, &m));
    /* fused: exp -> neg is one step; neg's output is kept, tanh alone */
    assert_int_equal(m.naive_bytes, (fuse ? 2 : 3) * sizeof xv);
    ccg_exec_tensor out[2] = {
        xt_out(ccg_value_name(g, n), fuse ? nf : nu, sizeof nf),
        xt_out(ccg_value_name(g, t), fuse ? tf : tu, sizeof tf)};
    assert_ok(x2, ccg_exec_run(x2, &in, 1, out, 2));
    ccg_exec_free(x2);
  }
  assert_int_equal(unsetenv("CCG_EXEC_FUSE"), 0);
  assert_memory_equal(nf, nu, sizeof nf);
  assert_memory_equal(tf, tu, sizeof tf);
  for (int i = 0; i < 300; i++)
    assert_true(fabsf(tf[i] - tanhf(-expf(xv[i]))) <= 1e-6f);
  ccg_graph_free(g);
}

/* RMSNorm as torch exports it: Pow(x, 2), ReduceMean(-1, keepdims), Add
 * eps, Sqrt, then Div(x, s), or Reciprocal and Mul(x, r) followed by
 * Mul(w, y), or Div(1, s), Mul(x, r), Cast to f32, Mul(w, y): one pass per
 * row, within 2 ulp of the unfused steps (the
 * scalar table: the same bits), with only the output in the arena. */
static void fused_rms_norm_matches_unfused(void **state) {
  (void)state;
  static const float two = 2.0f, eps = 1e-6f, one = 1.0f;
  enum { R = 33, C = 257, N = R * C };
  static float xv[N], wv[C], a[N], b[N];
  xt_fill(xv, N, 11);
  xt_fill(wv, C, 12);
  const char *names[3] = {"scalar", "avx2", "avx512"};
  for (int recip = 0; recip < 3; recip++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[33,257]");
    ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[257]"), v, y;
    int64_t axis = -1;
    assert_ok(g, ccg_pow(g, x, scalar_const(g, &two), &v));
    assert_ok(g, ccg_reduce_mean(g, v, &axis, 1, true, &v));
    assert_ok(g, ccg_add(g, v, scalar_const(g, &eps), &v));
    assert_ok(g, ccg_sqrt(g, v, &v));
    if (recip == 2) { /* as torch exports LlamaRMSNorm */
      assert_ok(g, ccg_div(g, scalar_const(g, &one), v, &v));
      assert_ok(g, ccg_mul(g, x, v, &y));
      assert_ok(g, ccg_cast(g, y, CCG_DTYPE_F32, &y));
      assert_ok(g, ccg_mul(g, w, y, &y));
    } else if (recip) {
      assert_ok(g, xt_node(g, "Reciprocal", NULL, &v, 1, NULL, 0, 1, &v));
      assert_ok(g, ccg_mul(g, x, v, &y));
      assert_ok(g, ccg_mul(g, w, y, &y));
    } else {
      assert_ok(g, ccg_div(g, x, v, &y));
    }
    assert_ok(g, ccg_graph_add_output(g, y));
    ccg_exec_tensor in[2] = {XT_F32("x", xv, R, C), XT_F32("w", wv, C)};
    for (int isa = 0; isa < CCG__ISA_COUNT; isa++) {
      if (!ccg__isa_supported((ccg__isa)isa))
        continue;
      assert_int_equal(setenv("CCG_CPU_ISA", names[isa], 1), 0);
      ccg_exec_memory mf, mu;
      run_fused(g, true, in, 2, ccg_value_name(g, y), a, N, &mf);
      run_fused(g, false, in, 2, ccg_value_name(g, y), b, N, &mu);
      assert_int_equal(mf.naive_bytes, N * sizeof(float));
      assert_true(mu.naive_bytes > 2 * N * sizeof(float));
      if (isa == CCG__ISA_SCALAR)
        assert_memory_equal(a, b, sizeof a);
      for (int i = 0; i < N; i++)
        if (ulp_error(a[i], (double)b[i]) > 2.0)
          fail_msg("%s, row %d: fused %.9g, unfused %.9g", names[isa], i / C,
                   (double)a[i], (double)b[i]);
    }
    ccg_graph_free(g);
  }
  assert_int_equal(unsetenv("CCG_CPU_ISA"), 0);
}

/* Attention scores as torch exports them: Div by a scalar, Add of a mask
 * row, Softmax over the last axis (rows of 300 and of 1500, longer than a
 * block); and Add then Softmax alone. Fused: the same bits, only the
 * output in the arena. */
static void fused_softmax_matches_unfused(void **state) {
  (void)state;
  static const float scale = 8.0f;
  const char *names[3] = {"scalar", "avx2", "avx512"};
  int64_t lens[2] = {300, 1500};
  for (int variant = 0; variant < 4; variant++) {
    int64_t len = lens[variant % 2], rows = 2 * 17;
    size_t n = (size_t)(rows * len);
    float *xv = malloc(n * sizeof(float)), *mv = malloc(17 * len * 4);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    assert_true(xv && mv && a && b);
    xt_fill(xv, n, 21);
    xt_fill(mv, (size_t)(17 * len), 22);
    for (int64_t i = 0; i < 17 * len; i++)
      mv[i] = mv[i] > 0.9f ? -INFINITY : mv[i] * 4.0f; /* masked entries */
    char xs[64], ms[64];
    snprintf(xs, sizeof xs, "[2,17,%lld]", (long long)len);
    snprintf(ms, sizeof ms, "[17,%lld]", (long long)len);
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, xs);
    ccg_value_id m = ccg_test_input(g, "m", CCG_DTYPE_F32, ms), v = x, y;
    if (variant < 2)
      assert_ok(g, ccg_div(g, x, scalar_const(g, &scale), &v));
    assert_ok(g, ccg_add(g, v, m, &v));
    assert_ok(g, ccg_softmax(g, v, -1, &y));
    assert_ok(g, ccg_graph_add_output(g, y));
    ccg_exec_tensor in[2] = {XT_F32("x", xv, 2, 17, len),
                             XT_F32("m", mv, 17, len)};
    for (int isa = 0; isa < CCG__ISA_COUNT; isa++) {
      if (!ccg__isa_supported((ccg__isa)isa))
        continue;
      assert_int_equal(setenv("CCG_CPU_ISA", names[isa], 1), 0);
      ccg_exec_memory mf, mu;
      run_fused(g, true, in, 2, ccg_value_name(g, y), a, n, &mf);
      run_fused(g, false, in, 2, ccg_value_name(g, y), b, n, &mu);
      assert_memory_equal(a, b, n * sizeof(float));
      assert_int_equal(mf.naive_bytes, n * sizeof(float));
      assert_int_equal(mu.naive_bytes, (variant < 2 ? 3 : 2) * n * 4);
    }
    for (int64_t r = 0; r < rows; r++) { /* rows sum to 1 */
      double sum = 0;
      for (int64_t k = 0; k < len; k++)
        sum += a[r * len + k];
      assert_true(fabs(sum - 1.0) < 1e-5);
    }
    ccg_graph_free(g);
    free(xv);
    free(mv);
    free(a);
    free(b);
  }
  assert_int_equal(unsetenv("CCG_CPU_ISA"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(functions_within_bounds),
      cmocka_unit_test(results_independent_of_position),
      cmocka_unit_test(binary_ops_match_scalar),
      cmocka_unit_test(rows_match_direct_sums),
      cmocka_unit_test(isa_from_environment),
      cmocka_unit_test(fused_gelu_matches_unfused),
      cmocka_unit_test(fused_silu_rows_match_unfused),
      cmocka_unit_test(chain_stops_at_outputs),
      cmocka_unit_test(fused_rms_norm_matches_unfused),
      cmocka_unit_test(fused_softmax_matches_unfused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
