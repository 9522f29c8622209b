/* Private: the arithmetic of SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss, as static inline functions for the host and,
 * under nvcc, the device, so that the CPU tests check what the GPU kernels
 * compute. Scores / log-probabilities are [N, C, D] (D: the trailing dims
 * flattened, 1 when there are none), targets [N, D]; class c of position
 * p = n * D + d is element n * C * D + c * D + d. Math in double. */
#ifndef CCG_EXEC_LOSS_MATH_H
#define CCG_EXEC_LOSS_MATH_H

#include "exec/kernels_math.h"

/* The per-node parameters both backends read. */
typedef struct ccg__loss_args {
  bool softmax; /* SoftmaxCrossEntropyLoss: input 0 is scores */
  bool has_ii;
  int64_t ii; /* ignore_index */
  size_t C, D;
  ccg_dtype dx, dt, dw; /* scores, targets, weights (dw unused if no w) */
} ccg__loss_args;

/* Positions summed per chunk: the sum of a mean or sum reduction is, on
 * both backends, the sums of chunks of this many positions (in order),
 * added in chunk order. */
#define CCG__LOSS_CHUNK 1024

/* max and log(sum(exp(x - max))) of position p's class line. */
CCG_HD static inline void ccg__loss_lse(const ccg__loss_args *a, const void *x,
                                        size_t p, double *mx, double *lse) {
  size_t base = (p / a->D) * a->C * a->D + p % a->D;
  double m = -INFINITY, s = 0.0;
  for (size_t c = 0; c < a->C; c++) {
    double v = ccg__ld_f64(a->dx, x, base + c * a->D);
    m = (v > m || v != v) ? v : m;
  }
  if (m == INFINITY || m == -INFINITY) {
    *mx = m;
    *lse = 0.0;
    return;
  }
  for (size_t c = 0; c < a->C; c++)
    s += exp(ccg__ld_f64(a->dx, x, base + c * a->D) - m);
  *mx = m;
  *lse = log(s);
}

/* Writes position p's log-probabilities (SoftmaxCrossEntropyLoss's second
 * output) in dtype dout. */
CCG_HD static inline void ccg__loss_log_prob(const ccg__loss_args *a,
                                             const void *x, ccg_dtype dout,
                                             void *lp, size_t p) {
  double mx, lse;
  ccg__loss_lse(a, x, p, &mx, &lse);
  size_t base = (p / a->D) * a->C * a->D + p % a->D;
  for (size_t c = 0; c < a->C; c++) {
    size_t i = base + c * a->D;
    ccg__st_f64(dout, lp, i, ccg__ld_f64(a->dx, x, i) - mx - lse);
  }
}

/* Position p's loss -w[t] * logp[t] and the weight applied w[t] (1 without
 * weights; both 0 where t is ignore_index). False, with *t_out the
 * target, when the target is not a class index. */
CCG_HD static inline bool ccg__loss_elem(const ccg__loss_args *a, const void *x,
                                         const void *t, const void *w, size_t p,
                                         double *loss, double *wt,
                                         int64_t *t_out) {
  int64_t k = ccg__ld_i64(a->dt, t, p);
  *t_out = k;
  *loss = 0.0;
  *wt = 0.0;
  if (a->has_ii && k == a->ii)
    return true;
  if (k < 0 || (uint64_t)k >= (uint64_t)a->C)
    return false;
  size_t i = (p / a->D) * a->C * a->D + (size_t)k * a->D + p % a->D;
  double lp = ccg__ld_f64(a->dx, x, i);
  if (a->softmax) {
    double mx, lse;
    ccg__loss_lse(a, x, p, &mx, &lse);
    lp = lp - mx - lse;
  }
  double wv = w ? ccg__ld_f64(a->dw, w, (size_t)k) : 1.0;
  *loss = -lp * wv;
  *wt = wv;
  return true;
}

/* The sum of v over chunk c of n values. */
CCG_HD static inline double ccg__loss_chunk_sum(const double *v, size_t n,
                                                size_t c) {
  double s = 0.0;
  size_t end = (c + 1) * CCG__LOSS_CHUNK;
  for (size_t i = c * CCG__LOSS_CHUNK; i < end && i < n; i++)
    s += v[i];
  return s;
}

/* The reduced loss from the chunk sums of losses and weights: a sum, or
 * for mean the sum over the sum of the weights applied (ONNX: 0/0 is NaN
 * when every target is ignored). */
CCG_HD static inline double ccg__loss_final(bool mean, const double *lsum,
                                            const double *wsum,
                                            size_t n_chunks) {
  double l = 0.0, w = 0.0;
  for (size_t c = 0; c < n_chunks; c++) {
    l += lsum[c];
    w += wsum[c];
  }
  return mean ? l / w : l;
}

#endif
