/* The ModelProto decoder of ccg__onnx_decode (wire.h). The wire pre-scan
 * and protobuf-c's unpack were a third of an import: protobuf-c looks every
 * field up by a search over ranges, copies every bytes field (the weights)
 * and calls the allocator once per message, string and list. This one
 * fills the same structs from the same descriptors, carves everything from
 * blocks of the capped allocator, and leaves bytes fields (but attributes'
 * strings) pointing into the source.
 *
 * It only takes the input that it decodes exactly as protobuf-c would and
 * that ccg__onnx_wire_check passes: every field known to the descriptors
 * (which test_onnx_decode holds equal to the pre-scan's schema), with its
 * wire type, whole, inside its message, nested no deeper than the limit,
 * and a graph. Anything else (an unknown field, a repeated singular
 * sub-message, which protobuf-c merges, a type ONNX does not use, malformed
 * bytes, the byte cap) makes it answer "not decoded", and the import then
 * runs the pre-scan and protobuf-c, whose result or error stands. */
#include <limits.h>
#include <string.h>

#include "onnx/internal.h"
#include "onnx/wire.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* More fields than any ONNX message has; a descriptor with more is left to
 * protobuf-c. */
#define MAX_FIELDS 32
/* Messages from this size on are decoded in one pass (decode_msg). */
#define ONE_PASS_FROM ((ptrdiff_t)1 << 16)

typedef struct dec {
  ccg__onnx_cap *cap;
  int max_depth;
  uint8_t *cur, *end; /* free space in the newest block */
  size_t block;       /* size of the next block */
  /* the same for the nodes' records (node_fast), kept apart */
  uint8_t *node_cur, *node_end;
  size_t node_block;
} dec;

/* Blocks double up to twice the size from which the cap backs them with
 * huge pages, and start there for a large model: a decoded model is fresh
 * memory, and 4 KiB page faults were a good part of decoding it. */
#define BLOCK_MIN ((size_t)64 << 10)
#define BLOCK_MAX ((size_t)4 << 20)

/* Carves `size` bytes (aligned as `align`) from blocks of the cap: the
 * model is only ever freed whole, so its parts need no headers. */
static void *dalloc(dec *d, size_t size, size_t align) {
  uintptr_t at = ((uintptr_t)d->cur + align - 1) & ~(uintptr_t)(align - 1);
  if (!d->cur || at > (uintptr_t)d->end || size > (uintptr_t)d->end - at) {
    size_t n = size + 8 > d->block ? size + 8 : d->block;
    uint8_t *b = ccg__onnx_cap_block(d->cap, n);
    if (!b)
      return NULL;
    if (d->block < BLOCK_MAX)
      d->block *= 2;
    d->cur = b;
    d->end = b + n;
    at = ((uintptr_t)b + align - 1) & ~(uintptr_t)(align - 1);
  }
  d->cur = (uint8_t *)at + size;
  return (void *)at;
}

/* A varint of at most max bytes at *p (< end); false if it is cut short or
 * longer. */
static inline bool varint(const uint8_t **p, const uint8_t *end, unsigned max,
                          uint64_t *out) {
  const uint8_t *q = *p;
  if (q < end && !(*q & 0x80)) {
    *out = *q;
    *p = q + 1;
    return true;
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < max && q < end; i++) {
    uint8_t b = *q++;
    v |= (uint64_t)(b & 0x7f) << (7 * i < 64 ? 7 * i : 63);
    if (!(b & 0x80)) {
      *out = v;
      *p = q;
      return true;
    }
  }
  return false;
}

/* The field numbered num, looked for first where the last one was found
 * and after it (serializers write fields in number order). */
static const ProtobufCFieldDescriptor *
find(const ProtobufCMessageDescriptor *md, uint32_t num, unsigned *hint) {
  unsigned h = *hint;
  if (h < md->n_fields && md->fields[h].id == num)
    return &md->fields[h];
  if (h + 1 < md->n_fields && md->fields[h + 1].id == num) {
    *hint = h + 1;
    return &md->fields[h + 1];
  }
  unsigned lo = 0, hi = md->n_fields; /* fields are sorted by number */
  while (lo < hi) {
    unsigned mid = lo + (hi - lo) / 2;
    if (md->fields[mid].id < num)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < md->n_fields && md->fields[lo].id == num) {
    *hint = lo;
    return &md->fields[lo];
  }
  return NULL;
}

/* The wire type of one element of field type t; -1 for types ONNX does not
 * use (decoded by protobuf-c). */
