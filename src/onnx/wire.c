/* The wire-format pre-scan and the byte-capped protobuf-c allocator of
 * wire.h. The tables below are the ONNX schema reduced to what the scan
 * needs: for each message, each field's number, name and wire shape, and for
 * sub-message fields the message they hold. They must name every
 * sub-message field of schemas/onnx.proto, or protobuf-c would recurse into
 * one the scan never measured. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "onnx/wire.h"

/* How a field is encoded. The packable kinds are repeated scalars, which
 * arrive either one element per tag or packed into one length-delimited
 * field. */
typedef enum wire_kind {
  K_VARINT, /* int32/int64/uint64/enum/bool */
  K_I32,    /* float */
  K_I64,    /* double */
  K_BYTES,  /* string/bytes */
  K_MSG,    /* sub-message: descended into */
  K_PVARINT,
  K_PI32,
  K_PI64
} wire_kind;

/* clang-format off */
#define WIRE_MSG_LIST(X)                                                       \
  X(MODEL, "ModelProto")                                                       \
  X(GRAPH, "GraphProto")                                                       \
  X(NODE, "NodeProto")                                                         \
  X(ATTR, "AttributeProto")                                                    \
  X(VALUE_INFO, "ValueInfoProto")                                              \
  X(TENSOR, "TensorProto")                                                     \
  X(SEGMENT, "TensorProto.Segment")                                            \
  X(SPARSE, "SparseTensorProto")                                               \
  X(TYPE, "TypeProto")                                                         \
  X(TYPE_TENSOR, "TypeProto.Tensor")                                           \
  X(TYPE_SEQ, "TypeProto.Sequence")                                            \
  X(TYPE_MAP, "TypeProto.Map")                                                 \
  X(TYPE_OPT, "TypeProto.Optional")                                            \
  X(TYPE_SPARSE, "TypeProto.SparseTensor")                                     \
  X(TYPE_OPAQUE, "TypeProto.Opaque")                                           \
  X(SHAPE, "TensorShapeProto")                                                 \
  X(DIM, "TensorShapeProto.Dimension")                                         \
  X(OPSET, "OperatorSetIdProto")                                               \
  X(ENTRY, "StringStringEntryProto")                                           \
  X(ANNOTATION, "TensorAnnotation")                                            \
  X(TRAINING, "TrainingInfoProto")                                             \
  X(FUNCTION, "FunctionProto")                                                 \
  X(DEVICE_CONF, "DeviceConfigurationProto")                                   \
  X(NODE_DEVICE_CONF, "NodeDeviceConfigurationProto")                          \
  X(SHARDING, "ShardingSpecProto")                                             \
  X(SHARDED_DIM, "ShardedDimProto")                                            \
  X(SIMPLE_SHARDED_DIM, "SimpleShardedDimProto")                               \
  X(INT_INT_LIST, "IntIntListEntryProto")

typedef enum wire_msg {
#define WIRE_MSG_ENUM(id, name) M_##id,
  WIRE_MSG_LIST(WIRE_MSG_ENUM)
#undef WIRE_MSG_ENUM
  M_COUNT
} wire_msg;
/* clang-format on */

typedef struct wire_field {
  uint32_t number;
  wire_kind kind;
  wire_msg msg; /* K_MSG only */
  const char *name;
} wire_field;

#define F(num, kind, nm)                                                       \
  { num, kind, M_COUNT, nm }
