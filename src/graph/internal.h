/* Private: the graph's data structures and the contract between the graph
 * core (graph.c, node.c, registry.c) and the op family files. */
#ifndef CCG_GRAPH_INTERNAL_H
#define CCG_GRAPH_INTERNAL_H

#include "ccgraph/graph.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/strmap.h"

/* ---- storage ----------------------------------------------------------- */

/* What is known of a value's contents, kept apart from its record: most
 * values have none (ccg__value.c NULL), and the record stays one cache line
 * (passes at 384 layers read tens of thousands of them, most once). Made
 * on the first write (ccg__contents_of), in the arena; never freed
 * apart from the graph, so a rollback that keeps the value keeps it. */
typedef struct ccg__contents {
  ccg_tensor *data;       /* initializers */
  ccg_tensor **rank_data; /* per-rank data (rankdata.c); NULL entries and
                             ranks past n_rank_data use `data` */
  ccg_dim *known;         /* known elements (shape arithmetic) */
  uint32_t n_rank_data;
  int n_known; /* -1 = contents unknown */
} ccg__contents;

/* A value: 64 bytes, one cache line in the table (its size is asserted
 * below). Pointers first, then the 32-bit fields, then the bytes. */
typedef struct ccg__value {
  const char *name;
  /* Interned in the graph (ccg__shape_intern): values of one shape share
   * one copy, which is never written; a shape that changes is interned
   * anew. A whole ccg_shape, as ccg_value_shape hands it out. */
  const ccg_shape *shape;
  ccg_placement *placements; /* n_placements, in the arena; NULL = none */
  ccg__contents *c;          /* NULL = no data, nothing known */
  ccg_node_id producer;
  uint32_t producer_slot;
  int n_placements;             /* 0 = none */
  uint32_t first_use, last_use; /* into ccg_graph.uses; CCG_NONE = none */
  uint32_t n_uses;
  uint8_t dtype;  /* a ccg_dtype */
  uint8_t kind;   /* a ccg_value_kind */
  bool is_output; /* a graph output */
} ccg__value;

_Static_assert(sizeof(ccg__value) <= 64, "a value record is one cache line");
_Static_assert(CCG_DTYPE_COUNT <= 256, "a dtype fits ccg__value.dtype");

/* v's data (an initializer's), NULL where it has none. */
static inline ccg_tensor *ccg__vdata(const ccg__value *v) {
  return v->c ? v->c->data : NULL;
}
/* How many of v's elements are known (ccg__contents.known), -1: none. */
static inline int ccg__vn_known(const ccg__value *v) {
  return v->c ? v->c->n_known : -1;
}
/* v's contents record, made where it has none (no data, nothing known);
 * NULL when out of memory, with no error set. */
ccg__contents *ccg__contents_of(ccg_graph *g, ccg__value *v);

/* One use of a value as a node input. A value's uses form a doubly linked
 * list in node order (prev/next are indexes into ccg_graph.uses), appended
 * as nodes are committed and unlinked when ccg__rollback removes them: the
 * consumer index every pass reads (ccg_value_next_use). */
typedef struct ccg__use {
  ccg_node_id node;
  uint32_t slot;
  uint32_t prev, next; /* CCG_NONE at the ends */
} ccg__use;

typedef struct ccg__node {
  const char *name;
  ccg_value_id *inputs;
  ccg_value_id *outputs;
  ccg_attr *attrs;
  ccg_tag *tag;           /* NULL = none */
  struct ccg__meta *meta; /* key/value strings, in the order first set */
  ccg_op op;
  uint32_t n_inputs;
  uint32_t n_outputs;
  uint32_t n_attrs;
} ccg__node;

typedef struct ccg__meta {
  const char *key, *value;
  struct ccg__meta *next;
} ccg__meta;

struct ccg_graph {
  ccg_ctx ctx; /* first: see ccg_last_error */
  ccg_allocator alloc;
  ccg_arena arena;   /* everything the graph keeps */
  ccg_arena scratch; /* shape-rule work, reset per node; see add_node */
  const char *name;
  bool has_mesh;
  ccg_mesh mesh;
  struct ccg__meta *meta; /* graph metadata, in the order first set */