static int elem_wire(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_ENUM:
    return WT_VARINT;
  case PROTOBUF_C_TYPE_FLOAT:
    return WT_I32;
  case PROTOBUF_C_TYPE_DOUBLE:
    return WT_I64;
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_BYTES:
  case PROTOBUF_C_TYPE_MESSAGE:
    return WT_LEN;
  default:
    return -1;
  }
}

size_t ccg__onnx_pb_elem_size(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_ENUM:
  case PROTOBUF_C_TYPE_FLOAT:
    return 4;
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_DOUBLE:
    return 8;
  case PROTOBUF_C_TYPE_BYTES:
    return sizeof(ProtobufCBinaryData);
  default:
    return sizeof(void *);
  }
}

/* One field as read off the wire. */
typedef struct wfield {
  const ProtobufCFieldDescriptor *f;
  unsigned wt;
  uint64_t v;          /* varint value */
  const uint8_t *body; /* fixed-size value or length-delimited payload */
  size_t len;          /* payload bytes */
} wfield;

/* Reads the field at *p into *w. False for anything protobuf-c might read
 * differently: malformed, unknown to the descriptor, a wire type the field
 * cannot have, a type ONNX does not use. */
static bool next(const ProtobufCMessageDescriptor *md, const uint8_t **p,
                 const uint8_t *end, unsigned *hint, wfield *w) {
  uint64_t tag;
  if (!varint(p, end, 5, &tag) || tag >> 32 || tag < 8)
    return false;
  w->wt = (unsigned)(tag & 7);
  w->f = find(md, (uint32_t)(tag >> 3), hint);
  if (!w->f || w->f->label == PROTOBUF_C_LABEL_REQUIRED ||
      w->f->label == PROTOBUF_C_LABEL_NONE)
    return false;
  int ew = elem_wire(w->f->type);
  bool packed = w->wt == WT_LEN && w->f->label == PROTOBUF_C_LABEL_REPEATED &&
                ew != WT_LEN;
  if (ew < 0 || ((unsigned)ew != w->wt && !packed))
    return false;
  switch (w->wt) {
  case WT_VARINT:
    return varint(p, end, 10, &w->v);
  case WT_I64:
  case WT_I32: {
    size_t n = w->wt == WT_I64 ? 8 : 4;
    if ((size_t)(end - *p) < n)
      return false;
    w->body = *p;
    *p += n;
    return true;
  }
  default: {
    /* protobuf-c refuses lengths past INT_MAX (the path with protobuf-c
     * takes the largest weights out first, so it may still read such a
     * model) */
    uint64_t len;
    if (!varint(p, end, 5, &len) || len > INT_MAX || len > (uint64_t)(end - *p))
      return false;
    w->body = *p;
    w->len = (size_t)len;
    *p += len;
    return true;
  }
  }
}

/* Elements in a packed run of field type t; false if the run does not hold
 * whole elements. */
static bool packed_count(ProtobufCType t, const uint8_t *p, size_t len,
                         size_t *n) {
  int ew = elem_wire(t);
  if (ew != WT_VARINT) {
    size_t el = ew == WT_I32 ? 4 : 8;
    *n = len / el;
    return len % el == 0;
  }
  size_t count = 0, run = 0;
  for (size_t i = 0; i < len; i++) {
    if (p[i] & 0x80) {
      if (++run >= 10)
        return false;
    } else {
      count++;
      run = 0;
    }
  }
  *n = count;
  return run == 0;
}

/* Stores one scalar element of type t, from a varint or little-endian
 * fixed bytes, at dst. */
static void put_scalar(ProtobufCType t, uint64_t v, const uint8_t *fixed,
                       void *dst) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_ENUM: {
    int32_t x = (int32_t)(uint32_t)v; /* protobuf-c keeps the low 32 bits */
    memcpy(dst, &x, 4);
    break;
  }
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_UINT64:
    memcpy(dst, &v, 8);
    break;
  case PROTOBUF_C_TYPE_FLOAT:
    memcpy(dst, fixed, 4);
    break;
  default: /* DOUBLE */
    memcpy(dst, fixed, 8);
    break;
  }
}

static bool decode_msg(dec *d, const ProtobufCMessageDescriptor *md,
                       const uint8_t *p, const uint8_t *end, int depth,
                       ProtobufCMessage **out);

static bool decode_sub(dec *d, const ProtobufCMessageDescriptor *md,
                       const uint8_t *p, const uint8_t *end, int depth,
                       ProtobufCMessage **out);

/* An attribute's string (s, strings) as *b: copied, unlike the other bytes
 * fields. The import reads it with its attribute, long after the source
 * has left the cache. */
