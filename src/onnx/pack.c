/* Serialization of built models. The ranks of one SPMD graph differ only in
 * their initializers' data, so the model is built once and packed in parts:
 * protobuf-c writes a message's fields in field-number order, so a message's
 * bytes are the bytes of its fields' ranges laid end to end. ModelProto is
 * [fields before graph][graph][fields after]; GraphProto is [node, name]
 * [initializer][the rest]. Everything but the initializer range is packed
 * once; each rank packs its initializers and copies the rest around them,
 * which gives exactly the bytes a whole-model pack gives. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "onnx/internal.h"

enum {
  MODEL_GRAPH_FIELD = 7, /* ModelProto.graph */
  GRAPH_INIT_FIELD = 5,  /* GraphProto.initializer */
  LAST_FIELD = 0x1fffffff
};

struct ccg__onnx_shared {
  ccg_graph *g;
  ccg_onnx_export_options o;
  int64_t first;        /* the rank the model was built for */
  ccg_arena a;          /* the model */
  ccg_arena rank_arena; /* one rank's initializers, reset per rank */
  Onnx__ModelProto *m;
  /* the rank whose data the model's initializers hold; they are made again
   * in place for another (stale: for none, after a failure) */
  int64_t built;
  bool stale;
  size_t *init_size; /* their packed sizes */
  /* packed parts: model before the graph field, graph before and after
   * its initializers, model after the graph field */
  struct seg *part[4];
  size_t part_len[4];
};

/* A packed part is a list of segments in the model's arena. */
typedef struct seg {
  struct seg *next;
  size_t len, cap;
  uint8_t data[];
} seg;

/* Segments grow with the part, from 4 KiB to 1 MiB. */
#define SEG_MIN ((size_t)4 << 10)
#define SEG_MAX ((size_t)1 << 20)

enum { P_MODEL_PRE, P_GRAPH_PRE, P_GRAPH_POST, P_MODEL_POST };

static ccg_status oom(ccg_graph *g) {
  return ccg__error(&g->ctx, CCG_STATUS_OOM, "exporting graph '%s' to ONNX",
                    ccg_graph_name(g));
}

/* A part being packed: segments grow with it, each element of a repeated
 * message field lies whole in one. */
typedef struct part_sink {
  ccg_arena *a;
  seg *head, *tail;
  size_t len;
} part_sink;

/* n contiguous bytes at the end of the part; NULL on OOM. */
static uint8_t *part_room(part_sink *s, size_t n) {
  seg *t = s->tail;
  if (!t || t->cap - t->len < n) {
    size_t cap = s->len < SEG_MIN   ? SEG_MIN
                 : s->len > SEG_MAX ? SEG_MAX
                                    : s->len;
    if (cap < n)
      cap = n;
    if (!(t = ccg__arena_alloc(s->a, sizeof *t + cap, 8)))
      return NULL;
    *t = (seg){NULL, 0, cap};
    if (s->tail)
      s->tail->next = t;
    else
      s->head = t;
    s->tail = t;
  }
  uint8_t *p = t->data + t->len;
  t->len += n;
  s->len += n;
  return p;
}

/* The tag of length-delimited field `id` and the length, as varints. */
static size_t varint(uint64_t v, uint8_t *out) {
  size_t n = 0;
  for (; v >= 0x80; v >>= 7)
    out[n++] = (uint8_t)(v | 0x80);
  out[n++] = (uint8_t)v;
  return n;
}

static size_t len_head(uint32_t id, size_t len, uint8_t *out) {
  size_t n =
      varint((uint64_t)id << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, out);
  return n + varint(len, out + n);
}

/* A copy of msg (into out, sizeof_message bytes) keeping only the fields
 * numbered lo..hi. ONNX is proto2 without required fields: every field is
 * absent by its count, its has_ flag, its oneof case or a NULL pointer. */
