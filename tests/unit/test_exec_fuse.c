/* Plan-time fusions of the CPU executor against the same graphs run with
 * CCG_EXEC_FUSE=0: fused attention (src/exec/cpu/fuse_attn.c) in the
 * layouts torch exports and the patterns that must stay unfused, the
 * written-out Gelu in a GEMM epilogue (src/exec/plan.c), the residual Add
 * before a LayerNormalization and the elementwise chains on the pool
 * (src/exec/cpu/fuse.c). Fused results agree with the unfused within 1e-5
 * (other GEMM blockings, Gelu's other rounding), are the same bytes at 1
 * and 3 threads, and the fused intermediates take no memory. */
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

/* Steps that run a kernel in the last executor `run` made, and the
 * scratch bytes they ask for (planned in the arena: in naive_bytes). */
static size_t live_steps, live_scratch;

/* Output `name` of g (elements n) with fusion on or off at `threads`;
 * the plan's naive bytes into *naive. */
static void run(ccg_graph *g, bool fuse, int threads, const ccg_exec_tensor *in,
                size_t n_in, const char *name, float *out, size_t n,
                size_t *naive) {
  assert_int_equal(setenv("CCG_EXEC_FUSE", fuse ? "1" : "0", 1), 0);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in;
  o.n_input_shapes = n_in;
  o.threads = threads;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  ccg_exec_memory m;
  assert_ok(x, ccg_exec_memory_info(x, &m));
  *naive = m.naive_bytes;
  live_steps = live_scratch = 0;
  for (size_t k = 0; k < x->n_steps; k++) {
    live_steps += x->steps[k].run != NULL;
    live_scratch += x->steps[k].run ? x->steps[k].scratch : 0;
  }
  ccg_exec_tensor t = xt_out(name, out, n * sizeof(float));
  assert_ok(x, ccg_exec_run(x, in, n_in, &t, 1));
  ccg_exec_free(x);
  assert_int_equal(unsetenv("CCG_EXEC_FUSE"), 0);
}

/* Runs g fused (1 and 3 threads) and unfused; checks the agreement and
 * returns the fused plan's naive bytes (unfused: *naive_unfused). */
static size_t check(ccg_graph *g, const ccg_exec_tensor *in, size_t n_in,
                    ccg_value_id y, size_t n, size_t *naive_unfused) {
  float *a = malloc(3 * n * sizeof(float)), *b = a + n, *c = b + n;
  assert_non_null(a);
  size_t nf, nf3;
  const char *name = ccg_value_name(g, y);
  run(g, true, 1, in, n_in, name, a, n, &nf);
  run(g, true, 3, in, n_in, name, c, n, &nf3);
  run(g, false, 1, in, n_in, name, b, n, naive_unfused);
  xt_close(a, b, n, 1e-5, 1e-5, "fused against unfused");
  assert_memory_equal(a, c, n * sizeof(float));
  assert_int_equal(nf, nf3);
  free(a);
  return nf;
}

/* A Constant holding *v (which the graph borrows). */
static ccg_value_id scalar(ccg_graph *g, const float *v) {
  ccg_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = CCG_DTYPE_F32;
  t.data = v;
  ccg_value_id out;
  assert_ok(g, ccg_constant(g, &t, &out));
  return out;
}

static const float four = 4.0f, quarter = 0.25f, sqrt2 = 1.41421356f,
                   one = 1.0f, half = 0.5f;

static float *filled(size_t n, uint32_t seed, float scale) {
  float *v = malloc(n * sizeof(float));
  assert_non_null(v);
  xt_fill(v, n, seed);
  for (size_t i = 0; i < n; i++)
    v[i] *= scale;
  return v;
}

/* ---- attention ----------------------------------------------------------- */

enum { B = 2, H = 3, S = 150, T = 130, D = 16 };

typedef struct attn_case {
  int scale;  /* 0 none, 1 Div(s, c), 2 Mul(c, s) */
  int mask;   /* 0 none, 1 Add(s, m [1,1,S,T]), 2 Add(m [S,T], s) */
  bool heads; /* Q, K, V as [B, S, H, D] through Transposes */
  bool out_t; /* the output through Transpose(0, 2, 1, 3) */
  bool leak;  /* the scores are a graph output too: no fusion */
  int axis;   /* Softmax axis (-1 fuses) */
  bool cast;  /* Cast to f32 after the Softmax (a copy) */
} attn_case;