static bool attr_bytes(dec *d, const uint8_t *body, size_t len,
                       ProtobufCBinaryData *b) {
  *b = (ProtobufCBinaryData){len, NULL};
  if (!len)
    return true;
  b->data = dalloc(d, len, 1);
  if (!b->data)
    return false;
  memcpy(b->data, body, len);
  return true;
}

/* One element of a length-delimited field (string, bytes or sub-message)
 * at dst. */
static bool put_len(dec *d, const wfield *w, int depth, void *dst) {
  switch (w->f->type) {
  case PROTOBUF_C_TYPE_STRING: {
    char *s = dalloc(d, w->len + 1, 1);
    if (!s)
      return false;
    memcpy(s, w->body, w->len);
    s[w->len] = '\0';
    memcpy(dst, &s, sizeof s);
    return true;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    /* protobuf-c leaves data NULL when the field is empty */
    ProtobufCBinaryData b = {w->len, w->len ? (uint8_t *)w->body : NULL};
    const ProtobufCMessageDescriptor *a = &onnx__attribute_proto__descriptor;
    if (w->f >= a->fields && w->f < a->fields + a->n_fields &&
        !attr_bytes(d, w->body, w->len, &b))
      return false;
    memcpy(dst, &b, sizeof b);
    return true;
  }
  default: {
    ProtobufCMessage *sub;
    if (!decode_sub(d, w->f->descriptor, w->body, w->body + w->len, depth + 1,
                    &sub))
      return false;
    memcpy(dst, &sub, sizeof sub);
    return true;
  }
  }
}

/* Appends a packed run to the repeated field at base (n elements so far). */
static void put_packed(const wfield *w, uint8_t *base, size_t *n) {
  ProtobufCType t = w->f->type;
  size_t el = ccg__onnx_pb_elem_size(t);
  const uint8_t *p = w->body, *end = w->body + w->len;
  int ew = elem_wire(t);
  while (p < end) {
    uint64_t v = 0;
    const uint8_t *fixed = p;
    if (ew == WT_VARINT)
      (void)varint(&p, end, 10, &v); /* checked by packed_count */
    else
      p += el;
    put_scalar(t, v, fixed, base + *n * el);
    ++*n;
  }
}

/* Makes room for k more elements in repeated field f of m, which holds n
 * in a list of *room. */
static bool grow(dec *d, const ProtobufCFieldDescriptor *f, uint8_t *m,
                 size_t n, size_t k, uint32_t *room) {
  if (n + k <= *room)
    return true;
  size_t want = 2 * (size_t)*room > n + k ? 2 * (size_t)*room : n + k;
  if (want < 16)
    want = 16;
  if (want > UINT32_MAX)
    return false;
  size_t el = ccg__onnx_pb_elem_size(f->type);
  void *list = dalloc(d, want * el, 8), *old;
  if (!list)
    return false;
  memcpy(&old, m + f->offset, sizeof old);
  if (n)
    memcpy(list, old, n * el);
  memcpy(m + f->offset, &list, sizeof list);
  *room = (uint32_t)want;
  return true;
}

/* Fills field w of message m. Repeated fields have lists of their final
 * size, or with `room` (their sizes), lists that grow. */
static bool put(dec *d, const ProtobufCMessageDescriptor *md, const wfield *w,
                int depth, uint8_t *m, uint32_t *room) {
  const ProtobufCFieldDescriptor *f = w->f;
  void *member = m + f->offset;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    size_t *n = (size_t *)(void *)(m + f->quantifier_offset);
    bool packed = w->wt == WT_LEN && elem_wire(f->type) != WT_LEN;
    if (room) {
      size_t k = 1;
      if ((packed && !packed_count(f->type, w->body, w->len, &k)) ||
          !grow(d, f, m, *n, k, &room[f - md->fields]))
        return false;
    }
    uint8_t *base;
    memcpy(&base, member, sizeof base);
    if (packed) {
      put_packed(w, base, n);
      return true;
    }
    void *dst = base + *n * ccg__onnx_pb_elem_size(f->type);
    ++*n;
    if (w->wt != WT_LEN) {
      put_scalar(f->type, w->v, w->body, dst);
      return true;
    }
    return put_len(d, w, depth, dst);
  }
  bool oneof = f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE && !oneof) {
    void *prev;
    memcpy(&prev, member, sizeof prev);
    if (prev)
      return false; /* protobuf-c merges the two */
  }
  if (w->wt == WT_LEN) {
    if (!put_len(d, w, depth, member))
      return false;
  } else {
    put_scalar(f->type, w->v, w->body, member);
  }
  if (oneof)
    memcpy(m + f->quantifier_offset, &f->id, sizeof f->id);
  else if (f->quantifier_offset)
    *(protobuf_c_boolean *)(void *)(m + f->quantifier_offset) = 1;
  return true;
}

