/* Private: the contract between the files of the ONNX layer. Protobuf-c
 * structs never leave src/onnx. */
#ifndef CCG_ONNX_INTERNAL_H
#define CCG_ONNX_INTERNAL_H

#include <sys/types.h>

#include "ccgraph/onnx.h"
#include "core/arena.h"
#include "core/jtext.h"
#include "core/error.h"
#include "core/strmap.h"
#include "graph/internal.h"
#include "onnx.pb-c.h"

/* The ai.onnx opsets a model may import: each op is then read from its own
 * oldest opset on (ccg_op_onnx_since), so an old model whose every op has
 * today's meaning imports, and one that uses an op's older form is refused
 * naming the node and the op. */
#define CCG__ONNX_MIN_OPSET 1
#define CCG__ONNX_MAX_OPSET 24
#define CCG__ONNX_MIN_EXPORT_OPSET 17
/* bytes of a model file gathered for one write(2) */
#define CCG__ONNX_WRITE_BUF ((size_t)1 << 20)
#define CCG__ONNX_DOMAIN_MS "com.microsoft"

/* Model-level metadata_props keys (docs/onnx.md). */
#define CCG__META_FORMAT "ccgraph.format"
#define CCG__META_MESH "ccgraph.mesh"
#define CCG__META_BACKWARD "ccgraph.backward"
#define CCG__META_PLACEMENTS "ccgraph.placements"
#define CCG__META_TAGS "ccgraph.tags"
/* Graph metadata (ccg_graph_meta) under this prefix travels through
 * import and export; our other keys are written from the graph itself. */
#define CCG__META_GRAPH_PREFIX "ccgraph.shard."
#define CCG__META_SLOTS "ccgraph.node_meta"
#define CCG__META_FORMAT_VERSION "1"
#define CCG__BACKWARD_CONVENTION "replicated_loss"

/* Names of the model-local functions that carry Gelu below opset 20. */
#define CCG__FN_GELU "Gelu"
#define CCG__FN_GELU_TANH "GeluTanh"

/* ---- types (types.c) ---------------------------------------------------- */

/* ONNX TensorProto.DataType of an IR dtype (0 for UNDEFINED). */
int32_t ccg__onnx_dtype_code(ccg_dtype dt);
/* IR dtype of an ONNX type code; false if the IR has no such dtype. */
bool ccg__onnx_dtype_from_code(int64_t code, ccg_dtype *out);
/* ONNX's name of a type code ("UINT16"), for messages. */
const char *ccg__onnx_dtype_code_name(int64_t code);
/* The IR version a model of this ai.onnx opset declares. */
int64_t ccg__onnx_ir_version(int64_t opset);

/* ---- export (export.c, functions.c) ------------------------------------- */

/* Where initializers above the threshold go while a file is written. */
typedef struct ccg__onnx_ext {
  FILE *file;           /* open temporary data file, NULL until needed */
  const char *tmp_path; /* its temporary path (made by the caller) */
  const char *location; /* the name written in the model (final basename) */
  uint64_t offset;
  bool used;
} ccg__onnx_ext;

/* Builds the ModelProto of g (for `rank`: -1 = common data) in `a`. ext NULL
 * keeps every initializer inline. Errors go to g. */
ccg_status ccg__onnx_build_model(ccg_graph *g, const ccg_onnx_export_options *o,
                                 int64_t rank, ccg_arena *a, ccg__onnx_ext *ext,
                                 Onnx__ModelProto **out);
/* The repeated fields that a build may hand out one by one: GraphProto's
 * node and value_info, ModelProto's metadata_props. */
enum {
  CCG__ONNX_GRAPH_NODE = 1,
  CCG__ONNX_GRAPH_VALUE_INFO = 13,
  CCG__ONNX_MODEL_METADATA = 14
};
/* Receives a GraphProto.node (a NodeProto), .value_info (a ValueInfoProto)
 * or ModelProto.metadata_props (a StringStringEntryProto) element, in
 * model order; msg is valid only during the call. */
typedef ccg_status (*ccg__onnx_emit)(void *ctx, uint32_t field,
                                     const ProtobufCMessage *msg);
/* ccg__onnx_build_model, but each node and value info is built in scratch
 * memory, handed to fn and forgotten, and so is each metadata entry: the
 * model comes back without them.
 * A large model is then packed while each element is in the cache, and no
 * memory the size of the whole tree is touched. fn's errors are returned
 * as they are. */