  ccg__value *values;
  size_t n_values, cap_values;
  ccg__node *nodes;
  size_t n_nodes, cap_nodes;
  ccg_value_id *inputs, *outputs, *inits;
  size_t n_inputs, cap_inputs, n_outputs, cap_outputs, n_inits, cap_inits;
  ccg__use *uses;
  size_t n_uses, cap_uses;
  /* which of values, nodes and uses are ccg__bulk_alloc blocks (see
   * ccg__table_reserve) */
  bool values_bulk, nodes_bulk, uses_bulk;
  /* the largest mapping instance of any node's tag; recounted after a
   * rollback (max_instance_stale) */
  uint32_t max_instance;
  bool max_instance_stale;

  /* ccg_graph_topo_order must look at the nodes (check.c): a node has a
   * schedule slot (CCG_META_SLOT), or inputs were rewired by hand. Else the
   * node order is topological, as add_node keeps it (a node's inputs exist
   * before it). Inputs are rewired through ccg__node_set_input, which sets
   * this. */
  bool order_unsure;

  ccg_strmap value_names;
  ccg_strmap node_names;
  ccg_strmap symbols; /* interned symbol strings */
  /* interned shapes (ccg__shape_intern): open addressing, a power of two
   * slots, NULL = empty */
  const ccg_shape **shapes;
  size_t n_shapes, cap_shapes;

  char *scope; /* "/a/b" or ""; the graph's allocator, scope_cap bytes */
  size_t scope_len, scope_cap;

  struct ccg__release *releases; /* run at ccg_graph_free; arena list */
};

/* Memory the graph does not allocate but owns, such as a mapped external
 * data file that borrowed initializers point into. */
typedef struct ccg__release {
  void (*fn)(void *p, size_t n);
  void *p;
  size_t n;
  struct ccg__release *next;
} ccg__release;

/* Makes g own `p`: fn(p, n) runs when g is freed, after every other use.
 * On OOM, fn runs at once and OOM is returned (recorded on g), so the
 * caller never leaks p. */
ccg_status ccg__graph_own(ccg_graph *g, void (*fn)(void *p, size_t n), void *p,
                          size_t n);
/* Adds an initializer whose data is not copied: t->data must stay valid
 * and unchanged for the graph's lifetime (memory given to ccg__graph_own). */
ccg_status ccg__graph_add_initializer_borrowed(ccg_graph *g, const char *name,
                                               const ccg_tensor *t,
                                               ccg_value_id *out);
/* ccg_graph_set_initializer_rank_data without copying t->data (which must
 * live as long as g, as for ccg__graph_add_initializer_borrowed). */
ccg_status ccg__graph_set_rank_data_borrowed(ccg_graph *g, ccg_value_id v,
                                             int64_t rank, const ccg_tensor *t);

/* Interns a symbol text in the graph: equal strings, one pointer. Only
 * canonical texts (ccg__sym_canonical) may be interned: shape import relies
 * on it to skip canonicalizing symbols that are already interned. */
const char *ccg__intern(ccg_graph *g, const char *s);
/* ccg__intern for a fresh symbol (ccg__dim_fresh): marked as one, unless the
 * same text was interned before as an ordinary symbol. */
const char *ccg__intern_fresh(ccg_graph *g, const char *s);
/* True if d is a symbol a shape rule made fresh (a dim set by data), or an
 * expression over such symbols only (a shard of one: "fresh/2"). */
bool ccg__dim_is_fresh(const ccg_graph *g, ccg_dim d);
/* Copies a shape into the graph, interning its symbols (canonicalized). */
ccg_status ccg__shape_import(ccg_graph *g, const ccg_shape *in, ccg_shape *out);
/* The graph's one copy of shape s, whose symbols must be interned in g
 * already (ccg__shape_import's output): equal shapes, one pointer, valid as
 * long as g. Dims past s->rank are not read. NULL on OOM (not recorded). */