/* Fields no reader of an import looks at are left out of the decoded
 * model (ccg__onnx_wire_check has checked their bytes): the graph's
 * value_info, a shape for every value of an exported model, was most of
 * the decoded bytes, and doc strings are never read. */
static bool unread(const ProtobufCMessageDescriptor *md,
                   const ProtobufCFieldDescriptor *f) {
  if (md == &onnx__graph_proto__descriptor)
    return f->id == 13; /* value_info */
  /* most fields fail at the first or third letter ("dims", "domain") */
  return f->name[0] == 'd' && f->name[1] && f->name[2] == 'c' &&
         strcmp(f->name, "doc_string") == 0;
}

/* Checks p[0..end) as a message of type md by the rules decode_msg
 * decodes by, storing nothing: what is left out is refused where decoding
 * it would be (and so where ccg__onnx_wire_check would be), without the
 * pre-scan's schema lookups by name. */
static bool check_msg(const dec *d, const ProtobufCMessageDescriptor *md,
                      const uint8_t *p, const uint8_t *end, int depth) {
  if (depth > d->max_depth || md->n_fields > MAX_FIELDS)
    return false;
  bool seen[MAX_FIELDS] = {false};
  unsigned hint = 0;
  for (const uint8_t *q = p; q < end;) {
    wfield w;
    if (!next(md, &q, end, &hint, &w))
      return false;
    const ProtobufCFieldDescriptor *f = w.f;
    size_t k;
    if (w.wt == WT_LEN && elem_wire(f->type) != WT_LEN &&
        !packed_count(f->type, w.body, w.len, &k))
      return false;
    if (f->type != PROTOBUF_C_TYPE_MESSAGE)
      continue;
    if (f->label != PROTOBUF_C_LABEL_REPEATED &&
        !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) {
      if (seen[f - md->fields])
        return false; /* protobuf-c merges the two */
      seen[f - md->fields] = true;
    }
    if (!check_msg(d, f->descriptor, w.body, w.body + w.len, depth + 1))
      return false;
  }
  return true;
}

/* The graph's value_info, one per value of an exported model, is most of
 * what check_msg checks: its usual fields are checked here by number, and
 * anything else (or a model nested too deep for all five levels) goes to
 * check_msg, which decides. Levels: ValueInfoProto, TypeProto,
 * TypeProto.Tensor, TensorShapeProto, TensorShapeProto.Dimension. */
typedef struct vi_field {
  uint8_t num, wt;
  int8_t sub; /* level of the sub-message, -1 for none */
  bool once;  /* a singular sub-message outside a oneof: protobuf-c would
                 merge a second one */
} vi_field;

#define VI_LEVELS 5
static const vi_field vi_fields[VI_LEVELS][3] = {
    {{1, WT_LEN, -1, false}, {2, WT_LEN, 1, true}, {3, WT_LEN, -1, false}},
    {{1, WT_LEN, 2, false}, {6, WT_LEN, -1, false}, {0, 0, 0, false}},
    {{1, WT_VARINT, -1, false}, {2, WT_LEN, 3, true}, {0, 0, 0, false}},
    {{1, WT_LEN, 4, false}, {0, 0, 0, false}, {0, 0, 0, false}},
    {{1, WT_VARINT, -1, false},
     {2, WT_LEN, -1, false},
     {3, WT_LEN, -1, false}}};

static bool vi_fast(const uint8_t *p, const uint8_t *end, int level) {
  bool seen[3] = {false};
  while (p < end) {
    uint64_t tag, v;
    if (!varint(&p, end, 5, &tag) || tag >> 32)
      return false;
    const vi_field *f = NULL;
    for (int i = 0; i < 3 && !f; i++)
      if (vi_fields[level][i].num && vi_fields[level][i].num == tag >> 3 &&
          vi_fields[level][i].wt == (tag & 7))
        f = &vi_fields[level][i];
    if (!f || !varint(&p, end, f->wt == WT_VARINT ? 10 : 5, &v))
      return false;
    if (f->wt == WT_VARINT)
      continue;
    if (v > INT_MAX || v > (uint64_t)(end - p))
      return false;
    if (f->once && seen[f - vi_fields[level]])
      return false;
    seen[f - vi_fields[level]] = true;
    if (f->sub >= 0 && !vi_fast(p, p + v, f->sub))
      return false;
    p += v;
  }
  return true;
}

static bool check_unread(const dec *d, const wfield *w, int depth) {
  if (w->f->type != PROTOBUF_C_TYPE_MESSAGE)
    return true;
  if (w->f->descriptor == &onnx__value_info_proto__descriptor &&
      depth + VI_LEVELS <= d->max_depth &&
      vi_fast(w->body, w->body + w->len, 0))
    return true;
  return check_msg(d, w->f->descriptor, w->body, w->body + w->len, depth + 1);
}

