/* Private to src/onnx: defences run before and during protobuf-c unpacking of
 * an ONNX ModelProto. protobuf-c recurses once per nested message with no
 * limit and allocates whatever the input asks for, so an import first walks
 * the wire format with an explicit stack (ccg__onnx_wire_check) and then
 * unpacks through an allocator that counts bytes (ccg__onnx_cap). */
#ifndef CCG_ONNX_WIRE_H
#define CCG_ONNX_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "ccgraph/core.h"

/* Nesting limit used when the caller passes max_depth <= 0. ModelProto is
 * depth 1; a plain graph's deepest path (Model > Graph > ValueInfo > Type >
 * Tensor > Shape > Dimension) is 7, and each level of If/Loop subgraph adds
 * 3 more (Node > Attribute > Graph). */
#define CCG__ONNX_DEFAULT_MAX_DEPTH 64

/* Checks that data[0..size) is a well-formed protobuf encoding of an ONNX
 * ModelProto before anything unpacks it: every tag, varint and length is
 * complete and inside its enclosing message, no group or invalid wire type
 * appears, each field the ONNX schema knows has the wire type the schema
 * gives it, and sub-messages nest at most max_depth deep (ModelProto = 1).
 * Only fields that the schema declares as messages are descended into;
 * unknown fields are skipped whole. Uses an explicit stack, never recursion.
 * Also refuses data that cannot be an ONNX model: empty, a first field that
 * is not a ModelProto field, or no graph. Returns CCG_STATUS_PARSE with the
 * message on the thread's context naming the byte offset, the message type
 * and the field number (and field name when known); CCG_STATUS_OOM if the
 * stack cannot grow. Thread-safe. */
ccg_status ccg__onnx_wire_check(const uint8_t *data, size_t size,
                                int max_depth);

/* The same checks for a lone TensorProto (a .pb tensor file): no graph is
 * required and the first field must be a TensorProto field. */
ccg_status ccg__onnx_wire_check_tensor(const uint8_t *data, size_t size);

/* True if the scan's schema has field `number` in message `type` and
 * takes it with `wire_type` (0 varint, 1 64-bit, 2 length-delimited, 5
 * 32-bit); then *sub names the message the scan descends into (NULL for a
 * scalar, string or bytes field). For the test that holds the schema
 * against protobuf-c's descriptors. */
bool ccg__onnx_wire_field(const char *type, uint32_t number, unsigned wire_type,
                          const char **sub);

/* A protobuf-c allocator that refuses to hand out more than max_bytes in
 * total (live bytes, headers included); frees give bytes back to the count.
 * Small blocks come from chunks that only ccg__onnx_cap_release frees, so
 * after an unpack through it, release is the one call that frees the
 * message (protobuf-c's free_unpacked is allowed before it but not needed).
 * One cap per unpack; not thread-safe. */
typedef struct ccg__onnx_cap {
  ProtobufCAllocator pc;   /* what protobuf-c calls; allocator_data = this */
  size_t max_bytes;        /* 0: no cap */
  size_t used;             /* bytes live now */
  size_t peak;             /* most bytes live at once */
  bool exceeded;           /* an allocation was refused for the cap */
  void *chunks;            /* chunks of small blocks, newest first */
  uint8_t *cur, *end;      /* free space in the newest chunk */
  size_t chunk_size;       /* size of the next chunk */
  struct cap_links *large; /* large blocks not freed yet */
} ccg__onnx_cap;

/* Sets up `cap` with a limit of max_bytes (0 = unlimited). */
void ccg__onnx_capped_allocator_init(ccg__onnx_cap *cap, size_t max_bytes);
/* The allocator to hand to protobuf-c ("borrowed": lives as long as cap). */
ProtobufCAllocator *ccg__onnx_capped_allocator(ccg__onnx_cap *cap);
/* True once an allocation was refused because of the cap: an unpack that
 * returned NULL with this set ran out of budget, not into bad data. */
bool ccg__onnx_cap_exceeded(const ccg__onnx_cap *cap);
/* A block of `size` bytes, aligned as malloc aligns, counted against the
 * cap and freed only by ccg__onnx_cap_release (never pass it to the
 * allocator's free). From 2 MiB on it is backed by huge pages where the
 * system has them. NULL when the cap or the memory runs out. */
void *ccg__onnx_cap_block(ccg__onnx_cap *cap, size_t size);
/* Decodes data[0..size) into the ModelProto that protobuf-c's unpack
 * would give, allocated from `cap` (set up by the caller), without copying
 * bytes fields other than attributes' strings: their data points into
 * `data`, which must outlive the model. The graph's value_info and doc strings
 * are checked but left out (no reader of an import looks at them). A model it
 * returns passes ccg__onnx_wire_check(data, size, max_depth). Returns NULL,
 * with cap released, for anything else and anything it does not decode exactly
 * as protobuf-c would (a field the descriptors lack, a repeated singular
 * sub-message, the cap reached): the caller then runs the pre-scan and
 * protobuf-c. Thread-safe. */
struct Onnx__ModelProto *ccg__onnx_decode(const uint8_t *data, size_t size,
                                          int max_depth, ccg__onnx_cap *cap);
/* The bytes one element of a repeated field of type t takes in a
 * protobuf-c message (protobuf-c keeps its own table private). */
size_t ccg__onnx_pb_elem_size(ProtobufCType t);
/* Frees every block the allocator handed out (whatever was unpacked through
 * it is gone) and leaves `cap` empty with the same limit. */
void ccg__onnx_cap_release(ccg__onnx_cap *cap);

#endif
