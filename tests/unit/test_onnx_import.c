/* ONNX import of models made here with the generated protobuf-c code: the
 * opset conversions (axes/split inputs from initializers and Constant nodes,
 * Split-18 num_outputs, Constant value_* forms, SplitToSequence read by
 * SequenceAt as one Split), ONNX Runtime's per-rank
 * com.microsoft collectives, and every semantic check with the message it
 * gives (unknown ops, run-time axes, dims, raw_data lengths, external data
 * confinement, non-ONNX input). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "test_util.h"
#include "exec_test_util.h"

/* A model under construction: fixed-size tables are plenty for tests. */
typedef struct mk {
  Onnx__ModelProto m;
  Onnx__GraphProto g;
  Onnx__OperatorSetIdProto os[3], *osp[3];
  Onnx__ValueInfoProto in[4], *inp[4], out[4], *outp[4];
  Onnx__TypeProto tp[8];
  Onnx__TypeProto__Tensor tt[8];
  Onnx__TensorShapeProto sp[8];
  Onnx__TensorShapeProto__Dimension dims[8][4], *dimp[8][4];
  Onnx__NodeProto nodes[8], *nodep[8];
  Onnx__AttributeProto attrs[16], *attrp[16];
  size_t n_attrs;
  Onnx__TensorProto inits[8], *initp[8];
  Onnx__StringStringEntryProto kv[8], *kvp[8];
  size_t n_types;
  char *names[8][4];
} mk;

static mk *mk_new(int64_t opset) {
  mk *k = calloc(1, sizeof *k);
  onnx__model_proto__init(&k->m);
  onnx__graph_proto__init(&k->g);
  k->m.has_ir_version = 1;
  k->m.ir_version = 8;
  k->m.graph = &k->g;
  k->g.name = "imported";
  onnx__operator_set_id_proto__init(&k->os[0]);
  k->os[0].domain = "";
  k->os[0].has_version = 1;
  k->os[0].version = opset;
  k->osp[0] = &k->os[0];
  k->m.opset_import = k->osp;
  k->m.n_opset_import = 1;
  k->g.input = k->inp;
  k->g.output = k->outp;
  k->g.node = k->nodep;
  k->g.initializer = k->initp;
  k->m.metadata_props = k->kvp;
  return k;
}

static void mk_opset(mk *k, const char *domain, int64_t v) {
  size_t i = k->m.n_opset_import++;
  onnx__operator_set_id_proto__init(&k->os[i]);
  k->os[i].domain = (char *)domain;
  k->os[i].has_version = 1;
  k->os[i].version = v;
  k->osp[i] = &k->os[i];
}

static Onnx__ValueInfoProto *mk_value(mk *k, Onnx__ValueInfoProto *vi,
                                      const char *name, int32_t type, int rank,
                                      const int64_t *dims) {
  size_t t = k->n_types++;
  onnx__value_info_proto__init(vi);
  onnx__type_proto__init(&k->tp[t]);
  onnx__type_proto__tensor__init(&k->tt[t]);
  onnx__tensor_shape_proto__init(&k->sp[t]);
  for (int i = 0; i < rank; i++) {
    onnx__tensor_shape_proto__dimension__init(&k->dims[t][i]);
    k->dims[t][i].value_case =
        ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    k->dims[t][i].dim_value = dims[i];
    k->dimp[t][i] = &k->dims[t][i];
  }
  k->sp[t].dim = k->dimp[t];
  k->sp[t].n_dim = (size_t)rank;
  k->tt[t].has_elem_type = 1;
  k->tt[t].elem_type = type;
  k->tt[t].shape = &k->sp[t];
  k->tp[t].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  k->tp[t].tensor_type = &k->tt[t];
  vi->name = (char *)name;
  vi->type = &k->tp[t];
  return vi;
}

static void mk_input(mk *k, const char *name, int rank, const int64_t *dims) {
  size_t i = k->g.n_input++;
  k->inp[i] = mk_value(k, &k->in[i], name, 1, rank, dims);
}

static void mk_output(mk *k, const char *name) {
  size_t i = k->g.n_output++;
  onnx__value_info_proto__init(&k->out[i]);
  k->out[i].name = (char *)name;
  k->outp[i] = &k->out[i];
}

static Onnx__NodeProto *mk_node(mk *k, const char *op, const char *name,
                                const char *in0, const char *in1,
                                const char *out0, const char *out1) {
  size_t i = k->g.n_node++;
  Onnx__NodeProto *n = &k->nodes[i];
  onnx__node_proto__init(n);
  n->op_type = (char *)op;
  n->name = (char *)name;
  k->names[i][0] = (char *)in0;
  k->names[i][1] = (char *)in1;
  k->names[i][2] = (char *)out0;
  k->names[i][3] = (char *)out1;
  n->input = &k->names[i][0];
  n->n_input = in1 ? 2 : in0 ? 1 : 0;
  n->output = &k->names[i][2];
  n->n_output = out1 ? 2 : 1;
  n->attribute = &k->attrp[k->n_attrs];
  k->nodep[i] = n;
  return n;
}

