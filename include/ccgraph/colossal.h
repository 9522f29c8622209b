/* ccgraph symbolic layer, ColossalAI (colossalai.communication): typed
 * calls of the "colossal.*" registry entries (docs/mappings.md). Each is
 * ccg_mapping_apply with the parameters given, so it inserts the same nodes
 * with the same tags; backward rules run through ccg_mapping_apply_backward.
 * `group` NULL means "tp" for the collectives. Calls on one graph are not
 * thread-safe; two graphs never interfere. */
#ifndef CCGRAPH_COLOSSAL_H
#define CCGRAPH_COLOSSAL_H

#include "ccgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- collectives ----------------------------------------------------------
 */

CCG_API ccg_status ccg_colossal_all_gather(ccg_graph *g, ccg_value_id x,
                                           const char *group, int64_t dim,
                                           ccg_value_id *out);
CCG_API ccg_status ccg_colossal_reduce_scatter(ccg_graph *g, ccg_value_id x,
                                               const char *group, int64_t dim,
                                               ccg_reduce_op op,
                                               ccg_value_id *out);
CCG_API ccg_status ccg_colossal_all_reduce(ccg_graph *g, ccg_value_id x,
                                           const char *group, ccg_reduce_op op,
                                           ccg_value_id *out);
CCG_API ccg_status ccg_colossal_broadcast(ccg_graph *g, ccg_value_id x,
                                          const char *group, int64_t src,
                                          ccg_value_id *out);
CCG_API ccg_status ccg_colossal_reduce(ccg_graph *g, ccg_value_id x,
                                       const char *group, int64_t dst,
                                       ccg_reduce_op op, ccg_value_id *out);
/* CollectivePermute shift +1 with rotation along one mesh axis. */
CCG_API ccg_status ccg_colossal_ring_forward(ccg_graph *g, ccg_value_id x,
                                             const char *group,
                                             ccg_value_id *out);

/* ---- pipeline -------------------------------------------------------------
 */

/* Which stage graph this is and what it receives. Shapes are copied into
 * the params; they must be static. */
typedef struct ccg_colossal_stage {
  size_t size;                         /* sizeof(ccg_colossal_stage) */
  const char *group;                   /* the pipeline mesh axis; NULL = "pp" */
  int64_t stage;                       /* 0 = first */
  int64_t num_stages;                  /* 0 = the axis size */
  const ccg_shape *input_tensor_shape; /* received from the previous stage */
  const ccg_shape *output_grad_shape;  /* received from the next stage */
  ccg_dtype dtype;                     /* received; UNDEFINED = f32 */
  bool scatter_gather_tensors;
  const char *tp_group; /* NULL = "tp" */
} ccg_colossal_stage;
#define CCG_COLOSSAL_STAGE_INIT                                                \
  {                                                                            \
    sizeof(ccg_colossal_stage), NULL, 0, 0, NULL, NULL, CCG_DTYPE_UNDEFINED,   \
        false, NULL                                                            \
  }

/* Received tensors are CCG_NONE where the stage gets none (the first stage
 * receives nothing from a previous one, the last nothing from a next one);
 * sends to a missing peer are no-ops. */
CCG_API ccg_status ccg_colossal_send_forward(ccg_graph *g, ccg_value_id x,
                                             const ccg_colossal_stage *s);
CCG_API ccg_status ccg_colossal_recv_forward(ccg_graph *g,
                                             const ccg_colossal_stage *s,
                                             ccg_value_id *y);
CCG_API ccg_status ccg_colossal_send_backward(ccg_graph *g, ccg_value_id dx,
                                              const ccg_colossal_stage *s);
CCG_API ccg_status ccg_colossal_recv_backward(ccg_graph *g,
                                              const ccg_colossal_stage *s,
                                              ccg_value_id *dy);
CCG_API ccg_status ccg_colossal_send_forward_recv_backward(
    ccg_graph *g, ccg_value_id x, const ccg_colossal_stage *s,
    ccg_value_id *dy);
CCG_API ccg_status ccg_colossal_send_backward_recv_forward(
    ccg_graph *g, ccg_value_id dx, const ccg_colossal_stage *s,
    ccg_value_id *y);
CCG_API ccg_status ccg_colossal_send_forward_recv_forward(
    ccg_graph *g, ccg_value_id x, const ccg_colossal_stage *s, ccg_value_id *y);
CCG_API ccg_status ccg_colossal_send_backward_recv_backward(
    ccg_graph *g, ccg_value_id dx, const ccg_colossal_stage *s,
    ccg_value_id *dy);
CCG_API ccg_status ccg_colossal_send_forward_backward_recv_forward_backward(
    ccg_graph *g, ccg_value_id x, ccg_value_id dx, const ccg_colossal_stage *s,
    ccg_value_id *y, ccg_value_id *dy);

/* Tensor meta (1 or 2 tensors): count, then per tensor ndims, dims and
 * dtype (ONNX type code) as i64 Send/Recv. The receiver gives each tensor's
 * rank; `outs` (room for 7) receives what arrives, *n_out of them (0 on the
 * first stage). */
CCG_API ccg_status ccg_colossal_send_tensor_meta(ccg_graph *g,
                                                 const ccg_value_id *xs,
                                                 size_t n,
                                                 const ccg_colossal_stage *s);
CCG_API ccg_status ccg_colossal_recv_tensor_meta(ccg_graph *g,
                                                 const int64_t *ndims, size_t n,
                                                 const ccg_colossal_stage *s,
                                                 ccg_value_id *outs,
                                                 size_t *n_out);

#ifdef __cplusplus
}
#endif
#endif
