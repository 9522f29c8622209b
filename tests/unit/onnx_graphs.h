/* Graphs the ONNX tests export: every ai.onnx op of the IR, the Megatron MLP
 * of samples/megatron_mlp.c, and every collective with uneven splits. */
#ifndef CCG_TEST_ONNX_GRAPHS_H
#define CCG_TEST_ONNX_GRAPHS_H

#include "test_util.h"

#define OK(g, expr) assert_ok(g, expr)

static inline float *onnx_test_weights(int64_t n, float scale) {
  float *w = malloc((size_t)n * sizeof *w);
  for (int64_t i = 0; i < n; i++)
    w[i] = scale * (float)((i * 7919) % 97 - 48) / 48.0f;
  return w;
}

/* Every ai.onnx op of the IR in one graph, with symbolic dims. */
static inline ccg_graph *onnx_test_ops_graph(void) {
  ccg_graph *g = ccg_test_graph_named("all_ops", NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,4,8]");
  ccg_value_id ids = ccg_test_input(g, "ids", CCG_DTYPE_I64, "[batch,3]");
  ccg_value_id cond = ccg_test_input(g, "cond", CCG_DTYPE_BOOL, "[4,8]");
  float wd[8 * 8], bd[8];
  for (int i = 0; i < 64; i++)
    wd[i] = (float)(i % 9) * 0.125f - 0.5f;
  for (int i = 0; i < 8; i++)
    bd[i] = (float)i * 0.25f;
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {8, 8}, wd};
  ccg_tensor bt = {CCG_DTYPE_F32, 1, {8}, bd};
  ccg_value_id w, b, v, t, u, parts[2], s, r;
  OK(g, ccg_graph_add_initializer(g, "w", &wt, &w));
  OK(g, ccg_graph_add_initializer(g, "b", &bt, &b));
  OK(g, ccg_graph_push_scope(g, "block"));
  OK(g, ccg_matmul(g, x, w, &v));
  OK(g, ccg_add(g, v, b, &v));
  OK(g, ccg_gelu(g, v, "none", &t));
  OK(g, ccg_gelu(g, t, "tanh", &t));
  OK(g, ccg_relu(g, t, &t));
  OK(g, ccg_sub(g, t, v, &t));
  OK(g, ccg_mul(g, t, v, &t));
  OK(g, ccg_div(g, t, b, &t));
  OK(g, ccg_neg(g, t, &t));
  OK(g, ccg_tanh(g, t, &t));
  OK(g, ccg_erf(g, t, &t));
  OK(g, ccg_sigmoid(g, t, &t));
  OK(g, ccg_exp(g, t, &t));
  OK(g, ccg_log(g, t, &t));
  OK(g, ccg_sqrt(g, t, &t));
  OK(g, ccg_pow(g, t, b, &t));
  OK(g, ccg_identity(g, t, &t));
  OK(g, ccg_dropout(g, t, 0.1f, &t));
  OK(g, ccg_where(g, cond, t, v, &t));
  OK(g, ccg_softmax(g, t, -1, &t));
  OK(g, ccg_layer_norm(g, t, b, b, -1, 1e-5f, &t));
  int64_t ax1[] = {1}, ax2[] = {2};
  OK(g, ccg_reduce_sum(g, t, ax2, 1, true, &u));
  OK(g, ccg_reduce_mean(g, t, ax1, 1, false, &s));
  OK(g, ccg_reduce_max(g, t, NULL, 0, true, &r));
  OK(g, ccg_add(g, t, u, &t));
  int64_t sizes[] = {1, 3};
  OK(g, ccg_split(g, t, 1, sizes, 2, parts));
  OK(g, ccg_concat(g, parts, 2, 1, &t));
  OK(g, ccg_split(g, t, 2, NULL, 2, parts));
  OK(g, ccg_concat(g, parts, 2, 2, &t));
  int64_t perm[] = {0, 2, 1};
  OK(g, ccg_transpose(g, t, perm, 3, &t));
  OK(g, ccg_cast(g, t, CCG_DTYPE_F16, &t));
  OK(g, ccg_cast(g, t, CCG_DTYPE_F32, &t));
  int64_t sq[] = {0};
  OK(g, ccg_unsqueeze(g, t, sq, 1, &u));
  OK(g, ccg_squeeze(g, u, sq, 1, &u));
  /* torch.onnx.export's dynamic reshape: Shape -> Gather -> Unsqueeze ->
   * Concat -> Reshape. */
  ccg_value_id shp, dim0, idx, cat[2], target;
  OK(g, ccg_shape_of(g, u, 0, 8, &shp));
  int64_t zero = 0;
  ccg_tensor zt = {CCG_DTYPE_I64, 0, {0}, &zero};
  OK(g, ccg_constant(g, &zt, &idx));
  OK(g, ccg_gather(g, shp, idx, 0, &dim0));
  OK(g, ccg_unsqueeze(g, dim0, sq, 1, &cat[0]));
  int64_t minus1 = -1;
  ccg_tensor mt = {CCG_DTYPE_I64, 1, {1}, &minus1};
  OK(g, ccg_constant(g, &mt, &cat[1]));
  OK(g, ccg_concat(g, cat, 2, 0, &target));
  OK(g, ccg_reshape(g, u, target, &u));
  int64_t st[] = {0}, en[] = {16}, sa[] = {1};
  OK(g, ccg_slice(g, u, st, en, sa, NULL, 1, &u));
  ccg_value_id ones;
  float one = 1.0f;
  ccg_tensor ot = {CCG_DTYPE_F32, 1, {1}, &one};
  OK(g, ccg_constant_of_shape(g, shp, &ot, &ones));
  float c1 = 1.0f;
  ccg_tensor ct = {CCG_DTYPE_F32, 0, {0}, &c1};
  ccg_value_id cv;
  OK(g, ccg_constant(g, &ct, &cv));
  OK(g, ccg_expand(g, cv, shp, &v));
  OK(g, ccg_add(g, v, ones, &v));
  ccg_value_id emb;
  OK(g, ccg_gather(g, w, ids, 0, &emb));
  ccg_value_id a2 = ccg_test_input(g, "a2", CCG_DTYPE_F32, "[6,8]");
  ccg_value_id gm;
  OK(g, ccg_gemm(g, a2, w, b, 0.5f, 2.0f, false, true, &gm));
  ccg_value_id sd = ccg_test_input(g, "sd", CCG_DTYPE_F32, "[4,3]");
  ccg_value_id su = ccg_test_input(g, "su", CCG_DTYPE_F32, "[2,3]");
  int64_t srows[2] = {1, -1};
  ccg_tensor stt = {CCG_DTYPE_I64, 2, {2, 1}, srows};
  ccg_value_id si, sc;
  OK(g, ccg_constant(g, &stt, &si));
  OK(g, ccg_scatter_nd(g, sd, si, su, "add", &sc));
  ccg_graph_pop_scope(g);
  OK(g, ccg_graph_add_output(g, sc));
  OK(g, ccg_graph_add_output(g, u));
  OK(g, ccg_graph_add_output(g, v));
  OK(g, ccg_graph_add_output(g, s));
  OK(g, ccg_graph_add_output(g, r));
  OK(g, ccg_graph_add_output(g, emb));
  OK(g, ccg_graph_add_output(g, gm));
  OK(g, ccg_graph_add_output(g, cv));
  OK(g, ccg_graph_validate(g));
  return g;
}