/* Attributes of the node made last. */
static Onnx__AttributeProto *mk_attr(mk *k, Onnx__NodeProto *n,
                                     const char *name, int type) {
  Onnx__AttributeProto *a = &k->attrs[k->n_attrs];
  onnx__attribute_proto__init(a);
  a->name = (char *)name;
  a->has_type = 1;
  a->type = type;
  k->attrp[k->n_attrs++] = a;
  n->n_attribute++;
  return a;
}

static Onnx__TensorProto *mk_init(mk *k, const char *name, int32_t type,
                                  int rank, const int64_t *dims,
                                  const void *raw, size_t len) {
  size_t i = k->g.n_initializer++;
  Onnx__TensorProto *t = &k->inits[i];
  onnx__tensor_proto__init(t);
  t->name = (char *)name;
  t->has_data_type = 1;
  t->data_type = type;
  t->dims = (int64_t *)dims;
  t->n_dims = (size_t)rank;
  t->has_raw_data = 1;
  t->raw_data.data = (uint8_t *)raw;
  t->raw_data.len = len;
  k->initp[i] = t;
  return t;
}

static void mk_meta(mk *k, const char *key, const char *value) {
  size_t i = k->m.n_metadata_props++;
  onnx__string_string_entry_proto__init(&k->kv[i]);
  k->kv[i].key = (char *)key;
  k->kv[i].value = (char *)value;
  k->kvp[i] = &k->kv[i];
}

/* The ReduceMean "mean" got its axes constant as the attribute axes = [1],
 * and the value `out` has the shape `shape`. */
static void expect_axes_1(ccg_graph *g, const char *out, const char *shape) {
  ccg_node_id n;
  assert_ok(g, ccg_graph_find_node(g, "mean", &n));
  const ccg_attr *ax = ccg_node_attr(g, n, "axes");
  assert_non_null(ax);
  assert_int_equal(ax->n, 1);
  assert_int_equal(ax->ints[0], 1);
  ccg_value_id v;
  assert_ok(g, ccg_graph_find_value(g, out, &v));
  assert_string_equal(ccg_test_shape(g, v), shape);
}

/* Packs, frees the builder and imports (base_dir for external data). */
static ccg_status mk_import(mk *k, const char *base_dir, ccg_graph **g) {
  size_t n = onnx__model_proto__get_packed_size(&k->m);
  uint8_t *buf = malloc(n + 1);
  onnx__model_proto__pack(&k->m, buf);
  free(k);
  *g = NULL;
  ccg_status st = ccg_onnx_import_buffer(buf, n, base_dir, NULL, g);
  free(buf);
  return st;
}

static const int64_t d23[] = {2, 3};