static void keep_fields(const ProtobufCMessage *msg, uint32_t lo, uint32_t hi,
                        ProtobufCMessage *out) {
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  memcpy(out, msg, d->sizeof_message);
  uint8_t *base = (uint8_t *)out;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->id >= lo && f->id <= hi)
      continue;
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
      *(size_t *)(base + f->quantifier_offset) = 0;
    else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
      *(uint32_t *)(base + f->quantifier_offset) = 0;
    else if (f->quantifier_offset)
      *(protobuf_c_boolean *)(base + f->quantifier_offset) = 0;
    else if (f->type == PROTOBUF_C_TYPE_STRING ||
             f->type == PROTOBUF_C_TYPE_MESSAGE)
      *(void **)(base + f->offset) = NULL;
  }
}

/* Packs one field of msg (all of it but its repeated messages). */
static ccg_status pack_field(ccg__onnx_shared *sh, part_sink *s,
                             const ProtobufCMessage *msg, uint32_t id) {
  union {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
  } copy;
  assert(msg->descriptor->sizeof_message <= sizeof copy);
  keep_fields(msg, id, id, &copy.m.base);
  size_t n = protobuf_c_message_get_packed_size(&copy.m.base);
  if (!n)
    return CCG_STATUS_OK;
  uint8_t *p = part_room(s, n);
  if (!p)
    return oom(sh->g);
  if (protobuf_c_message_pack(&copy.m.base, p) != n)
    return ccg__error(&sh->g->ctx, CCG_STATUS_INTERNAL,
                      "graph '%s': field %u packed to other than %zu bytes",
                      ccg_graph_name(sh->g), id, n);
  return CCG_STATUS_OK;
}

/* One element of repeated message field `id`, as the field's tag, length
 * and message, at the end of the part. */
static ccg_status pack_elem(ccg__onnx_shared *sh, part_sink *s, uint32_t id,
                            const ProtobufCMessage *msg) {
  uint8_t head[16];
  size_t n = protobuf_c_message_get_packed_size(msg);
  size_t h = len_head(id, n, head);
  uint8_t *p = part_room(s, h + n);
  if (!p)
    return oom(sh->g);
  memcpy(p, head, h);
  if (protobuf_c_message_pack(msg, p + h) != n)
    return ccg__error(&sh->g->ctx, CCG_STATUS_INTERNAL,
                      "graph '%s': a packed field %u is not %zu bytes",
                      ccg_graph_name(sh->g), id, n);
  return CCG_STATUS_OK;
}

/* The elements of the graph's nodes and value infos, packed while the build
 * hands them out, each just after it was built: in the cache, and in
 * scratch memory used again for the next. */
typedef struct streamed {
  ccg__onnx_shared *sh;
  part_sink nodes, infos, meta;
} streamed;

static ccg_status stream_elem(void *ctx, uint32_t field,
                              const ProtobufCMessage *msg) {
  streamed *st = ctx;
  part_sink *s = field == CCG__ONNX_GRAPH_NODE         ? &st->nodes
                 : field == CCG__ONNX_GRAPH_VALUE_INFO ? &st->infos
                                                       : &st->meta;
  return pack_elem(st->sh, s, field, msg);
}

/* Packs fields lo..hi of msg as protobuf_c_message_pack would, in field
 * order; field `spliced` (0: none) is the packed elements in `elems`. */
static ccg_status pack_part(ccg__onnx_shared *sh, const ProtobufCMessage *msg,
                            uint32_t lo, uint32_t hi, int part,
                            uint32_t spliced, const part_sink *elems) {
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  const uint8_t *base = (const uint8_t *)msg;
  part_sink s = {&sh->a, NULL, NULL, 0};
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->id < lo || f->id > hi)
      continue;
    if (f->id == spliced) {
      /* the elements' segments become the part's: the part grows on in
       * their last one */
      if (!elems->head)
        continue;
      if (s.tail)
        s.tail->next = elems->head;
      else
        s.head = elems->head;
      s.tail = elems->tail;
      s.len += elems->len;
      continue;
    }
    if (f->label != PROTOBUF_C_LABEL_REPEATED ||
        f->type != PROTOBUF_C_TYPE_MESSAGE) {
      CCG_CHECK(pack_field(sh, &s, msg, f->id));
      continue;
    }
    size_t count = *(const size_t *)(base + f->quantifier_offset);
    ProtobufCMessage *const *items =
        *(ProtobufCMessage *const *const *)(base + f->offset);
    for (size_t k = 0; k < count; k++)
      CCG_CHECK(pack_elem(sh, &s, f->id, items[k]));
  }
  sh->part[part] = s.head;
  sh->part_len[part] = s.len;
  return CCG_STATUS_OK;
}

