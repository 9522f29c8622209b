/* The per-element bodies of the GPU kernels (index_math.h, kernels_math.h),
 * run here on the CPU over every element and compared with the CPU
 * kernels' helpers or a direct computation: collective packing against
 * ccg__chunk_copy, broadcast offsets, reduction geometry and sums,
 * Gather's source elements, ScatterND's row offsets and combines, Trilu's
 * k read by the kernel, and CumSum's lines along an axis the kernel reads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec/cpu/cpu.h"
#include "exec/data_math.h"

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

/* packed[p] == full[ccg__pack_full_index(p)] for the CPU's packing. */
static void pack_index_matches_chunk_copy(void **state) {
  (void)state;
  uint32_t seed = 5;
  for (int trial = 0; trial < 200; trial++) {
    size_t outer = 1 + lcg(&seed) % 3, inner = 1 + lcg(&seed) % 4;
    int n = 1 + (int)(lcg(&seed) % 4);
    int64_t sizes[4], before[5] = {0};
    for (int r = 0; r < n; r++) {
      sizes[r] = (int64_t)(lcg(&seed) % 4); /* empty chunks too */
      before[r + 1] = before[r] + sizes[r];
    }
    size_t total = outer * (size_t)before[n] * inner;
    int32_t full[3 * 12 * 4], packed[3 * 12 * 4];
    for (size_t i = 0; i < total; i++)
      full[i] = (int32_t)i;
    ccg__chunk_copy(packed, full, sizeof(int32_t), outer, inner, sizes, n,
                    false);
    for (size_t p = 0; p < total; p++)
      assert_int_equal(packed[p],
                       full[ccg__pack_full_index(p, outer, inner, before, n)]);
  }
}

/* Offsets of every operand equal numpy broadcasting's. */
static void bcast_offsets_match_broadcasting(void **state) {
  (void)state;
  const int64_t shapes[][2][3] = {{{2, 3, 4}, {1, 3, 1}},
                                  {{4, 1, 5}, {1, 6, 5}},
                                  {{1, 1, 1}, {2, 2, 2}},
                                  {{3, 1, 2}, {3, 4, 1}}};
  for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
    ccg__xval a = {0}, b = {0}, o = {0};
    a.rank = b.rank = o.rank = 3;
    for (int d = 0; d < 3; d++) {
      a.dims[d] = shapes[t][0][d];
      b.dims[d] = shapes[t][1][d];
      o.dims[d] = a.dims[d] > b.dims[d] ? a.dims[d] : b.dims[d];
    }
    const ccg__xval *ins[2] = {&a, &b};
    ccg__bcast bc;
    ccg__bcast_init(&bc, &o, ins, 2);
    size_t i = 0;
    for (int64_t x = 0; x < o.dims[0]; x++)
      for (int64_t y = 0; y < o.dims[1]; y++)
        for (int64_t z = 0; z < o.dims[2]; z++, i++) {
          int64_t off[CCG__BCAST_MAX];
          ccg__bcast_offsets(&bc, i, off);
          const ccg__xval *v[2] = {&a, &b};
          for (int k = 0; k < 2; k++) {
            int64_t c[3] = {v[k]->dims[0] == 1 ? 0 : x,
                            v[k]->dims[1] == 1 ? 0 : y,
                            v[k]->dims[2] == 1 ? 0 : z};
            int64_t want = (c[0] * v[k]->dims[1] + c[1]) * v[k]->dims[2] + c[2];
            assert_int_equal(off[k], want);
          }
        }
  }
}

/* Every subset of axes of a [2,3,4] tensor, Sum / Mean / Max, f32 and i64:
 * the geometry from the CPU preparation's output strides and the element
 * body against a direct loop. */