/* softmax(Q K^T [scale] [+ mask]) V in the layouts torch exports; inputs
 * q, k, v (and m) into in. Returns the output; *probe the scores when
 * the case leaks them. */
static ccg_value_id attention(ccg_graph *g, const attn_case *c,
                              ccg_value_id *scores) {
  static const int64_t to_heads[4] = {0, 2, 1, 3}, to_kt[4] = {0, 2, 3, 1};
  ccg_value_id q, k, v, s;
  if (c->heads) {
    q = ccg_test_input(g, "q", CCG_DTYPE_F32, "[2,150,3,16]");
    k = ccg_test_input(g, "k", CCG_DTYPE_F32, "[2,130,3,16]");
    v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[2,130,3,16]");
    assert_ok(g, ccg_transpose(g, q, to_heads, 4, &q));
    assert_ok(g, ccg_transpose(g, k, to_kt, 4, &k));
    assert_ok(g, ccg_transpose(g, v, to_heads, 4, &v));
  } else {
    q = ccg_test_input(g, "q", CCG_DTYPE_F32, "[2,3,150,16]");
    k = ccg_test_input(g, "k", CCG_DTYPE_F32, "[2,3,16,130]");
    v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[2,3,130,16]");
  }
  assert_ok(g, ccg_matmul(g, q, k, &s));
  *scores = s;
  if (c->scale == 1)
    assert_ok(g, ccg_div(g, s, scalar(g, &four), &s));
  else if (c->scale == 2)
    assert_ok(g, ccg_mul(g, scalar(g, &quarter), s, &s));
  if (c->mask == 1) {
    ccg_value_id m = ccg_test_input(g, "m", CCG_DTYPE_F32, "[1,1,150,130]");
    assert_ok(g, ccg_add(g, s, m, &s));
  } else if (c->mask == 2) {
    ccg_value_id m = ccg_test_input(g, "m", CCG_DTYPE_F32, "[150,130]");
    assert_ok(g, ccg_add(g, m, s, &s));
  }
  assert_ok(g, ccg_softmax(g, s, c->axis, &s));
  if (c->cast)
    assert_ok(g, ccg_cast(g, s, CCG_DTYPE_F32, &s));
  ccg_value_id y;
  assert_ok(g, ccg_matmul(g, s, v, &y));
  if (c->out_t)
    assert_ok(g, ccg_transpose(g, y, to_heads, 4, &y));
  return y;
}

static void attention_cases(void **state) {
  (void)state;
  const attn_case cases[] = {
      {1, 1, true, true, false, -1},       {2, 2, false, false, false, -1},
      {0, 0, true, false, false, -1},      {1, 0, false, true, false, -1},
      {0, 2, true, true, false, -1, true}, {1, 1, true, true, true, -1},
      {1, 1, false, false, false, 2},
  };
  size_t nq = (size_t)B * S * H * D, nk = (size_t)B * T * H * D;
  size_t ns = (size_t)B * H * S * T, no = nq;
  float *qd = filled(nq, 1, 1.0f), *kd = filled(nk, 2, 1.0f);
  float *vd = filled(nk, 3, 1.0f), *md = filled((size_t)S * T, 4, 1.0f);
  for (size_t i = 0; i < (size_t)S * T; i++) /* causal, as the exports */
    md[i] = (int64_t)(i % T) > (int64_t)(i / T) ? -1e4f : md[i];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const attn_case *c = &cases[i];
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id scores, y = attention(g, c, &scores);
    assert_ok(g, ccg_graph_add_output(g, y));
    if (c->leak)
      assert_ok(g, ccg_graph_add_output(g, scores));
    ccg_exec_tensor in[4] = {
        c->heads ? XT_F32("q", qd, B, S, H, D) : XT_F32("q", qd, B, H, S, D),
        c->heads ? XT_F32("k", kd, B, T, H, D) : XT_F32("k", kd, B, H, D, T),
        c->heads ? XT_F32("v", vd, B, T, H, D) : XT_F32("v", vd, B, H, T, D),
        c->mask == 1 ? XT_F32("m", md, 1, 1, S, T) : XT_F32("m", md, S, T)};
    size_t nu, nf = check(g, in, c->mask ? 4 : 3, y, no, &nu);
    size_t steps_unfused = live_steps;
    bool fuses = !c->leak && c->axis == -1;
    size_t fused_scratch = 0;
    if (fuses) { /* one step; the Transposes folded unless 4 KiB apart */
      size_t n_fused;
      float *tmp = malloc(no * sizeof(float));
      run(g, true, 1, in, c->mask ? 4 : 3, ccg_value_name(g, y), tmp, no,
          &n_fused);
      free(tmp);
      fused_scratch = live_scratch;
      assert_int_equal(live_steps, 1);
      assert_true(steps_unfused >= 3);
    }
    if (fuses) { /* only the output and the kernel's block of scores */
      assert_int_equal(nf, no * sizeof(float) + fused_scratch);
      assert_true(fused_scratch <= ns * sizeof(float));
    } else /* the scores (at least) are kept */
      assert_true(nf >= (no + ns) * sizeof(float));
    assert_true(nu >= (no + ns) * sizeof(float));
    ccg_graph_free(g);
  }
  free(qd);
  free(kd);
  free(vd);
  free(md);
}

