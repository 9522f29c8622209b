/* Elementwise reduction of several ranks' buffers in a fixed order. */
#include <string.h>

#include "exec/comm/comm.h"
#include "exec/cpu/cpu.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define RBLOCK 256
/* Results at least this large are written with non-temporal stores: they
 * are not read again soon, and a store that skips the cache does not first
 * read the line (half the memory traffic of a normal store). */
#define STREAM_BYTES (1u << 20)

static float red_f32(ccg_reduce_op op, float a, float b) {
  switch (op) {
  case CCG_REDUCE_PROD:
    return a * b;
  case CCG_REDUCE_MIN:
    return b < a ? b : a;
  case CCG_REDUCE_MAX:
    return b > a ? b : a;
  default: /* SUM, AVG */
    return a + b;
  }
}

static double red_f64(ccg_reduce_op op, double a, double b) {
  switch (op) {
  case CCG_REDUCE_PROD:
    return a * b;
  case CCG_REDUCE_MIN:
    return b < a ? b : a;
  case CCG_REDUCE_MAX:
    return b > a ? b : a;
  default:
    return a + b;
  }
}

static int64_t red_i64(ccg_reduce_op op, int64_t a, int64_t b) {
  switch (op) {
  case CCG_REDUCE_PROD:
    return (int64_t)((uint64_t)a * (uint64_t)b);
  case CCG_REDUCE_MIN:
    return b < a ? b : a;
  case CCG_REDUCE_MAX:
    return b > a ? b : a;
  default:
    return (int64_t)((uint64_t)a + (uint64_t)b);
  }
}

/* k floats from src to dst, streaming where the target allows. */
static void store_f32(float *dst, const float *src, size_t k, bool stream) {
#if defined(__SSE2__)
  if (stream) {
    size_t j = 0;
    for (; j < k && ((uintptr_t)(dst + j) & 15u); j++)
      dst[j] = src[j];
    for (; j + 4 <= k; j += 4)
      _mm_stream_ps(dst + j, _mm_loadu_ps(src + j));
    for (; j < k; j++)
      dst[j] = src[j];
    return;
  }
#else
  (void)stream;
#endif
  memcpy(dst, src, k * sizeof *dst);
}

/* acc += s over a whole block: a constant trip count, so that the
 * compiler vectorizes it at -O2 (elementwise: the same bits). */
static void add_block(float *restrict acc, const float *restrict s) {
  for (size_t j = 0; j < RBLOCK; j++)
    acc[j] += s[j];
}

/* Sum of f32 inputs from element off: blocks of accumulators so the loop
 * vectorizes; each block goes to every output (outs point at the first
 * element written). An output may alias an input (each block is read
 * before it is written). */
static void reduce_f32(ccg_reduce_op op, const float *const *ins, int n,
                       size_t off, size_t count, float *const *outs,
                       int n_outs) {
  bool stream = count * sizeof(float) >= STREAM_BYTES;
  float acc[RBLOCK];
  float scale = op == CCG_REDUCE_AVG ? 1.0f / (float)n : 1.0f;
  for (size_t i = 0; i < count; i += RBLOCK) {
    size_t k = count - i < RBLOCK ? count - i : RBLOCK;
    memcpy(acc, ins[0] + off + i, k * sizeof *acc);
    for (int r = 1; r < n; r++) {
      const float *s = ins[r] + off + i;
      if ((op == CCG_REDUCE_SUM || op == CCG_REDUCE_AVG) && k == RBLOCK)
        add_block(acc, s);
      else if (op == CCG_REDUCE_SUM || op == CCG_REDUCE_AVG)
        for (size_t j = 0; j < k; j++)
          acc[j] += s[j];
      else
        for (size_t j = 0; j < k; j++)
          acc[j] = red_f32(op, acc[j], s[j]);
    }
    if (op == CCG_REDUCE_AVG)
      for (size_t j = 0; j < k; j++)
        acc[j] *= scale;
    for (int o = 0; o < n_outs; o++)
      store_f32(outs[o] + i, acc, k, stream);
  }
#if defined(__SSE2__)
  if (stream)
    _mm_sfence(); /* streamed stores are not ordered by the barrier after */
#endif
}

void ccg__reduce_ordered_to(ccg_dtype dt, ccg_reduce_op op,
                            const void *const *ins, int n, size_t off,
                            size_t count, void *const *outs, int n_outs) {
  size_t es = ccg_dtype_size(dt);
  if (dt == CCG_DTYPE_F32) {
    float *at[64];
    for (int o = 0; o < n_outs && o < 64; o++)
      at[o] = (float *)outs[o] + off;
    reduce_f32(op, (const float *const *)ins, n, off, count, at,
               n_outs < 64 ? n_outs : 64);
    return;
  }
  char *first = (char *)outs[0] + off * es;
  ccg__reduce_ordered(dt, op, ins, n, off, count, first);
  for (int o = 1; o < n_outs; o++)
    memcpy((char *)outs[o] + off * es, first, count * es);
}

void ccg__reduce_ordered(ccg_dtype dt, ccg_reduce_op op, const void *const *ins,
                         int n, size_t off, size_t count, void *out) {
  if (dt == CCG_DTYPE_F32) {
    float *o = out;
    reduce_f32(op, (const float *const *)ins, n, off, count, &o, 1);
    return;
  }
  bool is_float = ccg_dtype_is_float(dt);
  for (size_t i = 0; i < count; i++) {
    if (is_float) {
      double acc = ccg__ld_f64(dt, ins[0], off + i);
      for (int r = 1; r < n; r++) {
        double v = ccg__ld_f64(dt, ins[r], off + i);
        /* f16/bf16 accumulate in f32, as the f32 path does, and are
         * rounded to their storage type once at the end */
        acc = dt == CCG_DTYPE_F64 ? red_f64(op, acc, v)
                                  : (double)red_f32(op, (float)acc, (float)v);
      }
      if (op == CCG_REDUCE_AVG)
        acc /= n;
      ccg__st_f64(dt, out, i, acc);
    } else {
      int64_t acc = ccg__ld_i64(dt, ins[0], off + i);
      for (int r = 1; r < n; r++)
        acc = red_i64(op, acc, ccg__ld_i64(dt, ins[r], off + i));
      if (op == CCG_REDUCE_AVG)
        acc /= n;
      ccg__st_i64(dt, out, i, acc);
    }
  }
}