#define SUB(num, m, nm)                                                        \
  { num, K_MSG, M_##m, nm }

static const wire_field model_fields[] = {
    F(1, K_VARINT, "ir_version"),     SUB(8, OPSET, "opset_import"),
    F(2, K_BYTES, "producer_name"),   F(3, K_BYTES, "producer_version"),
    F(4, K_BYTES, "domain"),          F(5, K_VARINT, "model_version"),
    F(6, K_BYTES, "doc_string"),      SUB(7, GRAPH, "graph"),
    SUB(14, ENTRY, "metadata_props"), SUB(20, TRAINING, "training_info"),
    SUB(25, FUNCTION, "functions"),   SUB(26, DEVICE_CONF, "configuration"),
};
static const wire_field graph_fields[] = {
    SUB(1, NODE, "node"),
    F(2, K_BYTES, "name"),
    SUB(5, TENSOR, "initializer"),
    SUB(15, SPARSE, "sparse_initializer"),
    F(10, K_BYTES, "doc_string"),
    SUB(11, VALUE_INFO, "input"),
    SUB(12, VALUE_INFO, "output"),
    SUB(13, VALUE_INFO, "value_info"),
    SUB(14, ANNOTATION, "quantization_annotation"),
    SUB(16, ENTRY, "metadata_props"),
};
static const wire_field node_fields[] = {
    F(1, K_BYTES, "input"),
    F(2, K_BYTES, "output"),
    F(3, K_BYTES, "name"),
    F(4, K_BYTES, "op_type"),
    F(7, K_BYTES, "domain"),
    F(8, K_BYTES, "overload"),
    SUB(5, ATTR, "attribute"),
    F(6, K_BYTES, "doc_string"),
    SUB(9, ENTRY, "metadata_props"),
    SUB(10, NODE_DEVICE_CONF, "device_configurations"),
};
static const wire_field attr_fields[] = {
    F(1, K_BYTES, "name"),
    F(21, K_BYTES, "ref_attr_name"),
    F(13, K_BYTES, "doc_string"),
    F(20, K_VARINT, "type"),
    F(2, K_I32, "f"),
    F(3, K_VARINT, "i"),
    F(4, K_BYTES, "s"),
    SUB(5, TENSOR, "t"),
    SUB(6, GRAPH, "g"),
    SUB(22, SPARSE, "sparse_tensor"),
    SUB(14, TYPE, "tp"),
    F(7, K_PI32, "floats"),
    F(8, K_PVARINT, "ints"),
    F(9, K_BYTES, "strings"),
    SUB(10, TENSOR, "tensors"),
    SUB(11, GRAPH, "graphs"),
    SUB(23, SPARSE, "sparse_tensors"),
    SUB(15, TYPE, "type_protos"),
};
static const wire_field value_info_fields[] = {
    F(1, K_BYTES, "name"),
    SUB(2, TYPE, "type"),
    F(3, K_BYTES, "doc_string"),
    SUB(4, ENTRY, "metadata_props"),
};
static const wire_field tensor_fields[] = {
    F(1, K_PVARINT, "dims"),          F(2, K_VARINT, "data_type"),
    SUB(3, SEGMENT, "segment"),       F(4, K_PI32, "float_data"),
    F(5, K_PVARINT, "int32_data"),    F(6, K_BYTES, "string_data"),
    F(7, K_PVARINT, "int64_data"),    F(8, K_BYTES, "name"),
    F(12, K_BYTES, "doc_string"),     F(9, K_BYTES, "raw_data"),
    SUB(13, ENTRY, "external_data"),  F(14, K_VARINT, "data_location"),
    F(10, K_PI64, "double_data"),     F(11, K_PVARINT, "uint64_data"),
    SUB(16, ENTRY, "metadata_props"),
};
static const wire_field segment_fields[] = {
    F(1, K_VARINT, "begin"),
    F(2, K_VARINT, "end"),
};
static const wire_field sparse_fields[] = {
    SUB(1, TENSOR, "values"),
    SUB(2, TENSOR, "indices"),
    F(3, K_PVARINT, "dims"),
};
static const wire_field type_fields[] = {
    SUB(1, TYPE_TENSOR, "tensor_type"),
    SUB(4, TYPE_SEQ, "sequence_type"),
    SUB(5, TYPE_MAP, "map_type"),
    SUB(9, TYPE_OPT, "optional_type"),
    SUB(8, TYPE_SPARSE, "sparse_tensor_type"),
    SUB(7, TYPE_OPAQUE, "opaque_type"),
    F(6, K_BYTES, "denotation"),
};
static const wire_field type_tensor_fields[] = {
    F(1, K_VARINT, "elem_type"),
    SUB(2, SHAPE, "shape"),
};
static const wire_field type_seq_fields[] = {
    SUB(1, TYPE, "elem_type"),
};
static const wire_field type_map_fields[] = {
    F(1, K_VARINT, "key_type"),
    SUB(2, TYPE, "value_type"),
};
static const wire_field type_opaque_fields[] = {
    F(1, K_BYTES, "domain"),
    F(2, K_BYTES, "name"),
};
static const wire_field shape_fields[] = {
    SUB(1, DIM, "dim"),
};
static const wire_field dim_fields[] = {
    F(1, K_VARINT, "dim_value"),
    F(2, K_BYTES, "dim_param"),
    F(3, K_BYTES, "denotation"),
};
static const wire_field opset_fields[] = {
    F(1, K_BYTES, "domain"),
    F(2, K_VARINT, "version"),
};
static const wire_field entry_fields[] = {
    F(1, K_BYTES, "key"),
    F(2, K_BYTES, "value"),
};
static const wire_field annotation_fields[] = {
    F(1, K_BYTES, "tensor_name"),
    SUB(2, ENTRY, "quant_parameter_tensor_names"),
};
static const wire_field training_fields[] = {
    SUB(1, GRAPH, "initialization"),
    SUB(2, GRAPH, "algorithm"),
    SUB(3, ENTRY, "initialization_binding"),
    SUB(4, ENTRY, "update_binding"),
};
static const wire_field function_fields[] = {
    F(1, K_BYTES, "name"),
    F(4, K_BYTES, "input"),
    F(5, K_BYTES, "output"),
    F(6, K_BYTES, "attribute"),
    SUB(11, ATTR, "attribute_proto"),
    SUB(7, NODE, "node"),
    F(8, K_BYTES, "doc_string"),
    SUB(9, OPSET, "opset_import"),
    F(10, K_BYTES, "domain"),
    F(13, K_BYTES, "overload"),
    SUB(12, VALUE_INFO, "value_info"),
    SUB(14, ENTRY, "metadata_props"),
};
static const wire_field device_conf_fields[] = {
    F(1, K_BYTES, "name"),
    F(2, K_VARINT, "num_devices"),
    F(3, K_BYTES, "device"),
};
static const wire_field node_device_conf_fields[] = {
    F(1, K_BYTES, "configuration_id"),
    SUB(2, SHARDING, "sharding_spec"),
    F(3, K_VARINT, "pipeline_stage"),
};
static const wire_field sharding_fields[] = {
    F(1, K_BYTES, "tensor_name"),
    F(2, K_PVARINT, "device"),
    SUB(3, INT_INT_LIST, "index_to_device_group_map"),
    SUB(4, SHARDED_DIM, "sharded_dim"),
};
static const wire_field sharded_dim_fields[] = {
    F(1, K_VARINT, "axis"),
    SUB(2, SIMPLE_SHARDED_DIM, "simple_sharding"),
};
static const wire_field simple_sharded_dim_fields[] = {
    F(1, K_VARINT, "dim_value"),
    F(2, K_BYTES, "dim_param"),
    F(3, K_VARINT, "num_shards"),
};
static const wire_field int_int_list_fields[] = {
    F(1, K_VARINT, "key"),
    F(2, K_PVARINT, "value"),
};

#undef F
#undef SUB

typedef struct wire_desc {
  const char *name;
  const wire_field *fields;
  size_t n;
} wire_desc;

#define DESC(id, arr) [M_##id] = {NULL, arr, sizeof arr / sizeof arr[0]}

static const wire_desc descs[] = {
    DESC(MODEL, model_fields),
    DESC(GRAPH, graph_fields),
    DESC(NODE, node_fields),
    DESC(ATTR, attr_fields),
    DESC(VALUE_INFO, value_info_fields),
    DESC(TENSOR, tensor_fields),
    DESC(SEGMENT, segment_fields),
    DESC(SPARSE, sparse_fields),
    DESC(TYPE, type_fields),
    DESC(TYPE_TENSOR, type_tensor_fields),
    DESC(TYPE_SEQ, type_seq_fields),
    DESC(TYPE_MAP, type_map_fields),
    DESC(TYPE_OPT, type_seq_fields), /* same shape: elem_type = 1 */
    DESC(TYPE_SPARSE, type_tensor_fields),
    DESC(TYPE_OPAQUE, type_opaque_fields),
    DESC(SHAPE, shape_fields),
    DESC(DIM, dim_fields),
    DESC(OPSET, opset_fields),
    DESC(ENTRY, entry_fields),
    DESC(ANNOTATION, annotation_fields),
    DESC(TRAINING, training_fields),
    DESC(FUNCTION, function_fields),
    DESC(DEVICE_CONF, device_conf_fields),
    DESC(NODE_DEVICE_CONF, node_device_conf_fields),
    DESC(SHARDING, sharding_fields),
    DESC(SHARDED_DIM, sharded_dim_fields),
    DESC(SIMPLE_SHARDED_DIM, simple_sharded_dim_fields),
    DESC(INT_INT_LIST, int_int_list_fields),
};
#undef DESC
_Static_assert(sizeof descs / sizeof descs[0] == M_COUNT,
               "descs must cover wire_msg");

static const char *const msg_names[] = {
#define WIRE_MSG_NAME(id, name) name,
    WIRE_MSG_LIST(WIRE_MSG_NAME)
#undef WIRE_MSG_NAME
};
_Static_assert(sizeof msg_names / sizeof msg_names[0] == M_COUNT,
               "msg_names must cover wire_msg");

enum {
  WT_VARINT = 0,
  WT_I64 = 1,
  WT_LEN = 2,
  WT_SGROUP = 3,
  WT_EGROUP = 4,
  WT_I32 = 5
};

#define MAX_FIELD_NUMBER 536870911u /* 2^29 - 1 */

static const char *wt_name(unsigned wt) {
  static const char *const names[] = {
      "varint",    "64-bit", "length-delimited", "start-group",
      "end-group", "32-bit", "invalid (6)",      "invalid (7)"};
  return names[wt & 7];
}

static const wire_field *find_field(wire_msg m, uint32_t number) {
  const wire_desc *d = &descs[m];
  for (size_t i = 0; i < d->n; i++)
    if (d->fields[i].number == number)
      return &d->fields[i];
  return NULL;
}

static bool kind_accepts(wire_kind k, unsigned wt) {
  switch (k) {
  case K_VARINT:
    return wt == WT_VARINT;
  case K_I32:
    return wt == WT_I32;
  case K_I64:
    return wt == WT_I64;
  case K_BYTES:
  case K_MSG:
    return wt == WT_LEN;
  case K_PVARINT:
    return wt == WT_VARINT || wt == WT_LEN;
  case K_PI32:
    return wt == WT_I32 || wt == WT_LEN;
  case K_PI64:
    return wt == WT_I64 || wt == WT_LEN;
  }
  return false;
}

static unsigned kind_wt(wire_kind k) {
  switch (k) {
  case K_VARINT:
  case K_PVARINT:
    return WT_VARINT;
  case K_I32:
  case K_PI32:
    return WT_I32;
  case K_I64:
  case K_PI64:
    return WT_I64;
  case K_BYTES:
  case K_MSG:
    break;
  }
  return WT_LEN;
}

/* Reads a varint of at most max_bytes bytes from p[*pos..end). 0 on
 * success, 1 if it runs into `end`, 2 if it is longer than max_bytes. Tags
 * and lengths get 5 bytes (32 bits), as protobuf-c reads them: a longer one
 * would be read differently there than here. Values get 10. */
static int read_varint(const uint8_t *p, size_t *pos, size_t end,
                       unsigned max_bytes, uint64_t *out) {
  uint64_t v = 0;
  size_t i = *pos;
  for (unsigned shift = 0; shift < 7 * max_bytes; shift += 7) {
    if (i >= end)
      return 1;
    uint8_t b = p[i++];
    v |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
    if (!(b & 0x80)) {
      *pos = i;
      *out = v;
      return 0;
    }
  }
  return 2;
}

typedef struct wire_frame {
  wire_msg msg;
  size_t end;
} wire_frame;

/* The scan's state, so that errors can say where they happened. */
typedef struct wire_scan {
  const uint8_t *data;
  size_t size;
  int max_depth;
  wire_frame *stack;
  size_t depth, cap;
} wire_scan;

/* Where a field starts, for messages. Formatted only when something fails:
 * the scan runs over every field of every model imported. */
typedef struct wire_where {
  size_t at;
  wire_msg msg;
  uint32_t num;
  const wire_field *field;
} wire_where;

static ccg_status field_fail(const wire_where *w, const char *fmt, ...)
    CCG_PRINTF(2, 3);
static ccg_status field_fail(const wire_where *w, const char *fmt, ...) {
  char problem[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(problem, sizeof problem, fmt, ap);
  va_end(ap);
  if (w->field)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "ONNX wire format: byte %zu: %s field %u (%s): %s", w->at,
                      msg_names[w->msg], (unsigned)w->num, w->field->name,
                      problem);
  return ccg__error(NULL, CCG_STATUS_PARSE,
                    "ONNX wire format: byte %zu: %s field %u: %s", w->at,
                    msg_names[w->msg], (unsigned)w->num, problem);
}

static const char *end_text(const wire_scan *s) {
  return s->depth > 1 ? "the enclosing message" : "the data";
}

static ccg_status push(wire_scan *s, wire_msg m, size_t end) {
  if (s->depth == s->cap && !ccg__vec_reserve(NULL, (void **)&s->stack, &s->cap,
                                              s->depth + 1, sizeof *s->stack))
    return ccg__error(NULL, CCG_STATUS_OOM,
                      "ONNX wire check: cannot grow the nesting stack to %zu",
                      s->depth + 1);
  s->stack[s->depth].msg = m;
  s->stack[s->depth].end = end;
  s->depth++;
  return CCG_STATUS_OK;
}

/* A packed run of scalars must hold whole elements. */
static ccg_status check_packed(const wire_scan *s, const wire_where *w,
                               size_t pos, size_t len) {
  wire_kind k = w->field->kind;
  if (k == K_PI32 || k == K_PI64) {
    size_t el = k == K_PI32 ? 4 : 8;
    if (len % el)
      return field_fail(w, "packed length %zu is not a multiple of %zu", len,
                        el);
    return CCG_STATUS_OK;
  }
  size_t end = pos + len;
  while (pos < end) {
    uint64_t v;
    size_t start = pos;
    if (read_varint(s->data, &pos, end, 10, &v))
      return field_fail(w, "packed varint at byte %zu is truncated or too long",
                        start);
  }
  return CCG_STATUS_OK;
}

/* One field of the message on top of the stack, starting at *pos. */
static ccg_status scan_field(wire_scan *s, size_t *pos, bool first,
                             bool *saw_graph) {
  wire_frame *top = &s->stack[s->depth - 1];
  wire_msg m = top->msg;
  size_t at = *pos, end = top->end;
  uint64_t tag;
  int rc = read_varint(s->data, pos, end, 5, &tag);
  if (rc || tag >> 32)
    return ccg__error(
        NULL, CCG_STATUS_PARSE, "ONNX wire format: byte %zu: %s: %s field tag",
        at, msg_names[m], rc == 1 ? "truncated" : "over-long (past 32 bits)");
  uint32_t num = (uint32_t)(tag >> 3);
  unsigned wt = (unsigned)(tag & 7);
  const wire_field *f = num ? find_field(m, num) : NULL;
  wire_where w = {at, m, num, f};
  if (first && (!f || !kind_accepts(f->kind, wt)))
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "not an ONNX %s: the first bytes (tag 0x%llx: field "
                      "%u, wire type %s) are not a %s field",
                      m == M_MODEL ? "model" : "tensor",
                      (unsigned long long)tag, (unsigned)num, wt_name(wt),
                      msg_names[m]);
  if (num == 0 || num > MAX_FIELD_NUMBER)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "ONNX wire format: byte %zu: %s: invalid field number %u",
                      at, msg_names[m], (unsigned)num);
  if (wt == WT_SGROUP || wt == WT_EGROUP || wt > WT_I32)
    return field_fail(&w, "%s wire type%s", wt_name(wt),
                      wt <= WT_I32 ? " (groups are not used by ONNX)" : "");
  if (f && !kind_accepts(f->kind, wt))
    return field_fail(&w, "wire type %s, the schema says %s", wt_name(wt),
                      wt_name(kind_wt(f->kind)));
  uint64_t v;
  switch (wt) {
  case WT_VARINT:
    rc = read_varint(s->data, pos, end, 10, &v);
    if (rc)
      return field_fail(&w, "%s varint",
                        rc == 1 ? "truncated"
                                : "over-long (more than 10 bytes)");
    return CCG_STATUS_OK;
  case WT_I64:
  case WT_I32: {
    size_t n = wt == WT_I64 ? 8 : 4;
    if (end - *pos < n)
      return field_fail(&w, "%zu-byte value runs past the end of %s", n,
                        end_text(s));
    *pos += n;
    return CCG_STATUS_OK;
  }
  default:
    break;
  }
  size_t len_at = *pos;
  rc = read_varint(s->data, pos, end, 5, &v);
  if (rc || v > UINT32_MAX)
    return field_fail(&w, "%s length",
                      rc == 1 ? "truncated" : "over-long (past 32 bits)");
  if (v > end - *pos)
    return field_fail(&w,
                      "length %llu (at byte %zu) runs past the end of %s "
                      "(%zu bytes left)",
                      (unsigned long long)v, len_at, end_text(s), end - *pos);
  size_t len = (size_t)v;
  if (!f || f->kind == K_BYTES) {
    *pos += len;
    return CCG_STATUS_OK;
  }
  if (f->kind != K_MSG) {
    CCG_CHECK(check_packed(s, &w, *pos, len));
    *pos += len;
    return CCG_STATUS_OK;
  }
  if (m == M_MODEL && f->msg == M_GRAPH)
    *saw_graph = true;
  if (s->depth + 1 > (size_t)s->max_depth)
    return field_fail(&w, "%s nested %zu deep, past the limit of %d",
                      msg_names[f->msg], s->depth + 1, s->max_depth);
  /* The child is read next, from *pos: no recursion. */
  return push(s, f->msg, *pos + len);
}

