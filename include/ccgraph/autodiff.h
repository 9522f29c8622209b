/* ccgraph passes: the backward pass (autodiff). It extends a forward graph
 * with the nodes that compute gradients: ops by their own gradient rules,
 * nodes tagged by a mapping by the mapping's backward rule (once per
 * instance), untagged collectives by the replicated-loss convention (the
 * `ccgraph.backward` convention of the ONNX export). docs/autodiff.md lists
 * every rule. */
#ifndef CCGRAPH_AUTODIFF_H
#define CCGRAPH_AUTODIFF_H

#include "ccgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The one backward convention for untagged collectives. */
#define CCG_BACKWARD_CONVENTION "replicated_loss"

typedef struct ccg_backward_options {
  size_t size; /* sizeof(ccg_backward_options) */
  /* A float value whose gradient is seeded with ones (a scalar loss, or the
   * sum of a tensor's elements); CCG_NONE when `outputs` seed instead, or
   * when only Sends do (an earlier pipeline stage, with p2p). */
  ccg_value_id loss;
  /* Values with given gradients: output_grads[i] (a value of g with the
   * same dtype and shape) or, with output_grads NULL, a new graph input
   * "grad/<name>" each. */
  const ccg_value_id *outputs;
  const ccg_value_id *output_grads;
  size_t n_outputs;
  /* Names or fnmatch patterns of graph inputs and initializers to
   * differentiate for; NULL = every float initializer. A pattern that
   * matches no float input or initializer is an error. */
  const char *const *wrt;
  size_t n_wrt;
  /* Adds each gradient "grad/<name>" as a graph output. */
  bool add_outputs;
  /* Pipeline stages: a Send whose input depends on a wanted value seeds the
   * backward (its gradient arrives from the peer), and values received by
   * Recv count as differentiable (their gradient is sent back). */
  bool p2p;
} ccg_backward_options;
#define CCG_BACKWARD_OPTIONS_INIT                                              \
  { sizeof(ccg_backward_options), CCG_NONE, NULL, NULL, 0, NULL, 0, true, true }

/* Adds the backward of g: for every value chosen by opts->wrt a value
 * "grad/<name>" (zeros when the loss does not depend on it). Gradients of a
 * value used several times are summed; only the nodes the requested
 * gradients need are built; integer and bool values carry no gradient. A
 * node with no gradient rule is an error naming its op and node (on g); a
 * failure leaves g unchanged. */
CCG_API ccg_status ccg_backward(ccg_graph *g, const ccg_backward_options *opts);

/* Data parallelism (docs/parallelism.md): groups the gradient collectives
 * the backward derived from ddp.all_reduce_grad (AllReduce) and from
 * fsdp.all_gather_param (ReduceScatter, ZeRO 1 and 3) into buckets, in the
 * order the backward makes them (last layer first), each of at most
 * `bucket_bytes` of whole gradients (a larger gradient is a bucket alone)
 * and of one collective, group, reduce and dtype: one ddp.all_reduce_bucket
 * (flattened, concatenated, all-reduced, split back) or
 * fsdp.reduce_scatter_bucket (each rank gets the same shard of every
 * gradient as from its own ReduceScatter) per bucket, placed right after
 * its last gradient so that the executor overlaps it with the rest of the
 * backward. 0 puts every gradient in a bucket of its own (nothing
 * changes). *n_buckets (may be NULL) gets the buckets made; a failure
 * leaves g unchanged. */
CCG_API ccg_status ccg_ddp_bucket_gradients(ccg_graph *g, size_t bucket_bytes,
                                            size_t *n_buckets);

#ifdef __cplusplus
}
#endif
#endif
