/* ONNX export and import: byte-identical round trips (every op, the
 * Megatron MLP, collectives with uneven splits, opsets 17..21, both
 * dialects), metadata (mesh, placements, tags), external data, per-rank
 * export with its all-or-nothing file handling, and the ORT dialect's
 * refusals. Opset-17 models are also written to CCG_ONNX_OUT_DIR for the
 * onnx.checker test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "onnx/internal.h"
#include "onnx_graphs.h"

#ifndef CCG_ONNX_OUT_DIR
#error "CCG_ONNX_OUT_DIR must name the folder for exported models"
#endif

static void *export_buf(ccg_graph *g, int64_t opset, ccg_onnx_dialect d,
                        size_t *size) {
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.opset = opset;
  o.dialect = d;
  void *data = NULL;
  assert_ok(g, ccg_onnx_export_buffer(g, &o, &data, size));
  return data;
}

static ccg_graph *import_buf(const void *data, size_t size) {
  ccg_graph *g = NULL;
  assert_ok(NULL, ccg_onnx_import_buffer(data, size, NULL, NULL, &g));
  return g;
}

static void write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
}

/* Keeps the model for the checker test (opset 17: the installed checker's
 * IR version). */
static void keep_for_checker(const char *name, const void *data, size_t size) {
  mkdir(CCG_ONNX_OUT_DIR, 0755);
  char path[512], tmp[600];
  snprintf(path, sizeof path, "%s/%s.onnx", CCG_ONNX_OUT_DIR, name);
  /* Renamed into place: the checker may be reading the folder while the
   * valgrind run of this test writes it again. */
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  write_file(tmp, data, size);
  assert_int_equal(rename(tmp, path), 0);
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Same dumps, same placements, same tags: the graphs are equal. */
static void assert_graphs_equal(ccg_graph *a, ccg_graph *b) {
  char *da = NULL, *db = NULL;
  assert_ok(a, ccg_graph_dump_string(a, CCG_DUMP_JSON, &da));
  assert_ok(b, ccg_graph_dump_string(b, CCG_DUMP_JSON, &db));

  assert_string_equal(da, db);
  free(da);
  free(db);
  assert_int_equal(ccg_graph_num_nodes(a), ccg_graph_num_nodes(b));
  for (ccg_node_id n = 0; n < ccg_graph_num_nodes(a); n++) {
    const ccg_tag *ta = ccg_node_tag(a, n), *tb = ccg_node_tag(b, n);
    assert_int_equal(ta == NULL, tb == NULL);
    if (!ta)
      continue;
    assert_string_equal(ta->mapping, tb->mapping);
    assert_int_equal(ta->instance, tb->instance);
    assert_int_equal(ta->backward, tb->backward);
    assert_int_equal(ta->params == NULL, tb->params == NULL);
    if (ta->params)
      assert_string_equal(ta->params, tb->params);
  }
  for (ccg_value_id v = 0; v < ccg_graph_num_values(a); v++) {
    ccg_value_id w;
    assert_ok(b, ccg_graph_find_value(b, ccg_value_name(a, v), &w));
    ccg_placement pa[CCG_MAX_MESH_AXES], pb[CCG_MAX_MESH_AXES];
    int na = ccg_value_placements(a, v, pa),
        nb = ccg_value_placements(b, w, pb);
    assert_int_equal(na, nb);
    for (int i = 0; i < na; i++) {
      assert_int_equal(pa[i].kind, pb[i].kind);
      assert_int_equal(pa[i].dim, pb[i].dim);
      assert_int_equal(pa[i].reduce, pb[i].reduce);
    }
  }
}

/* export -> import -> export gives the same bytes and an equal graph. */
static void round_trip(ccg_graph *g, int64_t opset, ccg_onnx_dialect d,
                       const char *keep_as) {
  size_t n1 = 0, n2 = 0;
  void *b1 = export_buf(g, opset, d, &n1);
  ccg_graph *h = import_buf(b1, n1);
  void *b2 = export_buf(h, opset, d, &n2);
  if (n1 != n2 || memcmp(b1, b2, n1) != 0)
    fail_msg("graph '%s' at opset %lld (%s): re-export differs (%zu vs %zu "
             "bytes)",
             ccg_graph_name(g), (long long)opset, ccg_onnx_dialect_name(d), n1,
             n2);
  if (d == CCG_ONNX_DIALECT_CCGRAPH)
    assert_graphs_equal(g, h);
  if (keep_as)
    keep_for_checker(keep_as, b1, n1);
  ccg_graph_free(h);
  free(b1);
  free(b2);
}

static void test_round_trip_ops(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_ops_graph();
  for (int64_t opset = 17; opset <= 21; opset++)
    round_trip(g, opset, CCG_ONNX_DIALECT_CCGRAPH,
               opset == 17 ? "all_ops" : NULL);
  ccg_graph_free(g);
}

static void test_round_trip_megatron(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(4, 16);
  for (int64_t opset = 17; opset <= 21; opset++)
    round_trip(g, opset, CCG_ONNX_DIALECT_CCGRAPH,
               opset == 17 ? "megatron_mlp" : NULL);
  ccg_graph_free(g);
}

/* The forward+backward graph of the tensor-parallel MLP round-trips, and
 * the forward graph read back differentiates to the same backward (the
 * tags and the backward convention travel with the model). */
static void test_round_trip_backward(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(4, 16);
  size_t n = 0;
  void *b = export_buf(g, 17, CCG_ONNX_DIALECT_CCGRAPH, &n);
  ccg_graph *h = import_buf(b, n);
  free(b);
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = ccg_graph_output(g, 0);
  assert_ok(g, ccg_backward(g, &o));
  o.loss = ccg_graph_output(h, 0);
  assert_ok(h, ccg_backward(h, &o));
  assert_graphs_equal(g, h);
  ccg_value_id gw;
  assert_ok(g, ccg_graph_find_value(g, "grad/fc1.weight", &gw));
  round_trip(g, 17, CCG_ONNX_DIALECT_CCGRAPH, "megatron_mlp_backward");
  round_trip(g, 21, CCG_ONNX_DIALECT_CCGRAPH, NULL);
  ccg_graph_free(h);
  ccg_graph_free(g);
}

/* An embedding, LayerNorm and a sequence-parallel Megatron MLP on tp=2,
 * differentiated: the backward's ScatterND, statistics and mapping
 * backwards export, re-import equal and pass onnx.checker. */
static void test_round_trip_backward_sp(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph_named("sp_block_backward", "tp=2");
  float table[40], w1[32], w2[32], gam[4], b1[8];
  for (int i = 0; i < 40; i++)
    table[i] = (float)(i % 7) * 0.1f;
  for (int i = 0; i < 32; i++)
    w1[i] = w2[i] = (float)(i % 5) * 0.05f;
  for (int i = 0; i < 8; i++)
    b1[i] = 0.01f * (float)i;
  for (int i = 0; i < 4; i++)
    gam[i] = 1.0f;
  ccg_tensor tt = {CCG_DTYPE_F32, 2, {10, 4}, table};
  ccg_tensor t1 = {CCG_DTYPE_F32, 2, {4, 4}, w1};
  ccg_tensor t2 = {CCG_DTYPE_F32, 2, {4, 4}, w2};
  ccg_tensor tb = {CCG_DTYPE_F32, 1, {4}, b1};
  ccg_tensor tg = {CCG_DTYPE_F32, 1, {4}, gam};
  ccg_value_id emb, wa, wb, bias, scale, ids, x, y;
  assert_ok(g, ccg_graph_add_initializer(g, "emb", &tt, &emb));
  assert_ok(g, ccg_graph_add_initializer(g, "fc1.weight", &t1, &wa));
  assert_ok(g, ccg_graph_add_initializer(g, "fc2.weight", &t2, &wb));
  assert_ok(g, ccg_graph_add_initializer(g, "fc1.bias", &tb, &bias));
  assert_ok(g, ccg_graph_add_initializer(g, "ln.weight", &tg, &scale));
  ids = ccg_test_input(g, "ids", CCG_DTYPE_I64, "[4]");
  assert_ok(g, ccg_gather(g, emb, ids, 0, &x));
  assert_ok(g, ccg_mark_sequence_parallel_param(g, scale, NULL, &scale));
  assert_ok(g, ccg_layer_norm(g, x, scale, CCG_NONE, -1, 1e-5f, &x));
  ccg_megatron_linear_options o = CCG_MEGATRON_LINEAR_OPTIONS_INIT;
  o.sequence_parallel = true;
  assert_ok(g, ccg_megatron_column_parallel_linear(g, x, wa, bias, &o, &y));
  assert_ok(g, ccg_gelu(g, y, "tanh", &y));
  assert_ok(g, ccg_megatron_row_parallel_linear(g, y, wb, CCG_NONE, &o, &y));
  assert_ok(g, ccg_reduce_mean(g, y, NULL, 0, false, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
  bo.loss = y;
  assert_ok(g, ccg_backward(g, &bo));
  round_trip(g, 17, CCG_ONNX_DIALECT_CCGRAPH, "sp_block_backward");
  ccg_graph_free(g);
}

static void test_round_trip_collectives(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_collectives();
  round_trip(g, 17, CCG_ONNX_DIALECT_CCGRAPH, "collectives");
  round_trip(g, 21, CCG_ONNX_DIALECT_CCGRAPH, NULL);
  ccg_graph_free(g);
}

static void test_round_trip_ort(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_ort_graph();
  round_trip(g, 17, CCG_ONNX_DIALECT_ORT, "ort_collectives");
  /* The ORT model reads back as the same collectives. */
  size_t n = 0;
  void *b = export_buf(g, 17, CCG_ONNX_DIALECT_ORT, &n);
  ccg_graph *h = import_buf(b, n);
  assert_graphs_equal(g, h);
  ccg_graph_free(h);
  free(b);
  ccg_graph_free(g);
}

/* What the model says, read back with the generated protobuf-c code. */
static Onnx__ModelProto *unpack_export(ccg_graph *g, int64_t opset,
                                       ccg_onnx_dialect d) {
  size_t n = 0;
  void *b = export_buf(g, opset, d, &n);
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, b);
  free(b);
  assert_non_null(m);
  return m;
}

static const Onnx__NodeProto *find_node(const Onnx__ModelProto *m,
                                        const char *op) {
  for (size_t i = 0; i < m->graph->n_node; i++)
    if (strcmp(m->graph->node[i]->op_type, op) == 0)
      return m->graph->node[i];
  fail_msg("no %s node", op);
  return NULL;
}

static const char *meta(const Onnx__ModelProto *m, const char *key) {
  for (size_t i = 0; i < m->n_metadata_props; i++)
    if (strcmp(m->metadata_props[i]->key, key) == 0)
      return m->metadata_props[i]->value;
  return NULL;
}

static void test_encoding(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(4, 16);
  Onnx__ModelProto *m = unpack_export(g, 17, CCG_ONNX_DIALECT_CCGRAPH);
  assert_int_equal(m->ir_version, 8);
  assert_string_equal(m->producer_name, "ccgraph");
  assert_string_equal(m->producer_version, ccg_version());
  assert_int_equal(m->n_opset_import, 2);
  assert_string_equal(m->opset_import[0]->domain, "");
  assert_int_equal(m->opset_import[0]->version, 17);
  assert_string_equal(m->opset_import[1]->domain, "ccgraph");
  assert_string_equal(meta(m, "ccgraph.mesh"), "tp=4");
  /* the backward pass's convention for untagged collectives */
  assert_string_equal(meta(m, "ccgraph.backward"), CCG_BACKWARD_CONVENTION);
  assert_string_equal(meta(m, "ccgraph.backward"), "replicated_loss");
  assert_non_null(strstr(meta(m, "ccgraph.tags"),
                         "megatron.reduce_from_tensor_model_parallel_region"));
  assert_non_null(strstr(meta(m, "ccgraph.placements"), "\"P(sum)\""));
  /* Gelu below opset 20: a call of the model-local function. */
  const Onnx__NodeProto *gelu = find_node(m, "GeluTanh");
  assert_string_equal(gelu->domain, "ccgraph");
  assert_int_equal(m->n_functions, 1);
  assert_string_equal(m->functions[0]->name, "GeluTanh");
  /* Symbolic dims as dim_param, weights as raw little-endian data. */
  const Onnx__TensorShapeProto *xs =
      m->graph->input[0]->type->tensor_type->shape;
  assert_string_equal(xs->dim[0]->dim_param, "batch");
  assert_int_equal(xs->dim[1]->dim_value, 16);
  assert_int_equal(m->graph->initializer[0]->raw_data.len, 16 * 16 * 4);
  const Onnx__NodeProto *ar = find_node(m, "AllReduce");
  assert_string_equal(ar->domain, "ccgraph");
  assert_int_equal(ar->n_attribute, 3);
  onnx__model_proto__free_unpacked(m, NULL);

  m = unpack_export(g, 20, CCG_ONNX_DIALECT_CCGRAPH);
  assert_int_equal(m->ir_version, 9);
  gelu = find_node(m, "Gelu");
  assert_null(gelu->domain);
  assert_int_equal(m->n_functions, 0);
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);

  /* Normalized attributes become inputs; Cast.to a type code. */
  g = onnx_test_ops_graph();
  m = unpack_export(g, 18, CCG_ONNX_DIALECT_CCGRAPH);
  const Onnx__NodeProto *rs = find_node(m, "ReduceSum");
  assert_int_equal(rs->n_input, 2);
  const Onnx__NodeProto *rm = find_node(m, "ReduceMean");
  assert_int_equal(rm->n_input, 2);
  const Onnx__NodeProto *cast = find_node(m, "Cast");
  assert_int_equal(cast->attribute[0]->i, 10); /* FLOAT16 */
  onnx__model_proto__free_unpacked(m, NULL);
  m = unpack_export(g, 17, CCG_ONNX_DIALECT_CCGRAPH);
  rm = find_node(m, "ReduceMean");
  assert_int_equal(rm->n_input, 1);
  assert_string_equal(rm->attribute[0]->name, "axes");
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);

  /* ORT dialect: com.microsoft ops with axis and group_size written. */
  g = onnx_test_ort_graph();
  m = unpack_export(g, 17, CCG_ONNX_DIALECT_ORT);
  assert_int_equal(m->n_opset_import, 3);
  assert_string_equal(m->opset_import[2]->domain, "com.microsoft");
  ar = find_node(m, "AllReduce");
  assert_string_equal(ar->domain, "com.microsoft");
  assert_int_equal(ar->n_attribute, 0);
  const Onnx__NodeProto *ag = find_node(m, "AllGather");
  assert_int_equal(ag->n_attribute, 2);
  assert_string_equal(ag->attribute[0]->name, "axis");
  assert_int_equal(ag->attribute[0]->i, 1);
  assert_string_equal(ag->attribute[1]->name, "group_size");
  assert_int_equal(ag->attribute[1]->i, 4);
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);
}

