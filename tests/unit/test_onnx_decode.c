/* src/onnx/decode_in.c: the ModelProto decoder gives what protobuf-c's unpack
 * gives (field by field, over the fields an import reads), leaves bytes
 * fields in the source, declines what it does not decode as protobuf-c
 * would, and an import of bad bytes still fails naming the fault. */
#include <dirent.h>
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

/* Moves `inner` into `outer` as field `field`. */
static void wrap(buf *outer, uint32_t field, buf *inner) {
  put_len(outer, field, inner->p, inner->n);
  free(inner->p);
  *inner = (buf){0};
}

/* ValueInfoProto name: f32 tensor of dims (dim_param where dims[i] < 0). */
static void value_info(buf *g, uint32_t field, const char *name, int rank,
                       const int64_t *dims) {
  buf vi = {0}, type = {0}, tt = {0}, shape = {0};
  put_str(&vi, 1, name);
  put_int(&tt, 1, 1);
  for (int i = 0; i < rank; i++) {
    buf dim = {0};
    if (dims[i] < 0) {
      put_int(&dim, 1, 7); /* dim_value, then dim_param: the last one wins */
      put_str(&dim, 2, "batch");
    } else {
      put_int(&dim, 1, (uint64_t)dims[i]);
    }
    wrap(&shape, 1, &dim);
  }
  wrap(&tt, 2, &shape);
  wrap(&type, 1, &tt);
  wrap(&vi, 2, &type);
  put_str(&vi, 3, "doc");
  wrap(g, field, &vi);
}

/* A model that uses every kind of field an import reads: opsets, metadata,
 * a graph input with a symbolic dim, initializers with raw_data, int64_data
 * (packed) and float_data (one element per tag), a node with attributes of
 * every scalar and list kind (packed and not), a tensor attribute, a
 * subgraph attribute, a sparse initializer, a function, doc strings and
 * value_info (not decoded). */
static buf rich_model(void) {
  buf model = {0}, graph = {0}, b = {0};
  put_int(&model, 1, 8);
  put_str(&model, 2, "test");
  put_str(&b, 1, "");
  put_int(&b, 2, 17);
  wrap(&model, 8, &b);
  put_str(&b, 1, "key");
  put_str(&b, 2, "value");
  wrap(&model, 14, &b);
  put_str(&model, 6, "a doc string");

  put_str(&graph, 2, "g");
  value_info(&graph, 11, "x", 2, (const int64_t[]){-1, 4});
  buf t = {0};
  put_int(&t, 1, 4);
  put_int(&t, 1, 2);
  put_int(&t, 2, 1);
  put_str(&t, 8, "w");
  float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  put_len(&t, 9, w, sizeof w);
  wrap(&graph, 5, &t);
  put_int(&t, 1, 2); /* dims, one per tag */
  put_int(&t, 2, 7);
  buf packed = {0};
  put_varint(&packed, 0);
  put_varint(&packed, (uint64_t)-1); /* 10 bytes */
  put_len(&t, 7, packed.p, packed.n);
  free(packed.p);
  packed = (buf){0};
  put_str(&t, 8, "shape");
  wrap(&graph, 5, &t);
  put_int(&t, 2, 1);
  put_float(&t, 4, 0.5f);
  put_str(&t, 8, "scalar");
  put_len(&t, 9, NULL, 0); /* empty raw_data: data stays NULL */
  wrap(&graph, 5, &t);
  /* more elements than the one-pass reader gathers: read field by field */
  put_int(&t, 1, 40);
  put_int(&t, 2, 7);
  for (int i = 0; i < 40; i++)
    put_varint(&packed, (uint64_t)i);
  put_len(&t, 7, packed.p, packed.n);
  free(packed.p);
  packed = (buf){0};
  put_str(&t, 8, "long");
  wrap(&graph, 5, &t);

  buf node = {0}, attr = {0};
  put_str(&node, 1, "x");
  put_str(&node, 1, "w");
  put_str(&node, 2, "y");
  put_str(&node, 3, "mm");
  put_str(&node, 4, "MatMul");
  put_str(&node, 6, "node doc");
  put_str(&attr, 1, "i");
  put_int(&attr, 20, 2);
  put_int(&attr, 3, (uint64_t)-5);
  wrap(&node, 5, &attr);
  put_str(&attr, 1, "f");
  put_float(&attr, 2, 1.25f);
  put_int(&attr, 20, 1);
  wrap(&node, 5, &attr);
  put_str(&attr, 1, "ints");
  put_int(&attr, 8, 3);
  put_int(&attr, 8, (uint64_t)-4);
  put_varint(&packed, 300);
  put_len(&attr, 8, packed.p, packed.n);
  free(packed.p);
  packed = (buf){0};
  wrap(&node, 5, &attr);
  put_str(&attr, 1, "floats");
  float fl[3] = {0.5f, -1.0f, 3.0f};
  put_len(&attr, 7, fl, sizeof fl);
  put_float(&attr, 7, 9.0f);
  wrap(&node, 5, &attr);
  put_str(&attr, 1, "strings");
  put_str(&attr, 9, "a");
  put_str(&attr, 9, "");
  put_str(&attr, 4, "s");
  wrap(&node, 5, &attr);
  put_str(&attr, 1, "t");
  put_int(&t, 2, 7);
  put_int(&t, 7, 42);
  wrap(&attr, 5, &t);
  wrap(&node, 5, &attr);
  buf sub = {0}, sn = {0};
  put_str(&sn, 1, "x");
  put_str(&sn, 2, "z");
  put_str(&sn, 4, "Relu");
  wrap(&sub, 1, &sn);
  put_str(&sub, 2, "body");
  value_info(&sub, 13, "z", 1, (const int64_t[]){3});
  put_str(&attr, 1, "g");
  wrap(&attr, 6, &sub);
  wrap(&node, 5, &attr);
  put_str(&attr, 1, "key");
  put_str(&attr, 2, "node meta");
  wrap(&node, 9, &attr);
  wrap(&graph, 1, &node);
  /* a node with only the fields the one-pass reader takes (decode_in.c) */
  put_str(&node, 1, "y");
  put_str(&node, 1, "");
  put_str(&node, 2, "z");
  put_str(&node, 4, "Foo");
  put_str(&node, 7, "custom");
  put_str(&node, 3, "fast");
  put_str(&node, 6, "node doc");
  put_str(&attr, 1, "mixed");
  put_int(&attr, 8, 7);
  put_varint(&packed, 1);
  put_varint(&packed, (uint64_t)-2);
  put_len(&attr, 8, packed.p, packed.n);
  free(packed.p);
  packed = (buf){0};
  put_float(&attr, 7, 2.0f);
  put_len(&attr, 7, fl, sizeof fl);
  put_str(&attr, 9, "b");
  put_str(&attr, 4, "");
  put_str(&attr, 13, "attr doc");
  put_int(&attr, 20, 7);
  put_int(&attr, 3, 9);
  put_float(&attr, 2, -0.5f);
  wrap(&node, 5, &attr);
  put_str(&attr, 1, "ref");
  put_str(&attr, 21, "outer");
  put_int(&attr, 20, 2);
  wrap(&node, 5, &attr);
  wrap(&graph, 1, &node);
  /* more inputs than it gathers on the stack: read field by field */
  for (int i = 0; i < 40; i++)
    put_str(&node, 1, i % 2 ? "x" : "w");
  put_str(&node, 2, "sum");
  put_str(&node, 4, "Sum");
  wrap(&graph, 1, &node);

  buf sp = {0};
  put_int(&t, 2, 1);
  put_float(&t, 4, 2.0f);
  put_str(&t, 8, "sp");
  wrap(&sp, 1, &t);
  put_int(&t, 2, 7);
  put_int(&t, 7, 1);
  wrap(&sp, 2, &t);
  put_int(&sp, 3, 4);
  wrap(&graph, 15, &sp);
  value_info(&graph, 13, "y", 2, (const int64_t[]){-1, 2});
  value_info(&graph, 12, "y", 2, (const int64_t[]){-1, 2});
  wrap(&model, 7, &graph);

  buf fn = {0};
  put_str(&fn, 1, "F");
  put_str(&fn, 4, "a");
  put_str(&fn, 5, "b");
  put_str(&sn, 1, "a");
  put_str(&sn, 2, "b");
  put_str(&sn, 4, "Neg");
  wrap(&fn, 7, &sn);
  put_str(&fn, 10, "custom");
  wrap(&model, 25, &fn);
  return model;
}

/* ---- field-by-field comparison ----------------------------------------- */

/* The fields the decoder leaves out (decode_in.c says why). */
static bool unread(const ProtobufCMessageDescriptor *md,
                   const ProtobufCFieldDescriptor *f) {
  if (md == &onnx__graph_proto__descriptor)
    return f->id == 13;
  return strcmp(f->name, "doc_string") == 0;
}

typedef struct src {
  const uint8_t *p;
  size_t n;
} src;

static void compare_msg(const ProtobufCMessageDescriptor *md, const void *a,
                        const void *b, const src *s, const char *path);

/* One element: a from protobuf-c, b from the decoder. */
static void compare_elem(const ProtobufCMessageDescriptor *md,
                         const ProtobufCFieldDescriptor *f, const void *a,
                         const void *b, const src *s, const char *path) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING: {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    if ((x == NULL) != (y == NULL) || (x && strcmp(x, y) != 0))
      fail_msg("%s.%s: '%s' against '%s'", path, f->name, x ? x : "(null)",
               y ? y : "(null)");
    break;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    const ProtobufCBinaryData *x = a, *y = b;
    if (x->len != y->len || (x->len && memcmp(x->data, y->data, x->len)))
      fail_msg("%s.%s: %zu bytes against %zu", path, f->name, x->len, y->len);
    /* left in the source, not copied, except attributes' strings (read
     * with their attribute) */
    bool in_source = y->data >= s->p && y->data + y->len <= s->p + s->n;
    bool attr = md == &onnx__attribute_proto__descriptor;
    if (y->len && in_source == attr)
      fail_msg("%s.%s: data is %sin the source", path, f->name,
               in_source ? "" : "not ");
    if (!y->len && y->data)
      fail_msg("%s.%s: empty but not NULL", path, f->name);
    break;
  }
  case PROTOBUF_C_TYPE_MESSAGE: {
    const void *x = *(void *const *)a, *y = *(void *const *)b;
    if ((x == NULL) != (y == NULL))
      fail_msg("%s.%s: set in one of the two", path, f->name);
    if (x) {
      char sub[512];
      snprintf(sub, sizeof sub, "%s.%s", path, f->name);
      compare_msg(f->descriptor, x, y, s, sub);
    }
    break;
  }
  default:
    if (memcmp(a, b, ccg__onnx_pb_elem_size(f->type)) != 0)
      fail_msg("%s.%s: values differ", path, f->name);
  }
}

static void compare_msg(const ProtobufCMessageDescriptor *md, const void *a,
                        const void *b, const src *s, const char *path) {
  const uint8_t *x = a, *y = b;
  for (unsigned i = 0; i < md->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &md->fields[i];
    if (unread(md, f))
      continue;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t na = *(const size_t *)(const void *)(x + f->quantifier_offset);
      size_t nb = *(const size_t *)(const void *)(y + f->quantifier_offset);
      if (na != nb)
        fail_msg("%s.%s: %zu elements against %zu", path, f->name, na, nb);
      const uint8_t *ea = *(uint8_t *const *)(const void *)(x + f->offset);
      const uint8_t *eb = *(uint8_t *const *)(const void *)(y + f->offset);
      size_t el = ccg__onnx_pb_elem_size(f->type);
      for (size_t k = 0; k < na; k++)
        compare_elem(md, f, ea + k * el, eb + k * el, s, path);
      continue;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      uint32_t ca = *(const uint32_t *)(const void *)(x + f->quantifier_offset);
      uint32_t cb = *(const uint32_t *)(const void *)(y + f->quantifier_offset);
      if (ca != cb)
        fail_msg("%s.%s: oneof case %u against %u", path, f->name, ca, cb);
      if (ca != f->id)
        continue;
    } else if (f->quantifier_offset) {
      protobuf_c_boolean ha =
          *(const protobuf_c_boolean *)(const void *)(x + f->quantifier_offset);
      protobuf_c_boolean hb =
          *(const protobuf_c_boolean *)(const void *)(y + f->quantifier_offset);
      if (!ha != !hb)
        fail_msg("%s.has_%s: %d against %d", path, f->name, ha, hb);
      if (!ha)
        continue;
    }
    compare_elem(md, f, x + f->offset, y + f->offset, s, path);
  }
}