/* Other layouts: rank 3 with K shared by every batch entry (MatMul's
 * broadcast) and no mask; heads of 256 (rows 4 KiB apart: the Transposes
 * fold all the same, Q, K, V packed per entry and the output unpacked);
 * probabilities that are also a graph output (no attention fusion). */
static void attention_layouts(void **state) {
  (void)state;
  static const int64_t to_heads[4] = {0, 2, 1, 3}, to_kt[4] = {0, 2, 3, 1};
  for (int variant = 0; variant < 3; variant++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id q, k, v, s, y;
    size_t nq, nk, nv, no;
    ccg_exec_tensor in[3];
    float *qd, *kd, *vd;
    if (variant != 1) { /* q [18, 20, 8], k [8, 24], v [18, 24, 5]: more
                         * entries than scratch slots */
      nq = 18 * 20 * 8, nk = 8 * 24, nv = 18 * 24 * 5, no = 18 * 20 * 5;
      q = ccg_test_input(g, "q", CCG_DTYPE_F32, "[18,20,8]");
      k = ccg_test_input(g, "k", CCG_DTYPE_F32, "[8,24]");
      v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[18,24,5]");
    } else { /* [1, 9, 4, 256] in heads */
      nq = nk = nv = no = 9 * 4 * 256;
      q = ccg_test_input(g, "q", CCG_DTYPE_F32, "[1,9,4,256]");
      k = ccg_test_input(g, "k", CCG_DTYPE_F32, "[1,9,4,256]");
      v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[1,9,4,256]");
      assert_ok(g, ccg_transpose(g, q, to_heads, 4, &q));
      assert_ok(g, ccg_transpose(g, k, to_kt, 4, &k));
      assert_ok(g, ccg_transpose(g, v, to_heads, 4, &v));
    }
    qd = filled(nq, 16, 1.0f);
    kd = filled(nk, 17, 1.0f);
    vd = filled(nv, 18, 1.0f);
    assert_ok(g, ccg_matmul(g, q, k, &s));
    assert_ok(g, ccg_mul(g, s, scalar(g, &quarter), &s));
    assert_ok(g, ccg_softmax(g, s, -1, &s));
    assert_ok(g, ccg_matmul(g, s, v, &y));
    if (variant == 2) /* the probabilities read again */
      assert_ok(g, ccg_graph_add_output(g, s));
    else if (variant == 1)
      assert_ok(g, ccg_transpose(g, y, to_heads, 4, &y));
    assert_ok(g, ccg_graph_add_output(g, y));
    if (variant != 1) {
      in[0] = XT_F32("q", qd, 18, 20, 8);
      in[1] = XT_F32("k", kd, 8, 24);
      in[2] = XT_F32("v", vd, 18, 24, 5);
    } else {
      in[0] = XT_F32("q", qd, 1, 9, 4, 256);
      in[1] = XT_F32("k", kd, 1, 9, 4, 256);
      in[2] = XT_F32("v", vd, 1, 9, 4, 256);
    }
    size_t nu, nf;
    check(g, in, 3, y, no, &nu);
    size_t unfused_steps = live_steps;
    float *tmp = malloc(no * sizeof(float));
    run(g, true, 1, in, 3, ccg_value_name(g, y), tmp, no, &nf);
    free(tmp);
    /* rank 3 and heads of 256: one step; the probabilities an output:
     * the Mul and Softmax still fuse as a chain, the MatMuls stay */
    size_t want[3] = {1, 1, 3};
    assert_int_equal(live_steps, want[variant]);
    assert_true(unfused_steps > live_steps);
    free(qd);
    free(kd);
    free(vd);
    ccg_graph_free(g);
  }
}

