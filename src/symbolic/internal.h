/* Private: the contract between the mapping registry (registry.c) and the
 * system files (megatron.c, opensora.c, colossal.c, dtensor.c).
 *
 * A system file exports one table of ccg__mapping_def and its length. Each
 * def declares its parameters as a table of ccg__param_spec (key, kind,
 * offset into the def's params struct, default as JSON text); the registry
 * parses the caller's JSON object into a zeroed params struct of
 * params_size bytes, writes the canonical JSON for the tags, runs the rule,
 * tags every node the rule added and rolls the graph back if it fails. */
#ifndef CCG_SYMBOLIC_INTERNAL_H
#define CCG_SYMBOLIC_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

#include "ccgraph/symbolic.h"
#include "core/error.h"

/* ---- parameters -------------------------------------------------------- */

typedef enum ccg__param_kind {
  CCG__PARAM_INT,    /* int64_t; a JSON integer */
  CCG__PARAM_BOOL,   /* bool; true or false */
  CCG__PARAM_NUMBER, /* double; a JSON number, written as a real */
  CCG__PARAM_STRING, /* const char *, borrowed for the call; a JSON string */
  CCG__PARAM_INTS,   /* ccg__ints; a list of integers, or null */
  CCG__PARAM_CUSTOM, /* parsed by the spec's own function */
  CCG__PARAM_KIND_COUNT
} ccg__param_kind;

/* An integer list parameter; set == false for null (v NULL, n 0). The
 * registry owns v and frees it after the call. */
typedef struct ccg__ints {
  bool set;
  int64_t *v;
  size_t n;
} ccg__ints;

/* Parses a CUSTOM value into `field`. On failure writes why (completing
 * "params key 'K' ...", e.g. "must be \"up\", \"down\" or a number") and
 * returns false. */
typedef bool (*ccg__param_parse_fn)(const json_t *v, void *field, char *why,
                                    size_t n);
/* The canonical JSON of a parsed CUSTOM field (new reference; NULL on OOM);
 * it replaces the value, so a parse with an emit keeps no pointer into v.
 * Optional: without it the value is kept as given. */
typedef json_t *(*ccg__param_emit_fn)(const void *field);

typedef struct ccg__param_spec {
  const char *key;
  ccg__param_kind kind;
  size_t offset;             /* of the field in the def's params struct */
  const char *dflt;          /* default as JSON text; NULL = required */
  const char *doc;           /* one line for docs/mappings.md */
  ccg__param_parse_fn parse; /* CUSTOM only */
  ccg__param_emit_fn emit;   /* CUSTOM only, optional */
} ccg__param_spec;