const ccg_shape *ccg__shape_intern(ccg_graph *g, const ccg_shape *s);

/* graph.c: records an out-of-memory error while doing `what`; OOM. */
ccg_status ccg__graph_oom(ccg_graph *g, const char *what);
/* ccg_graph_add_node with the op already resolved (d->op and d->domain are
 * not read): a reader that resolved it need not look it up again. */
ccg_status ccg__graph_add_node_op(ccg_graph *g, ccg_op op,
                                  const ccg_node_desc *d, ccg_node_id *out);
/* Grows one of the graph's large tables (values, nodes, uses) to hold
 * `need` elements of `elem` bytes, doubling; *bulk says whether *items is a
 * ccg__bulk_alloc block (see graph.c). False (table untouched) on OOM. */
bool ccg__table_reserve(ccg_graph *g, void **items, size_t *cap, bool *bulk,
                        size_t need, size_t elem);
/* Frees a table grown by ccg__table_reserve. */
void ccg__table_free(ccg_graph *g, void *items, size_t cap, bool bulk,
                     size_t elem);
/* Room for `nodes` more nodes, `values` more values and `uses` more input
 * uses, in the tables and in the node and value name indexes, so that a
 * reader or a pass that knows the counts grows each table once (an index
 * grown by doubling is rehashed into new memory at every step). */
ccg_status ccg__graph_reserve(ccg_graph *g, size_t nodes, size_t values,
                              size_t uses);
/* Appends a value (name arena-owned and already checked; hash its
 * ccg__strhash; shape interned by ccg__shape_intern) to the graph. */
ccg_status ccg__push_value(ccg_graph *g, const char *name, uint32_t hash,
                           ccg_dtype dt, const ccg_shape *shape,
                           ccg_value_kind kind, ccg_value_id *out);

/* Copies a tensor and its data into the graph's arena; NULL (with the error
 * recorded, naming `what` and `name`) on bad shapes or OOM. */
ccg_tensor *ccg__copy_tensor(ccg_graph *g, const ccg_tensor *t, ccg_status *st,
                             const char *what, const char *name);
/* Checks a node's attributes against its op's spec (names node, op, attr). */
ccg_status ccg__check_attrs(ccg_graph *g, ccg_op op, const char *node,
                            const ccg_attr *attrs, size_t n);
/* Deep copy of attributes into the arena; NULL with *st set on failure. */
ccg_attr *ccg__copy_attrs(ccg_graph *g, const ccg_attr *attrs, size_t n,
                          ccg_status *st, const char *node);

/* Validates placements of v against the mesh and v's rank; writes the
 * normalized form (Shard dims >= 0) to norm. */
ccg_status ccg__check_placements(ccg_graph *g, ccg_value_id v,
                                 const ccg_placement *p, int n,
                                 ccg_placement *norm);

static inline bool ccg__value_ok(const ccg_graph *g, ccg_value_id v) {
  return v < g->n_values;
}
static inline bool ccg__node_ok(const ccg_graph *g, ccg_node_id n) {
  return n < g->n_nodes;
}

/* Starts loading what a pass that reads node n's first input and output
 * will ask for, in three stages, each reading what the one before loaded:
 * issue stage 0 furthest ahead of the node being worked on, then 1, then
 * 2 nearest. On a graph larger than the cache each load is a miss, which a
 * walk over many nodes would otherwise wait for one after another.
 *   0: the node's input and output lists, name and attribute records;
 *   1: its first input's and output's value records, its attributes'
 *      names and string values;
 *   2: those values' shapes and placements, and the first string of a
 *      list of strings (mesh_axes).
 * Always inlined: GCC drops a call of a function that only prefetches
 * where it does not inline it early. */