/* The scan from a root message (ModelProto or TensorProto). */
static ccg_status scan(const uint8_t *data, size_t size, int max_depth,
                       wire_msg root, bool *saw_graph) {
  if (!data && size)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ONNX wire check: NULL data of %zu bytes", size);
  if (size == 0)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "not an ONNX %s: the data is empty (0 bytes)",
                      root == M_MODEL ? "model" : "tensor");
  wire_scan s = {
      data, size, max_depth > 0 ? max_depth : CCG__ONNX_DEFAULT_MAX_DEPTH,
      NULL, 0,    0};
  ccg_status st = push(&s, root, size);
  size_t pos = 0;
  bool first = true;
  while (st == CCG_STATUS_OK) {
    /* Close every message that ends here (a sub-message may end exactly
     * where its parent does). */
    while (s.depth && pos == s.stack[s.depth - 1].end)
      s.depth--;
    if (!s.depth)
      break;
    st = scan_field(&s, &pos, first, saw_graph);
    first = false;
  }
  free(s.stack);
  return st;
}

ccg_status ccg__onnx_wire_check(const uint8_t *data, size_t size,
                                int max_depth) {
  bool saw_graph = false;
  ccg_status st = scan(data, size, max_depth, M_MODEL, &saw_graph);
  if (st == CCG_STATUS_OK && !saw_graph)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "not an ONNX model: no graph (ModelProto field 7) in "
                      "%zu bytes",
                      size);
  return st;
}

