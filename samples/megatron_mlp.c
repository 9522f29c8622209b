/* A Megatron-style tensor-parallel MLP built with the public C API:
 *   x [batch, hidden] (replicated over tp)
 *   -> Identity (copy_to_tensor_model_parallel_region: identity forward)
 *   -> MatMul with the column shard of W1 [hidden, 4*hidden/tp] -> Gelu
 *   -> MatMul with the row shard of W2 [4*hidden/tp, hidden]  (partial sums)
 *   -> AllReduce(sum) over tp (reduce_from_tensor_model_parallel_region)
 *   -> + bias (added once, after the reduction)
 * Prints the graph in the format asked for (text, json or dot) and a summary
 * of its collectives; with --out DIR also writes one ONNX model per rank
 * (DIR/megatron_mlp.rank<r>.onnx), which `ccgraph verify DIR` checks.
 * usage: megatron_mlp [--tp N] [--format text|json|dot] [--out DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ccgraph/ccgraph.h>

#define CHECK(g, call)                                                         \
  do {                                                                         \
    ccg_status st_ = (call);                                                   \
    if (st_ != CCG_STATUS_OK) {                                                \
      fprintf(stderr, "megatron_mlp: %s: %s\n", ccg_status_name(st_),          \
              ccg_last_error(g));                                              \
      ccg_graph_free(g);                                                       \
      return st_ == CCG_STATUS_INVALID_ARG || st_ == CCG_STATUS_SHAPE ? 2 : 3; \
    }                                                                          \
  } while (0)

/* Deterministic weights: the sample's output does not depend on a seed. */
static float *weights(int64_t n, float scale) {
  float *w = malloc((size_t)n * sizeof *w);
  for (int64_t i = 0; w && i < n; i++)
    w[i] = scale * (float)((i * 7919) % 97 - 48) / 48.0f;
  return w;
}