__attribute__((always_inline)) static inline void
ccg__node_prefetch(const ccg_graph *g, ccg_node_id n, int stage) {
  const ccg__node *x = &g->nodes[n];
  /* the lists' first entries, read at stages 1 and 2 (stage 0 loads the
   * lists) */
  ccg_value_id in = CCG_NONE, out = CCG_NONE;
  if (stage > 0) {
    in = x->n_inputs ? x->inputs[0] : CCG_NONE;
    out = x->n_outputs ? x->outputs[0] : CCG_NONE;
  }
  switch (stage) {
  case 0:
    __builtin_prefetch(x->inputs);
    __builtin_prefetch(x->outputs);
    __builtin_prefetch(x->name);
    for (size_t b = 0; b < x->n_attrs * sizeof *x->attrs; b += 64)
      __builtin_prefetch((const char *)x->attrs + b);
    break;
  case 1:
    if (in != CCG_NONE)
      __builtin_prefetch(&g->values[in]);
    if (out != CCG_NONE)
      __builtin_prefetch(&g->values[out]);
    for (uint32_t i = 0; i < x->n_attrs; i++) {
      __builtin_prefetch(x->attrs[i].name);
      if (x->attrs[i].type == CCG_ATTR_STRING)
        __builtin_prefetch(x->attrs[i].s);
      else if (x->attrs[i].type == CCG_ATTR_STRINGS)
        __builtin_prefetch(x->attrs[i].strings);
    }
    break;
  default:
    if (in != CCG_NONE) {
      __builtin_prefetch(g->values[in].shape);
      __builtin_prefetch(g->values[in].placements);
    }
    if (out != CCG_NONE) {
      __builtin_prefetch(g->values[out].shape);
      __builtin_prefetch(g->values[out].placements);
    }
    for (uint32_t i = 0; i < x->n_attrs; i++)
      if (x->attrs[i].type == CCG_ATTR_STRINGS && x->attrs[i].n)
        __builtin_prefetch(x->attrs[i].strings[0]);
    break;
  }
}

/* How far ahead a walk issues ccg__node_prefetch's stages 0, 1 and 2, in
 * nodes: about one memory latency between stages at the tens of
 * nanoseconds a node of a verify walk takes. */
enum { CCG__PREFETCH_FAR = 24, CCG__PREFETCH_MID = 16, CCG__PREFETCH_NEAR = 8 };

/* The three stages for the node `k` places on in ids[0..n), while ids[k]
 * is worked on. */
__attribute__((always_inline)) static inline void
ccg__nodes_prefetch(const ccg_graph *g, const ccg_node_id *ids, size_t n,
                    size_t k) {
  if (k + CCG__PREFETCH_FAR < n)
    ccg__node_prefetch(g, ids[k + CCG__PREFETCH_FAR], 0);
  if (k + CCG__PREFETCH_MID < n)
    ccg__node_prefetch(g, ids[k + CCG__PREFETCH_MID], 1);
  if (k + CCG__PREFETCH_NEAR < n)
    ccg__node_prefetch(g, ids[k + CCG__PREFETCH_NEAR], 2);
}

/* ---- symbolic dims (symdim.c) ------------------------------------------ */

/* d = a * b, d = a / b (exact; false when not representable or not exact),
 * d = a + b (numbers, or equal monomials). Results are interned in g. */
bool ccg__dim_mul(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *d);
bool ccg__dim_div(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *d);
bool ccg__dim_add(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *d);
/* Canonical form of a symbol string, written to buf; false if it does not
 * fit. Strings outside the grammar are atoms and stay as they are. */
bool ccg__sym_canonical(const char *sym, char *buf, size_t size);
/* The symbol for a dim no rule can express, named from `base` (made an
 * identifier). Callers derive base from the node name and output/dim index,
 * so re-inference gives the same symbol. False on OOM. */
bool ccg__dim_fresh(ccg_graph *g, const char *base, ccg_dim *d);
/* This rank's entry of the rank-dependent atom "dp.tp{3,5,4,4}" (the
 * `len` characters at `text`); false if it is not one, an axis is not in
 * mesh m (may be NULL) or the list is too short. */
bool ccg__ranked_entry(const ccg_mesh *m, int64_t rank, const char *text,
                       size_t len, int64_t *v);
