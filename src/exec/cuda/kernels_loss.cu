/* SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss on the device: one
 * thread per position (its class line walked as on the CPU), then one per
 * chunk of positions, then one for the result, so the sums are the CPU's
 * (exec/loss_math.h) bit for bit. */
#include "exec/cuda/kernels_loss.h"
#include "exec/cuda/launch.cuh"

__global__ static void k_log_prob(ccg__loss_args a, const void *x,
                                  ccg_dtype dlp, void *lp, size_t n) {
  CCG__GRID_LOOP(p, n) { ccg__loss_log_prob(&a, x, dlp, lp, p); }
}

__global__ static void k_loss_elem(ccg__loss_args a, const void *x,
                                   const void *t, const void *w, ccg_dtype dout,
                                   void *o, double *ls, double *ws, size_t n,
                                   ccg__kerr err) {
  CCG__GRID_LOOP(p, n) {
    double l, wt;
    int64_t k;
    if (!ccg__loss_elem(&a, x, t, w, p, &l, &wt, &k)) {
      ccg__kfail2(err, p, (unsigned long long)k);
      l = wt = 0.0;
    }
    if (o) {
      ccg__st_f64(dout, o, p, l);
    } else {
      ls[p] = l;
      ws[p] = wt;
    }
  }
}

__global__ static void k_loss_chunks(const double *ls, const double *ws,
                                     double *lsum, double *wsum, size_t n,
                                     size_t nch) {
  CCG__GRID_LOOP(c, nch) {
    lsum[c] = ccg__loss_chunk_sum(ls, n, c);
    wsum[c] = ccg__loss_chunk_sum(ws, n, c);
  }
}

__global__ static void k_loss_final(bool mean, const double *lsum,
                                    const double *wsum, size_t nch,
                                    ccg_dtype dout, void *o) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    ccg__st_f64(dout, o, 0, ccg__loss_final(mean, lsum, wsum, nch));
}

extern "C" int ccg__cu_loss(cudaStream_t s, ccg__loss_args a, const void *x,
                            const void *t, const void *w, ccg_dtype dout,
                            void *o, ccg_dtype dlp, void *lp, int reduction,
                            size_t P, double *scratch, ccg__kerr err) {
  int e;
  if (lp && P) {
    k_log_prob<<<ccg__blocks(P), CCG__THREADS, 0, s>>>(a, x, dlp, lp, P);
    if ((e = ccg__launched()) != 0)
      return e;
  }
  if (reduction == 0) {
    if (!P)
      return 0;
    k_loss_elem<<<ccg__blocks(P), CCG__THREADS, 0, s>>>(a, x, t, w, dout, o,
                                                        NULL, NULL, P, err);
    return ccg__launched();
  }
  size_t nch = (P + CCG__LOSS_CHUNK - 1) / CCG__LOSS_CHUNK;
  double *ls = scratch, *ws = ls + P, *lsum = ws + P, *wsum = lsum + nch;
  if (P) {
    k_loss_elem<<<ccg__blocks(P), CCG__THREADS, 0, s>>>(a, x, t, w, dout, NULL,
                                                        ls, ws, P, err);
    if ((e = ccg__launched()) != 0)
      return e;
    k_loss_chunks<<<ccg__blocks(nch), CCG__THREADS, 0, s>>>(ls, ws, lsum, wsum,
                                                            P, nch);
    if ((e = ccg__launched()) != 0)
      return e;
  }
  k_loss_final<<<1, 1, 0, s>>>(reduction == 2, lsum, wsum, nch, dout, o);
  return ccg__launched();
}