ccg_status ccg__onnx_wire_check_tensor(const uint8_t *data, size_t size) {
  bool unused = false;
  return scan(data, size, CCG__ONNX_DEFAULT_MAX_DEPTH, M_TENSOR, &unused);
}

static bool msg_named(const char *type, wire_msg *m) {
  for (int i = 0; i < M_COUNT; i++)
    if (strcmp(msg_names[i], type) == 0) {
      *m = (wire_msg)i;
      return true;
    }
  return false;
}

bool ccg__onnx_wire_field(const char *type, uint32_t number, unsigned wire_type,
                          const char **sub) {
  wire_msg m;
  const wire_field *f = msg_named(type, &m) ? find_field(m, number) : NULL;
  if (!f || !kind_accepts(f->kind, wire_type))
    return false;
  *sub = f->kind == K_MSG ? msg_names[f->msg] : NULL;
  return true;
}

/* ---- the capped allocator ---------------------------------------------- */

/* Small blocks (nearly all of a model's messages, names and lists) are
 * carved front to back from chunks and only counted on free: protobuf-c
 * makes one allocation per message and string, and malloc/free of each was a
 * fifth of an import. Large blocks (tensor data) get their own malloc, are
 * kept on a list and go back on free. Every block has a header with its
 * size; large ones have the list links in front of it. */