ccg_status ccg__onnx_build_model_emit(ccg_graph *g,
                                      const ccg_onnx_export_options *o,
                                      int64_t rank, ccg_arena *a,
                                      ccg__onnx_ext *ext, ccg__onnx_emit fn,
                                      void *fn_ctx, Onnx__ModelProto **out);
/* The TensorProtos of g's initializers (graph order) with rank's data
 * (-1 = common data) into out[0..num_initializers): made again in place
 * where out[i] is one already, else allocated in `a` (which also holds
 * external data entries); ext NULL keeps them inline. The first entries of
 * a built model's GraphProto.initializer are these. Errors go to g. */
ccg_status ccg__onnx_rank_initializers(ccg_graph *g,
                                       const ccg_onnx_export_options *o,
                                       int64_t rank, ccg_arena *a,
                                       ccg__onnx_ext *ext,
                                       Onnx__TensorProto **out);

/* One model packed for several ranks of one graph: everything but the
 * graph's own initializers is built and serialized once (export_shared.c). */
typedef struct ccg__onnx_shared ccg__onnx_shared;
/* Builds g's model for `first` rank (its initializers written through ext)
 * and packs the parts every rank shares. "new": freed with
 * ccg__onnx_shared_free. Errors go to g. */
ccg_status ccg__onnx_shared_new(ccg_graph *g, const ccg_onnx_export_options *o,
                                int64_t first, ccg__onnx_ext *ext,
                                ccg__onnx_shared **out);
void ccg__onnx_shared_free(ccg__onnx_shared *sh);
/* The model of `rank` into malloc'd memory, or written to a new file at
 * `path` (ext: where that rank's external data goes; NULL inline). The
 * bytes equal ccg__onnx_pack of ccg__onnx_build_model for that rank. */
ccg_status ccg__onnx_shared_pack(ccg__onnx_shared *sh, int64_t rank,
                                 void **data, size_t *size);
ccg_status ccg__onnx_shared_pack_file(ccg__onnx_shared *sh, int64_t rank,
                                      ccg__onnx_ext *ext, const char *path);
/* Checks and fills defaults of caller options into *o (errors on g). */
ccg_status ccg__onnx_export_opts(ccg_graph *g,
                                 const ccg_onnx_export_options *in,
                                 ccg_onnx_export_options *o);

/* The model-local function that computes Gelu (tanh form or erf form) from
 * ai.onnx ops of `opset`, allocated in a. NULL on OOM. */
Onnx__FunctionProto *ccg__onnx_gelu_function(ccg_arena *a, bool tanh_form,
                                             int64_t opset);

/* ONNX's multi-device annotations (annot.c): from IR 11 (opset 23) on and
 * with a mesh, the mesh as ModelProto.configuration and each node's placed
 * inputs and outputs (Shard/Replicate, not Partial) as sharding specs.
 * ccg__onnx_annot_config sets m->configuration and *config to its name in
 * `a`, or leaves *config NULL when the model gets no annotations; then
 * ccg__onnx_annot_node annotates np, node n of g, in `a`. Errors on g. */
ccg_status ccg__onnx_annot_config(ccg_graph *g, int64_t opset, ccg_arena *a,
                                  Onnx__ModelProto *m, const char **config);
ccg_status ccg__onnx_annot_node(ccg_graph *g, ccg_arena *a, const char *config,
                                ccg_node_id n, Onnx__NodeProto *np);

/* ---- metadata (meta.c) -------------------------------------------------- */

/* JSON texts of the placements and mapping tags of g appended to *out
 * (nothing when there are none: out->n stays 0). Errors (OOM) on g; the
 * caller frees out->p either way. */
ccg_status ccg__onnx_meta_placements(ccg_graph *g, ccg__jtext *out);
ccg_status ccg__onnx_meta_tags(ccg_graph *g, ccg__jtext *out);
/* Restores them on an imported graph; errors on the thread, naming `what`
 * (the file). */
ccg_status ccg__onnx_restore_placements(ccg_graph *g, const char *json,
                                        const char *what);
ccg_status ccg__onnx_restore_tags(ccg_graph *g, const char *json,
                                  const char *what);
/* The same for node metadata of ccgraph's own ("ccgraph.*" keys: schedule
 * slots, pipeline stages), which IR 8 models cannot carry per node. */