static void test_axes_inputs_become_attributes(void **state) {
  (void)state;
  /* opset 18: ReduceMean axes from an initializer, Unsqueeze axes from a
   * Constant node; both constants feed nothing else and are not kept. */
  mk *k = mk_new(18);
  mk_input(k, "x", 2, d23);
  static const int64_t one[] = {1}, axes[] = {1};
  mk_init(k, "axes_init", 7, 1, one, axes, sizeof axes);
  mk_node(k, "ReduceMean", "mean", "x", "axes_init", "m", NULL);
  Onnx__NodeProto *c = mk_node(k, "Constant", "c", NULL, NULL, "c_out", NULL);
  Onnx__AttributeProto *a =
      mk_attr(k, c, "value_ints", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  static int64_t zero[] = {0};
  a->ints = zero;
  a->n_ints = 1;
  mk_node(k, "Unsqueeze", "unsq", "m", "c_out", "y", NULL);
  mk_output(k, "y");
  ccg_graph *g;
  assert_ok(NULL, mk_import(k, NULL, &g));
  assert_int_equal(ccg_graph_num_initializers(g), 0);
  assert_int_equal(ccg_graph_num_nodes(g), 2);
  expect_axes_1(g, "y", "[1,2,1]");
  ccg_graph_free(g);
}

/* An axes constant that also feeds a data input is kept, and initializers
 * listed as graph inputs too (IR < 4 style) are read as initializers,
 * whether they feed an axes input or not. */
static void test_axes_constant_kept(void **state) {
  (void)state;
  mk *k = mk_new(18);
  mk_input(k, "x", 2, d23);
  static const int64_t one[] = {1}, axes[] = {1};
  mk_input(k, "axes_init", 1, one);
  k->in[1].type->tensor_type->elem_type = 7;
  mk_input(k, "w", 1, one);
  k->in[2].type->tensor_type->elem_type = 7;
  mk_init(k, "axes_init", 7, 1, one, axes, sizeof axes);
  mk_init(k, "w", 7, 1, one, axes, sizeof axes);
  mk_node(k, "ReduceMean", "mean", "x", "axes_init", "m", NULL);
  mk_node(k, "Identity", "id", "axes_init", NULL, "a", NULL);
  mk_node(k, "Identity", "id_w", "w", NULL, "b", NULL);
  mk_output(k, "m");
  mk_output(k, "a");
  mk_output(k, "b");
  ccg_graph *g;
  assert_ok(NULL, mk_import(k, NULL, &g));
  assert_int_equal(ccg_graph_num_inputs(g), 1);
  assert_int_equal(ccg_graph_num_initializers(g), 2);
  assert_int_equal(ccg_graph_num_nodes(g), 3);
  expect_axes_1(g, "m", "[2,1]");
  ccg_graph_free(g);
}

/* An axes input computed by the graph imports where its contents are
 * known (here Shape(x, end=1) = [2]); a graph input is refused naming the
 * node and input. */
static void test_computed_axes_known(void **state) {
  (void)state;
  mk *k = mk_new(18);
  mk_input(k, "x", 2, d23);
  Onnx__NodeProto *s = mk_node(k, "Shape", "shape", "x", NULL, "s", NULL);
  Onnx__AttributeProto *a =
      mk_attr(k, s, "end", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = 1;
  mk_node(k, "Unsqueeze", "unsq", "x", "s", "y", NULL);
  mk_output(k, "y");
  ccg_graph *g;
  assert_ok(NULL, mk_import(k, NULL, &g));
  ccg_value_id y;
  assert_ok(g, ccg_graph_find_value(g, "y", &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,3,1]");
  ccg_graph_free(g);

  k = mk_new(18);
  mk_input(k, "x", 2, d23);
  static const int64_t one[] = {1};
  mk_input(k, "ax", 1, one);
  k->in[1].type->tensor_type->elem_type = 7;
  mk_node(k, "Unsqueeze", "unsq", "x", "ax", "y", NULL);
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "node 'unsq'", "input 'ax'", "computed at run time");
}

/* Node metadata (torch's dynamo module paths) is kept on import and
 * written back from IR 10 (opset 21) on; older models leave it out. */
static void test_node_metadata(void **state) {
  (void)state;
  mk *k = mk_new(18);
  mk_input(k, "x", 2, d23);
  Onnx__NodeProto *n = mk_node(k, "Relu", "node_Relu_0", "x", NULL, "y", NULL);
  static Onnx__StringStringEntryProto kv, *kvp[1];
  onnx__string_string_entry_proto__init(&kv);
  kv.key = "pkg.torch.onnx.name_scopes";
  kv.value = "['', 'act', 'relu']";
  kvp[0] = &kv;
  n->metadata_props = kvp;
  n->n_metadata_props = 1;
  mk_output(k, "y");
  ccg_graph *g;
  assert_ok(NULL, mk_import(k, NULL, &g));
  ccg_node_id id;
  assert_ok(g, ccg_graph_find_node(g, "node_Relu_0", &id));
  assert_string_equal(ccg_node_meta(g, id, "pkg.torch.onnx.name_scopes"),
                      "['', 'act', 'relu']");
  for (int opset = 17; opset <= 21; opset += 4) {
    ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
    o.opset = opset;
    void *b = NULL;
    size_t len = 0;
    assert_ok(g, ccg_onnx_export_buffer(g, &o, &b, &len));
    ccg_graph *back = NULL;
    assert_ok(NULL, ccg_onnx_import_buffer(b, len, NULL, NULL, &back));
    assert_ok(back, ccg_graph_find_node(back, "node_Relu_0", &id));
    const char *v = ccg_node_meta(back, id, "pkg.torch.onnx.name_scopes");
    if (opset >= 21)
      assert_string_equal(v, "['', 'act', 'relu']");
    else
      assert_null(v);
    free(b);
    ccg_graph_free(back);
  }
  ccg_graph_free(g);
}

static void test_split_num_outputs(void **state) {
  (void)state;
  /* Split-18 with num_outputs = 2 over a dim of 3: ONNX gives [2, 1]. */
  mk *k = mk_new(18);
  static const int64_t d3[] = {3, 4};
  mk_input(k, "x", 2, d3);
  Onnx__NodeProto *s = mk_node(k, "Split", "split", "x", NULL, "a", "b");
  Onnx__AttributeProto *a =
      mk_attr(k, s, "num_outputs", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = 2;
  mk_output(k, "a");
  mk_output(k, "b");
  ccg_graph *g;
  assert_ok(NULL, mk_import(k, NULL, &g));
  ccg_value_id v;
  assert_ok(g, ccg_graph_find_value(g, "a", &v));
  assert_string_equal(ccg_test_shape(g, v), "[2,4]");
  assert_ok(g, ccg_graph_find_value(g, "b", &v));
  assert_string_equal(ccg_test_shape(g, v), "[1,4]");
  ccg_graph_free(g);
}

/* torch's split as dynamo writes it: SplitToSequence read by SequenceAt at
 * constant positions (scalar int64 initializers). */
static const int64_t pos[] = {0, 1, 2, -1, -2};

static void mk_seq_at(mk *k, const char *name, const char *pname, size_t p,
                      const char *out) {
  mk_init(k, pname, 7, 0, NULL, &pos[p], sizeof pos[p]);
  mk_node(k, "SequenceAt", name, "seq", pname, out, NULL);
}

static Onnx__NodeProto *mk_split_seq(mk *k, const char *split, int64_t axis) {
  Onnx__NodeProto *n =
      mk_node(k, "SplitToSequence", "sts", "x", split, "seq", NULL);
  Onnx__AttributeProto *a =
      mk_attr(k, n, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = axis;
  return n;
}

static void assert_shape(ccg_graph *g, const char *name, const char *shape) {
  ccg_value_id v;
  assert_ok(g, ccg_graph_find_value(g, name, &v));
  assert_string_equal(ccg_test_shape(g, v), shape);
}

static void test_split_to_sequence(void **state) {
  (void)state;
  /* Chunks of 2 over 6: three equal parts, one Split, no sequence left. */
  mk *k = mk_new(18);
  static const int64_t d26[] = {2, 6}, two = 2;
  mk_input(k, "x", 2, d26);
  mk_init(k, "chunk", 7, 0, NULL, &two, sizeof two);
  mk_split_seq(k, "chunk", 1);
  mk_seq_at(k, "at0", "p0", 0, "a");
  mk_seq_at(k, "at1", "p1", 1, "b");
  mk_seq_at(k, "at2", "p2", 2, "c");
  mk_output(k, "a");
  mk_output(k, "b");
  mk_output(k, "c");
  ccg_graph *g;
  assert_ok(NULL, mk_import(k, NULL, &g));
  assert_shape(g, "a", "[2,2]");
  assert_shape(g, "b", "[2,2]");
  assert_shape(g, "c", "[2,2]");
  assert_int_equal(ccg_graph_num_nodes(g), 1);
  assert_int_equal(ccg_node_op(g, 0), CCG_OP_SPLIT);
  assert_string_equal(ccg_node_name(g, 0), "sts");
  assert_int_equal(ccg_graph_num_initializers(g), 0);
  ccg_graph_free(g);

  /* Chunks of 2 over 5: [2, 2, 1]; -1 is the short last one, the middle
   * part is read by no one. */
  k = mk_new(18);
  static const int64_t d52[] = {5, 2};
  mk_input(k, "x", 2, d52);
  mk_init(k, "chunk", 7, 0, NULL, &two, sizeof two);
  mk_split_seq(k, "chunk", -2);
  mk_seq_at(k, "last", "pl", 3, "z");
  mk_seq_at(k, "first", "pf", 0, "a");
  mk_output(k, "a");
  mk_output(k, "z");
  assert_ok(NULL, mk_import(k, NULL, &g));
  assert_shape(g, "a", "[2,2]");
  assert_shape(g, "z", "[1,2]");
  assert_int_equal(ccg_node_num_outputs(g, 0), 3);
  static const float x52[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  float a4[4], z2[2];
  ccg_exec_tensor in = XT_F32("x", x52, 5, 2);
  ccg_exec_tensor out[] = {xt_out("a", a4, sizeof a4),
                           xt_out("z", z2, sizeof z2)};
  assert_ok(g, xt_run1(g, &in, 1, out, 2));
  xt_close(a4, (const float[]){0, 1, 2, 3}, 4, 0, 0, "a");
  xt_close(z2, (const float[]){8, 9}, 2, 0, 0, "z");
  ccg_graph_free(g);

  /* 1-D sizes: keepdims=0 is ignored (ONNX drops the axis only for
   * chunks of a default split). */
  k = mk_new(18);
  static const int64_t n2[] = {2}, sizes[] = {1, 4};
  mk_input(k, "x", 2, d52);
  mk_init(k, "sizes", 7, 1, n2, sizes, sizeof sizes);
  Onnx__NodeProto *n = mk_split_seq(k, "sizes", 0);
  Onnx__AttributeProto *a =
      mk_attr(k, n, "keepdims", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = 0;
  mk_seq_at(k, "at0", "p0", 0, "a");
  mk_seq_at(k, "at1", "p1", 1, "b");
  mk_output(k, "a");
  mk_output(k, "b");
  assert_ok(NULL, mk_import(k, NULL, &g));
  assert_shape(g, "a", "[1,2]");
  assert_shape(g, "b", "[4,2]");
  ccg_graph_free(g);
}

static void test_split_to_sequence_keepdims(void **state) {
  (void)state;
  /* No split, keepdims=0: parts of 1 along axis 1, which each loses. */
  mk *k = mk_new(18);
  mk_input(k, "x", 2, d23);
  Onnx__NodeProto *n = mk_split_seq(k, NULL, 1);
  Onnx__AttributeProto *a =
      mk_attr(k, n, "keepdims", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = 0;
  mk_seq_at(k, "at0", "p0", 0, "a");
  mk_seq_at(k, "atm2", "pm2", 4, "b");
  mk_output(k, "a");
  mk_output(k, "b");
  ccg_graph *g;
  assert_ok(NULL, mk_import(k, NULL, &g));
  assert_shape(g, "a", "[2]");
  assert_shape(g, "b", "[2]");
  assert_int_equal(ccg_graph_num_nodes(g), 3); /* Split, 2 Squeeze */
  assert_int_equal(ccg_node_op(g, 2), CCG_OP_SQUEEZE);
  assert_string_equal(ccg_node_name(g, 2), "atm2");
  static const float x23[] = {0, 1, 2, 3, 4, 5};
  float a2[2], b2[2];
  ccg_exec_tensor in = XT_F32("x", x23, 2, 3);
  ccg_exec_tensor out[] = {xt_out("a", a2, sizeof a2),
                           xt_out("b", b2, sizeof b2)};
  assert_ok(g, xt_run1(g, &in, 1, out, 2));
  xt_close(a2, (const float[]){0, 3}, 2, 0, 0, "a");
  xt_close(b2, (const float[]){1, 4}, 2, 0, 0, "b (position -2)");
  ccg_graph_free(g);
}

static void test_split_to_sequence_refused(void **state) {
  (void)state;
  /* The sequence also goes to SequenceLength: no tensor can stand in. */
  mk *k = mk_new(18);
  mk_input(k, "x", 2, d23);
  mk_split_seq(k, NULL, 1);
  mk_seq_at(k, "at0", "p0", 0, "a");
  mk_node(k, "SequenceLength", "len", "seq", NULL, "n", NULL);
  mk_output(k, "a");
  mk_output(k, "n");
  ccg_graph *g;
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "node 'sts'", "op 'SplitToSequence'",
               "used by 'len' (SequenceLength)", "cannot read as a tensor");
  assert_null(g);

  /* The sequence is a graph output. */
  k = mk_new(18);
  mk_input(k, "x", 2, d23);
  mk_split_seq(k, NULL, 1);
  mk_output(k, "seq");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "node 'sts'", "'seq' is a graph output");

  /* A position past the end. */
  k = mk_new(18);
  mk_input(k, "x", 2, d23);
  mk_split_seq(k, NULL, 0);
  mk_seq_at(k, "at2", "p2", 2, "a");
  mk_output(k, "a");
  assert_fails(NULL, CCG_STATUS_PARSE, mk_import(k, NULL, &g), "node 'sts'",
               "'at2' reads position 2 of a sequence of 2");
}

static void test_ort_per_rank_model(void **state) {
  (void)state;
  /* As ONNX Runtime's per-rank models are written: com.microsoft ops with
   * group_size, no mesh metadata -> a 1-D mesh of group_size ranks. */
  mk *k = mk_new(17);
  mk_opset(k, "com.microsoft", 1);
  mk_input(k, "x", 2, d23);
  Onnx__NodeProto *n = mk_node(k, "AllGather", "ag", "x", NULL, "g", NULL);
  n->domain = "com.microsoft";
  Onnx__AttributeProto *a =
      mk_attr(k, n, "group_size", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = 4;
  a = mk_attr(k, n, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = 1;
  n = mk_node(k, "AllReduce", "ar", "g", NULL, "y", NULL);
  n->domain = "com.microsoft";
  mk_output(k, "y");
  ccg_graph *g;
  assert_ok(NULL, mk_import(k, NULL, &g));
  char mesh[64];
  ccg_mesh_format(ccg_graph_mesh(g), mesh, sizeof mesh);
  assert_string_equal(mesh, "world=4");
  ccg_value_id y;
  assert_ok(g, ccg_graph_find_value(g, "y", &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,12]");
  ccg_node_id ar;
  assert_ok(g, ccg_graph_find_node(g, "ar", &ar));
  assert_int_equal(ccg_node_op(g, ar), CCG_OP_ALL_REDUCE);
  const char *red;
  assert_ok(g, ccg_node_attr_string(g, ar, "reduce_op", &red));
  assert_string_equal(red, "sum");
  ccg_graph_free(g);

  /* An AllReduce alone says nothing of the number of ranks. */
  k = mk_new(17);
  mk_input(k, "x", 2, d23);
  n = mk_node(k, "AllReduce", "lonely", "x", NULL, "y", NULL);
  n->domain = "com.microsoft";
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_PARSE, mk_import(k, NULL, &g), "lonely",
               "number of ranks is unknown");
}

static void test_unknown_op(void **state) {
  (void)state;
  mk *k = mk_new(17);
  mk_input(k, "x", 2, d23);
  mk_node(k, "TfIdfVectorizer", "act", "x", NULL, "y", NULL);
  mk_output(k, "y");
  ccg_graph *g;
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "node 'act'", "op 'TfIdfVectorizer'", "domain 'ai.onnx'",
               "opset 17");
  assert_null(g);

  k = mk_new(17);
  mk_opset(k, "com.example", 3);
  mk_input(k, "x", 2, d23);
  Onnx__NodeProto *n = mk_node(k, "Fancy", "f", "x", NULL, "y", NULL);
  n->domain = "com.example";
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g), "node 'f'",
               "op 'Fancy'", "domain 'com.example'", "opset 3");

  /* An op older than the version whose meaning the IR has: refused by
   * name (GatherND is read from opset 11 on). */
  k = mk_new(10);
  mk_input(k, "x", 2, d23);
  mk_input(k, "i", 2, d23);
  mk_node(k, "GatherND", "gnd", "x", "i", "y", NULL);
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "node 'gnd'", "opset 10", "GatherND from opset 11");

  k = mk_new(25);
  mk_input(k, "x", 2, d23);
  mk_node(k, "Relu", "r", "x", NULL, "y", NULL);
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g), "opset 25",
               "1..24");

  k = mk_new(17);
  mk_input(k, "x", 2, d23);
  mk_node(k, "Gelu", "gelu", "x", NULL, "y", NULL);
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "node 'gelu'", "opset 20");
}

