/* Private: what the CPU normalization kernels (norm.c) share with the CUDA
 * launches (cuda/gpu_norm.c): the geometry each kernel derives from a
 * node's values and its n->p. */
#ifndef CCG_EXEC_CPU_NORM_H
#define CCG_EXEC_CPU_NORM_H

#include "exec/cpu/cpu.h"
#include "exec/norm_math.h"

/* Softmax of one f32 row in place, as the Softmax kernel computes it with
 * vm (fuse.c's Softmax after a chain). */
void ccg__softmax_row_f32(const ccg__vm *vm, float *row, size_t len);
/* LayerNormalization of one f32 row as its kernel computes it with vm
 * (scale and bias expanded to the row; y may be a). */
void ccg__layer_norm_row_f32(const ccg__vm *vm, const float *a, float *y,
                             size_t len, const float *scale, const float *bias,
                             float eps);
/* A LayerNormalization / RMSNormalization scale or bias expanded to the
 * normalized shape (xv's dims from axis on) as f32. */
void ccg__norm_expand_param(const ccg__xval *p, const ccg__xval *xv, int axis,
                            float *dst);
/* MeanVarianceNormalization of a: the kept and reduced dims (mask: the
 * reduced ones) with a's strides; elements per line and lines. */
void ccg__norm_mvn_geom(const ccg__xval *a, unsigned mask, ccg__view *kept,
                        ccg__view *red, size_t *count, size_t *n_kept);
/* RotaryEmbedding's layout of node n's input. */
void ccg__norm_rope_geom(const ccg_exec *x, const ccg__xnode *n, ccg__rope *r);
/* Every position id (host memory) indexes the caches; INVALID_ARG naming
 * node, entry and value otherwise. */
ccg_status ccg__norm_rope_check_pos(ccg_exec *x, const ccg__xnode *n,
                                    const int64_t *pos, size_t count);
/* Attention's geometry for node n's bound values. */
void ccg__norm_attn_geom(const ccg_exec *x, const ccg__xnode *n, ccg__attn *g);

#endif