void ccg__onnx_shared_free(ccg__onnx_shared *sh) {
  if (!sh)
    return;
  ccg__arena_free(&sh->rank_arena);
  ccg__arena_free(&sh->a);
  free(sh);
}

ccg_status ccg__onnx_shared_new(ccg_graph *g, const ccg_onnx_export_options *o,
                                int64_t first, ccg__onnx_ext *ext,
                                ccg__onnx_shared **out) {
  ccg__onnx_shared *sh = calloc(1, sizeof *sh);
  if (!sh)
    return oom(g);
  sh->g = g;
  sh->o = *o;
  sh->first = first;
  ccg__arena_init(&sh->a, &g->alloc, 0);
  ccg__arena_init(&sh->rank_arena, &g->alloc, 0);
  sh->built = first;
  streamed el = {sh,
                 {&sh->a, NULL, NULL, 0},
                 {&sh->a, NULL, NULL, 0},
                 {&sh->a, NULL, NULL, 0}};
  ccg_status st = ccg__onnx_build_model_emit(g, &sh->o, first, &sh->a, ext,
                                             stream_elem, &el, &sh->m);
  if (st == CCG_STATUS_OK &&
      (sh->m->base.n_unknown_fields || sh->m->graph->base.n_unknown_fields)) {
    /* protobuf-c writes unknown fields last: they would not be where the
     * parts put them */
    st = ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                    "graph '%s': built model has unknown fields",
                    ccg_graph_name(g));
  }
  /* (sh->m is NULL when the build failed) */
  const ProtobufCMessage *mm = st == CCG_STATUS_OK ? &sh->m->base : NULL;
  const ProtobufCMessage *gm = st == CCG_STATUS_OK ? &sh->m->graph->base : NULL;
  if (st == CCG_STATUS_OK)
    st = pack_part(sh, mm, 1, MODEL_GRAPH_FIELD - 1, P_MODEL_PRE, 0, NULL);
  if (st == CCG_STATUS_OK)
    st = pack_part(sh, gm, 1, GRAPH_INIT_FIELD - 1, P_GRAPH_PRE,
                   CCG__ONNX_GRAPH_NODE, &el.nodes);
  if (st == CCG_STATUS_OK)
    st = pack_part(sh, gm, GRAPH_INIT_FIELD + 1, LAST_FIELD, P_GRAPH_POST,
                   CCG__ONNX_GRAPH_VALUE_INFO, &el.infos);
  if (st == CCG_STATUS_OK)
    st = pack_part(sh, mm, MODEL_GRAPH_FIELD + 1, LAST_FIELD, P_MODEL_POST,
                   CCG__ONNX_MODEL_METADATA, &el.meta);
  if (st == CCG_STATUS_OK &&
      !(sh->init_size = ccg__arena_calloc(
            &sh->a, sh->m->graph->n_initializer + 1, sizeof *sh->init_size)))
    st = oom(g);
  if (st != CCG_STATUS_OK) {
    ccg__onnx_shared_free(sh);
    return st;
  }
  *out = sh;
  return CCG_STATUS_OK;
}

/* Puts rank's data into the model's initializers, sizes each once, and
 * returns the whole model's size. */