/* Opsets 11 and 12: axes and split as attributes, Dropout's ratio as an
 * attribute (inference: dropped), Softmax over the input flattened at
 * `axis` (default 1): read where that is the last dim, refused elsewhere. */
static void test_opset_11(void **state) {
  (void)state;
  mk *k = mk_new(11);
  mk_input(k, "x", 2, d23);
  Onnx__NodeProto *n = mk_node(k, "Unsqueeze", "u", "x", NULL, "xu", NULL);
  Onnx__AttributeProto *a =
      mk_attr(k, n, "axes", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  static int64_t zero[] = {0};
  a->ints = zero;
  a->n_ints = 1;
  n = mk_node(k, "Dropout", "d", "x", NULL, "xd", NULL);
  a = mk_attr(k, n, "ratio", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->f = 0.25f;
  mk_node(k, "Softmax", "s", "xd", NULL, "y", NULL); /* axis 1 of [2,3] */
  mk_output(k, "y");
  mk_output(k, "xu");
  ccg_graph *g;
  assert_ok(NULL, mk_import(k, NULL, &g));
  ccg_value_id v;
  assert_ok(g, ccg_graph_find_value(g, "xu", &v));
  assert_string_equal(ccg_test_shape(g, v), "[1,2,3]");
  ccg_node_id sn;
  assert_ok(g, ccg_graph_find_node(g, "s", &sn));
  const ccg_attr *ax = ccg_node_attr(g, sn, "axis");
  assert_non_null(ax);
  assert_int_equal(ax->i, -1);
  ccg_graph_free(g);

  static const int64_t d234[] = {2, 3, 4};
  k = mk_new(12);
  mk_input(k, "x", 3, d234);
  mk_node(k, "Softmax", "s3", "x", NULL, "y", NULL); /* default axis 1 */
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "node 's3'", "Softmax of opset 12", "axis 1 of rank 3",
               "only the last axis");
  assert_null(g);

  /* LogSoftmax and Hardmax flatten the same way before opset 13 */
  k = mk_new(12);
  mk_input(k, "x", 2, d23);
  mk_node(k, "LogSoftmax", "ls", "x", NULL, "y", NULL);
  mk_node(k, "Hardmax", "hm", "x", NULL, "z", NULL);
  mk_output(k, "y");
  mk_output(k, "z");
  assert_ok(NULL, mk_import(k, NULL, &g));
  assert_ok(g, ccg_graph_find_node(g, "hm", &sn));
  assert_int_equal(ccg_node_attr(g, sn, "axis")->i, -1);
  ccg_graph_free(g);
  k = mk_new(11);
  mk_input(k, "x", 3, d234);
  mk_node(k, "Hardmax", "h3", "x", NULL, "y", NULL);
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "node 'h3'", "Hardmax of opset 11", "only the last axis");
}

