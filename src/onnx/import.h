/* Private: state shared by the model reader (import.c) and the node
 * converter (nodes_in.c). */
#ifndef CCG_ONNX_IMPORT_H
#define CCG_ONNX_IMPORT_H

#include "onnx/internal.h"

typedef struct im {
  const ccg_onnx_import_options *o;
  ccg__onnx_src src;
  const Onnx__ModelProto *m;
  const Onnx__GraphProto *gp;
  ccg_graph *g;
  ccg_arena a;      /* decoded tensors and attributes, freed after import */
  bool lend_raw;    /* the graph owns the decoded model: initializers' raw
                       data is lent to it, not copied */
  ccg_arena node_a; /* a is swapped with it while one node is read, and it
                       is reset after each: what reading a node allocates
                       is dead once the graph has copied the node */
  int64_t opset;    /* ai.onnx; -1 when the model imports none */
  /* Initializers (index i) and Constant nodes (n_initializer + node index)
   * by output name, with their use counts. */
  ccg_strmap consts;
  uint32_t *uses, *slot_uses;
  /* ccg__strhash of every node input in model order (find_dropped hashes
   * them for consts; the node reader looks them up again in the graph), and
   * the first of the node being read */
  uint32_t *in_hash;
  const uint32_t *node_hash;
  /* the nodes' outputs and inputs, each node's counted up to 16 (the
   * graph's tables are reserved for them) */
  size_t n_values, n_uses;
  /* The last ops resolved (names in the decoded model): a model has few
   * distinct ops, and comparing names is cheaper than the registry's
   * lookup (nodes_in.c). */
  struct {
    const char *op_type, *domain;
    int op, kind;
    bool tanh_form;
  } ops[8];
  unsigned n_ops;
  /* initializers whose raw_data is read from the source, not from the
   * decoded model (strip.c): copied, never lent; with drop_pages the source
   * is a mapped file whose pages are let go once copied */
  const bool *outside;
  bool raw_in_source; /* every raw_data is read from the source */
  bool drop_pages;
} im;

/* The node's name, or "(unnamed)" for messages. */
const char *ccg__onnx_node_label(const Onnx__NodeProto *np);
/* The node's domain, "" for the default one (also spelled "ai.onnx"). */
const char *ccg__onnx_node_domain(const Onnx__NodeProto *np);
/* The node's integer attribute `name`, or dflt where it has none. */
int64_t ccg__onnx_attr_int(const Onnx__NodeProto *np, const char *name,
                           int64_t dflt);

/* Index of the input that holds a normalized attribute (axes, split) at the
 * model's opset, or -1. */
int ccg__onnx_attr_slot(const im *m, const Onnx__NodeProto *np);
/* True if constant c feeds nothing but such inputs (it is not kept). */
bool ccg__onnx_dropped(const im *m, uint32_t c);
/* Contents of the constant named `input` as int64s (in m->a or borrowed). */
ccg_status ccg__onnx_const_ints(im *m, const Onnx__NodeProto *np,
                                const char *input, const int64_t **vals,
                                size_t *n);
/* Fails naming the node, its op, domain and opset, then the message (on the
 * thread). */
ccg_status ccg__onnx_node_fail(im *m, const Onnx__NodeProto *np, ccg_status st,
                               const char *fmt, ...) CCG_PRINTF(4, 5);
/* Reads SplitToSequence node np and the SequenceAt nodes that read its
 * sequence as one IR Split (the IR has no sequences); refuses any other use,
 * naming the node and why. */
ccg_status ccg__onnx_split_seq_in(im *m, const Onnx__NodeProto *np);
/* True if np is a SequenceAt of a SplitToSequence's sequence (read with it). */
bool ccg__onnx_seq_at_of_split(const im *m, const Onnx__NodeProto *np);
/* Adds one node to m->g. Errors on the thread, naming node, op, domain and
 * opset. */
ccg_status ccg__onnx_node_in(im *m, const Onnx__NodeProto *np);

/* Checks the model's device configurations (annot.c) and, when the graph
 * has no mesh yet, sets the one its first configuration names ("dp=2,tp=2"
 * when its size matches, else one axis "world"). Runs before the nodes. */
ccg_status ccg__onnx_annot_mesh(im *m);
/* Checks the model's multi-device annotations and, with
 * `restore_placements`, sets the placements the first configuration's specs
 * describe. Runs once the graph is built. Errors on the thread, naming node
 * and field. */
ccg_status ccg__onnx_annot_in(im *m, bool restore_placements);

#endif