static void test_ort_dialect_refusals(void **state) {
  (void)state;
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.dialect = CCG_ONNX_DIALECT_ORT;
  void *b = NULL;
  size_t n = 0;
  ccg_graph *g = onnx_test_collectives();
  /* The first collective is a max over tp only. */
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_onnx_export_buffer(g, &o, &b, &n),
               "AllReduce_0", "every rank", "ort dialect");
  ccg_graph_free(g);

  g = ccg_test_graph("world=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,4]");
  ccg_value_id v;
  assert_ok(g, ccg_all_reduce(g, x, "world", CCG_REDUCE_MAX, &v));
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_onnx_export_buffer(g, &o, &b, &n),
               "AllReduce_0", "only sums");
  ccg_graph_free(g);

  g = ccg_test_graph("world=2");
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,4]");
  assert_ok(g, ccg_reduce_scatter(g, x, "world", 0, CCG_REDUCE_SUM, NULL, &v));
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_onnx_export_buffer(g, &o, &b, &n),
               "ReduceScatter_0", "com.microsoft has no such collective");
  ccg_graph_free(g);

  g = ccg_test_graph("world=2");
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,4]");
  assert_ok(g, ccg_all_to_all(g, x, "world", 1, 1, NULL, NULL, &v));
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_onnx_export_buffer(g, &o, &b, &n),
               "AllToAll_0", "dim 0");
  ccg_graph_free(g);

  g = ccg_test_graph("world=2");
  ccg_shape us = {2, {ccg_dim_sym("world{1,3}"), ccg_dim_num(4)}};
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &us, &x));
  int64_t uneven[] = {1, 3};
  assert_ok(g, ccg_all_gather(g, x, "world", 0, uneven, &v));
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_onnx_export_buffer(g, &o, &b, &n),
               "AllGather_0", "uneven");
  ccg_graph_free(g);
}