/* The unfused attention against a direct computation in double: the
 * comparison above has a meaning. */
static void attention_against_reference(void **state) {
  (void)state;
  attn_case c = {1, 1, true, true, false, -1};
  size_t nq = (size_t)B * S * H * D, nk = (size_t)B * T * H * D;
  float *qd = filled(nq, 5, 1.0f), *kd = filled(nk, 6, 1.0f);
  float *vd = filled(nk, 7, 1.0f), *md = filled((size_t)S * T, 8, 2.0f);
  float *y = malloc(nq * sizeof(float));
  double *row = malloc(T * sizeof(double));
  assert_true(y && row);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id scores, out = attention(g, &c, &scores);
  assert_ok(g, ccg_graph_add_output(g, out));
  ccg_exec_tensor in[4] = {
      XT_F32("q", qd, B, S, H, D), XT_F32("k", kd, B, T, H, D),
      XT_F32("v", vd, B, T, H, D), XT_F32("m", md, 1, 1, S, T)};
  size_t naive;
  run(g, true, 2, in, 4, ccg_value_name(g, out), y, nq, &naive);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < S; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < T; j++) {
          double d = 0.0;
          for (int e = 0; e < D; e++)
            d += (double)qd[((b * S + i) * H + h) * D + e] *
                 kd[((b * T + j) * H + h) * D + e];
          row[j] = d / 4.0 + md[i * T + j];
          mx = row[j] > mx ? row[j] : mx;
        }
        for (int j = 0; j < T; j++)
          sum += row[j] = exp(row[j] - mx);
        for (int e = 0; e < D; e++) {
          double acc = 0.0;
          for (int j = 0; j < T; j++)
            acc += row[j] / sum * vd[((b * T + j) * H + h) * D + e];
          float got = y[((b * S + i) * H + h) * D + e];
          assert_true(fabs(got - acc) <= 1e-5 + 1e-4 * fabs(acc));
        }
      }
  ccg_graph_free(g);
  free(qd);
  free(kd);
  free(vd);
  free(md);
  free(y);
  free(row);
}

/* ---- Gelu written out in the GEMM epilogue --------------------------------
 */

static void gelu_epilogue(void **state) {
  (void)state;
  enum { M = 70, K = 48, N = 300 };
  float *ad = filled(M * K, 9, 1.0f), *wd = filled(K * N, 10, 1.0f);
  float *bd = filled(N, 11, 1.0f);
  for (int twice = 0; twice < 2; twice++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[70,48]");
    ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[48,300]");
    ccg_value_id bias = ccg_test_input(g, "b", CCG_DTYPE_F32, "[300]");
    ccg_value_id h, e, y;
    assert_ok(g, ccg_matmul(g, a, w, &h));
    assert_ok(g, ccg_add(g, h, bias, &h));
    assert_ok(g, ccg_div(g, h, scalar(g, &sqrt2), &e));
    assert_ok(g, ccg_erf(g, e, &e));
    assert_ok(g, ccg_add(g, e, scalar(g, &one), &e));
    assert_ok(g, ccg_mul(g, h, e, &y));
    assert_ok(g, ccg_mul(g, y, scalar(g, &half), &y));
    if (twice) /* h read a third time: the pattern does not hold */
      assert_ok(g, ccg_add(g, y, h, &y));
    assert_ok(g, ccg_graph_add_output(g, y));
    ccg_exec_tensor in[3] = {XT_F32("a", ad, M, K), XT_F32("w", wd, K, N),
                             XT_F32("b", bd, N)};
    size_t nu, nf = check(g, in, 3, y, M * N, &nu);
    size_t mat = (size_t)M * N * sizeof(float);
    if (!twice) /* MatMul, Add and the Gelu: the output alone */
      assert_int_equal(nf, mat);
    else /* h kept for its third reader (the rest is one chain) */
      assert_int_equal(nf, 2 * mat);
    ccg_graph_free(g);
  }
  free(ad);
  free(wd);
  free(bd);
}

/* ---- Transposes read by a MatMul ---------------------------------------- */