static void reduce_elem_matches_direct(void **state) {
  (void)state;
  enum { D0 = 2, D1 = 3, D2 = 4, NE = D0 * D1 * D2 };
  const int64_t dims[3] = {D0, D1, D2};
  float af[NE];
  int64_t ai[NE];
  uint32_t seed = 11;
  for (int i = 0; i < NE; i++) {
    ai[i] = (int64_t)(lcg(&seed) % 19) - 9;
    af[i] = (float)ai[i] * 0.5f; /* exact sums in any order */
  }
  const ccg_op ops[] = {CCG_OP_REDUCE_SUM, CCG_OP_REDUCE_MEAN,
                        CCG_OP_REDUCE_MAX};
  for (unsigned mask = 0; mask < 8; mask++) {
    /* output strides as prep_reduce makes them: 0 on reduced dims */
    int64_t ost[3], s = 1, count = 1;
    for (int d = 2; d >= 0; d--) {
      if (mask >> d & 1) {
        ost[d] = 0;
        count *= dims[d];
      } else {
        ost[d] = s;
        s *= dims[d];
      }
    }
    ccg__red_geom g = ccg__red_geom_make(3, dims, ost, count);
    for (size_t oi = 0; oi < 3; oi++) {
      for (int integer = 0; integer < 2; integer++) {
        double got[NE], want[NE];
        for (int64_t j = 0; j < s; j++) {
          want[j] = ops[oi] == CCG_OP_REDUCE_MAX ? -INFINITY : 0.0;
          if (integer && ops[oi] == CCG_OP_REDUCE_MAX)
            want[j] = (double)INT64_MIN;
        }
        for (int64_t x = 0; x < D0; x++)
          for (int64_t y = 0; y < D1; y++)
            for (int64_t z = 0; z < D2; z++) {
              int64_t j = x * ost[0] + y * ost[1] + z * ost[2];
              size_t i = (size_t)((x * D1 + y) * D2 + z);
              double v = integer ? (double)ai[i] : (double)af[i];
              want[j] = ops[oi] == CCG_OP_REDUCE_MAX
                            ? (v > want[j] ? v : want[j])
                            : want[j] + v;
            }
        for (int64_t j = 0; j < s; j++) {
          if (ops[oi] == CCG_OP_REDUCE_MEAN)
            want[j] = integer ? (double)((int64_t)want[j] / count)
                              : want[j] / (double)count;
          if (integer) {
            int64_t out[NE];
            ccg__reduce_elem(ops[oi], &g, CCG_DTYPE_I64, ai, CCG_DTYPE_I64, out,
                             (size_t)j);
            got[j] = (double)out[j];
          } else {
            float out[NE];
            ccg__reduce_elem(ops[oi], &g, CCG_DTYPE_F32, af, CCG_DTYPE_F32, out,
                             (size_t)j);
            got[j] = (double)out[j];
          }
          assert_true(integer ? got[j] == want[j] : got[j] == (float)want[j]);
        }
      }
    }
  }
}

/* Source elements of Gather on axis 1 of [2,5,3], negative indices
 * included; an index out of range is reported with its position. */
static void gather_src_matches_direct(void **state) {
  (void)state;
  const int64_t idx[4] = {4, -1, 0, -5};
  const size_t outer = 2, ni = 4, inner = 3;
  const int64_t dim = 5;
  for (size_t e = 0; e < outer * ni * inner; e++) {
    size_t src = 0, bad = 99;
    assert_true(
        ccg__gather_src(CCG_DTYPE_I64, idx, ni, inner, dim, e, &src, &bad));
    size_t in = e % inner, j = (e / inner) % ni, oi = e / inner / ni;
    int64_t k = idx[j] < 0 ? idx[j] + dim : idx[j];
    assert_int_equal(src, (oi * (size_t)dim + (size_t)k) * inner + in);
  }
  const int32_t bad_idx[3] = {1, 5, 0};
  size_t src = 0, bad = 99;
  assert_false(ccg__gather_src(CCG_DTYPE_I32, bad_idx, 3, 1, 5, 1, &src, &bad));
  assert_int_equal(bad, 1);
  assert_true(ccg__gather_src(CCG_DTYPE_I32, bad_idx, 3, 1, 5, 2, &src, &bad));
  assert_int_equal(src, 0);
}

/* ScatterND: row offsets (negative entries, out of range) and the
 * reductions in f32, f16 and wrapping i64. */