/* An op is written only at an opset where it has the IR's meaning:
 * BitwiseAnd (opset 18 on) is refused at 17 naming the node, and written
 * at 18. */
static void test_op_newer_than_opset(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[2] = {ccg_test_input(g, "a", CCG_DTYPE_I32, "[3]"),
                        ccg_test_input(g, "b", CCG_DTYPE_I32, "[3]")};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "BitwiseAnd";
  d.name = "band";
  d.inputs = in;
  d.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  assert_ok(g, ccg_graph_add_output(g, ccg_node_output(g, n, 0)));
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  void *b = NULL;
  size_t len = 0;
  assert_fails(g, CCG_STATUS_UNSUPPORTED,
               ccg_onnx_export_buffer(g, &o, &b, &len), "node 'band'",
               "BitwiseAnd", "from opset 18");
  o.opset = 18;
  assert_ok(g, ccg_onnx_export_buffer(g, &o, &b, &len));
  ccg_graph *back = NULL;
  assert_ok(NULL, ccg_onnx_import_buffer(b, len, NULL, NULL, &back));
  assert_int_equal(ccg_graph_num_nodes(back), 1);
  free(b);
  ccg_graph_free(back);
  ccg_graph_free(g);
}

static void test_bad_options(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_ort_graph();
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  void *b = NULL;
  size_t n = 0;
  o.opset = 16;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_onnx_export_buffer(g, &o, &b, &n),
               "opset 16");
  o.opset = 25;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_onnx_export_buffer(g, &o, &b, &n),
               "opset 25");
  ccg_onnx_dialect d;
  assert_int_equal(ccg_onnx_dialect_parse("ORT", &d), CCG_STATUS_OK);
  assert_int_equal(d, CCG_ONNX_DIALECT_ORT);
  assert_fails(NULL, CCG_STATUS_PARSE, ccg_onnx_dialect_parse("tf", &d),
               "'tf'");
  ccg_graph_free(g);
}