static void test_runtime_axes(void **state) {
  (void)state;
  mk *k = mk_new(17);
  mk_input(k, "x", 2, d23);
  static const int64_t one[] = {1};
  mk_input(k, "axes", 1, one);
  mk_node(k, "ReduceSum", "sum", "x", "axes", "y", NULL);
  mk_output(k, "y");
  ccg_graph *g;
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "node 'sum'", "input 'axes'", "constant");
}

static void test_bad_tensors(void **state) {
  (void)state;
  static const float w[6] = {0};
  static const int64_t neg[] = {2, -3}, huge[] = {INT64_MAX / 2, 4};
  mk *k = mk_new(17);
  mk_input(k, "x", 2, d23);
  mk_init(k, "w", 1, 2, d23, w, 20); /* 24 needed */
  mk_node(k, "Add", "add", "x", "w", "y", NULL);
  mk_output(k, "y");
  ccg_graph *g;
  assert_fails(NULL, CCG_STATUS_PARSE, mk_import(k, NULL, &g),
               "initializer 'w'", "20 bytes of raw_data", "need 24");

  k = mk_new(17);
  mk_input(k, "x", 2, d23);
  mk_init(k, "w", 1, 2, neg, w, 24);
  mk_node(k, "Add", "add", "x", "w", "y", NULL);
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_PARSE, mk_import(k, NULL, &g),
               "initializer 'w'", "dim 1 = -3");

  k = mk_new(17);
  mk_input(k, "x", 2, d23);
  mk_init(k, "w", 1, 2, huge, w, 24);
  mk_node(k, "Add", "add", "x", "w", "y", NULL);
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_PARSE, mk_import(k, NULL, &g),
               "initializer 'w'", "overflow");

  k = mk_new(17);
  mk_input(k, "x", 2, d23);
  mk_init(k, "w", 4 /* UINT16 */, 2, d23, w, 12);
  mk_node(k, "Add", "add", "x", "w", "y", NULL);
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "initializer 'w'", "UINT16");

  k = mk_new(17);
  static const int64_t negin[] = {2, -1};
  mk_input(k, "x", 2, negin);
  mk_node(k, "Relu", "r", "x", NULL, "y", NULL);
  mk_output(k, "y");
  assert_fails(NULL, CCG_STATUS_PARSE, mk_import(k, NULL, &g),
               "graph input 'x'", "dim 1 is -1");
}