#define CCG__PARAM(st, field, key_, kind_, dflt_, doc_)                        \
  { key_, CCG__PARAM_##kind_, offsetof(st, field), dflt_, doc_, NULL, NULL }
#define CCG__PARAM_CUSTOM_SPEC(st, field, key_, parse_, emit_, dflt_, doc_)    \
  { key_, CCG__PARAM_CUSTOM, offsetof(st, field), dflt_, doc_, parse_, emit_ }

/* ---- a call of a rule -------------------------------------------------- */

typedef struct ccg_mapping ccg__mapping_def;

/* What a rule sees. Rules insert nodes with the graph's builders; the
 * registry tags them and undoes them on failure, so a rule simply returns
 * the first failing status. */
typedef struct ccg__mcall {
  ccg_graph *g;
  const ccg__mapping_def *def;
  const void *params;      /* the def's params struct */
  const char *params_json; /* canonical text (what the tags hold) */
  uint32_t instance;
  bool backward;
} ccg__mcall;

/* Forward: inputs in[0..n_in) (arity checked by the registry); *n_out is
 * the room in `out` on entry (at least def->max_out when that is bounded;
 * an unbounded rule checks it) and the count written on return. So that
 * ccg_mapping_instance_io can find an application's inputs and outputs
 * from its tags alone, a forward rule reads its inputs in order, creates
 * values only as outputs of nodes (ccg_constant, not initializers), and
 * does not read its own outputs. */
typedef ccg_status (*ccg__mapping_fwd_fn)(ccg__mcall *c, const ccg_value_id *in,
                                          size_t n_in, ccg_value_id *out,
                                          size_t *n_out);
/* Backward: gin[i] = gradient of in[i] (CCG_NONE for none) from the output
 * gradients gout (CCG_NONE where an output has none; the registry calls the
 * rule only when at least one is given). */
typedef ccg_status (*ccg__mapping_bwd_fn)(ccg__mcall *c, const ccg_value_id *in,
                                          size_t n_in, const ccg_value_id *out,
                                          const ccg_value_id *gout,
                                          size_t n_out, ccg_value_id *gin);

struct ccg_mapping {
  const char *name;        /* "megatron.copy_to_tensor_model_parallel_region" */
  const char *forward_doc; /* one line */
  const char *backward_doc; /* one line */
  const ccg__param_spec *params;
  size_t n_params;
  size_t params_size; /* sizeof the params struct */
  int min_in, max_in; /* max_in -1 = unbounded */
  int max_out;
  ccg__mapping_fwd_fn forward;
  ccg__mapping_bwd_fn backward;
  const void *data; /* the system file's per-entry data */
};

#define CCG__PARAMS(arr) (arr), (sizeof(arr) / sizeof((arr)[0]))

/* ---- helpers for rules (registry.c) ------------------------------------ */

/* Records "<mapping>: <message>" on the graph and returns st. */
ccg_status ccg__mfail(ccg__mcall *c, ccg_status st, const char *fmt, ...)
    CCG_PRINTF(3, 4);

/* Size W of the group over mesh axes `axes` ("tp", "dp,tp") of the graph's
 * mesh; fails naming the mapping and the group when there is no mesh or an
 * axis is unknown or repeated. */
ccg_status ccg__mgroup(ccg__mcall *c, const char *axes, int64_t *w);

/* Normalizes a (possibly negative) dim of value x, failing with the mapping,
 * the key, the value and its rank when out of range. */
ccg_status ccg__mdim(ccg__mcall *c, ccg_value_id x, int64_t dim,
                     const char *what, int *out);

/* The group and dim of a call: W of group `axes` (ccg__mgroup), then dim
 * `dim` of x normalized into *d (ccg__mdim, `what` naming the key), so a
 * bad group is reported before a bad dim. d NULL checks the group only,
 * for the variants of a rule that take no dim. */
ccg_status ccg__mgroup_dim(ccg__mcall *c, const char *axes, ccg_value_id x,
                           int64_t dim, const char *what, int64_t *w, int *d);

/* Dim `dim` of x must split into W equal parts: a number divisible by W (a
 * symbol is left to the shape rules). Fails naming mapping, value, dim,
 * size and W. */
ccg_status ccg__mdivisible(ccg__mcall *c, ccg_value_id x, int dim, int64_t w,
                           const char *group);

/* A split-size list `key` must have W entries >= 0; when `dim` >= 0 they
 * must also sum to dim `dim` of x (a number). */
ccg_status ccg__msplits(ccg__mcall *c, const ccg__ints *s, const char *key,
                        int64_t w, ccg_value_id x, int dim);

/* Formats value x as "'name' [shape]" for messages. */
const char *ccg__mvalue_str(ccg__mcall *c, ccg_value_id x, char *buf,
                            size_t size);

/* Reshape of x to dims[0..n) (Reshape's 0 and -1 allowed) given by a
 * Constant node, so that the shape is a tagged node's output. */
ccg_status ccg__mreshape_const(ccg_graph *g, ccg_value_id x,
                               const int64_t *dims, size_t n,
                               ccg_value_id *out);

/* Reshapes x to exactly `to` with constant dims (a symbolic dim stays in
 * place or is the one inferred); fails naming the mapping otherwise. */
ccg_status ccg__mreshape(ccg__mcall *c, ccg_value_id x, const ccg_shape *to,
                         ccg_value_id *out);

/* Open-Sora's all-to-all with W > 1: dim `scatter` of x splits into W chunks
 * (must divide), chunk j goes to group rank j, and what arrives is
 * concatenated rank-major along dim `gather`. Built so that the exchange
 * is on dim 0 (ONNX Runtime's AllToAll, NCCL's flat buffers): reshape the
 * scatter dim to [W, S/W], transpose W to the front, AllToAll(0, 0),
 * transpose W to just before the gather dim, reshape it into that dim. Dims
 * already at 0 skip their transpose. */
ccg_status ccg__mall_to_all(ccg__mcall *c, ccg_value_id x, const char *group,
                            int64_t w, int scatter, int gather,
                            ccg_value_id *out);

/* For the typed C functions: {"group": group} ({} for NULL), an integer
 * list (null for NULL) — new references, NULL on OOM — and apply of a
 * one-input one-output mapping with params (stolen; NULL = OOM); *out (out
 * NULL: not wanted) is CCG_NONE where the rule gave no output. */
json_t *ccg__mparams_group(const char *group);
json_t *ccg__mjson_ints(const int64_t *v, size_t n);
ccg_status ccg__mapply1(ccg_graph *g, const char *name, json_t *params,
                        ccg_value_id x, ccg_value_id *out);

/* Sets key to v on the params o, both stolen, and returns o; on failure
 * (o or v NULL: out of memory) frees both and returns NULL, which the next
 * ccg__mset passes on and ccg__mapply reports, so a typed call chains its
 * keys without a check after each. */
json_t *ccg__mset(json_t *o, const char *key, json_t *v);

/* ccg_mapping_apply of `name` with params (stolen; NULL = out of memory)
 * on in[0..n_in), with room for `room` outputs (at most
 * CCG__MAPPLY_MAX_OUT). Only on success are the outputs written to out
 * (NULL: not wanted) and their count to *n_out (NULL: not wanted). */
#define CCG__MAPPLY_MAX_OUT 8
ccg_status ccg__mapply(ccg_graph *g, const char *name, json_t *params,
                       const ccg_value_id *in, size_t n_in, ccg_value_id *out,
                       size_t room, size_t *n_out);

/* ---- the system tables ------------------------------------------------- */

extern const ccg__mapping_def ccg__megatron_mappings[];
extern const size_t ccg__megatron_mappings_count;
extern const ccg__mapping_def ccg__opensora_mappings[];
extern const size_t ccg__opensora_mappings_count;

/* ccg_mapping_instance_io given the instance's forward nodes (n, in
 * graph order), for a caller that has them: no walk over the graph. */
ccg_status ccg__mapping_instance_io_of(ccg_graph *g, uint32_t instance,
                                       const ccg_node_id *nodes, size_t n,
                                       ccg_value_id *inputs, size_t *n_inputs,
                                       ccg_value_id *outputs,
                                       size_t *n_outputs);

#endif