static ccg_status rank_parts(ccg__onnx_shared *sh, int64_t rank,
                             ccg__onnx_ext *ext, size_t *graph_len,
                             size_t *total) {
  Onnx__GraphProto *gp = sh->m->graph;
  size_t n = gp->n_initializer;
  if (rank != sh->built || sh->stale) {
    /* the constant inputs made from attributes after the graph's own hold
     * no rank data */
    ccg__arena_reset(&sh->rank_arena);
    sh->stale = true;
    CCG_CHECK(ccg__onnx_rank_initializers(sh->g, &sh->o, rank, &sh->rank_arena,
                                          ext, gp->initializer));
    sh->built = rank;
    sh->stale = false;
  }
  size_t init_len = 0;
  uint8_t tag[16];
  for (size_t k = 0; k < n; k++) {
    sh->init_size[k] =
        protobuf_c_message_get_packed_size(&gp->initializer[k]->base);
    init_len +=
        len_head(GRAPH_INIT_FIELD, sh->init_size[k], tag) + sh->init_size[k];
  }
  *graph_len =
      sh->part_len[P_GRAPH_PRE] + init_len + sh->part_len[P_GRAPH_POST];
  size_t head = len_head(MODEL_GRAPH_FIELD, *graph_len, tag);
  *total = sh->part_len[P_MODEL_PRE] + head + *graph_len +
           sh->part_len[P_MODEL_POST];
  if (*total > (size_t)INT32_MAX)
    return ccg__error(&sh->g->ctx, CCG_STATUS_UNSUPPORTED,
                      "graph '%s': the ONNX model would be %zu bytes, over "
                      "protobuf's 2 GiB limit (lower external_threshold)",
                      ccg_graph_name(sh->g), *total);
  return CCG_STATUS_OK;
}

static uint8_t *put(uint8_t *p, const void *src, size_t n) {
  if (n)
    memcpy(p, src, n);
  return p + n;
}

static uint8_t *put_part(uint8_t *p, const seg *s) {
  for (; s; s = s->next)
    p = put(p, s->data, s->len);
  return p;
}

ccg_status ccg__onnx_shared_pack(ccg__onnx_shared *sh, int64_t rank,
                                 void **data, size_t *size) {
  size_t graph_len, n;
  CCG_CHECK(rank_parts(sh, rank, NULL, &graph_len, &n));
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf)
    return ccg__error(&sh->g->ctx, CCG_STATUS_OOM,
                      "graph '%s': %zu bytes for the ONNX model",
                      ccg_graph_name(sh->g), n);
  uint8_t head[16];
  uint8_t *p = put_part(buf, sh->part[P_MODEL_PRE]);
  p = put(p, head, len_head(MODEL_GRAPH_FIELD, graph_len, head));
  p = put_part(p, sh->part[P_GRAPH_PRE]);
  bool bad = false;
  for (size_t k = 0; k < sh->m->graph->n_initializer; k++) {
    p = put(p, head, len_head(GRAPH_INIT_FIELD, sh->init_size[k], head));
    size_t w = protobuf_c_message_pack(&sh->m->graph->initializer[k]->base, p);
    bad |= w != sh->init_size[k];
    p += w;
  }
  p = put_part(p, sh->part[P_GRAPH_POST]);
  p = put_part(p, sh->part[P_MODEL_POST]);
  size_t packed = (size_t)(p - buf);
  if (bad || packed != n) {
    free(buf);
    return ccg__error(&sh->g->ctx, CCG_STATUS_INTERNAL,
                      "graph '%s': packed %zu of %zu bytes",
                      ccg_graph_name(sh->g), packed, n);
  }
  *data = buf;
  *size = n;
  return CCG_STATUS_OK;
}

/* A model file being written with writev(2): the packed parts and the
 * initializers' raw_data (inline weights) are written from where they lie,
 * and only the small pieces protobuf-c hands over from its own scratch are
 * copied, into `stage`. Through stdio every byte was copied once more. */
enum {
  OUT_IOV = 512,         /* pieces gathered per writev */
  OUT_STAGE = 256 << 10, /* bytes copied per writev at most */
  OUT_REF_MIN = 512      /* shorter pieces are copied */
};

typedef struct file_out {
  ProtobufCBuffer base;
  int fd;
  const uint8_t *keep_lo, *keep_hi; /* protobuf-c's appends from here are the
                                       tensor's raw_data: not copied */
  struct iovec iov[OUT_IOV];
  int n;
  size_t pending, written, used;
  uint8_t *stage;
  int err; /* errno of the first failed write, or 0 */
} file_out;