static void test_not_onnx(void **state) {
  (void)state;
  ccg_graph *g = NULL;
  static const char junk[] = "\xff\xff\xff\xff not a protobuf";
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer(junk, sizeof junk, NULL, NULL, &g),
               "<buffer>", "byte 0");
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer("", 0, NULL, NULL, &g), "<buffer>",
               "not an ONNX model");
  assert_fails(NULL, CCG_STATUS_IO,
               ccg_onnx_import_file("/nonexistent/m.onnx", NULL, &g),
               "/nonexistent/m.onnx");
  ccg_onnx_import_options o = CCG_ONNX_IMPORT_OPTIONS_INIT;
  o.max_bytes = 4;
  assert_fails(NULL, CCG_STATUS_OOM,
               ccg_onnx_import_buffer(junk, sizeof junk, NULL, &o, &g),
               "byte cap");
}

/* ---- external data ------------------------------------------------------ */

static char dir[256];

static int make_dir(void **state) {
  (void)state;
  mkdir(CCG_ONNX_OUT_DIR, 0755);
  snprintf(dir, sizeof dir, "%s/import_XXXXXX", CCG_ONNX_OUT_DIR);
  if (!mkdtemp(dir))
    return -1;
  char path[512];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  FILE *f = fopen(path, "wb");
  float w[6] = {1, 2, 3, 4, 5, 6};
  fwrite(w, sizeof w, 1, f);
  fclose(f);
  snprintf(path, sizeof path, "%s/link.bin", dir);
  return symlink("w.bin", path);
}