typedef struct cap_hdr {
  size_t size; /* bytes counted against the cap, header included */
  size_t large;
} cap_hdr;

typedef struct cap_links {
  struct cap_links *prev, *next;
} cap_links;

#define CAP_ALIGN _Alignof(max_align_t)
#define CAP_ROUND(n) (((n) + CAP_ALIGN - 1) & ~(size_t)(CAP_ALIGN - 1))
#define CAP_HDR CAP_ROUND(sizeof(cap_hdr))
#define CAP_LINKS CAP_ROUND(sizeof(cap_links))
/* Large blocks start 64 bytes into their allocation (links, then the
 * header), so that their data is 64-byte aligned as the graph keeps
 * tensors: an import may lend them to the graph (import.c). */
#define CAP_LARGE_OFF ((size_t)64)
_Static_assert(CAP_LINKS + CAP_HDR <= CAP_LARGE_OFF,
               "a large block's links and header fit before its data");
#define CAP_SMALL_MAX ((size_t)4096)
#define CAP_CHUNK_MIN ((size_t)64 << 10)
#define CAP_CHUNK_MAX ((size_t)4 << 20)
/* Chunks from this size on are huge-page blocks (ccg__bulk_alloc): a
 * decoded model is fresh memory, written once, and 4 KiB page faults were
 * half of its decoding. */