int main(int argc, char **argv) {
  int64_t tp = 4, hidden = 64;
  ccg_dump_format fmt = CCG_DUMP_TEXT;
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--tp") == 0 && i + 1 < argc) {
      tp = atoll(argv[++i]);
    } else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
      if (ccg_dump_format_parse(argv[++i], &fmt) != CCG_STATUS_OK) {
        fprintf(stderr, "megatron_mlp: %s\n", ccg_last_error(NULL));
        return 1;
      }
    } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      fprintf(stderr, "usage: megatron_mlp [--tp N] [--format text|json|dot] "
                      "[--out DIR]\n");
      return 1;
    }
  }
  char spec[32];
  snprintf(spec, sizeof spec, "tp=%lld", (long long)tp);
  ccg_mesh mesh;
  if (ccg_mesh_parse(spec, &mesh) != CCG_STATUS_OK) {
    fprintf(stderr, "megatron_mlp: %s\n", ccg_last_error(NULL));
    return 2;
  }
  if ((4 * hidden) % tp != 0) {
    fprintf(stderr, "megatron_mlp: ffn size %lld is not divisible by tp=%lld\n",
            (long long)(4 * hidden), (long long)tp);
    return 2;
  }
  int64_t ffn_local = 4 * hidden / tp;

  ccg_graph_options opts = CCG_GRAPH_OPTIONS_INIT;
  opts.name = "megatron_mlp";
  ccg_graph *g = NULL;
  if (ccg_graph_new(&opts, &g) != CCG_STATUS_OK) {
    fprintf(stderr, "megatron_mlp: %s\n", ccg_last_error(NULL));
    return 3;
  }
  CHECK(g, ccg_graph_set_mesh(g, &mesh));

  ccg_shape xs = {2, {ccg_dim_sym("batch"), ccg_dim_num(hidden)}};
  ccg_value_id x, w1, w2, b2, h, y;
  CHECK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  float *d1 = weights(hidden * ffn_local, 0.1f);
  float *d2 = weights(ffn_local * hidden, 0.1f);
  float *db = weights(hidden, 0.01f);
  if (!d1 || !d2 || !db) {
    fprintf(stderr, "megatron_mlp: out of memory\n");
    return 3;
  }
  ccg_tensor t1 = {CCG_DTYPE_F32, 2, {hidden, ffn_local}, d1};
  ccg_tensor t2 = {CCG_DTYPE_F32, 2, {ffn_local, hidden}, d2};
  ccg_tensor tb = {CCG_DTYPE_F32, 1, {hidden}, db};
  CHECK(g, ccg_graph_add_initializer(g, "fc1.weight", &t1, &w1));
  CHECK(g, ccg_graph_add_initializer(g, "fc2.weight", &t2, &w2));
  CHECK(g, ccg_graph_add_initializer(g, "fc2.bias", &tb, &b2));
  free(d1);
  free(d2);
  free(db);

  /* Placements say how each value lies across tp: x replicated, the fc1
   * weight column-sharded, the fc2 weight row-sharded. */
  ccg_placement rep = {CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
  ccg_placement col = {CCG_PLACEMENT_SHARD, 1, CCG_REDUCE_SUM};
  ccg_placement row = {CCG_PLACEMENT_SHARD, 0, CCG_REDUCE_SUM};
  ccg_placement partial = {CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_SUM};
  CHECK(g, ccg_value_set_placements(g, x, &rep, 1));
  CHECK(g, ccg_value_set_placements(g, w1, &col, 1));
  CHECK(g, ccg_value_set_placements(g, w2, &row, 1));

  ccg_tag copy_to = {"megatron.copy_to_tensor_model_parallel_region", 0,
                     "{\"group\":\"tp\"}", false};
  ccg_tag reduce_from = {"megatron.reduce_from_tensor_model_parallel_region", 1,
                         "{\"group\":\"tp\"}", false};
  CHECK(g, ccg_graph_push_scope(g, "mlp"));
  CHECK(g, ccg_identity(g, x, &h));
  CHECK(g, ccg_node_set_tag(g, ccg_value_producer(g, h), &copy_to));
  CHECK(g, ccg_matmul(g, h, w1, &h));
  CHECK(g, ccg_value_set_placements(g, h, &col, 1));
  CHECK(g, ccg_gelu(g, h, "tanh", &h));
  CHECK(g, ccg_matmul(g, h, w2, &h));
  CHECK(g, ccg_value_set_placements(g, h, &partial, 1));
  CHECK(g, ccg_all_reduce(g, h, "tp", CCG_REDUCE_SUM, &h));
  CHECK(g, ccg_node_set_tag(g, ccg_value_producer(g, h), &reduce_from));
  CHECK(g, ccg_value_set_placements(g, h, &rep, 1));
  CHECK(g, ccg_add(g, h, b2, &y));
  ccg_graph_pop_scope(g);
  CHECK(g, ccg_graph_add_output(g, y));
  CHECK(g, ccg_graph_validate(g));

  CHECK(g, ccg_graph_dump(g, fmt, stdout));
  if (fmt == CCG_DUMP_TEXT) {
    size_t n_coll = 0;
    for (size_t i = 0; i < ccg_graph_num_nodes(g); i++)
      n_coll += ccg_op_is_collective(ccg_node_op(g, (ccg_node_id)i));
    printf("\n%zu nodes, %zu collective(s) on mesh %s; per-rank weights "
           "fc1 [%lld,%lld] and fc2 [%lld,%lld] of [%lld,%lld] and "
           "[%lld,%lld]\n",
           ccg_graph_num_nodes(g), n_coll, spec, (long long)hidden,
           (long long)ffn_local, (long long)ffn_local, (long long)hidden,
           (long long)hidden, (long long)(4 * hidden), (long long)(4 * hidden),
           (long long)hidden);
  }
  if (out)
    CHECK(g, ccg_onnx_export_ranks(g, out, "megatron_mlp", NULL));
  ccg_graph_free(g);
  return 0;
}