/* Decodes p[0..end) as a message of type md. A small one is read twice:
 * a first pass checks every field and counts the repeated ones, so that
 * each list is one block of its final size; the second pass fills them. A
 * large one (a graph: its fields lie between the weights, and a second
 * pass over them would miss the cache again) is read once, into lists that
 * grow. */
static bool decode_msg(dec *d, const ProtobufCMessageDescriptor *md,
                       const uint8_t *p, const uint8_t *end, int depth,
                       ProtobufCMessage **out) {
  if (depth > d->max_depth || md->n_fields > MAX_FIELDS)
    return false;
  uint32_t count[MAX_FIELDS];
  memset(count, 0, md->n_fields * sizeof *count);
  bool once = end - p > ONE_PASS_FROM;
  unsigned hint = 0;
  for (const uint8_t *q = once ? end : p; q < end;) {
    wfield w;
    if (!next(md, &q, end, &hint, &w))
      return false;
    if (w.f->label != PROTOBUF_C_LABEL_REPEATED || unread(md, w.f))
      continue;
    size_t k = 1;
    if (w.wt == WT_LEN && elem_wire(w.f->type) != WT_LEN &&
        !packed_count(w.f->type, w.body, w.len, &k))
      return false;
    uint32_t *c = &count[w.f - md->fields];
    if (k > UINT32_MAX - *c)
      return false;
    *c += (uint32_t)k;
  }
  uint8_t *m = dalloc(d, md->sizeof_message, 8);
  if (!m)
    return false;
  md->message_init((ProtobufCMessage *)(void *)m);
  for (unsigned i = 0; i < md->n_fields; i++) {
    if (!count[i])
      continue;
    const ProtobufCFieldDescriptor *f = &md->fields[i];
    void *list =
        dalloc(d, (size_t)count[i] * ccg__onnx_pb_elem_size(f->type), 8);
    if (!list)
      return false;
    memcpy(m + f->offset, &list, sizeof list);
  }
  hint = 0;
  for (const uint8_t *q = p; q < end;) {
    wfield w;
    if (!next(md, &q, end, &hint, &w))
      return false;
    /* A graph's next field lies past this one's weights, on a page not
     * touched yet: its cache and TLB misses were a good part of decoding,
     * and fetching it now overlaps them with decoding this field. */
    if (once)
      __builtin_prefetch(q);
    if (unread(md, w.f) ? !check_unread(d, &w, depth)
                        : !put(d, md, &w, depth, m, once ? count : NULL))
      return false;
  }
  *out = (ProtobufCMessage *)(void *)m;
  return true;
}

/* ---- nodes, attributes, tensors ----------------------------------------- */

/* A model is mostly nodes, their attributes and small constants. The
 * descriptor-driven path reads each of them twice (counting, then
 * filling) and looks every field up; these read the fields they expect by
 * number in one pass, into lists gathered on the stack, and hand the
 * message to decode_msg for anything else (another field, another wire
 * type, long lists), which decides as before. The field numbers are
 * onnx.proto's; test_onnx_decode compares the result with protobuf-c's. */

/* Longest input, output or attribute list read in one pass. */
#define FAST_LIST 32

/* A length-delimited field's payload after its tag, or false. */
static inline bool payload(const uint8_t **p, const uint8_t *end,
                           const uint8_t **body, size_t *len) {
  uint64_t n;
  if (!varint(p, end, 5, &n) || n > INT_MAX || n > (uint64_t)(end - *p))
    return false;
  *body = *p;
  *len = (size_t)n;
  *p += n;
  return true;
}

static char *dstr(dec *d, const uint8_t *body, size_t len) {
  char *s = dalloc(d, len + 1, 1);
  if (s) {
    memcpy(s, body, len);
    s[len] = '\0';
  }
  return s;
}

/* A run of ints or floats (one element or a packed run) into v[*n..];
 * false when it does not fit or is malformed. */