#define CAP_CHUNK_BULK ((size_t)2 << 20)

/* The head of a chunk of small blocks. */
typedef struct cap_chunk {
  struct cap_chunk *next;
  size_t bulk; /* its size when it came from ccg__bulk_alloc, else 0 */
} cap_chunk;

static bool cap_charge(ccg__onnx_cap *cap, size_t total) {
  if (cap->max_bytes &&
      (total > cap->max_bytes || cap->used > cap->max_bytes - total)) {
    cap->exceeded = true;
    return false;
  }
  cap->used += total;
  if (cap->used > cap->peak)
    cap->peak = cap->used;
  return true;
}

static void *cap_alloc_small(ccg__onnx_cap *cap, size_t size) {
  size_t total = CAP_HDR + CAP_ROUND(size);
  if ((size_t)(cap->end - cap->cur) < total) {
    size_t chunk = cap->chunk_size ? cap->chunk_size : CAP_CHUNK_MIN;
    cap_chunk *c = chunk >= CAP_CHUNK_BULK ? ccg__bulk_alloc(chunk) : NULL;
    size_t bulk = c ? chunk : 0;
    if (!c && !(c = malloc(chunk)))
      return NULL;
    c->next = cap->chunks;
    c->bulk = bulk;
    cap->chunks = c;
    cap->cur = (uint8_t *)c + CAP_ROUND(sizeof *c);
    cap->end = (uint8_t *)c + chunk;
    cap->chunk_size = chunk < CAP_CHUNK_MAX ? chunk * 2 : chunk;
  }
  if (!cap_charge(cap, total))
    return NULL;
  cap_hdr *h = (cap_hdr *)cap->cur;
  cap->cur += total;
  h->size = total;
  h->large = 0;
  return (uint8_t *)h + CAP_HDR;
}