static void scatter_row_and_combine(void **state) {
  (void)state;
  const int64_t dims[2] = {3, 4};
  const int64_t rows[][2] = {{0, 0}, {2, 3}, {-1, -4}, {1, 2}};
  for (size_t r = 0; r < 4; r++) {
    size_t off = 0;
    assert_true(ccg__scatter_row(CCG_DTYPE_I64, rows, r, 2, dims, &off));
    int64_t a = rows[r][0] < 0 ? rows[r][0] + 3 : rows[r][0];
    int64_t b = rows[r][1] < 0 ? rows[r][1] + 4 : rows[r][1];
    assert_int_equal(off, (size_t)(a * 4 + b));
  }
  const int64_t bad[2] = {3, 0};
  size_t off = 0;
  assert_false(ccg__scatter_row(CCG_DTYPE_I64, bad, 0, 2, dims, &off));
  const int64_t bad2[2] = {0, -5};
  assert_false(ccg__scatter_row(CCG_DTYPE_I64, bad2, 0, 2, dims, &off));

  float of[4] = {1.5f, -2.0f, 3.0f, 0.25f};
  const float uf[4] = {0.5f, 4.0f, -1.0f, 8.0f};
  for (int red = 1; red <= 4; red++)
    ccg__combine_elem(red, CCG_DTYPE_F32, of, (size_t)(red - 1), CCG_DTYPE_F32,
                      uf, (size_t)(red - 1));
  assert_true(of[0] == 2.0f && of[1] == -8.0f && of[2] == 3.0f &&
              of[3] == 0.25f);
  uint16_t oh = ccg__f32_to_f16(1.0f), uh = ccg__f32_to_f16(0.0009765625f);
  ccg__combine_elem(1, CCG_DTYPE_F16, &oh, 0, CCG_DTYPE_F16, &uh, 0);
  assert_int_equal(oh, ccg__f32_to_f16(1.0009765625f));
  int64_t oi = INT64_MAX, ui = 2;
  ccg__combine_elem(1, CCG_DTYPE_I64, &oi, 0, CCG_DTYPE_I64, &ui, 0);
  assert_true(oi == INT64_MIN + 1); /* wraps like the CPU */
  oi = -3;
  ccg__combine_elem(3, CCG_DTYPE_I64, &oi, 0, CCG_DTYPE_I64, &ui, 0);
  assert_int_equal(oi, 2);
}

/* A reduction split into parts as the GPU splits long lines (worker w of
 * W takes elements w, w + W, ...), the parts joined in worker order with
 * ccg__rd_merge: every kind equals the one-worker result, exactly where
 * the sums are exact (integers, halves; products within rounding), for
 * floats and int64, and NaN for every kind where one element is NaN. */
static void reduce_parts_merge(void **state) {
  (void)state;
  enum { N = 200, W = 32 };
  const int64_t dims[1] = {N}, ost[1] = {0};
  ccg__red_geom g = ccg__red_geom_make(1, dims, ost, N);
  double af[N];
  int64_t ai[N];
  uint32_t seed = 5;
  for (int i = 0; i < N; i++) {
    ai[i] = (int64_t)(lcg(&seed) % 9) - 4;
    af[i] = i % 7 == 3 ? 1.5 : (double)ai[i] * 0.5; /* exact in any order */
    if (af[i] == 0.0)
      af[i] = 1.0; /* Prod stays non-zero */
  }
  const ccg__rd_kind kinds[] = {
      CCG__RD_SUM, CCG__RD_MEAN,       CCG__RD_MAX,
      CCG__RD_MIN, CCG__RD_PROD,       CCG__RD_L1,
      CCG__RD_L2,  CCG__RD_SUM_SQUARE, CCG__RD_LOG_SUM_EXP};
  for (int nan = 0; nan < 2; nan++) {
    af[77] = nan ? NAN : 2.0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
      ccg__rd_kind kind = kinds[k];
      double one =
          ccg__reduce_part_f64(kind, &g, CCG_DTYPE_F64, af, 0, 0.0, 0, 1);
      double parts =
          ccg__reduce_part_f64(kind, &g, CCG_DTYPE_F64, af, 0, 0.0, 0, W);
      for (int w = 1; w < W; w++)
        parts = ccg__rd_merge_f64(
            kind, parts,
            ccg__reduce_part_f64(kind, &g, CCG_DTYPE_F64, af, 0, 0.0, w, W));
      if (nan) { /* every kind: NaN (it wins Max and Min) */
        assert_true(one != one && parts != parts);
        continue;
      }
      if (kind == CCG__RD_PROD || kind == CCG__RD_LOG_SUM_EXP)
        assert_true(fabs(one - parts) <= 1e-12 * fabs(one));
      else
        assert_true(one == parts);
      if (!ccg__rd_int_ok(kind))
        continue; /* float only */
      int64_t oi = ccg__reduce_part_i64(kind, &g, CCG_DTYPE_I64, ai, 0, 0, 1);
      int64_t pi = ccg__reduce_part_i64(kind, &g, CCG_DTYPE_I64, ai, 0, 0, W);
      for (int w = 1; w < W; w++)
        pi = ccg__rd_merge_i64(
            kind, pi,
            ccg__reduce_part_i64(kind, &g, CCG_DTYPE_I64, ai, 0, w, W));
      assert_true(oi == pi);
    }
  }
}