/* y = a Transpose(w) + Transpose(c) d over batch dims [2,3], as a backward
 * writes dY B^T and A^T dY: both Transposes fold into their MatMul, which
 * reads w and c transposed (plan.c), so neither takes memory. c under
 * perm (1,0,3,2) instead, which also swaps batch dims, stays a step; so
 * does Transpose(w) where a second MatMul reads it too. */
static void transposed_operands(void **state) {
  (void)state;
  float *ad = filled(2 * 3 * 5 * 4, 12, 1.0f), *wd = filled(6 * 4, 13, 1.0f);
  float *cd = filled(2 * 3 * 4 * 5, 14, 1.0f);
  float *dd = filled(2 * 3 * 4 * 6, 15, 1.0f);
  static const int64_t swap[4] = {0, 1, 3, 2}, both[4] = {1, 0, 3, 2};
  const size_t wt_bytes = 4 * 6 * 4, ct_bytes = 2 * 3 * 5 * 4 * 4;
  for (int variant = 0; variant < 3; variant++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[2,3,5,4]");
    ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[6,4]");
    ccg_value_id c = ccg_test_input(g, "c", CCG_DTYPE_F32,
                                    variant == 1 ? "[3,2,4,5]" : "[2,3,4,5]");
    ccg_value_id d = ccg_test_input(g, "d", CCG_DTYPE_F32, "[2,3,4,6]");
    ccg_value_id wt, ct, y1, y2, y;
    assert_ok(g, ccg_transpose(g, w, NULL, 0, &wt)); /* no perm: reversed */
    assert_ok(g, ccg_matmul(g, a, wt, &y1));
    assert_ok(g, ccg_transpose(g, c, variant == 1 ? both : swap, 4, &ct));
    assert_ok(g, ccg_matmul(g, ct, d, &y2));
    assert_ok(g, ccg_add(g, y1, y2, &y));
    if (variant == 2) {
      ccg_value_id y3;
      assert_ok(g, ccg_matmul(g, a, wt, &y3));
      assert_ok(g, ccg_add(g, y, y3, &y));
    }
    assert_ok(g, ccg_graph_add_output(g, y));
    int64_t c_dims[4] = {variant == 1 ? 3 : 2, variant == 1 ? 2 : 3, 4, 5};
    ccg_exec_tensor in[4] = {XT_F32("a", ad, 2, 3, 5, 4), XT_F32("w", wd, 6, 4),
                             xt_in("c", CCG_DTYPE_F32, cd, 4, c_dims),
                             XT_F32("d", dd, 2, 3, 4, 6)};
    size_t nu, nf = check(g, in, 4, y, 2 * 3 * 5 * 6, &nu);
    /* variant 2: its two Adds are one elementwise chain too, the first
     * sum ([2,3,5,6]) no longer stored */
    size_t folded = variant == 0   ? wt_bytes + ct_bytes
                    : variant == 1 ? wt_bytes
                                   : ct_bytes + 2 * 3 * 5 * 6 * 4;
    assert_int_equal(nu - nf, folded);
    ccg_graph_free(g);
  }
  free(ad);
  free(wd);
  free(cd);
  free(dd);
}

/* ---- residual Add, then LayerNormalization ------------------------------ */

/* s = x + r; y = LayerNorm(s) over the last dim (axis -1) or the last two
 * (-2); z = s + y reads the sum again. Fused: the same bits; s, y and z
 * take memory, nothing else does. With the mean as an output of its own,
 * the pair stays unfused. */
