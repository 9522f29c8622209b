/* Private: launchers of the normalization, rotary-embedding and attention
 * kernels added to kernels_norm.cu (Softmax's and LayerNormalization's are
 * in kernels.h). Each enqueues on `s` and returns the launch's cudaError_t
 * as an int; the arithmetic is norm_math.h, shared with the CPU. */
#ifndef CCG_EXEC_CUDA_KERNELS_NORM_H
#define CCG_EXEC_CUDA_KERNELS_NORM_H

#include "exec/cuda/kernels.h"
#include "exec/norm_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* LogSoftmax (op CCG_OP_LOG_SOFTMAX) or Hardmax lines of [outer, len,
 * inner]. */
int ccg__cu_softmax_op(cudaStream_t s, ccg_op op, ccg_dtype di, const void *in,
                       ccg_dtype dout, void *out, size_t outer, size_t len,
                       size_t inner);
/* RMSNormalization of `rows` rows of len, scale expanded to len f32. */
int ccg__cu_rms_norm(cudaStream_t s, ccg_dtype di, const void *in,
                     ccg_dtype dout, void *out, size_t rows, size_t len,
                     const float *scale, float eps);
/* BatchNormalization (inference) of n elements of [N, C, inner]. */
int ccg__cu_batch_norm(cudaStream_t s, ccg_dtype di, const void *in,
                       ccg_dtype dout, void *out, size_t n, size_t inner,
                       size_t channels, ccg_dtype dp, const void *scale,
                       const void *bias, ccg_dtype ds, const void *mean,
                       const void *var, float eps);
/* BatchNormalization in training mode: one thread per channel of [n, C,
 * inner]; run_mean and run_var may be NULL. */
int ccg__cu_batch_norm_train(cudaStream_t s, ccg_dtype di, const void *in,
                             ccg_dtype dout, void *out, size_t n, size_t inner,
                             size_t channels, ccg_dtype dp, const void *scale,
                             const void *bias, ccg_dtype ds, const void *mean,
                             const void *var, void *run_mean, void *run_var,
                             float eps, float momentum);
/* Instance/GroupNormalization: rows groups of len elements, `groups` per
 * sample, cpg channels per group of `spatial` elements each. */
int ccg__cu_group_norm(cudaStream_t s, ccg_dtype di, const void *in,
                       ccg_dtype dout, void *out, size_t rows, size_t len,
                       size_t spatial, size_t groups, size_t cpg, ccg_dtype dp,
                       const void *scale, const void *bias, float eps);
/* MeanVarianceNormalization: n_kept lines of count elements. */
int ccg__cu_mvn(cudaStream_t s, ccg_dtype di, const void *in, ccg_dtype dout,
                void *out, const ccg__view *kept, const ccg__view *red,
                size_t count, size_t n_kept);
/* RotaryEmbedding of n elements; position ids (may be NULL) outside
 * [0, rows) are recorded in err (detail: the element, value: the id). */
int ccg__cu_rope(cudaStream_t s, const ccg__rope *r, ccg_dtype di,
                 const void *in, ccg_dtype dc, const void *cosc,
                 const void *sinc, const int64_t *pos, int64_t rows,
                 ccg_dtype dout, void *out, size_t n, ccg__kerr err);
/* Attention: its rows (B Hq Sq) with `scores` (rows x T f32) of scratch;
 * qk may be NULL. */
int ccg__cu_attention(cudaStream_t s, const ccg__attn *a, ccg_dtype dt,
                      const void *q, const void *k, const void *v,
                      const void *pk, const void *pv, ccg_dtype dm,
                      const void *mask, void *y, void *qk, float *scores);
/* present_key (value: present_value) of n elements. */
int ccg__cu_attn_present(cudaStream_t s, const ccg__attn *a, bool value,
                         ccg_dtype dt, const void *kv, const void *past,
                         void *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif
