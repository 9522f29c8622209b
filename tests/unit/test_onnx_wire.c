/* src/onnx/wire.c: the wire-format pre-scan of ONNX models and the byte-capped
 * protobuf-c allocator. Inputs are hand-built byte strings, one per defect. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "onnx.pb-c.h"
#include "onnx/wire.h"
#include "test_util.h"
#include "pb_writer.h"

/* ---- a small protobuf writer ------------------------------------------- */

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static void put_bytes(buf *b, const uint8_t *src, size_t n) { put(b, src, n); }

/* Fields appended to a message under construction get wrapped by `wrap`. */
static void wrap(buf *outer, uint32_t field, const buf *inner) {
  put_len(outer, field, inner->p, inner->n);
}

/* ModelProto { ir_version 8, graph { node { op_type "Relu", input "x",
 * output "y" }, name "g" } }: a valid model. */
static buf valid_model(void) {
  buf node = {0}, graph = {0}, model = {0};
  put_str(&node, 1, "x");
  put_str(&node, 2, "y");
  put_str(&node, 4, "Relu");
  wrap(&graph, 1, &node);
  put_str(&graph, 2, "g");
  put_tag(&model, 1, 0);
  put_varint(&model, 8);
  wrap(&model, 7, &graph);
  free(node.p);
  free(graph.p);
  return model;
}

/* A model whose messages nest along `path` (field numbers from ModelProto
 * down), the innermost one empty: depth = n + 1. Lengths are computed from
 * the inside out first so that the bytes can be written front to back. */
static buf nested_model(const uint32_t *path, size_t n) {
  size_t *content = calloc(n + 1, sizeof *content);
  assert_non_null(content);
  for (size_t i = n; i-- > 0;)
    content[i] = varint_len((uint64_t)path[i] << 3) +
                 varint_len(content[i + 1]) + content[i + 1];
  buf b = {0};
  for (size_t i = 0; i < n; i++) {
    put_tag(&b, path[i], 2);
    put_varint(&b, content[i + 1]);
  }
  assert_int_equal(b.n, content[0]);
  free(content);
  return b;
}

/* Model > Graph > Node > Attribute > Graph > Node > ...: `n` fields. */
static buf deep_model(size_t n) {
  static const uint32_t cycle[] = {1, 5, 6}; /* node, attribute, g */
  uint32_t *path = malloc(n * sizeof *path);
  assert_non_null(path);
  path[0] = 7;
  for (size_t i = 1; i < n; i++)
    path[i] = cycle[(i - 1) % 3];
  buf b = nested_model(path, n);
  free(path);
  return b;
}

static ccg_status check(const buf *b, int max_depth) {
  return ccg__onnx_wire_check(b->p, b->n, max_depth);
}

/* Fails with PARSE and every fragment in the thread's last error. */
#define assert_parse_error(b, depth, ...)                                      \
  assert_fails(NULL, CCG_STATUS_PARSE, check(b, depth), __VA_ARGS__)

/* ---- the pre-scan ------------------------------------------------------ */

static void test_valid_model_passes(void **state) {
  (void)state;
  buf m = valid_model();
  assert_ok(NULL, check(&m, 0));
  /* protobuf-c agrees that it is a model. */
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, m.n, m.p);
  assert_non_null(mp);
  assert_string_equal(mp->graph->node[0]->op_type, "Relu");
  onnx__model_proto__free_unpacked(mp, NULL);
  free(m.p);
}

static void test_not_onnx(void **state) {
  (void)state;
  assert_fails(NULL, CCG_STATUS_PARSE, ccg__onnx_wire_check(NULL, 0, 0),
               "not an ONNX model", "empty");
  const char *text = "hello, this is a text file\n";
  buf t = {0};
  put_bytes(&t, (const uint8_t *)text, strlen(text));
  assert_parse_error(&t, 0, "not an ONNX model", "not a ModelProto field");
  free(t.p);
  static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  buf p = {0};
  put_bytes(&p, png, sizeof png);
  assert_parse_error(&p, 0, "not an ONNX model", "field 1281");
  free(p.p);
  /* Well-formed protobuf, but no graph: some other message. */
  buf ng = {0};
  put_tag(&ng, 1, 0);
  put_varint(&ng, 8);
  put_str(&ng, 2, "producer");
  assert_parse_error(&ng, 0, "not an ONNX model", "no graph");
  free(ng.p);
  assert_fails(NULL, CCG_STATUS_INVALID_ARG, ccg__onnx_wire_check(NULL, 4, 0),
               "NULL data");
}

static void test_truncated(void **state) {
  (void)state;
  buf m = valid_model();
  /* Every proper prefix of a valid model is refused, none crashes. */
  for (size_t n = 0; n < m.n; n++) {
    buf cut = {m.p, n, n};
    assert_int_equal(check(&cut, 0), CCG_STATUS_PARSE);
    assert_non_null(strstr(ccg_last_error(NULL), n ? "ONNX" : "empty"));
  }
  free(m.p);
  /* Cut inside ir_version's varint. */
  buf v = {0};
  put_tag(&v, 1, 0);
  put_bytes(&v, (const uint8_t[]){0x80, 0x80}, 2);
  assert_parse_error(&v, 0, "byte 0", "ModelProto field 1 (ir_version)",
                     "truncated varint");
  free(v.p);
  /* Graph declares 100 bytes, 3 follow. */
  buf g = {0};
  put_tag(&g, 7, 2);
  put_varint(&g, 100);
  put_bytes(&g, (const uint8_t[]){0x0a, 0x00, 0x12}, 3);
  assert_parse_error(&g, 0, "byte 0", "ModelProto field 7 (graph)",
                     "length 100", "past the end of the data", "3 bytes left");
  free(g.p);
  /* A node longer than the graph that holds it. */
  buf node = {0}, graph = {0}, model = {0};
  put_str(&node, 4, "Relu");
  put_tag(&graph, 1, 2);
  put_varint(&graph, 40);
  put(&graph, node.p, node.n);
  put_tag(&model, 1, 0);
  put_varint(&model, 8);
  wrap(&model, 7, &graph);
  assert_parse_error(&model, 0, "byte 4", "GraphProto field 1 (node)",
                     "length 40", "enclosing message");
  free(node.p);
  free(graph.p);
  free(model.p);
  /* An attribute's float (fixed 32-bit) cut after 2 bytes, at the end of
   * its message. */
  buf attr = {0}, n2 = {0}, g2 = {0}, m2 = {0};
  put_tag(&attr, 2, 5);
  put_bytes(&attr, (const uint8_t[]){0, 0}, 2);
  wrap(&n2, 5, &attr);
  wrap(&g2, 1, &n2);
  wrap(&m2, 7, &g2);
  assert_parse_error(&m2, 0, "AttributeProto field 2 (f)", "4-byte value",
                     "enclosing message");
  free(attr.p);
  free(n2.p);
  free(g2.p);
  free(m2.p);
}