/* Decodes data both ways and compares; false when the decoder declined. */
static bool decodes_as_protobuf_c(const uint8_t *data, size_t size,
                                  const char *what) {
  assert_int_equal(ccg__onnx_wire_check(data, size, 0), CCG_STATUS_OK);
  ccg__onnx_cap mine, theirs;
  ccg__onnx_capped_allocator_init(&mine, 0);
  ccg__onnx_capped_allocator_init(&theirs, 0);
  Onnx__ModelProto *a = onnx__model_proto__unpack(
      ccg__onnx_capped_allocator(&theirs), size, data);
  assert_non_null(a);
  Onnx__ModelProto *b = ccg__onnx_decode(data, size, 0, &mine);
  if (b) {
    src s = {data, size};
    compare_msg(&onnx__model_proto__descriptor, a, b, &s, what);
  }
  ccg__onnx_cap_release(&mine);
  ccg__onnx_cap_release(&theirs);
  return b != NULL;
}

/* ---- tests ------------------------------------------------------------- */

static void test_rich_model_matches_protobuf_c(void **state) {
  (void)state;
  buf m = rich_model();
  assert_true(decodes_as_protobuf_c(m.p, m.n, "rich"));
  free(m.p);
}

/* Models the exporter writes: symbolic dims, graph metadata, constants. */
static void test_exported_model_matches_protobuf_c(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,4]"), w, y;
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ccg_tensor t = {CCG_DTYPE_F32, 2, {4, 2}, data};
  assert_ok(g, ccg_graph_add_initializer(g, "w", &t, &w));
  assert_ok(g, ccg_matmul(g, x, w, &y));
  assert_ok(g, ccg_gelu(g, y, "tanh", &y));
  assert_ok(g, ccg_reshape_to(g, y, (const int64_t[]){0, 2, 1}, 3, &y));
  assert_ok(g, ccg_all_reduce(g, y, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  void *bytes = NULL;
  size_t size = 0;
  assert_ok(g, ccg_onnx_export_buffer(g, NULL, &bytes, &size));
  assert_true(decodes_as_protobuf_c(bytes, size, "exported"));
  ccg_graph *back = NULL;
  assert_ok(NULL, ccg_onnx_import_buffer(bytes, size, NULL, NULL, &back));
  assert_int_equal(ccg_graph_num_nodes(back), ccg_graph_num_nodes(g));
  ccg_graph_free(back);
  free(bytes);
  ccg_graph_free(g);
}

/* Every 8th model of the ONNX node tests, where the system has them (the
 * conformance test needs them too): the writers of real models. */
static void test_onnx_node_models_match_protobuf_c(void **state) {
  (void)state;
  const char *root = "/usr/share/libonnx-testdata/data/node";
  DIR *d = opendir(root);
  if (!d) {
    print_message("no %s: only the models built here are compared\n", root);
    return;
  }
  struct dirent *e;
  size_t seen = 0, decoded = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || seen++ % 8)
      continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.onnx", root, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f)
      continue;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    decoded += decodes_as_protobuf_c(p, (size_t)n, e->d_name);
    free(p);
  }
  closedir(d);
  assert_true(decoded > 50);
}

/* What protobuf-c reads its own way is left to it: the import still takes
 * the model, as before. */
static void test_declines_and_protobuf_c_reads(void **state) {
  (void)state;
  /* two graph fields: protobuf-c merges them (the second name wins) */
  buf m = {0}, g = {0}, n = {0}, b = {0};
  put_int(&m, 1, 8);
  put_str(&b, 1, "");
  put_int(&b, 2, 17);
  wrap(&m, 8, &b);
  value_info(&g, 11, "x", 1, (const int64_t[]){3});
  put_str(&n, 1, "x");
  put_str(&n, 2, "y");
  put_str(&n, 4, "Relu");
  put_int(&n, 99, 1); /* a field NodeProto does not have */
  wrap(&g, 1, &n);
  put_str(&g, 2, "first");
  wrap(&m, 7, &g);
  value_info(&g, 12, "y", 1, (const int64_t[]){3});
  put_str(&g, 2, "second");
  wrap(&m, 7, &g);
  assert_false(decodes_as_protobuf_c(m.p, m.n, "merged"));
  ccg_graph *back = NULL;
  assert_ok(NULL, ccg_onnx_import_buffer(m.p, m.n, NULL, NULL, &back));
  assert_string_equal(ccg_graph_name(back), "second");
  assert_int_equal(ccg_graph_num_nodes(back), 1);
  ccg_graph_free(back);
  free(m.p);
}