/* d on global rank `rank` of mesh m (may be NULL): rank-dependent atoms
 * ("tp{3,5,4,4}") take that rank's entry and named atoms their value in b
 * (may be NULL). True with *num set when the result is a number; false with
 * the canonical text of what remains in buf. */
typedef struct ccg__dim_binds {
  const char *const *names;
  const int64_t *values;
  size_t n;
} ccg__dim_binds;
bool ccg__dim_at_rank(const ccg_mesh *m, int64_t rank, const ccg__dim_binds *b,
                      ccg_dim d, int64_t *num, char *buf, size_t size);
/* Formats a dim ("4", "batch") into buf. */
const char *ccg__dim_str(ccg_dim d, char *buf, size_t size);

/* ---- the op registry and family contract ------------------------------- */

typedef struct ccg__attr_spec {
  const char *name;
  ccg_attr_type type;
  bool required;
  int64_t i;     /* default for INT */
  float f;       /* default for FLOAT */
  const char *s; /* default for STRING */
} ccg__attr_spec;

typedef struct ccg__infer ccg__infer;
typedef struct ccg__grad ccg__grad;

enum {
  CCG__OP_ELEMENTWISE = 1u << 0, /* same-shape elementwise (in-place able) */
  CCG__OP_COLLECTIVE = 1u << 1,
};

/* What a family file gives for one op. */
typedef struct ccg__op_def {
  const ccg__attr_spec *attrs;
  size_t n_attrs;
  unsigned flags;
  /* Checks inputs and attributes; sets every output's dtype and shape (and
   * known contents where it can). Errors through ccg__fail. */
  ccg_status (*infer)(ccg__infer *ix);
  /* The gradient rule (grad.c has the contract and helpers): from the
   * gradients of the outputs, the gradients of the inputs asked for, built
   * from ordinary nodes. NULL: the op has no rule (the backward pass reports
   * it naming op and node when a gradient has to cross it). */
  ccg_status (*grad)(ccg__grad *gx);
  ccg_op_shard shard; /* default: REPLICATE */
  /* The dtypes of its main data input the op takes (CCG__DT bits, for
   * docs/ops.md; the shape rule is what checks); 0: not said. */
  unsigned dtypes;
  /* Default-domain ops: the lowest ai.onnx opset whose version of the op
   * the IR implements (0: CCG__ONNX_SINCE_DEFAULT). */
  int onnx_since;
} ccg__op_def;

/* The oldest opset an op is read from when its def names none. */
#define CCG__ONNX_SINCE_DEFAULT 11

typedef struct ccg__op_info {
  const char *name;
  const char *domain;
  int min_in, max_in, min_out, max_out;
  const ccg__op_def *def;
} ccg__op_info;

const ccg__op_info *ccg__op_info_of(ccg_op op);
/* The spec of attribute `name` of a valid op, or NULL. */
const ccg__attr_spec *ccg__attr_spec_of(ccg_op op, const char *name);

#define CCG__ATTRS(arr) (arr), (sizeof(arr) / sizeof((arr)[0]))
#define CCG__NO_ATTRS NULL, 0

/* Declarations of every op's definition, ccg__opdef_<ID>. */
#define CCG__OPDEF_DECL(id, name, domain, imin, imax, omin, omax)              \
  extern const ccg__op_def ccg__opdef_##id;
CCG_OP_LIST(CCG__OPDEF_DECL)
#undef CCG__OPDEF_DECL

/* ---- shape inference context ------------------------------------------- */

struct ccg__infer {
  ccg_graph *g;
  ccg_op op;
  const char *node_name;
  const ccg_value_id *in;
  size_t n_in;
  const ccg_attr *attrs;
  size_t n_attrs;
  size_t n_out;
  ccg_dtype *out_dtype;
  ccg_shape *out_shape;
  int *out_n_known; /* -1 unknown */
  ccg_dim (*out_known)[CCG_MAX_RANK];
};

/* A fresh dim for output `out`, dim `dim` of the node being inferred. */
ccg_status ccg__fresh_dim(ccg__infer *ix, size_t out, int dim, ccg_dim *d);