/* ---- files -------------------------------------------------------------- */

static char tmpdir[256];

static int make_tmpdir(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "%s/onnx_files_XXXXXX", CCG_ONNX_OUT_DIR);
  mkdir(CCG_ONNX_OUT_DIR, 0755);
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static size_t count_files(const char *dir) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
  FILE *p = popen(cmd, "r");
  size_t n = 0;
  assert_int_equal(fscanf(p, "%zu", &n), 1);
  pclose(p);
  return n;
}

static void test_external_data(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(2, 32);
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.external_threshold = 1024; /* the two weights (8 KiB each), not the bias */
  char path[512], data[512];
  snprintf(path, sizeof path, "%s/mlp.onnx", tmpdir);
  snprintf(data, sizeof data, "%s/mlp.onnx.data", tmpdir);
  assert_ok(g, ccg_onnx_export_file(g, path, &o));
  struct stat st;
  assert_int_equal(stat(data, &st), 0);
  assert_int_equal(st.st_size, 2 * 32 * 64 * 4);
  assert_int_equal(count_files(tmpdir), 2); /* no temporary left */
  ccg_graph *h = NULL;
  assert_ok(NULL, ccg_onnx_import_file(path, NULL, &h));
  assert_graphs_equal(g, h);
  for (size_t i = 0; i < ccg_graph_num_initializers(g); i++) {
    const ccg_tensor *a = ccg_value_data(g, ccg_graph_initializer(g, i));
    const ccg_tensor *b = ccg_value_data(h, ccg_graph_initializer(h, i));
    size_t na, nb;
    assert_ok(g, ccg_tensor_nbytes(a, &na));
    assert_ok(h, ccg_tensor_nbytes(b, &nb));
    assert_int_equal(na, nb);
    assert_memory_equal(a->data, b->data, na);
  }
  /* The same model inline is byte-identical after the round trip. */
  size_t n1, n2;
  void *b1 = export_buf(g, 17, CCG_ONNX_DIALECT_CCGRAPH, &n1);
  void *b2 = export_buf(h, 17, CCG_ONNX_DIALECT_CCGRAPH, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(b1, b2, n1);
  free(b1);
  free(b2);
  ccg_graph_free(h);
  /* Export to a folder that does not exist: an error naming the file, and
   * nothing written. */
  snprintf(path, sizeof path, "%s/missing/mlp.onnx", tmpdir);
  assert_fails(g, CCG_STATUS_IO, ccg_onnx_export_file(g, path, &o),
               "missing/mlp.onnx");
  assert_int_equal(count_files(tmpdir), 2);
  /* The checker test also reads a model with external data. */
  char kept[512];
  snprintf(kept, sizeof kept, "%s/megatron_external.onnx", CCG_ONNX_OUT_DIR);
  assert_ok(g, ccg_onnx_export_file(g, kept, &o));
  ccg_graph_free(g);
}

/* Mappings of `path` in this process (/proc/self/maps). */
static int count_mappings(const char *path) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[4096];
  int n = 0;
  size_t len = strlen(path);
  while (fgets(line, sizeof line, f)) {
    size_t l = strcspn(line, "\n");
    line[l] = '\0';
    if (l >= len && strcmp(line + l - len, path) == 0)
      n++;
  }
  fclose(f);
  return n;
}