/* Bad bytes inside the graph: the decoder declines them, and the import
 * fails naming the offset, the message and the field. */
static void test_bad_bytes_named(void **state) {
  (void)state;
  buf good = rich_model();
  /* the node's op_type "MatMul": find it to damage the bytes around it */
  const uint8_t *op = NULL;
  for (size_t i = 0; i + 6 <= good.n && !op; i++)
    if (memcmp(good.p + i, "MatMul", 6) == 0)
      op = good.p + i;
  assert_non_null(op);
  size_t at = (size_t)(op - good.p);
  ccg__onnx_cap cap;

  /* wrong wire type for a known field: op_type (4) as a varint */
  buf m = {0};
  put(&m, good.p, good.n);
  m.p[at - 2] = (uint8_t)(4 << 3 | 0);
  ccg__onnx_capped_allocator_init(&cap, 0);
  assert_null(ccg__onnx_decode(m.p, m.n, 0, &cap));
  ccg_graph *g = NULL;
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer(m.p, m.n, NULL, NULL, &g), "<buffer>",
               "NodeProto field 4 (op_type)", "wire type varint");
  assert_null(g);
  free(m.p);

  /* a length past the end of its message: the function's domain, its
   * last field, one byte longer */
  m = (buf){0};
  put(&m, good.p, good.n);
  assert_memory_equal(m.p + m.n - 6, "custom", 6);
  m.p[m.n - 7]++;
  assert_null(ccg__onnx_decode(m.p, m.n, 0, &cap));
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer(m.p, m.n, NULL, NULL, &g), "<buffer>",
               "FunctionProto field 10 (domain)",
               "runs past the end of the enclosing message");
  free(m.p);

  /* a truncated varint: the model cut inside a varint at its end */
  m = (buf){0};
  put(&m, good.p, good.n);
  put_tag(&m, 1, 0);
  uint8_t cont = 0x80;
  put(&m, &cont, 1);
  assert_null(ccg__onnx_decode(m.p, m.n, 0, &cap));
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer(m.p, m.n, NULL, NULL, &g), "<buffer>",
               "ModelProto field 1 (ir_version)", "truncated varint");
  free(m.p);

  /* a truncated model: cut inside the graph */
  assert_null(ccg__onnx_decode(good.p, good.n / 2, 0, &cap));
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer(good.p, good.n / 2, NULL, NULL, &g),
               "<buffer>", "ModelProto field 7 (graph)", "runs past the end");

  /* nesting past the limit: a graph input's dims are 7 deep (Model >
   * Graph > ValueInfo > Type > Tensor > Shape > Dimension) */
  ccg_onnx_import_options o = CCG_ONNX_IMPORT_OPTIONS_INIT;
  o.max_depth = 5;
  assert_null(ccg__onnx_decode(good.p, good.n, 5, &cap));
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer(good.p, good.n, NULL, &o, &g), "<buffer>",
               "past the limit of 5");
  ccg__onnx_cap_release(&cap);
  free(good.p);
}

/* The decoder's memory counts against the import's byte cap. */
static void test_cap_declines(void **state) {
  (void)state;
  buf m = rich_model();
  ccg__onnx_cap cap;
  ccg__onnx_capped_allocator_init(&cap, 64);
  assert_null(ccg__onnx_decode(m.p, m.n, 0, &cap));
  assert_int_equal(cap.used, 0);
  ccg_onnx_import_options o = CCG_ONNX_IMPORT_OPTIONS_INIT;
  o.max_bytes = m.n + 64;
  ccg_graph *g = NULL;
  assert_fails(NULL, CCG_STATUS_OOM,
               ccg_onnx_import_buffer(m.p, m.n, NULL, &o, &g), "byte cap");
  free(m.p);
}

/* The wire types protobuf-c reads a field of type t with (repeated:
 * packed runs too). */