/* Runs the op's shape rule with scratch space from the graph's arena. */
ccg_status ccg__run_infer(ccg__infer *ix);

/* Records "node 'N' (Op): <message>" on the graph and returns st. */
ccg_status ccg__fail(ccg__infer *ix, ccg_status st, const char *fmt, ...)
    CCG_PRINTF(3, 4);

/* Input i present? (optional inputs may be CCG_NONE) */
bool ccg__in_has(const ccg__infer *ix, size_t i);
ccg_dtype ccg__in_dtype(const ccg__infer *ix, size_t i);
const ccg_shape *ccg__in_shape(const ccg__infer *ix, size_t i);
const char *ccg__in_name(const ccg__infer *ix, size_t i);
/* Known contents of input i (see ccg_value_known): count or -1. */
int ccg__in_known(const ccg__infer *ix, size_t i, const ccg_dim **elems);
/* Shape formatted into a per-call static-free buffer for messages. */
const char *ccg__shape_str(const ccg_shape *s, char *buf, size_t size);
/* shape.c: an int vector printed "[1,2,3]"; input i's shape printed. */
const char *ccg__ints_str(const int64_t *v, size_t n, char *buf, size_t size);
const char *ccg__in_str(const ccg__infer *ix, size_t i, char *buf, size_t size);
/* Sets the known contents of output `out` to the n entries of k. */
void ccg__set_known(ccg__infer *ix, size_t out, const ccg_dim *k, int n);

/* Attribute reads with the op's defaults. */
const ccg_attr *ccg__attr(const ccg__infer *ix, const char *name);
int64_t ccg__attr_i(const ccg__infer *ix, const char *name);
float ccg__attr_f(const ccg__infer *ix, const char *name);
const char *ccg__attr_s(const ccg__infer *ix, const char *name);
/* An INT attribute that must be 0 or 1 (error naming it otherwise). */
ccg_status ccg__attr_flag(ccg__infer *ix, const char *name, bool *out);
/* A STRING attribute holding a dtype name ("f16"); DTYPE error naming the
 * attribute and its text otherwise. */
ccg_status ccg__attr_dtype(ccg__infer *ix, const char *name, ccg_dtype *out);
/* The STRING attribute "reduction" of the scatters: none, add, mul, max
 * or min (INVALID_ARG naming its text otherwise). */
ccg_status ccg__attr_reduction(ccg__infer *ix, const char **out);
/* List attribute: count (0 if absent) and pointer. */
size_t ccg__attr_ints(const ccg__infer *ix, const char *name,
                      const int64_t **v);
size_t ccg__attr_strings(const ccg__infer *ix, const char *name,
                         const char *const **v);

/* Normalizes axis into [0, rank) or fails naming `what`, the axis and the
 * rank. */
ccg_status ccg__axis(ccg__infer *ix, int64_t axis, int rank, const char *what,
                     int *out);
/* ONNX multidirectional broadcast of two shapes. */
ccg_status ccg__broadcast(ccg__infer *ix, const ccg_shape *a,
                          const ccg_shape *b, ccg_shape *out);
/* Checks that input i has one of the dtypes in `mask` (bit per ccg_dtype). */
ccg_status ccg__expect_dtype(ccg__infer *ix, size_t i, unsigned mask,
                             const char *what);
/* Input i must be a 1-D vector of one of the dtypes in `types`. */
ccg_status ccg__expect_vector(ccg__infer *ix, size_t i, unsigned types,
                              const char *what);
static inline bool ccg__is_num(ccg_dim d, int64_t v) {
  return !ccg_dim_is_sym(d) && d.size == v;
}
/* Checks that inputs i and j have the same dtype. */
ccg_status ccg__same_dtype(ccg__infer *ix, size_t i, size_t j);

#define CCG__DT(x) (1u << CCG_DTYPE_##x)
#define CCG__FLOAT_TYPES                                                       \
  (CCG__DT(F32) | CCG__DT(F16) | CCG__DT(BF16) | CCG__DT(F64))