static void *cap_alloc(void *user, size_t size) {
  ccg__onnx_cap *cap = user;
  if (size <= CAP_SMALL_MAX)
    return cap_alloc_small(cap, size);
  size_t total = CAP_LARGE_OFF + size;
  if (total < size || total > SIZE_MAX - CAP_LARGE_OFF) {
    cap->exceeded = true;
    return NULL;
  }
  if (!cap_charge(cap, total))
    return NULL;
  uint8_t *p = aligned_alloc(CAP_LARGE_OFF, (total + CAP_LARGE_OFF - 1) &
                                                ~(CAP_LARGE_OFF - 1));
  if (!p) {
    cap->used -= total;
    return NULL;
  }
  cap_links *l = (cap_links *)p;
  l->prev = NULL;
  l->next = cap->large;
  if (l->next)
    l->next->prev = l;
  cap->large = l;
  cap_hdr *h = (cap_hdr *)(p + CAP_LARGE_OFF - CAP_HDR);
  h->size = total;
  h->large = 1;
  return p + CAP_LARGE_OFF;
}

static void cap_free(void *user, void *ptr) {
  if (!ptr)
    return;
  ccg__onnx_cap *cap = user;
  cap_hdr *h = (cap_hdr *)((uint8_t *)ptr - CAP_HDR);
  cap->used -= h->size;
  if (!h->large)
    return; /* its chunk goes in ccg__onnx_cap_release */
  cap_links *l = (cap_links *)((uint8_t *)ptr - CAP_LARGE_OFF);
  if (l->prev)
    l->prev->next = l->next;
  else
    cap->large = l->next;
  if (l->next)
    l->next->prev = l->prev;
  free(l);
}