static bool pb_accepts(const ProtobufCFieldDescriptor *f, unsigned wt) {
  unsigned el;
  switch (f->type) {
  case PROTOBUF_C_TYPE_FLOAT:
  case PROTOBUF_C_TYPE_FIXED32:
  case PROTOBUF_C_TYPE_SFIXED32:
    el = 5;
    break;
  case PROTOBUF_C_TYPE_DOUBLE:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_SFIXED64:
    el = 1;
    break;
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_BYTES:
  case PROTOBUF_C_TYPE_MESSAGE:
    el = 2;
    break;
  default:
    el = 0;
  }
  return wt == el || (wt == 2 && f->label == PROTOBUF_C_LABEL_REPEATED);
}

static const char *short_name(const ProtobufCMessageDescriptor *md) {
  return strncmp(md->name, "onnx.", 5) == 0 ? md->name + 5 : md->name;
}

/* The decoder skips the pre-scan: that is sound only if every field the
 * descriptors know, the scan knows too, with the same wire types and the
 * same message inside. Walks every message a ModelProto reaches. */
static void test_schema_matches_descriptors(void **state) {
  (void)state;
  const ProtobufCMessageDescriptor *queue[64] = {
      &onnx__model_proto__descriptor};
  size_t n = 1, fields = 0;
  for (size_t i = 0; i < n; i++) {
    const ProtobufCMessageDescriptor *md = queue[i];
    for (unsigned k = 0; k < md->n_fields; k++) {
      const ProtobufCFieldDescriptor *f = &md->fields[k];
      const ProtobufCMessageDescriptor *sub =
          f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
      for (unsigned wt = 0; wt < 8; wt++) {
        if (!pb_accepts(f, wt))
          continue;
        const char *want = NULL;
        if (!ccg__onnx_wire_field(short_name(md), f->id, wt, &want))
          fail_msg("%s field %u (%s), wire type %u: not in the scan's schema",
                   short_name(md), f->id, f->name, wt);
        if ((sub == NULL) != (want == NULL) ||
            (sub && strcmp(short_name(sub), want) != 0))
          fail_msg("%s field %u (%s): the scan holds %s there", short_name(md),
                   f->id, f->name, want ? want : "no message");
        fields++;
      }
      bool seen = !sub;
      for (size_t j = 0; j < n && !seen; j++)
        seen = queue[j] == sub;
      if (!seen) {
        assert_true(n < sizeof queue / sizeof queue[0]);
        queue[n++] = sub;
      }
    }
  }
  assert_true(n >= 20);
  assert_true(fields >= 100);
}

/* A model whose graph has one value_info with the given body. */
static buf with_value_info(buf *vi) {
  buf m = {0}, g = {0}, b = {0};
  put_int(&m, 1, 8);
  put_str(&b, 1, "");
  put_int(&b, 2, 17);
  wrap(&m, 8, &b);
  put_str(&g, 2, "g");
  wrap(&g, 13, vi);
  wrap(&m, 7, &g);
  return m;
}

/* value_info is checked field by field for the usual fields and by the
 * descriptors otherwise (decode_in.c): both give the pre-scan's answer. */