static int remove_dir(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static ccg_status import_external(const char *loc, const char *off,
                                  const char *len, const char *base) {
  mk *k = mk_new(17);
  mk_input(k, "x", 2, d23);
  Onnx__TensorProto *t = mk_init(k, "w", 1, 2, d23, NULL, 0);
  t->has_raw_data = 0;
  t->has_data_location = 1;
  t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  static Onnx__StringStringEntryProto e[3];
  static Onnx__StringStringEntryProto *ep[3];
  const char *keys[] = {"location", "offset", "length"};
  const char *vals[] = {loc, off, len};
  size_t n = 0;
  for (size_t i = 0; i < 3; i++) {
    if (!vals[i])
      continue;
    onnx__string_string_entry_proto__init(&e[n]);
    e[n].key = (char *)keys[i];
    e[n].value = (char *)vals[i];
    ep[n] = &e[n];
    n++;
  }
  t->external_data = ep;
  t->n_external_data = n;
  mk_node(k, "Add", "add", "x", "w", "y", NULL);
  mk_output(k, "y");
  ccg_graph *g = NULL;
  ccg_status st = mk_import(k, base, &g);
  if (st == CCG_STATUS_OK) {
    ccg_value_id w;
    assert_ok(g, ccg_graph_find_value(g, "w", &w));
    const float *d = ccg_value_data(g, w)->data;
    assert_float_equal(d[5], 6.0f, 0.0f);
  }
  ccg_graph_free(g);
  return st;
}

static void test_external_data_confined(void **state) {
  (void)state;
  assert_ok(NULL, import_external("w.bin", NULL, NULL, dir));
  assert_ok(NULL, import_external("w.bin", "0", "24", dir));
  assert_fails(NULL, CCG_STATUS_PARSE,
               import_external("../w.bin", NULL, NULL, dir), "'../w.bin'",
               "leaves the model's folder");
  assert_fails(NULL, CCG_STATUS_PARSE,
               import_external("sub/../../x", NULL, NULL, dir), "'..'");
  assert_fails(NULL, CCG_STATUS_PARSE,
               import_external("/etc/passwd", NULL, NULL, dir), "'/etc/passwd'",
               "not a relative path");
  assert_fails(NULL, CCG_STATUS_PARSE,
               import_external("link.bin", NULL, NULL, dir), "'link.bin'",
               "symbolic link");
  assert_fails(NULL, CCG_STATUS_PARSE, import_external("w.bin", "8", "24", dir),
               "offset 8", "length 24", "past the end");
  assert_fails(NULL, CCG_STATUS_PARSE, import_external("w.bin", "0", "20", dir),
               "20 bytes", "needs 24");
  assert_fails(NULL, CCG_STATUS_PARSE,
               import_external("w.bin", "-4", NULL, dir), "offset '-4'");
  assert_fails(NULL, CCG_STATUS_IO,
               import_external("missing.bin", NULL, NULL, dir),
               "'missing.bin'");
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               import_external("w.bin", NULL, NULL, NULL), "no base folder");
}

static void test_metadata_errors(void **state) {
  (void)state;
  mk *k = mk_new(17);
  mk_input(k, "x", 2, d23);
  mk_node(k, "Relu", "r", "x", NULL, "y", NULL);
  mk_output(k, "y");
  mk_meta(k, "ccgraph.mesh", "tp=2");
  mk_meta(k, "ccgraph.placements",
          "[{\"value\":\"nope\",\"placements\":[\"R\"]}]");
  ccg_graph *g;
  assert_fails(NULL, CCG_STATUS_PARSE, mk_import(k, NULL, &g),
               "ccgraph.placements", "'nope'");
  k = mk_new(17);
  mk_input(k, "x", 2, d23);
  mk_node(k, "Relu", "r", "x", NULL, "y", NULL);
  mk_output(k, "y");
  mk_meta(k, "ccgraph.tags", "{not json");
  assert_fails(NULL, CCG_STATUS_PARSE, mk_import(k, NULL, &g), "ccgraph.tags");
  k = mk_new(17);
  mk_input(k, "x", 2, d23);
  mk_node(k, "Relu", "r", "x", NULL, "y", NULL);
  mk_output(k, "y");
  mk_meta(k, "ccgraph.backward", "sum_of_losses");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, mk_import(k, NULL, &g),
               "ccgraph.backward", "'sum_of_losses'", "replicated_loss");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_axes_inputs_become_attributes),
      cmocka_unit_test(test_axes_constant_kept),
      cmocka_unit_test(test_split_num_outputs),
      cmocka_unit_test(test_split_to_sequence),
      cmocka_unit_test(test_split_to_sequence_keepdims),
      cmocka_unit_test(test_split_to_sequence_refused),
      cmocka_unit_test(test_node_metadata),
      cmocka_unit_test(test_computed_axes_known),
      cmocka_unit_test(test_ort_per_rank_model),
      cmocka_unit_test(test_unknown_op),
      cmocka_unit_test(test_opset_11),
      cmocka_unit_test(test_runtime_axes),
      cmocka_unit_test(test_bad_tensors),
      cmocka_unit_test(test_not_onnx),
      cmocka_unit_test_setup_teardown(test_external_data_confined, make_dir,
                                      remove_dir),
      cmocka_unit_test(test_metadata_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