static bool fast_scalars(unsigned wt, bool is_float, const uint8_t **p,
                         const uint8_t *end, void *v, size_t *n) {
  if (wt == (is_float ? WT_I32 : WT_VARINT)) {
    if (*n >= FAST_LIST)
      return false;
    if (is_float) {
      if (end - *p < 4)
        return false;
      memcpy((float *)v + (*n)++, *p, 4);
      *p += 4;
      return true;
    }
    uint64_t x;
    if (!varint(p, end, 10, &x))
      return false;
    memcpy((int64_t *)v + (*n)++, &x, 8);
    return true;
  }
  const uint8_t *body;
  size_t len, k;
  if (wt != WT_LEN || !payload(p, end, &body, &len) ||
      !packed_count(is_float ? PROTOBUF_C_TYPE_FLOAT : PROTOBUF_C_TYPE_INT64,
                    body, len, &k) ||
      k > FAST_LIST - *n)
    return false;
  for (const uint8_t *q = body, *e = body + len; q < e; ++*n) {
    if (is_float) {
      memcpy((float *)v + *n, q, 4);
      q += 4;
    } else {
      uint64_t x = 0;
      (void)varint(&q, e, 10, &x); /* checked by packed_count */
      memcpy((int64_t *)v + *n, &x, 8);
    }
  }
  return true;
}

/* A copy of the first n elements of v in the model's blocks (NULL for
 * none, as protobuf-c leaves an empty list). */
static bool dlist(dec *d, const void *v, size_t n, size_t el, void **out) {
  *out = NULL;
  if (!n)
    return true;
  *out = dalloc(d, n * el, 8);
  if (!*out)
    return false;
  memcpy(*out, v, n * el);
  return true;
}

/* AttributeProto: name, type, f, i, s, floats, ints, strings,
 * ref_attr_name, doc_string (left out); else decode_msg. */
static bool attr_fast(dec *d, const uint8_t *p, const uint8_t *end, int depth,
                      ProtobufCMessage **out) {
  const ProtobufCMessageDescriptor *md = &onnx__attribute_proto__descriptor;
  if (depth > d->max_depth)
    return false;
  Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT;
  int64_t ints[FAST_LIST];
  float floats[FAST_LIST];
  ProtobufCBinaryData strings[FAST_LIST];
  size_t n_ints = 0, n_floats = 0, n_strings = 0;
  for (const uint8_t *q = p; q < end;) {
    uint64_t tag, v;
    const uint8_t *body;
    size_t len;
    if (!varint(&q, end, 5, &tag) || tag >> 32)
      return false;
    unsigned wt = (unsigned)(tag & 7);
    switch (tag >> 3) {
    case 1:  /* name */
    case 21: /* ref_attr_name */
    case 13: /* doc_string, left out */
      if (wt != WT_LEN || !payload(&q, end, &body, &len))
        return decode_msg(d, md, p, end, depth, out);
      if (tag >> 3 != 13 &&
          !(*(tag >> 3 == 1 ? &a.name : &a.ref_attr_name) = dstr(d, body, len)))
        return false;
      break;
    case 20: /* type */
    case 3:  /* i */
      if (wt != WT_VARINT || !varint(&q, end, 10, &v))
        return decode_msg(d, md, p, end, depth, out);
      if (tag >> 3 == 3) {
        a.has_i = 1;
        memcpy(&a.i, &v, 8);
      } else {
        a.has_type = 1;
        a.type = (Onnx__AttributeProto__AttributeType)(int32_t)(uint32_t)v;
      }
      break;
    case 2: /* f */
      if (wt != WT_I32 || end - q < 4)
        return decode_msg(d, md, p, end, depth, out);
      a.has_f = 1;
      memcpy(&a.f, q, 4);
      q += 4;
      break;
    case 4:   /* s */
    case 9: { /* strings */
      ProtobufCBinaryData b;
      if (wt != WT_LEN || !payload(&q, end, &body, &len) ||
          (tag >> 3 == 9 && n_strings == FAST_LIST))
        return decode_msg(d, md, p, end, depth, out);
      if (!attr_bytes(d, body, len, &b))
        return false;
      if (tag >> 3 == 4) {
        a.has_s = 1;
        a.s = b;
      } else {
        strings[n_strings++] = b;
      }
      break;
    }
    case 7: /* floats */
    case 8: /* ints */
      if (!fast_scalars(wt, tag >> 3 == 7, &q, end,
                        tag >> 3 == 7 ? (void *)floats : (void *)ints,
                        tag >> 3 == 7 ? &n_floats : &n_ints))
        return decode_msg(d, md, p, end, depth, out);
      break;
    default:
      return decode_msg(d, md, p, end, depth, out);
    }
  }
  Onnx__AttributeProto *m = dalloc(d, sizeof *m, 8);
  if (!m)
    return false;
  *m = a;
  if (!dlist(d, ints, n_ints, sizeof *ints, (void **)&m->ints) ||
      !dlist(d, floats, n_floats, sizeof *floats, (void **)&m->floats) ||
      !dlist(d, strings, n_strings, sizeof *strings, (void **)&m->strings))
    return false;
  m->n_ints = n_ints;
  m->n_floats = n_floats;
  m->n_strings = n_strings;
  *out = &m->base;
  return true;
}