static void test_value_info_checked_as_pre_scan(void **state) {
  (void)state;
  for (int c = 0; c < 9; c++) {
    buf vi = {0}, type = {0}, tt = {0}, shape = {0}, dim = {0};
    put_str(&vi, 1, "v");
    put_str(&vi, 3, "doc");
    put_int(&dim, 1, 4);
    if (c == 1)
      put_str(&dim, 2, "n"); /* oneof: the later one counts */
    if (c == 2)
      put_int(&dim, 4, 1); /* no such field */
    put_str(&dim, 3, "denotation");
    wrap(&shape, 1, &dim);
    put_str(&dim, 2, "batch");
    wrap(&shape, 1, &dim);
    put_int(&tt, 1, 1);
    wrap(&tt, 2, &shape);
    if (c == 3) {
      put_len(&shape, 1, "\x08", 1); /* a dim cut short */
      wrap(&tt, 2, &shape);          /* and a second shape: merged */
    }
    if (c == 4)
      put_len(&tt, 1, "x", 1); /* elem_type with the wrong wire type */
    wrap(&type, 1, &tt);
    if (c == 5) {
      put_int(&tt, 1, 7);
      wrap(&type, 1, &tt); /* tensor_type again: a oneof, taken */
    }
    if (c == 6) {
      put_int(&tt, 1, 7);
      wrap(&type, 9, &tt); /* optional_type: another member */
    }
    put_str(&type, 6, "IMAGE");
    wrap(&vi, 2, &type);
    if (c == 7) {
      put_str(&type, 6, "x");
      wrap(&vi, 2, &type); /* a second type: merged */
    }
    if (c == 8) { /* a length past the end */
      put_tag(&vi, 1, 2);
      put_varint(&vi, 5);
      put(&vi, "ab", 2);
    }
    buf m = with_value_info(&vi);
    bool scan = ccg__onnx_wire_check(m.p, m.n, CCG__ONNX_DEFAULT_MAX_DEPTH) ==
                CCG_STATUS_OK;
    ccg_clear_error(NULL);
    ccg__onnx_cap cap;
    ccg__onnx_capped_allocator_init(&cap, 0);
    Onnx__ModelProto *mp = ccg__onnx_decode(m.p, m.n, 0, &cap);
    /* what protobuf-c merges or keeps as unknown the decoder declines; the
     * rest it takes exactly when the pre-scan passes */
    bool declined = c == 2 || c == 3 || c == 7;
    if ((mp != NULL) != (scan && !declined))
      fail_msg("value_info case %d: decoded %d, pre-scan %d", c, mp != NULL,
               scan);
    ccg__onnx_cap_release(&cap);
    free(m.p);
  }
}

/* What the decoder leaves out it still checks, and it wants a graph. */
static void test_unread_checked(void **state) {
  (void)state;
  /* graph { value_info { type { tensor_type { elem_type as bytes } } } } */
  buf m = {0}, g = {0}, vi = {0}, type = {0}, tt = {0}, b = {0};
  put_int(&m, 1, 8);
  put_str(&b, 1, "");
  put_int(&b, 2, 17);
  wrap(&m, 8, &b);
  put_str(&tt, 1, "x");
  wrap(&type, 1, &tt);
  wrap(&vi, 2, &type);
  wrap(&g, 13, &vi);
  wrap(&m, 7, &g);
  ccg__onnx_cap cap;
  ccg__onnx_capped_allocator_init(&cap, 0);
  assert_null(ccg__onnx_decode(m.p, m.n, 0, &cap));
  ccg_graph *out = NULL;
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer(m.p, m.n, NULL, NULL, &out), "<buffer>",
               "TypeProto.Tensor field 1 (elem_type)",
               "wire type length-delimited");
  free(m.p);

  /* the same value_info, well formed, but nested past the limit */
  m = (buf){0};
  put_int(&m, 1, 8);
  put_int(&tt, 1, 1);
  wrap(&type, 1, &tt);
  wrap(&vi, 2, &type);
  wrap(&g, 13, &vi);
  wrap(&m, 7, &g);
  assert_non_null(ccg__onnx_decode(m.p, m.n, 0, &cap));
  ccg__onnx_cap_release(&cap);
  assert_null(ccg__onnx_decode(m.p, m.n, 4, &cap));
  ccg_onnx_import_options o = CCG_ONNX_IMPORT_OPTIONS_INIT;
  o.max_depth = 4;
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer(m.p, m.n, NULL, &o, &out), "<buffer>",
               "past the limit of 4");
  free(m.p);

  /* no graph */
  m = (buf){0};
  put_int(&m, 1, 8);
  assert_null(ccg__onnx_decode(m.p, m.n, 0, &cap));
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_onnx_import_buffer(m.p, m.n, NULL, NULL, &out), "<buffer>",
               "no graph");
  free(m.p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rich_model_matches_protobuf_c),
      cmocka_unit_test(test_value_info_checked_as_pre_scan),
      cmocka_unit_test(test_exported_model_matches_protobuf_c),
      cmocka_unit_test(test_onnx_node_models_match_protobuf_c),
      cmocka_unit_test(test_declines_and_protobuf_c_reads),
      cmocka_unit_test(test_bad_bytes_named),
      cmocka_unit_test(test_cap_declines),
      cmocka_unit_test(test_schema_matches_descriptors),
      cmocka_unit_test(test_unread_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