static void out_flush(file_out *o) {
  struct iovec *v = o->iov;
  int n = o->n;
  while (n > 0 && !o->err) {
    ssize_t w = writev(o->fd, v, n);
    if (w < 0) {
      if (errno != EINTR)
        o->err = errno ? errno : EIO;
      continue;
    }
    o->written += (size_t)w;
    for (; n > 0 && (size_t)w >= v->iov_len; v++, n--)
      w -= (ssize_t)v->iov_len;
    if (n > 0) {
      v->iov_base = (uint8_t *)v->iov_base + w;
      v->iov_len -= (size_t)w;
    }
  }
  o->n = 0;
  o->pending = 0;
  o->used = 0;
}

/* len bytes at data; with `keep` they stay as they are until the file is
 * closed, and longer ones are written from there. */
static void out_put(file_out *o, const void *data, size_t len, bool keep) {
  if (o->err || !len)
    return;
  if (keep && len >= OUT_REF_MIN) {
    o->iov[o->n++] = (struct iovec){(void *)data, len};
  } else {
    if (len > OUT_STAGE - o->used)
      out_flush(o);
    if (len > OUT_STAGE) { /* written before data goes away */
      o->iov[o->n++] = (struct iovec){(void *)data, len};
      out_flush(o);
      return;
    }
    uint8_t *p = o->stage + o->used;
    memcpy(p, data, len);
    o->used += len;
    struct iovec *last = o->n ? &o->iov[o->n - 1] : NULL;
    if (last && (uint8_t *)last->iov_base + last->iov_len == p)
      last->iov_len += len;
    else
      o->iov[o->n++] = (struct iovec){p, len};
  }
  o->pending += len;
  if (o->n == OUT_IOV || o->pending >= CCG__ONNX_WRITE_BUF)
    out_flush(o);
}

static void out_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
  file_out *o = (file_out *)b;
  out_put(o, data, len,
          o->keep_lo && data >= o->keep_lo && data + len <= o->keep_hi);
}

static void out_part(file_out *o, const seg *p) {
  for (; p; p = p->next)
    out_put(o, p->data, p->len, true);
}

ccg_status ccg__onnx_shared_pack_file(ccg__onnx_shared *sh, int64_t rank,
                                      ccg__onnx_ext *ext, const char *path) {
  size_t graph_len, n;
  CCG_CHECK(rank_parts(sh, rank, ext, &graph_len, &n));
  file_out *o = malloc(sizeof *o);
  uint8_t *stage = malloc(OUT_STAGE);
  if (!o || !stage) {
    free(o);
    free(stage);
    return oom(sh->g);
  }
  *o = (file_out){.base = {out_append}, .stage = stage};
  o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (o->fd < 0) {
    int e = errno;
    free(stage);
    free(o);
    return ccg__error(&sh->g->ctx, CCG_STATUS_IO, "writing '%s': %s", path,
                      strerror(e));
  }
  uint8_t head[16];
  out_part(o, sh->part[P_MODEL_PRE]);
  out_put(o, head, len_head(MODEL_GRAPH_FIELD, graph_len, head), false);
  out_part(o, sh->part[P_GRAPH_PRE]);
  for (size_t k = 0; k < sh->m->graph->n_initializer; k++) {
    const Onnx__TensorProto *tp = sh->m->graph->initializer[k];
    out_put(o, head, len_head(GRAPH_INIT_FIELD, sh->init_size[k], head), false);
    o->keep_lo = tp->has_raw_data ? tp->raw_data.data : NULL;
    o->keep_hi = o->keep_lo ? o->keep_lo + tp->raw_data.len : NULL;
    protobuf_c_message_pack_to_buffer(&tp->base, &o->base);
  }
  out_part(o, sh->part[P_GRAPH_POST]);
  out_part(o, sh->part[P_MODEL_POST]);
  out_flush(o);
  if (close(o->fd) != 0 && !o->err)
    o->err = errno ? errno : EIO;
  int err = o->err;
  size_t written = o->written;
  free(stage);
  free(o);
  if (err)
    return ccg__error(&sh->g->ctx, CCG_STATUS_IO, "writing '%s': %s", path,
                      strerror(err));
  if (written != n)
    return ccg__error(&sh->g->ctx, CCG_STATUS_INTERNAL,
                      "graph '%s': packed %zu of %zu bytes",
                      ccg_graph_name(sh->g), written, n);
  return CCG_STATUS_OK;
}