/* Trilu with k read from memory (k_dev, as the kernel does for a k fed at
 * run time) keeps the same elements as with k known at launch, for k of
 * either integer dtype. */
static void trilu_k_read_by_kernel(void **state) {
  (void)state;
  for (int upper = 0; upper < 2; upper++)
    for (int64_t k = -4; k <= 4; k++) {
      ccg__remap known = {.kind = CCG__REMAP_TRILU,
                          .rank = 3,
                          .odims = {2, 3, 4},
                          .idims = {2, 3, 4},
                          .k = k,
                          .upper = upper != 0};
      ccg__remap read = known;
      int32_t k32 = (int32_t)k;
      read.k = 99; /* not used: the kernel reads kp */
      read.k_dev = true;
      read.kdt = (int)CCG_DTYPE_I32;
      read.kp = &k32;
      for (size_t j = 0; j < 24; j++) {
        int64_t want = ccg__remap_src(&known, j);
        assert_true(want == ccg__remap_src(&read, j));
        size_t col = j % 4, row = (j / 4) % 3;
        int64_t diff = (int64_t)col - (int64_t)row;
        bool keep = upper ? diff >= k : diff <= k;
        assert_true(want == (keep ? (int64_t)j : -1));
      }
    }
}

/* CumSum's lines along every axis (negative too) of a [2, 3, 4] tensor, and
 * the refusal of an axis out of range; the sums along axis 1 against a
 * direct loop. */
static void cumsum_geom_by_axis(void **state) {
  (void)state;
  const int64_t dims[3] = {2, 3, 4};
  const size_t want_len[3] = {2, 3, 4}, want_inner[3] = {12, 4, 1};
  for (int64_t axis = -3; axis < 3; axis++) {
    size_t lines = 0, len = 0, inner = 0;
    assert_true(ccg__cumsum_geom(dims, 3, 24, axis, &lines, &len, &inner));
    int ax = (int)(axis < 0 ? axis + 3 : axis);
    assert_int_equal(len, want_len[ax]);
    assert_int_equal(inner, want_inner[ax]);
    assert_int_equal(lines, 24 / want_len[ax]);
  }
  size_t lines, len, inner;
  assert_false(ccg__cumsum_geom(dims, 3, 24, 3, &lines, &len, &inner));
  assert_false(ccg__cumsum_geom(dims, 3, 24, -4, &lines, &len, &inner));
  const int64_t empty[2] = {0, 5};
  assert_true(ccg__cumsum_geom(empty, 2, 0, 0, &lines, &len, &inner));
  assert_int_equal(lines, 0);

  float in[24], out[24];
  for (int i = 0; i < 24; i++)
    in[i] = (float)(i % 7) - 2.0f;
  assert_true(ccg__cumsum_geom(dims, 3, 24, 1, &lines, &len, &inner));
  for (size_t t = 0; t < lines; t++)
    ccg__cumsum_line(CCG_DTYPE_F32, in, out, t, len, inner, false, false);
  for (int a = 0; a < 2; a++)
    for (int c = 0; c < 4; c++) {
      float acc = 0.0f;
      for (int b = 0; b < 3; b++) {
        acc += in[a * 12 + b * 4 + c];
        assert_true(out[a * 12 + b * 4 + c] == acc);
      }
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pack_index_matches_chunk_copy),
      cmocka_unit_test(bcast_offsets_match_broadcasting),
      cmocka_unit_test(reduce_elem_matches_direct),
      cmocka_unit_test(gather_src_matches_direct),
      cmocka_unit_test(scatter_row_and_combine),
      cmocka_unit_test(reduce_parts_merge),
      cmocka_unit_test(trilu_k_read_by_kernel),
      cmocka_unit_test(cumsum_geom_by_axis),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