/* External tensors start 64-byte aligned (an odd-sized f16 weight is
 * padded after), are mapped on import by default and unmapped with the
 * graph, and are read instead when mapping is turned off. */
static void test_external_data_mapped(void **state) {
  (void)state;
  ccg_graph *g;
  assert_ok(NULL, ccg_graph_new(NULL, &g));
  uint16_t h[333];
  float f[300];
  for (int i = 0; i < 333; i++)
    h[i] = (uint16_t)(0x3c00 + i);
  for (int i = 0; i < 300; i++)
    f[i] = 0.5f * (float)i - 7.0f;
  ccg_tensor th = {CCG_DTYPE_F16, 1, {333}, h};
  ccg_tensor tf = {CCG_DTYPE_F32, 2, {30, 10}, f};
  ccg_value_id a, b, y;
  assert_ok(g, ccg_graph_add_initializer(g, "half", &th, &a));
  assert_ok(g, ccg_graph_add_initializer(g, "single", &tf, &b));
  assert_ok(g, ccg_identity(g, b, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_value_id c;
  assert_ok(g, ccg_identity(g, a, &c));
  assert_ok(g, ccg_graph_add_output(g, c));
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.external_threshold = 16;
  char path[512], data[512];
  snprintf(path, sizeof path, "%s/aligned.onnx", tmpdir);
  snprintf(data, sizeof data, "%s/aligned.onnx.data", tmpdir);
  assert_ok(g, ccg_onnx_export_file(g, path, &o));
  struct stat st;
  assert_int_equal(stat(data, &st), 0);
  /* 666 bytes of f16, padded to 704, then 1200 bytes of f32. */
  assert_int_equal(st.st_size, 704 + 1200);

  for (int map = 1; map >= 0; map--) {
    ccg_onnx_import_options io = CCG_ONNX_IMPORT_OPTIONS_INIT;
    io.map_external_data = map;
    ccg_graph *back = NULL;
    assert_ok(NULL, ccg_onnx_import_file(path, &io, &back));
    assert_int_equal(count_mappings(data), map ? 1 : 0);
    const ccg_tensor *bh = ccg_value_data(back, ccg_graph_initializer(back, 0));
    const ccg_tensor *bf = ccg_value_data(back, ccg_graph_initializer(back, 1));
    assert_int_equal(((uintptr_t)bh->data) % 64, 0);
    assert_int_equal(((uintptr_t)bf->data) % 64, 0);
    assert_memory_equal(bh->data, h, sizeof h);
    assert_memory_equal(bf->data, f, sizeof f);
    /* Mapped or read, the round trip gives the same bytes. */
    size_t n1, n2;
    void *b1 = export_buf(g, 17, CCG_ONNX_DIALECT_CCGRAPH, &n1);
    void *b2 = export_buf(back, 17, CCG_ONNX_DIALECT_CCGRAPH, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(b1, b2, n1);
    free(b1);
    free(b2);
    ccg_graph_free(back);
    assert_int_equal(count_mappings(data), 0);
  }
  ccg_graph_free(g);
}

/* Rank r's shard of fc1.weight: every element r + 1. */
static void set_rank_shards(ccg_graph *g, int64_t world) {
  ccg_value_id w;
  assert_ok(g, ccg_graph_find_value(g, "fc1.weight", &w));
  const ccg_tensor *c = ccg_value_data(g, w);
  size_t nb;
  assert_ok(g, ccg_tensor_nbytes(c, &nb));
  float *d = malloc(nb);
  for (int64_t r = 0; r < world; r++) {
    if (r == 1)
      continue; /* rank 1 keeps the common data */
    for (size_t i = 0; i < nb / 4; i++)
      d[i] = (float)(r + 1);
    ccg_tensor t = *c;
    t.data = d;
    assert_ok(g, ccg_graph_set_initializer_rank_data(g, w, r, &t));
  }
  free(d);
}

static void test_export_ranks(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(4, 16);
  set_rank_shards(g, 4);
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.external_threshold = 512;
  assert_ok(g, ccg_onnx_export_ranks(g, tmpdir, "mlp", &o));
  assert_int_equal(count_files(tmpdir), 8); /* 4 models + 4 data files */
  ccg_value_id w;
  assert_ok(g, ccg_graph_find_value(g, "fc1.weight", &w));
  const float *common = ccg_value_data(g, w)->data;
  for (int r = 0; r < 4; r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/mlp.rank%d.onnx", tmpdir, r);
    ccg_graph *h = NULL;
    assert_ok(NULL, ccg_onnx_import_file(path, NULL, &h));
    ccg_value_id hw;
    assert_ok(h, ccg_graph_find_value(h, "fc1.weight", &hw));
    const float *d = ccg_value_data(h, hw)->data;
    float want = r == 1 ? common[5] : (float)(r + 1);
    assert_float_equal(d[5], want, 0.0f);
    assert_int_equal(ccg_graph_num_nodes(h), ccg_graph_num_nodes(g));
    ccg_graph_free(h);
  }
  ccg_graph_free(g);
}

/* The model built once and packed in parts for every rank (its nodes,
 * value infos and metadata packed as they are made) gives the bytes of
 * each rank's model built and packed whole by protobuf-c, at opsets 17, 21
 * and 23 (sharding annotations on the nodes). */
static void test_export_rank_buffers(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(4, 16);
  set_rank_shards(g, 4);
  for (int k = 0; k < 3; k++) {
    ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
    o.opset = k == 2 ? 23 : k ? 21 : 17;
    o.dialect = k ? CCG_ONNX_DIALECT_CCGRAPH : CCG_ONNX_DIALECT_ORT;
    void *data[4];
    size_t sizes[4];
    assert_ok(g, ccg_onnx_export_rank_buffers(g, &o, data, sizes));
    for (int r = 0; r < 4; r++) {
      ccg_arena a;
      ccg__arena_init(&a, NULL, 0);
      Onnx__ModelProto *m = NULL;
      assert_ok(g, ccg__onnx_build_model(g, &o, r, &a, NULL, &m));
      /* annotations at opset 23: some node carries a sharding spec */
      size_t annotated = 0;
      for (size_t i = 0; i < m->graph->n_node; i++)
        annotated += m->graph->node[i]->n_device_configurations;
      assert_int_equal(m->n_configuration, k == 2);
      assert_true(k == 2 ? annotated > 0 : annotated == 0);
      size_t n = onnx__model_proto__get_packed_size(m);
      uint8_t *whole = malloc(n);
      assert_int_equal(onnx__model_proto__pack(m, whole), n);
      assert_int_equal(sizes[r], n);
      assert_memory_equal(data[r], whole, n);
      void *one = NULL;
      size_t one_size = 0;
      o.rank = r;
      assert_ok(g, ccg_onnx_export_buffer(g, &o, &one, &one_size));
      o.rank = -1;
      assert_int_equal(one_size, n);
      assert_memory_equal(one, whole, n);
      free(one);
      free(whole);
      ccg__arena_free(&a);
    }
    /* ranks 0 and 2 hold different fc1.weight data: different models */
    assert_true(sizes[0] == sizes[2] &&
                memcmp(data[0], data[2], sizes[0]) != 0);
    for (int r = 0; r < 4; r++)
      free(data[r]);
  }
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_onnx_export_rank_buffers(g, NULL, NULL, NULL),
               "no output buffers");
  ccg_graph_free(g);
}

/* Rank models written to files go through a write buffer: each file holds
 * the bytes of its model packed in memory, also past the buffer's size
 * (2 MB models). */
static void test_export_ranks_files_equal_buffers(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(4, 512);
  set_rank_shards(g, 4);
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.external_threshold = SIZE_MAX;
  void *data[4];
  size_t sizes[4];
  assert_ok(g, ccg_onnx_export_rank_buffers(g, &o, data, sizes));
  assert_ok(g, ccg_onnx_export_ranks(g, tmpdir, "big", &o));
  assert_int_equal(count_files(tmpdir), 4);
  for (int r = 0; r < 4; r++) {
    char path[600];
    snprintf(path, sizeof path, "%s/big.rank%d.onnx", tmpdir, r);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_true(sizes[r] > CCG__ONNX_WRITE_BUF);
    uint8_t *got = malloc(sizes[r] + 1);
    assert_non_null(got);
    assert_int_equal(fread(got, 1, sizes[r] + 1, f), sizes[r]);
    fclose(f);
    assert_memory_equal(got, data[r], sizes[r]);
    free(got);
    free(data[r]);
    assert_int_equal(unlink(path), 0);
  }
  ccg_graph_free(g);
}

/* A write that fails part-way through a model (here the file size limit,
 * as a full disk would) is an IO error naming the file, even where the
 * write buffer only meets it when flushing, and nothing is left behind. */
static void test_export_write_failure(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(4, 512);
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.external_threshold = SIZE_MAX;
  struct rlimit old, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 1536 * 1024; /* past one write buffer, short of a model */
  assert_true(old.rlim_cur == RLIM_INFINITY || old.rlim_cur > lim.rlim_cur);
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ccg_status st = ccg_onnx_export_ranks(g, tmpdir, "big", &o);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, prev);
  assert_int_equal(st, CCG_STATUS_IO);
  const char *msg = ccg_last_error(g);
  if (!strstr(msg, "big.rank0.onnx") || !strstr(msg, strerror(EFBIG)))
    fail_msg("message: %s", msg);
  assert_int_equal(count_files(tmpdir), 0);
  ccg_graph_free(g);
}

/* Large inline weights are read from the model's bytes, not from
 * protobuf-c's decoding (strip.c): a file and a buffer import give the same
 * weights, and the model exported again gives the same bytes. */
static void test_import_large_inline_weights(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,64]"), y, w, b;
  static float wd[64 * 96], bd[96];
  for (size_t i = 0; i < 64 * 96; i++)
    wd[i] = (float)i * 0.25f;
  for (size_t i = 0; i < 96; i++)
    bd[i] = -(float)i;
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {64, 96}, wd}; /* 24 KiB: taken out */
  ccg_tensor bt = {CCG_DTYPE_F32, 1, {96}, bd};     /* small: decoded */
  assert_ok(g, ccg_graph_add_initializer(g, "w", &wt, &w));
  assert_ok(g, ccg_graph_add_initializer(g, "b", &bt, &b));
  assert_ok(g, ccg_matmul(g, x, w, &y));
  assert_ok(g, ccg_add(g, y, b, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  void *a = NULL;
  size_t na = 0;
  assert_ok(g, ccg_onnx_export_buffer(g, NULL, &a, &na));
  char path[600];
  snprintf(path, sizeof path, "%s/inline.onnx", tmpdir);
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.external_threshold = SIZE_MAX;
  assert_ok(g, ccg_onnx_export_file(g, path, &o));
  for (int from_file = 0; from_file < 2; from_file++) {
    ccg_graph *h = NULL;
    if (from_file)
      assert_ok(NULL, ccg_onnx_import_file(path, NULL, &h));
    else
      assert_ok(NULL, ccg_onnx_import_buffer(a, na, NULL, NULL, &h));
    ccg_value_id hw, hb;
    assert_ok(h, ccg_graph_find_value(h, "w", &hw));
    assert_ok(h, ccg_graph_find_value(h, "b", &hb));
    assert_memory_equal(ccg_value_data(h, hw)->data, wd, sizeof wd);
    assert_memory_equal(ccg_value_data(h, hb)->data, bd, sizeof bd);
    void *again = NULL;
    size_t n_again = 0;
    assert_ok(h, ccg_onnx_export_buffer(h, NULL, &again, &n_again));
    assert_int_equal(n_again, na);
    assert_memory_equal(again, a, na);
    free(again);
    ccg_graph_free(h);
  }
  assert_int_equal(unlink(path), 0);
  free(a);
  ccg_graph_free(g);
}

static void test_export_ranks_failure_leaves_nothing(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(4, 16);
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.external_threshold = 512;
  /* Rank 2's final name is taken by a folder: its rename fails after ranks
   * 0 and 1 were renamed, and everything goes. */
  char blocker[512];
  snprintf(blocker, sizeof blocker, "%s/mlp.rank2.onnx", tmpdir);
  assert_int_equal(mkdir(blocker, 0755), 0);
  assert_fails(g, CCG_STATUS_IO, ccg_onnx_export_ranks(g, tmpdir, "mlp", &o),
               "mlp.rank2.onnx");
  assert_int_equal(count_files(tmpdir), 1); /* only the blocking folder */
  assert_int_equal(rmdir(blocker), 0);
  /* A folder whose parent does not exist: nothing is made. */
  char missing[512];
  snprintf(missing, sizeof missing, "%s/missing/deeper", tmpdir);
  assert_fails(g, CCG_STATUS_IO, ccg_onnx_export_ranks(g, missing, "mlp", &o),
               "cannot create folder", "missing/deeper");
  assert_int_equal(count_files(tmpdir), 0);
  /* A missing folder is made, and holds every rank's model. */
  snprintf(missing, sizeof missing, "%s/made", tmpdir);
  assert_ok(g, ccg_onnx_export_ranks(g, missing, "mlp", &o));
  assert_int_equal(count_files(missing), 8); /* 4 models, 4 data files */
  for (int r = 0; r < 4; r++) {
    char f[600];
    snprintf(f, sizeof f, "%s/mlp.rank%d.onnx", missing, r);
    assert_int_equal(unlink(f), 0);
    snprintf(f, sizeof f, "%s/mlp.rank%d.onnx.data", missing, r);
    assert_int_equal(unlink(f), 0);
  }
  assert_int_equal(rmdir(missing), 0);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_onnx_export_ranks(g, tmpdir, "a/b", &o), "a/b");
  ccg_graph_free(g);
}

