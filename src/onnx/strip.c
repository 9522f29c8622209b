/* Inline weights taken out of a model's bytes before protobuf-c decodes
 * them: protobuf-c copies every bytes field, so a model's raw_data would
 * live twice (the source and the decoded copy) until the import ends. The
 * graph's initializers are copied once, from the source, into the graph;
 * a mapped model file can then let go of each weight's pages as soon as
 * that weight is copied. Runs after ccg__onnx_wire_check: the bytes are
 * well formed, but every read is still bounds-checked. */
#include <stdlib.h>
#include <string.h>

#include "onnx/internal.h"

enum {
  MODEL_GRAPH = 7, /* ModelProto.graph */
  GRAPH_INIT = 5,  /* GraphProto.initializer */
  TENSOR_RAW = 9,  /* TensorProto.raw_data */
  WIRE_LEN = 2,    /* length-delimited */
  MIN_RAW = 4096   /* smaller raw_data stays where it is */
};

typedef struct field {
  const uint8_t *start; /* the tag */
  const uint8_t *body;  /* the payload (length-delimited fields) */
  size_t len;           /* payload bytes */
  const uint8_t *end;   /* one past the field */
  uint32_t number;
  int wire;
} field;

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return true;
  }
  return false;
}

/* The field at *p, which then points past it. */
static bool next_field(const uint8_t **p, const uint8_t *end, field *f) {
  uint64_t tag, v;
  f->start = *p;
  if (!varint(p, end, &tag))
    return false;
  f->number = (uint32_t)(tag >> 3);
  f->wire = (int)(tag & 7);
  f->body = NULL;
  f->len = 0;
  switch (f->wire) {
  case 0:
    if (!varint(p, end, &v))
      return false;
    break;
  case 1:
  case 5: {
    size_t n = f->wire == 1 ? 8 : 4;
    if ((size_t)(end - *p) < n)
      return false;
    *p += n;
    break;
  }
  case WIRE_LEN:
    if (!varint(p, end, &v) || v > (uint64_t)(end - *p))
      return false;
    f->body = *p;
    f->len = (size_t)v;
    *p += v;
    break;
  default:
    return false;
  }
  f->end = *p;
  return true;
}

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7)
    n++;
  return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
  for (; v >= 0x80; v >>= 7)
    *p++ = (uint8_t)(v | 0x80);
  *p++ = (uint8_t)v;
  return p;
}

/* The lone large raw_data field of a TensorProto's payload, if it has one
 * (a repeated raw_data would be merged by protobuf: left alone). */
static bool lone_raw(const field *init, field *raw) {
  const uint8_t *p = init->body, *end = init->body + init->len;
  int found = 0;
  field f;
  while (p < end) {
    if (!next_field(&p, end, &f))
      return false;
    if (f.number == TENSOR_RAW) {
      if (f.wire != WIRE_LEN)
        return false;
      *raw = f;
      found++;
    }
  }
  return found == 1 && raw->len >= MIN_RAW;
}

static uint8_t *put_field_head(uint8_t *p, uint32_t number, size_t len) {
  p = put_varint(p, (uint64_t)number << 3 | WIRE_LEN);
  return put_varint(p, len);
}

ccg_status ccg__onnx_strip_raw(const uint8_t *data, size_t size,
                               ccg__onnx_stripped *out) {
  memset(out, 0, sizeof *out);
  const uint8_t *p = data, *end = data + size;
  field f, graph = {0};
  int graphs = 0;
  while (p < end) {
    if (!next_field(&p, end, &f))
      return CCG_STATUS_OK; /* protobuf-c will say what is wrong */
    if (f.number == MODEL_GRAPH && f.wire == WIRE_LEN) {
      graph = f;
      graphs++;
    }
  }
  if (graphs != 1) /* several would be merged: left to protobuf-c */
    return CCG_STATUS_OK;
  /* the initializers with a raw_data to take out, and the bytes saved */
  size_t n_init = 0, n_raw = 0, saved = 0;
  p = graph.body;
  const uint8_t *gend = graph.body + graph.len;
  while (p < gend) {
    field r;
    if (!next_field(&p, gend, &f))
      return CCG_STATUS_OK;
    if (f.number != GRAPH_INIT || f.wire != WIRE_LEN)
      continue;
    n_init++;
    if (lone_raw(&f, &r)) {
      size_t inner = f.len - (size_t)(r.end - r.start);
      saved += (size_t)(f.end - f.start) -
               (varint_size((uint64_t)GRAPH_INIT << 3 | WIRE_LEN) +
                varint_size(inner) + inner);
      n_raw++;
    }
  }
  if (!n_raw)
    return CCG_STATUS_OK;
  size_t glen = graph.len - saved;
  size_t total = (size_t)(graph.start - data) +
                 varint_size((uint64_t)MODEL_GRAPH << 3 | WIRE_LEN) +
                 varint_size(glen) + glen + (size_t)(end - graph.end);
  out->data = malloc(total ? total : 1);
  out->raw = calloc(n_raw, sizeof *out->raw);
  if (!out->data || !out->raw) {
    ccg__onnx_stripped_free(out);
    return ccg__error(NULL, CCG_STATUS_OOM, "%zu bytes for the model", total);
  }
  uint8_t *w = out->data;
  memcpy(w, data, (size_t)(graph.start - data));
  w += graph.start - data;
  w = put_field_head(w, MODEL_GRAPH, glen);
  p = graph.body;
  size_t k = 0;
  while (p < gend) {
    field r;
    next_field(&p, gend, &f); /* read whole above */
    if (f.number != GRAPH_INIT || f.wire != WIRE_LEN || !lone_raw(&f, &r)) {
      memcpy(w, f.start, (size_t)(f.end - f.start));
      w += f.end - f.start;
      if (f.number == GRAPH_INIT && f.wire == WIRE_LEN)
        k++;
      continue;
    }
    size_t before = (size_t)(r.start - f.body);
    size_t after = (size_t)(f.body + f.len - r.end);
    w = put_field_head(w, GRAPH_INIT, before + after);
    memcpy(w, f.body, before);
    w += before;
    memcpy(w, r.end, after);
    w += after;
    out->raw[out->n_raw++] = (ccg__onnx_raw){k++, r.body, r.len};
  }
  memcpy(w, graph.end, (size_t)(end - graph.end));
  w += end - graph.end;
  out->size = (size_t)(w - out->data);
  if (out->size != total || k != n_init) {
    ccg__onnx_stripped_free(out);
    return ccg__error(NULL, CCG_STATUS_INTERNAL,
                      "taking inline weights out of the model: wrote %zu of "
                      "%zu bytes",
                      (size_t)(w - out->data), total);
  }
  return CCG_STATUS_OK;
}

void ccg__onnx_stripped_free(ccg__onnx_stripped *s) {
  free(s->data);
  free(s->raw);
  memset(s, 0, sizeof *s);
}