/* A node's record: its NodeProto, lists and strings in one block of their
 * own region. An import walks the nodes several times before it reads
 * their attributes; with the attributes between them, each walk missed
 * the cache on every node. */
static void *node_alloc(dec *d, size_t size) {
  uint8_t *cur = d->cur, *end = d->end;
  size_t block = d->block;
  d->cur = d->node_cur;
  d->end = d->node_end;
  d->block = d->node_block;
  void *p = dalloc(d, size, 8);
  d->node_cur = d->cur;
  d->node_end = d->end;
  d->node_block = d->block;
  d->cur = cur;
  d->end = end;
  d->block = block;
  return p;
}

/* A string field's payload, copied later. */
typedef struct view {
  const uint8_t *p;
  size_t n;
} view;

static char *put_view(char **at, view v) {
  char *s = *at;
  memcpy(s, v.p, v.n);
  s[v.n] = '\0';
  *at += v.n + 1;
  return s;
}

/* NodeProto: input, output, name, op_type, domain, attribute, doc_string
 * (left out); else decode_msg. */
static bool node_fast(dec *d, const uint8_t *p, const uint8_t *end, int depth,
                      ProtobufCMessage **out) {
  const ProtobufCMessageDescriptor *md = &onnx__node_proto__descriptor;
  if (depth > d->max_depth)
    return false;
  /* one: name, op_type, domain */
  view in[FAST_LIST], outs[FAST_LIST], one[3] = {{NULL, 0}};
  bool has[3] = {false};
  Onnx__AttributeProto *attrs[FAST_LIST];
  size_t n_in = 0, n_out = 0, n_attr = 0, chars = 0;
  for (const uint8_t *q = p; q < end;) {
    uint64_t tag;
    view v;
    if (!varint(&q, end, 5, &tag) || tag >> 32)
      return false;
    uint64_t num = tag >> 3;
    if ((tag & 7) != WT_LEN || num < 1 || num > 7 ||
        !payload(&q, end, &v.p, &v.n))
      return decode_msg(d, md, p, end, depth, out);
    switch (num) {
    case 1:
    case 2:
      if ((num == 1 ? n_in : n_out) == FAST_LIST)
        return decode_msg(d, md, p, end, depth, out);
      if (num == 1)
        in[n_in++] = v;
      else
        outs[n_out++] = v;
      chars += v.n + 1;
      break;
    case 3: /* name, op_type, domain: the last one counts */
    case 4:
    case 7: {
      size_t k = num == 3 ? 0 : num == 4 ? 1 : 2;
      if (has[k])
        chars -= one[k].n + 1;
      has[k] = true;
      one[k] = v;
      chars += v.n + 1;
      break;
    }
    case 5: {
      ProtobufCMessage *a;
      if (n_attr == FAST_LIST)
        return decode_msg(d, md, p, end, depth, out);
      if (!attr_fast(d, v.p, v.p + v.n, depth + 1, &a))
        return false;
      attrs[n_attr++] = (Onnx__AttributeProto *)(void *)a;
      break;
    }
    default: /* 6: doc_string, left out */
      break;
    }
  }
  size_t lists = (n_in + n_out + n_attr) * sizeof(void *);
  Onnx__NodeProto *m = node_alloc(d, sizeof *m + lists + chars);
  if (!m)
    return false;
  *m = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
  void **list = (void **)(m + 1);
  char *at = (char *)(list + n_in + n_out + n_attr);
  /* protobuf-c leaves an empty list NULL */
  m->input = n_in ? (char **)list : NULL;
  m->output = n_out ? (char **)list + n_in : NULL;
  m->attribute = n_attr ? (Onnx__AttributeProto **)list + n_in + n_out : NULL;
  for (size_t i = 0; i < n_in; i++)
    m->input[i] = put_view(&at, in[i]);
  for (size_t i = 0; i < n_out; i++)
    m->output[i] = put_view(&at, outs[i]);
  if (n_attr)
    memcpy(m->attribute, attrs, n_attr * sizeof *attrs);
  m->n_input = n_in;
  m->n_output = n_out;
  m->n_attribute = n_attr;
  if (has[0])
    m->name = put_view(&at, one[0]);
  if (has[1])
    m->op_type = put_view(&at, one[1]);
  if (has[2])
    m->domain = put_view(&at, one[2]);
  *out = &m->base;
  return true;
}

/* TensorProto: dims, data_type, name, raw_data (left in the source),
 * short int64_data and float_data, doc_string (left out); else
 * decode_msg. A model's many small constants (shapes, axes) are these. */