#define CCG__INT_TYPES (CCG__DT(I64) | CCG__DT(I32) | CCG__DT(I8) | CCG__DT(U8))
#define CCG__NUM_TYPES (CCG__FLOAT_TYPES | CCG__INT_TYPES)
#define CCG__ALL_TYPES (CCG__NUM_TYPES | CCG__DT(BOOL))

/* ---- gradient rules (grad.c) ------------------------------------------- */

/* What a gradient rule sees: the forward node, the gradient of each output
 * (CCG_NONE where an output has none; at least one is given) and which
 * inputs want a gradient. The rule sets gin[i] for the inputs it can (it
 * may leave an input that is not wanted at CCG_NONE); each gradient has its
 * input's dtype and shape. Rules add nodes with the typed builders only. */
struct ccg__grad {
  ccg_graph *g;
  ccg_node_id node;
  ccg_op op;
  const ccg_value_id *in;
  size_t n_in;
  const ccg_value_id *out;
  size_t n_out;
  const ccg_value_id *gout; /* n_out entries */
  const bool *need;         /* n_in entries */
  ccg_value_id *gin;        /* n_in entries, CCG_NONE on entry */
};

/* Records "node 'N' (Op): gradient: <message>" on the graph. */
ccg_status ccg__grad_fail(ccg__grad *gx, ccg_status st, const char *fmt, ...)
    CCG_PRINTF(3, 4);
/* Attribute reads of the forward node, with the op's defaults. */
int64_t ccg__grad_attr_i(ccg__grad *gx, const char *name);
float ccg__grad_attr_f(ccg__grad *gx, const char *name);
const char *ccg__grad_attr_s(ccg__grad *gx, const char *name);
size_t ccg__grad_attr_ints(ccg__grad *gx, const char *name, const int64_t **v);
/* A scalar Constant of float dtype dt holding v. */
ccg_status ccg__grad_scalar(ccg_graph *g, ccg_dtype dt, double v,
                            ccg_value_id *out);
/* SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss (loss.c): the
 * weight each position of targets t [N, d...] gets (w[t], or 1 without
 * class weights w (CCG_NONE); 0 where t is *ignore_index, when given), in
 * the float dtype of the scalars zero and one, and *tsafe: t with ignored
 * positions set to class 0. The mean reduction divides by their sum. */
ccg_status ccg__loss_weight_applied(ccg_graph *g, ccg_value_id t,
                                    ccg_value_id w, const int64_t *ignore_index,
                                    ccg_value_id zero, ccg_value_id one,
                                    ccg_value_id *wt, ccg_value_id *tsafe);
/* An i64 vector Constant (a shape, axes). */
ccg_status ccg__grad_i64(ccg_graph *g, const int64_t *v, size_t n,
                         ccg_value_id *out);
/* The shape of value x as an i64 vector: a Constant when every dim is a
 * number (x need not stay alive), else Shape(x). */
ccg_status ccg__grad_shape_of(ccg_graph *g, ccg_value_id x, ccg_value_id *out);
/* Zeros of float dtype dt and numeric dims (ConstantOfShape). */
ccg_status ccg__grad_zeros(ccg_graph *g, ccg_dtype dt, const int64_t *dims,
                           size_t n, ccg_value_id *out);
/* Zeros of x's dtype and shape (ConstantOfShape). */
ccg_status ccg__grad_zeros_like(ccg_graph *g, ccg_value_id x,
                                ccg_value_id *out);
/* The gradient of a scatter (ScatterElements, ScatterND: data, indices,
 * updates): updates' is dy at the indices (`gather`), data's is dy (add)
 * or dy with the written places zeroed (none: `scatter` of zeros); other
 * reductions are UNSUPPORTED. axis: the ops' axis attribute, NULL for
 * none. */
ccg_status ccg__grad_scatter(ccg__grad *gx, ccg_op gather, ccg_op scatter,
                             const ccg_attr *axis);
/* Sums gradient dy (of a broadcast result) down to `target`'s shape: the
 * leading dims dy has more, and the dims where target has the number 1 and
 * dy has not, are summed; the result has target's shape exactly. */