static void test_bad_varints_and_tags(void **state) {
  (void)state;
  buf v = {0};
  put_tag(&v, 1, 0);
  for (int i = 0; i < 11; i++)
    put_bytes(&v, (const uint8_t[]){0xff}, 1);
  put_bytes(&v, (const uint8_t[]){0x01}, 1);
  assert_parse_error(&v, 0, "ModelProto field 1 (ir_version)", "over-long");
  free(v.p);
  /* A length that needs more than 32 bits. */
  buf l = {0};
  put_tag(&l, 1, 0);
  put_varint(&l, 8);
  put_tag(&l, 7, 2);
  put_varint(&l, (uint64_t)1 << 40);
  assert_parse_error(&l, 0, "byte 2", "ModelProto field 7 (graph)",
                     "over-long");
  free(l.p);
  /* A tag of more than 5 bytes. */
  buf t = {0};
  put_tag(&t, 1, 0);
  put_varint(&t, 8);
  put_bytes(&t, (const uint8_t[]){0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 6);
  assert_parse_error(&t, 0, "byte 2", "ModelProto", "over-long", "tag");
  free(t.p);
  /* Field number 0. */
  buf z = {0};
  put_tag(&z, 1, 0);
  put_varint(&z, 8);
  put_tag(&z, 0, 2);
  put_varint(&z, 0);
  assert_parse_error(&z, 0, "byte 2", "invalid field number 0");
  free(z.p);
}

static void test_wire_types(void **state) {
  (void)state;
  static const struct {
    unsigned wt;
    const char *frag;
  } cases[] = {{3, "start-group wire type"},
               {4, "end-group wire type"},
               {6, "invalid (6) wire type"},
               {7, "invalid (7) wire type"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    buf node = {0}, graph = {0}, model = {0};
    put_str(&node, 4, "Relu");
    put_tag(&node, 77, cases[i].wt);
    put_varint(&node, 0);
    wrap(&graph, 1, &node);
    wrap(&model, 7, &graph);
    assert_parse_error(&model, 0, "byte 10", "NodeProto field 77",
                       cases[i].frag);
    free(node.p);
    free(graph.p);
    free(model.p);
  }
  /* A field the schema knows, with another wire type than the schema's. */
  buf m = {0};
  put_tag(&m, 1, 0);
  put_varint(&m, 8);
  put_tag(&m, 7, 0);
  put_varint(&m, 1);
  assert_parse_error(&m, 0, "byte 2", "ModelProto field 7 (graph)",
                     "wire type varint", "schema says length-delimited");
  free(m.p);
  /* Packed floats that do not fill whole elements. */
  buf tensor = {0}, graph = {0}, model = {0};
  put_len(&tensor, 4, "abc", 3);
  wrap(&graph, 5, &tensor);
  wrap(&model, 7, &graph);
  assert_parse_error(&model, 0, "TensorProto field 4 (float_data)",
                     "packed length 3", "multiple of 4");
  free(tensor.p);
  free(graph.p);
  free(model.p);
  /* Packed dims whose last varint is cut. */
  buf t2 = {0}, g2 = {0}, m2 = {0};
  put_len(&t2, 1, (const uint8_t[]){0x02, 0x83}, 2);
  wrap(&g2, 5, &t2);
  wrap(&m2, 7, &g2);
  assert_parse_error(&m2, 0, "TensorProto field 1 (dims)", "packed varint",
                     "truncated");
  free(t2.p);
  free(g2.p);
  free(m2.p);
}

static void test_unknown_fields_skipped(void **state) {
  (void)state;
  /* Unknown fields are skipped whole, even when their bytes would be
   * nonsense as a message, and every wire type but groups is fine. */
  buf node = {0}, graph = {0}, model = {0};
  put_str(&node, 4, "Relu");
  put_len(&node, 99, (const uint8_t[]){0xff, 0xff, 0x07}, 3);
  put_tag(&node, 100, 1);
  put_bytes(&node, (const uint8_t[]){1, 2, 3, 4, 5, 6, 7, 8}, 8);
  put_tag(&node, 101, 5);
  put_bytes(&node, (const uint8_t[]){1, 2, 3, 4}, 4);
  put_tag(&node, 102, 0);
  put_varint(&node, UINT64_MAX);
  wrap(&graph, 1, &node);
  wrap(&model, 7, &graph);
  put_str(&model, 1000, "an unknown trailing field");
  assert_ok(NULL, check(&model, 0));
  free(node.p);
  free(graph.p);
  free(model.p);
}

static void test_depth_limit(void **state) {
  (void)state;
  /* 20 fields: messages 21 deep. */
  buf m = deep_model(20);
  assert_ok(NULL, check(&m, 21));
  assert_parse_error(&m, 20, "nested 21 deep", "past the limit of 20");
  free(m.p);
  /* The default limit. */
  buf at = deep_model(CCG__ONNX_DEFAULT_MAX_DEPTH - 1);
  assert_ok(NULL, check(&at, 0));
  free(at.p);
  buf over = deep_model(CCG__ONNX_DEFAULT_MAX_DEPTH);
  assert_parse_error(&over, 0, "nested 65 deep", "past the limit of 64");
  free(over.p);
  /* Type nesting counts the same way: Model > Graph > ValueInfo > Type >
   * Sequence > Type > Sequence > ... */
  uint32_t path[40] = {7, 11, 2};
  for (size_t i = 3; i < 40; i++)
    path[i] = i % 2 ? 4 : 1;
  buf ty = nested_model(path, 40);
  assert_ok(NULL, check(&ty, 41));
  assert_parse_error(&ty, 30, "past the limit of 30", "TypeProto");
  free(ty.p);
}

static void test_very_deep_nesting(void **state) {
  (void)state;
  /* 100000 levels: refused at the default limit, and walked to the bottom
   * without recursion when the limit allows it. */
  buf m = deep_model(100000);
  assert_parse_error(&m, 0, "past the limit of 64");
  assert_ok(NULL, check(&m, 200000));
  free(m.p);
}

static void test_error_names_offset(void **state) {
  (void)state;
  /* The same defect at a later offset is reported there. */
  buf m = valid_model();
  size_t at = m.n;
  put_tag(&m, 7, 2);
  put_varint(&m, 50);
  char want[32];
  snprintf(want, sizeof want, "byte %zu:", at);
  assert_parse_error(&m, 0, want, "ModelProto field 7 (graph)");
  free(m.p);
}

/* ---- the capped allocator ---------------------------------------------- */

static void test_cap_counts_and_refuses(void **state) {
  (void)state;
  ccg__onnx_cap cap;
  ccg__onnx_capped_allocator_init(&cap, 1000);
  ProtobufCAllocator *a = ccg__onnx_capped_allocator(&cap);
  void *p = a->alloc(a->allocator_data, 400);
  assert_non_null(p);
  memset(p, 0xab, 400); /* the whole block is usable */
  assert_true(cap.used >= 400 && cap.used < 450);
  void *q = a->alloc(a->allocator_data, 700);
  assert_null(q);
  assert_true(ccg__onnx_cap_exceeded(&cap));
  a->free(a->allocator_data, p);
  assert_int_equal(cap.used, 0);
  assert_true(cap.peak >= 400);
  /* Freed bytes count again. */
  q = a->alloc(a->allocator_data, 700);
  assert_non_null(q);
  a->free(a->allocator_data, q);
  a->free(a->allocator_data, NULL);
  assert_int_equal(cap.used, 0);
  /* Sizes whose header would overflow are refused, with or without cap. */
  assert_null(a->alloc(a->allocator_data, SIZE_MAX));
  ccg__onnx_cap_release(&cap);
  assert_int_equal(cap.max_bytes, 1000);
  assert_false(ccg__onnx_cap_exceeded(&cap));

  ccg__onnx_cap open;
  ccg__onnx_capped_allocator_init(&open, 0);
  a = ccg__onnx_capped_allocator(&open);
  assert_null(a->alloc(a->allocator_data, SIZE_MAX - 4));
  /* Large blocks (tensor data) and many small ones over several chunks;
   * some freed, the rest left to release (valgrind sees any leak). */
  void *big[4];
  for (int i = 0; i < 4; i++) {
    big[i] = a->alloc(a->allocator_data, (size_t)(1 << 20) + (size_t)i);
    assert_non_null(big[i]);
    memset(big[i], i, (size_t)1 << 20);
  }
  a->free(a->allocator_data, big[1]);
  a->free(a->allocator_data, big[3]);
  a->free(a->allocator_data, big[0]);
  for (int i = 0; i < 5000; i++) {
    char *s = a->alloc(a->allocator_data, (size_t)(i % 300) + 1);
    assert_non_null(s);
    assert_int_equal((uintptr_t)s % _Alignof(max_align_t), 0);
    memset(s, 'x', (size_t)(i % 300) + 1);
    if (i % 3 == 0)
      a->free(a->allocator_data, s);
  }
  assert_true(open.used > ((size_t)1 << 20));
  ccg__onnx_cap_release(&open);
  assert_int_equal(open.used, 0);
}

static void test_cap_with_protobuf_c(void **state) {
  (void)state;
  /* A model whose graph holds 2000 empty nodes: 2 bytes each on the wire,
   * a struct each once unpacked. */
  buf graph = {0}, model = {0};
  for (int i = 0; i < 2000; i++)
    put_len(&graph, 1, "", 0);
  wrap(&model, 7, &graph);
  assert_ok(NULL, check(&model, 0));
  ccg__onnx_cap cap;
  ccg__onnx_capped_allocator_init(&cap, 0);
  Onnx__ModelProto *mp = onnx__model_proto__unpack(
      ccg__onnx_capped_allocator(&cap), model.n, model.p);
  assert_non_null(mp);
  assert_int_equal(mp->graph->n_node, 2000);
  size_t need = cap.peak;
  assert_true(need > 2000 * sizeof(Onnx__NodeProto));
  /* free_unpacked gives every byte back to the count; release frees. */
  onnx__model_proto__free_unpacked(mp, ccg__onnx_capped_allocator(&cap));
  assert_int_equal(cap.used, 0);
  assert_false(ccg__onnx_cap_exceeded(&cap));
  ccg__onnx_cap_release(&cap);
  /* Half of what it needs: protobuf-c gives up and frees what it took. */
  ccg__onnx_capped_allocator_init(&cap, need / 2);
  mp = onnx__model_proto__unpack(ccg__onnx_capped_allocator(&cap), model.n,
                                 model.p);
  assert_null(mp);
  assert_true(ccg__onnx_cap_exceeded(&cap));
  assert_int_equal(cap.used, 0);
  ccg__onnx_cap_release(&cap);
  /* Exactly enough is enough; release alone frees the message. */
  ccg__onnx_capped_allocator_init(&cap, need);
  mp = onnx__model_proto__unpack(ccg__onnx_capped_allocator(&cap), model.n,
                                 model.p);
  assert_non_null(mp);
  assert_false(ccg__onnx_cap_exceeded(&cap));
  ccg__onnx_cap_release(&cap);
  free(graph.p);
  free(model.p);
}

/* Inline weights that are most of a decoded model are lent to the
 * imported graph by the decoded model (which the graph then owns): the data
 * is the same bit for bit, 64-byte aligned, and lives on after the caller's
 * buffer is gone. A model of mostly structure has its weights copied: the
 * same data either way. */
static void test_import_lends_inline_weights(void **state) {
  (void)state;
  for (int side = 2; side <= 2048; side *= 1024) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,2]"), w, y;
    size_t n = (size_t)side * 2;
    float *data = malloc(n * sizeof *data);
    assert_non_null(data);
    for (size_t i = 0; i < n; i++)
      data[i] = (float)i * 0.25f - 7.0f;
    ccg_tensor t = {CCG_DTYPE_F32, 2, {2, side}, data};
    assert_ok(g, ccg_graph_add_initializer(g, "w", &t, &w));
    assert_ok(g, ccg_matmul(g, x, w, &y));
    assert_ok(g, ccg_graph_add_output(g, y));
    void *bytes = NULL;
    size_t size = 0;
    assert_ok(g, ccg_onnx_export_buffer(g, NULL, &bytes, &size));
    ccg_graph_free(g);
    ccg_graph *back = NULL;
    assert_int_equal(ccg_onnx_import_buffer(bytes, size, NULL, NULL, &back),
                     CCG_STATUS_OK);
    memset(bytes, 0xff, size); /* nothing may point into it */
    free(bytes);
    ccg_value_id v;
    assert_ok(back, ccg_graph_find_value(back, "w", &v));
    const ccg_tensor *d = ccg_value_data(back, v);
    assert_non_null(d);
    assert_int_equal(d->dims[1], side);
    assert_int_equal((uintptr_t)d->data % 64, 0);
    assert_memory_equal(d->data, data, n * sizeof *data);
    ccg_graph_free(back);
    free(data);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_model_passes),
      cmocka_unit_test(test_not_onnx),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_bad_varints_and_tags),
      cmocka_unit_test(test_wire_types),
      cmocka_unit_test(test_unknown_fields_skipped),
      cmocka_unit_test(test_depth_limit),
      cmocka_unit_test(test_very_deep_nesting),
      cmocka_unit_test(test_error_names_offset),
      cmocka_unit_test(test_cap_counts_and_refuses),
      cmocka_unit_test(test_cap_with_protobuf_c),
      cmocka_unit_test(test_import_lends_inline_weights),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