/* One graph per rank, all or nothing: an older program in the folder keeps
 * every file, unchanged, when a later rank cannot be written (an AllReduce
 * of max in the ORT dialect), and the failing rank's message reaches the
 * first graph. */
static void test_export_rank_graphs_all_or_nothing(void **state) {
  (void)state;
  ccg_graph *ok = onnx_test_megatron_mlp(2, 16);
  ccg_graph *bad = onnx_test_megatron_mlp(2, 16);
  assert_ok(ok, ccg_onnx_export_ranks(ok, tmpdir, "prog", NULL));
  char path[600];
  snprintf(path, sizeof path, "%s/prog.rank0.onnx", tmpdir);
  struct stat before, after;
  assert_int_equal(stat(path, &before), 0);
  ccg_value_id x = ccg_test_input(bad, "extra", CCG_DTYPE_F32, "[4]"), y;
  assert_ok(bad, ccg_all_reduce(bad, x, "tp", CCG_REDUCE_MAX, &y));
  assert_ok(bad, ccg_graph_add_output(bad, y));
  ccg_graph *gs[2] = {ok, bad};
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.dialect = CCG_ONNX_DIALECT_ORT;
  assert_fails(ok, CCG_STATUS_UNSUPPORTED,
               ccg_onnx_export_rank_graphs(gs, 2, tmpdir, "prog", &o),
               "prog.rank1.onnx", "com.microsoft AllReduce only sums");
  assert_int_equal(stat(path, &after), 0);
  assert_true(after.st_mtime == before.st_mtime &&
              after.st_size == before.st_size && after.st_ino == before.st_ino);
  assert_int_equal(count_files(tmpdir), 2); /* the older two, nothing else */
  /* both written when both can be */
  assert_ok(ok, ccg_onnx_export_rank_graphs(gs, 2, tmpdir, "prog", NULL));
  snprintf(path, sizeof path, "%s/prog.rank1.onnx", tmpdir);
  ccg_graph *back = NULL;
  assert_ok(NULL, ccg_onnx_import_file(path, NULL, &back));
  ccg_value_id e;
  assert_ok(back, ccg_graph_find_value(back, "extra", &e)); /* rank 1's own */
  ccg_graph_free(back);
  assert_int_equal(ccg_onnx_export_rank_graphs(NULL, 0, tmpdir, "p", NULL),
                   CCG_STATUS_INVALID_ARG);
  for (int r = 0; r < 2; r++) {
    snprintf(path, sizeof path, "%s/prog.rank%d.onnx", tmpdir, r);
    unlink(path);
  }
  ccg_graph_free(ok);
  ccg_graph_free(bad);
}