ccg_status ccg__grad_unbroadcast(ccg_graph *g, ccg_value_id dy,
                                 ccg_value_id target, ccg_value_id *out);
/* The same, but the result has `want` (a shape that broadcasts to dy's). */
ccg_status ccg__grad_reduce_to(ccg_graph *g, ccg_value_id dy,
                               const ccg_shape *want, ccg_value_id *out);
/* Reshape x to the shape of value `like`. */
ccg_status ccg__grad_reshape_like(ccg_graph *g, ccg_value_id x,
                                  ccg_value_id like, ccg_value_id *out);
/* Elementwise a * b / a * constant, shortcuts for rules. */
ccg_status ccg__grad_scale(ccg_graph *g, ccg_value_id x, double k,
                           ccg_value_id *out);

/* ---- builder helpers for the typed builders ---------------------------- */

/* Adds a node of `op` with inputs and attributes; outputs go to outs (may be
 * NULL). Used by every typed builder. */
ccg_status ccg__build(ccg_graph *g, ccg_op op, const ccg_value_id *in,
                      size_t n_in, const ccg_attr *attrs, size_t n_attrs,
                      size_t n_out, ccg_value_id *outs, ccg_node_id *node);
/* Adds an initializer named "<scope>/<hint>_<k>" (first free k). */
ccg_status ccg__add_const(ccg_graph *g, const ccg_tensor *t, const char *hint,
                          ccg_value_id *out);
/* The same for an i64 vector. */
ccg_status ccg__const_i64(ccg_graph *g, const int64_t *v, size_t n,
                          const char *hint, ccg_value_id *out);

/* Puts the nodes in a topological order that, among the nodes ready at each
 * point, takes the lowest key[node] (then the lowest id): a pass gives its
 * appended nodes the key of where they belong (reorder.c). Node ids change;
 * values and names follow. An error (a cycle) leaves g unchanged. */
ccg_status ccg__graph_reorder(ccg_graph *g, const uint64_t *key);
/* check.c: true when ccg_graph_topo_order gives the nodes' own order (0, 1,
 * 2, ...), so that a pass walking in that order need not ask for it. */
bool ccg__graph_in_added_order(const ccg_graph *g);

/* Appends node n's use of v (input `slot`) to the end of v's use list;
 * room in g->uses is reserved by the caller. */
void ccg__link_use(ccg_graph *g, ccg_value_id v, ccg_node_id n, uint32_t slot);
/* Makes input `slot` of node n read v instead of the value it reads (a
 * rewiring: a re-gather, a gradient bucket), which n may not read before
 * v is made: the use moves from the old value's list to v's, and the
 * order is marked unsure (order_unsure), so that ccg_graph_topo_order
 * looks at the nodes. The input and v must be values (no use is added or
 * dropped): INVALID_ARG otherwise, nothing changed. */
ccg_status ccg__node_set_input(ccg_graph *g, ccg_node_id n, size_t slot,
                               ccg_value_id v);

/* Removes in place the nodes with keep_node[n] false (their outputs go with
 * them) and the initializers with keep_init[v] false (indexed by value id;
 * read for initializers only). Graph inputs stay. Kept values are numbered
 * as a graph built afresh numbers them: inputs, initializers, then node
 * outputs in node order; node order, names, attributes, tags, metadata,
 * placements and per-rank data stay (compact.c). INTERNAL, with g
 * unchanged, if a kept node or a graph output reads a removed value. */
ccg_status ccg__graph_compact(ccg_graph *g, const bool *keep_node,
                              const bool *keep_init);

/* Rollback: builders that add helper values (constants) before their node
 * undo them if the node is refused, so a failed call changes nothing. */
typedef struct ccg__mark {
  size_t n_values, n_nodes, n_inputs, n_outputs, n_inits;
} ccg__mark;
ccg__mark ccg__mark_get(const ccg_graph *g);
/* The largest mapping instance among the nodes' tags (0 when none). */
uint32_t ccg__graph_max_instance(ccg_graph *g);
void ccg__rollback(ccg_graph *g, const ccg__mark *m);

#endif