/* samples/megatron_mlp.c: column- then row-parallel linear over tp. */
static inline ccg_graph *onnx_test_megatron_mlp(int64_t tp, int64_t hidden) {
  char spec[32];
  snprintf(spec, sizeof spec, "tp=%lld", (long long)tp);
  ccg_graph *g = ccg_test_graph_named("megatron_mlp", spec);
  int64_t ffn = 4 * hidden / tp;
  ccg_shape xs = {2, {ccg_dim_sym("batch"), ccg_dim_num(hidden)}};
  ccg_value_id x, w1, w2, b2, h, y;
  OK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  float *d1 = onnx_test_weights(hidden * ffn, 0.02f);
  float *d2 = onnx_test_weights(ffn * hidden, 0.03f);
  float *db = onnx_test_weights(hidden, 0.01f);
  ccg_tensor t1 = {CCG_DTYPE_F32, 2, {hidden, ffn}, d1};
  ccg_tensor t2 = {CCG_DTYPE_F32, 2, {ffn, hidden}, d2};
  ccg_tensor tb = {CCG_DTYPE_F32, 1, {hidden}, db};
  OK(g, ccg_graph_add_initializer(g, "fc1.weight", &t1, &w1));
  OK(g, ccg_graph_add_initializer(g, "fc2.weight", &t2, &w2));
  OK(g, ccg_graph_add_initializer(g, "fc2.bias", &tb, &b2));
  free(d1);
  free(d2);
  free(db);
  ccg_placement rep = {CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
  ccg_placement col = {CCG_PLACEMENT_SHARD, 1, CCG_REDUCE_SUM};
  ccg_placement row = {CCG_PLACEMENT_SHARD, 0, CCG_REDUCE_SUM};
  ccg_placement partial = {CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_SUM};
  OK(g, ccg_value_set_placements(g, x, &rep, 1));
  OK(g, ccg_value_set_placements(g, w1, &col, 1));
  OK(g, ccg_value_set_placements(g, w2, &row, 1));
  ccg_tag copy_to = {"megatron.copy_to_tensor_model_parallel_region", 0,
                     "{\"group\":\"tp\"}", false};
  ccg_tag reduce_from = {"megatron.reduce_from_tensor_model_parallel_region", 1,
                         NULL, false};
  OK(g, ccg_graph_push_scope(g, "mlp"));
  OK(g, ccg_identity(g, x, &h));
  OK(g, ccg_node_set_tag(g, ccg_value_producer(g, h), &copy_to));
  OK(g, ccg_matmul(g, h, w1, &h));
  OK(g, ccg_value_set_placements(g, h, &col, 1));
  OK(g, ccg_gelu(g, h, "tanh", &h));
  OK(g, ccg_matmul(g, h, w2, &h));
  OK(g, ccg_value_set_placements(g, h, &partial, 1));
  OK(g, ccg_all_reduce(g, h, "tp", CCG_REDUCE_SUM, &h));
  OK(g, ccg_node_set_tag(g, ccg_value_producer(g, h), &reduce_from));
  OK(g, ccg_value_set_placements(g, h, &rep, 1));
  OK(g, ccg_add(g, h, b2, &y));
  ccg_graph_pop_scope(g);
  OK(g, ccg_graph_add_output(g, y));
  OK(g, ccg_graph_validate(g));
  return g;
}

/* Every collective on a dp=2,tp=4 mesh, uneven splits included. */
static inline ccg_graph *onnx_test_collectives(void) {
  ccg_graph *g = ccg_test_graph_named("collectives", "dp=2,tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[16,seq]");
  ccg_value_id v, a, b, c, d;
  int64_t uneven[] = {3, 5, 4, 4};
  OK(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_MAX, &v));
  OK(g, ccg_all_reduce(g, v, "dp,tp", CCG_REDUCE_AVG, &v));
  OK(g, ccg_shard_slice(g, v, "tp", 0, uneven, &a));
  OK(g, ccg_all_gather(g, a, "tp", 0, uneven, &b));
  OK(g, ccg_reduce_scatter(g, b, "tp", 0, CCG_REDUCE_SUM, uneven, &c));
  OK(g, ccg_all_gather(g, c, "tp", 0, uneven, &c));
  OK(g, ccg_all_to_all(g, c, "tp", 0, 1, NULL, NULL, &d));
  OK(g, ccg_broadcast(g, d, "dp", 0, &d));
  OK(g, ccg_reduce(g, d, "dp", 1, CCG_REDUCE_PROD, &d));
  OK(g, ccg_collective_permute(g, d, "tp", 1, true, &d));
  ccg_node_id send;
  OK(g, ccg_send(g, d, "dp", 1, 7, &send));
  ccg_shape rs = ccg_shape_make(2, (const int64_t[]){4, 4});
  ccg_value_id rv;
  OK(g, ccg_recv(g, "dp", -1, 7, CCG_DTYPE_F32, &rs, &rv));
  OK(g, ccg_graph_add_output(g, d));
  OK(g, ccg_graph_add_output(g, rv));
  OK(g, ccg_graph_validate(g));
  return g;
}

/* What the ORT dialect can write: whole-world sum, gather, dim-0 all-to-all
 * on a 1-D mesh of 4 ranks. */
static inline ccg_graph *onnx_test_ort_graph(void) {
  ccg_graph *g = ccg_test_graph_named("ort_collectives", "world=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,16]");
  ccg_value_id v;
  OK(g, ccg_all_reduce(g, x, "world", CCG_REDUCE_SUM, &v));
  OK(g, ccg_all_gather(g, v, "world", 1, NULL, &v));
  OK(g, ccg_all_to_all(g, v, "world", 0, 0, NULL, NULL, &v));
  OK(g, ccg_graph_add_output(g, v));
  OK(g, ccg_graph_validate(g));
  return g;
}

#endif