void *ccg__onnx_cap_block(ccg__onnx_cap *cap, size_t size) {
  size_t total = CAP_ROUND(sizeof(cap_chunk)) + size;
  if (total < size || !cap_charge(cap, total))
    return NULL;
  cap_chunk *c = total >= CAP_CHUNK_BULK ? ccg__bulk_alloc(total) : NULL;
  size_t bulk = c ? total : 0;
  if (!c && !(c = malloc(total))) {
    cap->used -= total;
    return NULL;
  }
  /* behind the newest chunk: small blocks keep being carved from that */
  c->bulk = bulk;
  if (cap->chunks) {
    c->next = ((cap_chunk *)cap->chunks)->next;
    ((cap_chunk *)cap->chunks)->next = c;
  } else {
    c->next = NULL;
    cap->chunks = c;
  }
  return (uint8_t *)c + CAP_ROUND(sizeof *c);
}

void ccg__onnx_capped_allocator_init(ccg__onnx_cap *cap, size_t max_bytes) {
  memset(cap, 0, sizeof *cap);
  cap->pc.alloc = cap_alloc;
  cap->pc.free = cap_free;
  cap->pc.allocator_data = cap;
  cap->max_bytes = max_bytes;
}

ProtobufCAllocator *ccg__onnx_capped_allocator(ccg__onnx_cap *cap) {
  return &cap->pc;
}

void ccg__onnx_cap_release(ccg__onnx_cap *cap) {
  for (cap_chunk *c = cap->chunks; c;) {
    cap_chunk *next = c->next;
    if (c->bulk)
      ccg__bulk_free(c, c->bulk);
    else
      free(c);
    c = next;
  }
  for (cap_links *l = cap->large; l;) {
    cap_links *next = l->next;
    free(l);
    l = next;
  }
  ccg__onnx_capped_allocator_init(cap, cap->max_bytes);
}

bool ccg__onnx_cap_exceeded(const ccg__onnx_cap *cap) { return cap->exceeded; }