static void add_layer_norm(void **state) {
  (void)state;
  enum { A = 5, R = 7, C = 96, N = A * R * C };
  float *xd = filled(N, 12, 2.0f), *rd = filled(N, 13, 1.0f);
  float *wd = filled(R * C, 14, 1.0f), *bd = filled(R * C, 15, 1.0f);
  for (int variant = 0; variant < 3; variant++) {
    int64_t axis = variant == 1 ? -2 : -1;
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[5,7,96]");
    ccg_value_id r = ccg_test_input(g, "r", CCG_DTYPE_F32, "[5,7,96]");
    ccg_value_id w =
        ccg_test_input(g, "w", CCG_DTYPE_F32, axis == -1 ? "[96]" : "[7,96]");
    ccg_value_id b =
        ccg_test_input(g, "b", CCG_DTYPE_F32, axis == -1 ? "[96]" : "[7,96]");
    ccg_value_id s, y[3], z;
    assert_ok(g, ccg_add(g, x, r, &s));
    ccg_value_id in[3] = {s, w, b};
    ccg_attr at[2] = {CCG_ATTR_I("axis", axis), CCG_ATTR_F("epsilon", 1e-5f)};
    assert_ok(g, xt_node(g, "LayerNormalization", "ln", in, 3, at, 2,
                         variant == 2 ? 2 : 1, y));
    assert_ok(g, ccg_add(g, s, y[0], &z));
    assert_ok(g, ccg_graph_add_output(g, z));
    if (variant == 2)
      assert_ok(g, ccg_graph_add_output(g, y[1]));
    ccg_exec_tensor t[4] = {
        XT_F32("x", xd, A, R, C), XT_F32("r", rd, A, R, C),
        axis == -1 ? XT_F32("w", wd, C) : XT_F32("w", wd, R, C),
        axis == -1 ? XT_F32("b", bd, C) : XT_F32("b", bd, R, C)};
    float *f = malloc(2 * N * sizeof(float)), *u = f + N;
    assert_non_null(f);
    size_t nf, nu;
    run(g, true, 1, t, 4, ccg_value_name(g, z), f, N, &nf);
    size_t steps_fused = live_steps;
    run(g, false, 1, t, 4, ccg_value_name(g, z), u, N, &nu);
    /* the LayerNormalization's step runs within the Add's */
    assert_int_equal(steps_fused + (variant == 2 ? 0 : 1), live_steps);
    assert_memory_equal(f, u, N * sizeof(float));
    assert_int_equal(nf, nu); /* the same values in either plan */
    /* against a direct computation */
    int len = axis == -1 ? C : R * C;
    for (int row = 0; row < N / len; row++) {
      double m = 0.0, v = 0.0;
      for (int k = 0; k < len; k++)
        m += (double)(xd[row * len + k] + rd[row * len + k]);
      m /= len;
      for (int k = 0; k < len; k++) {
        double d = (double)(xd[row * len + k] + rd[row * len + k]) - m;
        v += d * d;
      }
      v /= len;
      for (int k = 0; k < len; k++) {
        int i = row * len + k, p = axis == -1 ? k % C : k;
        double sv = (double)(xd[i] + rd[i]);
        double want = sv + (sv - m) / sqrt(v + 1e-5) * wd[p] + bd[p];
        assert_true(fabs(f[i] - want) <= 1e-5 + 1e-5 * fabs(want));
      }
    }
    free(f);
    ccg_graph_free(g);
  }
  free(xd);
  free(rd);
  free(wd);
  free(bd);
}

/* ---- the elementwise chains on the pool ---------------------------------
 * A chain (x * sigmoid(x) - c, c a row) and a scaled, masked Softmax after
 * a chain, over enough blocks and rows for several chunks: the same bytes
 * at 1 and 3 threads, the same bits as unfused. */
static void chains_on_threads(void **state) {
  (void)state;
  enum { R = 96, C = 1000, N = R * C };
  float *xd = filled(N, 19, 3.0f), *cd = filled(C, 20, 1.0f);
  for (int softmax = 0; softmax < 2; softmax++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[96,1000]");
    ccg_value_id c = ccg_test_input(g, "c", CCG_DTYPE_F32, "[1000]"), y;
    if (softmax) {
      assert_ok(g, ccg_div(g, x, scalar(g, &four), &y));
      assert_ok(g, ccg_add(g, y, c, &y));
      assert_ok(g, ccg_softmax(g, y, -1, &y));
    } else {
      ccg_value_id sg;
      assert_ok(g, ccg_sigmoid(g, x, &sg));
      assert_ok(g, ccg_mul(g, x, sg, &y));
      assert_ok(g, ccg_sub(g, y, c, &y));
    }
    assert_ok(g, ccg_graph_add_output(g, y));
    ccg_exec_tensor in[2] = {XT_F32("x", xd, R, C), XT_F32("c", cd, C)};
    size_t nu, nf = check(g, in, 2, y, N, &nu);
    assert_int_equal(nf, (size_t)N * sizeof(float)); /* the output alone */
    assert_true(nu > nf);
    ccg_graph_free(g);
  }
  free(xd);
  free(cd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(attention_cases),
      cmocka_unit_test(attention_layouts),
      cmocka_unit_test(attention_against_reference),
      cmocka_unit_test(gelu_epilogue),
      cmocka_unit_test(transposed_operands),
      cmocka_unit_test(add_layer_norm),
      cmocka_unit_test(chains_on_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