static bool tensor_fast(dec *d, const uint8_t *p, const uint8_t *end, int depth,
                        ProtobufCMessage **out) {
  const ProtobufCMessageDescriptor *md = &onnx__tensor_proto__descriptor;
  if (depth > d->max_depth)
    return false;
  Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
  int64_t dims[FAST_LIST], i64[FAST_LIST];
  float f32[FAST_LIST];
  size_t n_dims = 0, n_i64 = 0, n_f32 = 0;
  view name = {NULL, 0};
  for (const uint8_t *q = p; q < end;) {
    uint64_t tag, v;
    view b;
    if (!varint(&q, end, 5, &tag) || tag >> 32)
      return false;
    unsigned wt = (unsigned)(tag & 7);
    switch (tag >> 3) {
    case 1: /* dims */
    case 7: /* int64_data */
      if (!fast_scalars(wt, false, &q, end, tag >> 3 == 1 ? dims : i64,
                        tag >> 3 == 1 ? &n_dims : &n_i64))
        return decode_msg(d, md, p, end, depth, out);
      break;
    case 4: /* float_data */
      if (!fast_scalars(wt, true, &q, end, f32, &n_f32))
        return decode_msg(d, md, p, end, depth, out);
      break;
    case 2: /* data_type */
      if (wt != WT_VARINT || !varint(&q, end, 10, &v))
        return decode_msg(d, md, p, end, depth, out);
      t.has_data_type = 1;
      t.data_type = (int32_t)(uint32_t)v;
      break;
    case 8:  /* name */
    case 9:  /* raw_data */
    case 12: /* doc_string, left out */
      if (wt != WT_LEN || !payload(&q, end, &b.p, &b.n))
        return decode_msg(d, md, p, end, depth, out);
      if (tag >> 3 == 8) {
        name = b;
      } else if (tag >> 3 == 9) {
        t.has_raw_data = 1;
        t.raw_data = (ProtobufCBinaryData){b.n, b.n ? (uint8_t *)b.p : NULL};
      }
      break;
    default:
      return decode_msg(d, md, p, end, depth, out);
    }
  }
  size_t fl = (n_f32 * sizeof *f32 + 7) & ~(size_t)7;
  Onnx__TensorProto *m =
      dalloc(d, sizeof t + (n_dims + n_i64) * 8 + fl + name.n + 1, 8);
  if (!m)
    return false;
  *m = t;
  uint8_t *at = (uint8_t *)(m + 1);
  /* protobuf-c leaves an empty list NULL */
  m->dims = n_dims ? memcpy(at, dims, n_dims * 8) : NULL;
  at += n_dims * 8;
  m->int64_data = n_i64 ? memcpy(at, i64, n_i64 * 8) : NULL;
  at += n_i64 * 8;
  m->float_data = n_f32 ? memcpy(at, f32, n_f32 * sizeof *f32) : NULL;
  at += fl;
  m->n_dims = n_dims;
  m->n_int64_data = n_i64;
  m->n_float_data = n_f32;
  char *str = (char *)at;
  if (name.p)
    m->name = put_view(&str, name);
  *out = &m->base;
  return true;
}

static bool decode_sub(dec *d, const ProtobufCMessageDescriptor *md,
                       const uint8_t *p, const uint8_t *end, int depth,
                       ProtobufCMessage **out) {
  if (md == &onnx__tensor_proto__descriptor)
    return tensor_fast(d, p, end, depth, out);
  if (md == &onnx__node_proto__descriptor)
    return node_fast(d, p, end, depth, out);
  if (md == &onnx__attribute_proto__descriptor)
    return attr_fast(d, p, end, depth, out);
  return decode_msg(d, md, p, end, depth, out);
}

Onnx__ModelProto *ccg__onnx_decode(const uint8_t *data, size_t size,
                                   int max_depth, ccg__onnx_cap *cap) {
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
  /* fixed-size values are copied as they lie */
  (void)data, (void)size, (void)max_depth, (void)cap;
  return NULL;
#else
  size_t block = size >= 2 * BLOCK_MAX ? BLOCK_MAX / 2 : BLOCK_MIN;
  dec d = {cap,   max_depth > 0 ? max_depth : CCG__ONNX_DEFAULT_MAX_DEPTH,
           NULL,  NULL,
           block, NULL,
           NULL,  block};
  ProtobufCMessage *m = NULL;
  if (!size ||
      !decode_msg(&d, &onnx__model_proto__descriptor, data, data + size, 1,
                  &m) ||
      !((Onnx__ModelProto *)m)->graph) {
    ccg__onnx_cap_release(cap);
    return NULL;
  }
  return (Onnx__ModelProto *)m;
#endif
}