ccg_status ccg__onnx_meta_slots(ccg_graph *g, ccg__jtext *out);
ccg_status ccg__onnx_restore_slots(ccg_graph *g, const char *json,
                                   const char *what);

/* ---- tensors (tensor.c) ------------------------------------------------- */

/* Fills tp (already initialized) with t's dims, type and data: raw_data
 * (borrowed from t) or, when ext is given and the data is larger than
 * `threshold`, appended to the external data file. Errors on ctx (NULL: the
 * thread's). */
ccg_status ccg__onnx_tensor_out(ccg_ctx *ctx, ccg_arena *a, const ccg_tensor *t,
                                const char *name, ccg__onnx_ext *ext,
                                size_t threshold, Onnx__TensorProto *tp);

/* What import needs to decode tensors. */
/* An external data file mapped during one import (owned by the graph). */
typedef struct ccg__onnx_map {
  dev_t dev;
  ino_t ino;
  const uint8_t *base;
  size_t len;
  struct ccg__onnx_map *next;
} ccg__onnx_map;

typedef struct ccg__onnx_src {
  const char *what;     /* file name or "<buffer>", for messages */
  const char *base_dir; /* external data folder; NULL = refuse */
  size_t max_bytes;     /* remaining byte budget for external data */
  ccg_graph *owner;     /* mapped files are given to it; NULL = copy */
  ccg__onnx_map *maps;  /* files mapped so far (in the import's arena) */
} ccg__onnx_src;

/* Decodes tp into *t, its data in `a`. With borrow_raw, raw_data is not
 * copied: t->data points into tp, possibly unaligned, for callers that only
 * memcpy it (initializers: the graph copies them). With `mapped` set and
 * src->owner given, 64-byte aligned external data is not read but mapped
 * (read-only, owned by src->owner), and *mapped says so: t->data then lives
 * as long as that graph. `role` names the tensor in messages ("initializer
 * 'w'"). Errors on the thread context. */
ccg_status ccg__onnx_tensor_in(ccg__onnx_src *src, ccg_arena *a,
                               const Onnx__TensorProto *tp, const char *role,
                               bool borrow_raw, bool *mapped, ccg_tensor *t);

/* ---- inline weights kept out of protobuf-c (strip.c) -------------------- */

/* A graph initializer's raw_data left in the source bytes. */
typedef struct ccg__onnx_raw {
  size_t init;         /* index in GraphProto.initializer */
  const uint8_t *data; /* inside the source */
  size_t len;
} ccg__onnx_raw;
typedef struct ccg__onnx_stripped {
  uint8_t *data; /* the model without those raw_data fields; NULL: none */
  size_t size;
  ccg__onnx_raw *raw;
  size_t n_raw;
} ccg__onnx_stripped;
/* A copy of a (wire-checked) model's bytes without the large raw_data of its
 * graph's initializers, and where each was. out->data stays NULL where
 * there is nothing to take out or the layout is one protobuf-c must merge
 * (repeated graph or raw_data fields). Errors (OOM) on the thread. */
ccg_status ccg__onnx_strip_raw(const uint8_t *data, size_t size,
                               ccg__onnx_stripped *out);
void ccg__onnx_stripped_free(ccg__onnx_stripped *s);

/* ---- files (tensor_file.c, import.c) ----------------------------------- */

/* Checks caller import options and fills defaults into *o (thread errors). */
ccg_status ccg__onnx_import_opts(const ccg_onnx_import_options *in,
                                 ccg_onnx_import_options *o);
/* A whole file (at most max_bytes): mapped read-only where it is a regular
 * file (no copy: protobuf-c copies what it keeps), else read into memory.
 * Free with ccg__onnx_file_free, whatever the status. Errors on the thread
 * context, naming the file. */
typedef struct ccg__onnx_file {
  uint8_t *data;
  size_t size;
  bool mapped;
} ccg__onnx_file;
ccg_status ccg__onnx_file_read(const char *path, size_t max_bytes,
                               ccg__onnx_file *f);
void ccg__onnx_file_free(ccg__onnx_file *f);
/* The folder of `path` for external data: *base points into *dir ("new":
 * free()) or to "." or "/". */
ccg_status ccg__onnx_dir_of(const char *path, char **dir, const char **base);

/* ---- hardening hooks ---------------------------------------------------- */

/* Import runs these before and while unpacking; see import.c. */

#endif