/* The rank models of the samples' graphs, kept for the checker. */
static void test_rank_models_for_checker(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(2, 16);
  set_rank_shards(g, 2);
  assert_ok(g,
            ccg_onnx_export_ranks(g, CCG_ONNX_OUT_DIR, "megatron_tp2", NULL));
  ccg_graph_free(g);
  g = onnx_test_ort_graph();
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.dialect = CCG_ONNX_DIALECT_ORT;
  assert_ok(g, ccg_onnx_export_ranks(g, CCG_ONNX_OUT_DIR, "ort_world4", &o));
  char path[512];
  snprintf(path, sizeof path, "%s/ort_world4.rank3.onnx", CCG_ONNX_OUT_DIR);
  assert_true(file_exists(path));
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_ops),
      cmocka_unit_test(test_round_trip_megatron),
      cmocka_unit_test(test_round_trip_backward),
      cmocka_unit_test(test_round_trip_backward_sp),
      cmocka_unit_test(test_round_trip_collectives),
      cmocka_unit_test(test_round_trip_ort),
      cmocka_unit_test(test_encoding),
      cmocka_unit_test(test_ort_dialect_refusals),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_op_newer_than_opset),
      cmocka_unit_test_setup_teardown(test_external_data_mapped, make_tmpdir,
                                      remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_external_data, make_tmpdir,
                                      remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_export_ranks, make_tmpdir,
                                      remove_tmpdir),
      cmocka_unit_test(test_export_rank_buffers),
      cmocka_unit_test_setup_teardown(test_export_ranks_files_equal_buffers,
                                      make_tmpdir, remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_export_write_failure, make_tmpdir,
                                      remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_import_large_inline_weights,
                                      make_tmpdir, remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_export_ranks_failure_leaves_nothing,
                                      make_tmpdir, remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_export_rank_graphs_all_or_nothing,
                                      make_tmpdir, remove_tmpdir),
      cmocka_unit_test(test_rank_models_for_checker),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
