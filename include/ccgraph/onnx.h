/* ccgraph ONNX layer: graph <-> ONNX ModelProto. Export writes one model (or
 * one model per rank of the graph's mesh); import reads standard ONNX models,
 * ONNX Runtime's com.microsoft collectives and ccgraph's own domain. The
 * encoding (metadata keys, Gelu below opset 20, dialects, external data) is
 * described in docs/onnx.md. Calls on different graphs may run concurrently. */
#ifndef CCGRAPH_ONNX_H
#define CCGRAPH_ONNX_H

#include "ccgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How collective nodes are written. CCGRAPH: domain "ccgraph", every
 * attribute kept. ORT: ONNX Runtime's com.microsoft AllReduce / AllGather /
 * AllToAll where the meaning matches exactly; any other collective is an
 * error naming the node. */
typedef enum ccg_onnx_dialect {
  CCG_ONNX_DIALECT_CCGRAPH,
  CCG_ONNX_DIALECT_ORT,
  CCG_ONNX_DIALECT_COUNT
} ccg_onnx_dialect;

/* "ccgraph", "ort"; "invalid" out of range. Static string. */
CCG_API const char *ccg_onnx_dialect_name(ccg_onnx_dialect d);
/* Parses "ccgraph" or "ort". CCG_STATUS_PARSE (thread context) otherwise. */
CCG_API ccg_status ccg_onnx_dialect_parse(const char *name,
                                          ccg_onnx_dialect *out);

typedef struct ccg_onnx_export_options {
  size_t size;               /* sizeof(ccg_onnx_export_options) */
  int64_t opset;             /* ai.onnx opset, 17..24 (default 17) */
  ccg_onnx_dialect dialect;  /* default CCGRAPH */
  size_t external_threshold; /* initializers of more bytes than this go to
                                an external data file (default 1 MiB);
                                SIZE_MAX keeps everything inline. Only the
                                file exports use external data. */
  int rank;                  /* whose per-rank initializer data to write
                                (-1, the default: the common data) */
} ccg_onnx_export_options;
#define CCG_ONNX_EXPORT_OPTIONS_INIT                                           \
  {                                                                            \
    sizeof(ccg_onnx_export_options), 17, CCG_ONNX_DIALECT_CCGRAPH,             \
        (size_t)1 << 20, -1                                                    \
  }

typedef struct ccg_onnx_import_options {
  size_t size;            /* sizeof(ccg_onnx_import_options) */
  size_t max_bytes;       /* cap on memory the decoder may allocate (default
                             4 GiB); external data is counted too */
  int max_depth;          /* nesting limit of the wire format (default 64) */
  const char *name;       /* name of the new graph (default: the model's) */
  bool map_external_data; /* default true: external data at 64-byte
                             aligned offsets is mapped read-only instead of
                             read (shared with the page cache; the graph
                             unmaps it). The file must then not be
                             truncated or rewritten while the graph lives.
                             Other external data is read. */
} ccg_onnx_import_options;
#define CCG_ONNX_IMPORT_OPTIONS_INIT                                           \
  { sizeof(ccg_onnx_import_options), (size_t)1 << 32, 64, NULL, true }

/* Writes g as an ONNX model to `path` (through a temporary file renamed at
 * the end: on failure nothing is left behind). Initializers above the
 * threshold go to "<model file name>.data" beside it. opts may be NULL.
 * Errors go to g and name the node, value or file at fault. */
CCG_API ccg_status ccg_onnx_export_file(ccg_graph *g, const char *path,
                                        const ccg_onnx_export_options *opts);

/* The same model serialized into memory, every initializer inline. "new":
 * *data is freed with free(). */
CCG_API ccg_status ccg_onnx_export_buffer(ccg_graph *g,
                                          const ccg_onnx_export_options *opts,
                                          void **data, size_t *size);

/* One model per rank of g's mesh (a graph without a mesh has one rank) in
 * memory, every initializer inline: data[r] and sizes[r] for each rank r
 * (arrays of the mesh's world size), the bytes ccg_onnx_export_buffer gives
 * with opts->rank = r. The model is built once for all ranks; opts->rank is
 * ignored. "new": each data[r] is freed with free(); on failure none is
 * left allocated. */
CCG_API ccg_status
ccg_onnx_export_rank_buffers(ccg_graph *g, const ccg_onnx_export_options *opts,
                             void **data, size_t *sizes);

/* One model per rank of g's mesh (a graph without a mesh has one rank):
 * dir/<name>.rank<r>.onnx, each with that rank's initializer data
 * (ccg_graph_set_initializer_rank_data) or else the common data. A missing
 * dir is created (its parent must exist). All files are written under
 * temporary names and renamed only when every rank succeeded; on failure
 * none is left (nor a folder made for them). opts->rank is ignored. */
CCG_API ccg_status ccg_onnx_export_ranks(ccg_graph *g, const char *dir,
                                         const char *name,
                                         const ccg_onnx_export_options *opts);
/* The same for a program with one graph per rank: graphs[r] (n of them) is
 * written as rank r (its per-rank data for r, if any). All or nothing: an
 * older program in dir keeps every file if any rank fails. */
CCG_API ccg_status ccg_onnx_export_rank_graphs(
    ccg_graph *const *graphs, size_t n, const char *dir, const char *name,
    const ccg_onnx_export_options *opts);

/* Reads an ONNX model file; external data is looked up in the file's folder
 * and must stay inside it. "new": *out is freed with ccg_graph_free. Errors
 * go to the thread's context (ccg_last_error(NULL)) and name the file, node,
 * op, domain, opset or tensor at fault. */
CCG_API ccg_status ccg_onnx_import_file(const char *path,
                                        const ccg_onnx_import_options *opts,
                                        ccg_graph **out);

/* The same from memory. base_dir is the folder external data is resolved
 * against; NULL refuses models with external data. */
CCG_API ccg_status ccg_onnx_import_buffer(const void *data, size_t size,
                                          const char *base_dir,
                                          const ccg_onnx_import_options *opts,
                                          ccg_graph **out);

/* ---- single tensors (TensorProto files, .pb) ---------------------------- */

/* Reads one serialized ONNX TensorProto (the .pb files of ONNX's test data)
 * into *out: dtype, dims and data in any standard encoding (raw_data, typed
 * fields, external data beside the file and inside its folder). The checks
 * of the model reader apply (wire format, dims, data length against shape
 * and type, byte cap of opts->max_bytes; opts may be NULL). name (may be
 * NULL) gets the tensor's name, "" when it has none ("new": free()). "new":
 * out->data is 64-byte aligned, freed with ccg_onnx_tensor_free. Errors go
 * to the thread's context and name the file. */
CCG_API ccg_status
ccg_onnx_tensor_read_file(const char *path, const ccg_onnx_import_options *opts,
                          ccg_tensor *out, char **name);
/* Frees the data of a tensor from ccg_onnx_tensor_read_file (NULL-safe). */
CCG_API void ccg_onnx_tensor_free(ccg_tensor *t);
/* Writes t as one TensorProto (raw_data) named `name` (may be NULL) to
 * `path`. Errors go to the thread's context and name the file. */
CCG_API ccg_status ccg_onnx_tensor_write_file(const char *path,
                                              const ccg_tensor *t,
                                              const char *name);

#ifdef __cplusplus
}
#endif
#endif
