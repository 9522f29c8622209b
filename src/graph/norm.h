/* Private: shape-rule helpers the normalization files (norm.c,
 * norm_channel.c) share. */
#ifndef CCG_GRAPH_NORM_H
#define CCG_GRAPH_NORM_H

#include "graph/internal.h"

/* The float dtype of attribute stash_type (an ONNX TensorProto.DataType
 * code); INVALID_ARG naming the code otherwise. */
ccg_status ccg__norm_stash_dtype(ccg__infer *ix, ccg_dtype *out);
/* Attribute epsilon is finite and >= 0 (INVALID_ARG naming it otherwise). */
ccg_status ccg__norm_epsilon(ccg__infer *ix);
/* Gradient rules: xhat = (x - mean) r and r = 1/sqrt(var + eps), the
 * statistics over `axes` (kept as dims of 1). */
ccg_status ccg__norm_stats(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                           size_t n_axes, double eps, ccg_value_id *xhat,
                           ccg_value_id *r);
/* The input gradient of xhat given gy = d loss / d xhat:
 * r (gy - mean(gy) - xhat mean(gy xhat)). */
ccg_status ccg__norm_dx(ccg_graph *g, ccg_value_id gy, ccg_value_id xhat,
                        ccg_value_id r, const int64_t *axes, size_t n_axes,
                        ccg_value_id *dx);

#endif
