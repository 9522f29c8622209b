/* Helpers for the executor tests (include after test_util.h). */
#ifndef CCG_EXEC_TEST_UTIL_H
#define CCG_EXEC_TEST_UTIL_H

#include <math.h>

#include "ccgraph/exec.h"

/* An input tensor by name over caller data. */
static inline ccg_exec_tensor xt_in(const char *name, ccg_dtype dt,
                                    const void *data, int rank,
                                    const int64_t *dims) {
  ccg_exec_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.tensor.dtype = dt;
  t.tensor.rank = rank;
  for (int d = 0; d < rank; d++)
    t.tensor.dims[d] = dims[d];
  t.tensor.data = data;
  return t;
}
#define XT_F32(name, data, ...)                                                \
  xt_in((name), CCG_DTYPE_F32, (data),                                         \
        (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),       \
        (const int64_t[]){__VA_ARGS__})

/* An output into dst of `bytes`. */
static inline ccg_exec_tensor xt_out(const char *name, void *dst,
                                     size_t bytes) {
  ccg_exec_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dst = dst;
  t.dst_bytes = bytes;
  return t;
}

/* Compiles g for one rank (shapes bound from the inputs), runs it once and
 * frees the executor. Returns the run's status; the message goes to g. */
static inline ccg_status xt_run1(ccg_graph *g, const ccg_exec_tensor *in,
                                 size_t n_in, ccg_exec_tensor *out,
                                 size_t n_out) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in;
  o.n_input_shapes = n_in;
  ccg_exec *x = NULL;
  ccg_status st = ccg_exec_create(g, &o, &x);
  if (st != CCG_STATUS_OK)
    return st;
  st = ccg_exec_run(x, in, n_in, out, n_out);
  if (st != CCG_STATUS_OK)
    fprintf(stderr, "run: %s\n", ccg_last_error(x));
  ccg_exec_free(x);
  return st;
}

/* |got - want| <= atol + rtol * |want| for every element (NaN equal). */
static inline void xt_close(const float *got, const float *want, size_t n,
                            double atol, double rtol, const char *what) {
  for (size_t i = 0; i < n; i++) {
    if ((isnan(want[i]) && isnan(got[i])) || got[i] == want[i])
      continue;
    double err = fabs((double)got[i] - (double)want[i]);
    if (!(err <= atol + rtol * fabs((double)want[i])))
      fail_msg("%s: element %zu is %.9g, expected %.9g (atol %g, rtol %g)",
               what, i, (double)got[i], (double)want[i], atol, rtol);
  }
}

/* Deterministic pseudo-random floats in [-1, 1). */
static inline void xt_fill(float *v, size_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = (float)((s >> 8) & 0xffffff) / 8388608.0f - 1.0f;
  }
}

#endif
