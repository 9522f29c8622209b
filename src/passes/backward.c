/* The backward pass. The forward graph is cut into units: one per untagged
 * node, one per mapping instance (its tagged forward nodes together, with
 * the inputs and outputs ccg_mapping_instance_io finds). Units are ordered
 * topologically; a forward sweep marks the values that depend on a wanted
 * value, a backward sweep those the seeds depend on, and only units on both
 * paths are differentiated, in reverse order, each output's gradient summed
 * over its uses before its unit runs. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccgraph/autodiff.h"
#include "ccgraph/symbolic.h"
#include "graph/internal.h"
#include "passes/fsdp_regather.h"
#include "symbolic/internal.h"

typedef struct unit {
  ccg_node_id node; /* the first node */
  bool instance;
  const ccg_tag *tag;
  /* in bw.ids: a node's lists copied, an instance's made */
  const ccg_value_id *in, *out;
  size_t n_in, n_out;
  bool has_send, has_recv;
} unit;

typedef struct bw {
  ccg_graph *g;
  const ccg_backward_options *o;
  size_t nv, nn, nu;
  uint32_t *unit_of; /* per node */
  uint32_t *made_by; /* per value: its producer's unit, UINT32_MAX: none */
  unit *units;
  /* every unit's inputs and then outputs, the units in graph order: the
   * walks over the units (order, requires, useful, the gradients) read
   * them in turn from one block, not from each node's lists wherever the
   * arena put them (at 384 layers past the caches, each walk a miss per
   * unit) */
  ccg_value_id *ids;
  size_t *order; /* units, topological */
  bool *requires, *useful, *wrt;
  ccg_value_id *acc; /* accumulated gradient per forward value */
} bw;

static ccg_status oom(bw *b) {
  return ccg__error(&b->g->ctx, CCG_STATUS_OOM, "backward: out of memory");
}

static bool is_float(const bw *b, ccg_value_id v) {
  return ccg_dtype_is_float(ccg_value_dtype(b->g, v));
}

/* ---- units -------------------------------------------------------------- */

/* in and out: room for the node's lists. */
static void node_unit(bw *b, unit *u, ccg_node_id n, ccg_value_id *in,
                      ccg_value_id *out) {
  const ccg__node *x = &b->g->nodes[n];
  memcpy(in, x->inputs, x->n_inputs * sizeof *in);
  memcpy(out, x->outputs, x->n_outputs * sizeof *out);
  u->in = in;
  u->n_in = x->n_inputs;
  u->out = out;
  u->n_out = x->n_outputs;
}

/* The unit's forward nodes are nodes[0..n) (graph order); ni and no are
 * their inputs and outputs together, room enough in `in` and `out`. */
static ccg_status instance_unit(bw *b, unit *u, const ccg_node_id *nodes,
                                size_t n, ccg_value_id *in, size_t ni,
                                ccg_value_id *out, size_t no) {
  u->in = in;
  u->out = out;
  u->n_in = ni;
  u->n_out = no;
  return ccg__mapping_instance_io_of(b->g, u->tag->instance, nodes, n, in,
                                     &u->n_in, out, &u->n_out);
}

/* Mapping instance -> its unit (+1; 0 = empty slot), open addressing. */
typedef struct inst_slot {
  uint32_t instance, unit;
} inst_slot;

static inst_slot *inst_find(inst_slot *t, size_t cap, uint32_t instance) {
  size_t i = (instance * 2654435761u) & (cap - 1);
  while (t[i].unit && t[i].instance != instance)
    i = (i + 1) & (cap - 1);
  return &t[i];
}

static ccg_status make_units(bw *b) {
  ccg_graph *g = b->g;
  b->unit_of = calloc(b->nn + 1, sizeof *b->unit_of);
  b->made_by = malloc((b->nv + 1) * sizeof *b->made_by);
  b->units = calloc(b->nn + 1, sizeof *b->units);
  /* the unit of each mapping instance (+1; 0 = none yet), and the inputs
   * and outputs each unit's nodes have together */
  size_t cap = 16;
  while (cap < 2 * (b->nn + 1))
    cap *= 2;
  inst_slot *of_inst = calloc(cap, sizeof *of_inst);
  size_t *room = calloc(3 * (b->nn + 1), sizeof *room);
  ccg_node_id *nodes = calloc(b->nn + 1, sizeof *nodes);
  if (!b->unit_of || !b->made_by || !b->units || !of_inst || !room || !nodes) {
    free(of_inst), free(room), free(nodes);
    return oom(b);
  }
  memset(b->made_by, 0xff, (b->nv + 1) * sizeof *b->made_by);
  for (size_t n = 0; n < b->nn; n++) {
    /* The node records come in order, which the hardware loads ahead;
     * their lists and tags, in the arena, it does not. */
    if (n + CCG__PREFETCH_MID < b->nn) {
      const ccg__node *y = &g->nodes[n + CCG__PREFETCH_MID];
      __builtin_prefetch(y->inputs);
      __builtin_prefetch(y->outputs);
      __builtin_prefetch(y->tag);
    }
    const ccg_tag *t = ccg_node_tag(g, (ccg_node_id)n);
    bool inst = t && !t->backward;
    inst_slot *slot = inst ? inst_find(of_inst, cap, t->instance) : NULL;
    size_t u = slot && slot->unit ? slot->unit - 1 : b->nu;
    if (u == b->nu) {
      b->units[u].node = (ccg_node_id)n;
      b->units[u].instance = inst;
      b->units[u].tag = inst ? t : NULL;
      if (slot)
        *slot = (inst_slot){t->instance, (uint32_t)(u + 1)};
      b->nu++;
    }
    b->unit_of[n] = (uint32_t)u;
    size_t n_out = ccg_node_num_outputs(g, (ccg_node_id)n);
    for (size_t i = 0; i < n_out; i++) {
      ccg_value_id v = ccg_node_output(g, (ccg_node_id)n, i);
      if (v < b->nv)
        b->made_by[v] = (uint32_t)u;
    }
    room[3 * u] += ccg_node_num_inputs(g, (ccg_node_id)n);
    room[3 * u + 1] += n_out;
    room[3 * u + 2]++;
    ccg_op op = ccg_node_op(g, (ccg_node_id)n);
    b->units[u].has_send |= op == CCG_OP_SEND;
    b->units[u].has_recv |= op == CCG_OP_RECV;
  }
  /* each unit's nodes, in graph order: room[3u + 2] becomes where its
   * run in `nodes` starts */
  size_t at = 0, n_ids = 0;
  for (size_t u = 0; u < b->nu; u++) {
    size_t c = room[3 * u + 2];
    room[3 * u + 2] = at;
    at += c;
    n_ids += room[3 * u] + room[3 * u + 1];
  }
  if (!(b->ids = malloc((n_ids + 1) * sizeof *b->ids))) {
    free(of_inst), free(room), free(nodes);
    return oom(b);
  }
  for (size_t n = 0; n < b->nn; n++)
    nodes[room[3 * b->unit_of[n] + 2]++] = (ccg_node_id)n;
  ccg_status st = CCG_STATUS_OK;
  ccg_value_id *ids = b->ids;
  for (size_t u = 0, start = 0; u < b->nu && st == CCG_STATUS_OK; u++) {
    unit *x = &b->units[u];
    size_t end = room[3 * u + 2], ni = room[3 * u], no = room[3 * u + 1];
    if (x->instance)
      st = instance_unit(b, x, nodes + start, end - start, ids, ni, ids + ni,
                         no);
    else
      node_unit(b, x, x->node, ids, ids + ni);
    ids += ni + no;
    start = end;
  }
  free(of_inst), free(room), free(nodes);
  return st;
}

/* The unit producing v, or -1 for inputs and initializers. From made_by,
 * not the value records: they are read in no order, and at 384 layers
 * their table is past the caches. */
static long producer_unit(const bw *b, ccg_value_id v) {
  uint32_t u = v < b->nv ? b->made_by[v] : UINT32_MAX;
  return u == UINT32_MAX ? -1 : (long)u;
}

/* Units in an order where every unit follows the producers of its inputs;
 * a cycle between instances is an error naming one. */
static ccg_status order_units(bw *b) {
  bool *done = calloc(b->nu + 1, sizeof *done);
  b->order = calloc(b->nu + 1, sizeof *b->order);
  if (!done || !b->order) {
    free(done);
    return oom(b);
  }
  size_t k = 0;
  for (bool progress = true; progress && k < b->nu;) {
    progress = false;
    for (size_t u = 0; u < b->nu; u++) {
      if (done[u])
        continue;
      bool ready = true;
      for (size_t i = 0; ready && i < b->units[u].n_in; i++) {
        long p = producer_unit(b, b->units[u].in[i]);
        ready = p < 0 || (size_t)p == u || done[p];
      }
      if (ready) {
        done[u] = progress = true;
        b->order[k++] = u;
      }
    }
  }
  free(done);
  if (k == b->nu)
    return CCG_STATUS_OK;
  return ccg__error(
      &b->g->ctx, CCG_STATUS_INVALID_ARG,
      "backward: the graph's mapping instances depend on each "
      "other in a cycle (near node '%s')",
      ccg_node_name(b->g, b->units[b->order[k > 0 ? k - 1 : 0]].node));
}

/* ---- what to differentiate ----------------------------------------------- */

static ccg_status match_wrt(bw *b) {
  ccg_graph *g = b->g;
  size_t n = b->o->wrt ? b->o->n_wrt : 1;
  for (size_t p = 0; p < n; p++) {
    const char *pat = b->o->wrt ? b->o->wrt[p] : NULL;
    bool hit = false;
    for (int kind = 0; kind < 2; kind++) {
      size_t cnt =
          kind ? ccg_graph_num_initializers(g) : ccg_graph_num_inputs(g);
      for (size_t i = 0; i < cnt; i++) {
        ccg_value_id v =
            kind ? ccg_graph_initializer(g, i) : ccg_graph_input(g, i);
        bool m = pat ? fnmatch(pat, ccg_value_name(g, v), 0) == 0 : kind == 1;
        if (m && is_float(b, v))
          hit = b->wrt[v] = true;
      }
    }
    if (pat && !hit)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "backward: wrt '%s' matches no float graph input or "
                        "initializer",
                        pat);
  }
  return CCG_STATUS_OK;
}

static void mark_requires(bw *b) {
  for (size_t v = 0; v < b->nv; v++)
  b->requires[v] = b->wrt[v];
  for (size_t k = 0; k < b->nu; k++) {
    const unit *u = &b->units[b->order[k]];
    /* the value records of the outputs is_float reads, ahead (see
     * prefetch_values) */
    if (k + CCG__PREFETCH_MID < b->nu) {
      const unit *y = &b->units[b->order[k + CCG__PREFETCH_MID]];
      if (y->n_out && y->out[0] < b->nv)
        __builtin_prefetch(&b->g->values[y->out[0]]);
    }
    bool r = b->o->p2p && u->has_recv;
    for (size_t i = 0; !r && i < u->n_in; i++)
    r = u->in[i] != CCG_NONE && b->requires[u->in[i]];
    for (size_t i = 0; r && i < u->n_out; i++)
    b->requires[u->out[i]] = is_float(b, u->out[i]);
  }
}

static void mark_useful(bw *b, const ccg_value_id *seeds, size_t n) {
  for (size_t i = 0; i < n; i++)
    b->useful[seeds[i]] = true;
  for (size_t k = b->nu; k-- > 0;) {
    const unit *u = &b->units[b->order[k]];
    bool use = b->o->p2p && u->has_send;
    for (size_t i = 0; !use && i < u->n_out; i++)
      use = b->useful[u->out[i]];
    for (size_t i = 0; use && i < u->n_in; i++)
      if (u->in[i] != CCG_NONE)
        b->useful[u->in[i]] = true;
  }
}

/* requires[] holds only float values (match_wrt and mark_requires test
 * the dtype), so no value record is read here. */
static bool needed(const bw *b, ccg_value_id v) {
  return v != CCG_NONE && v < b->nv && b->requires[v] && b->useful[v];
}

/* ---- gradients ----------------------------------------------------------- */

/* Adds grad to v's accumulated gradient. by: the unit whose rule gave it,
 * named in the error (NULL: the output gradients given). */
static ccg_status accumulate(bw *b, ccg_value_id v, ccg_value_id grad,
                             const unit *by) {
  ccg_graph *g = b->g;
  const ccg_shape *want = ccg_value_shape(g, v);
  if (ccg_value_dtype(g, grad) == ccg_value_dtype(g, v) &&
      ccg_shape_equal(ccg_value_shape(g, grad), want)) {
    if (b->acc[v] == CCG_NONE) {
      b->acc[v] = grad;
      return CCG_STATUS_OK;
    }
    return ccg_add(g, b->acc[v], grad, &b->acc[v]);
  }
  /* the rule's name only now: formatting it for every unit was a good
   * part of the pass */
  char a[128], c[128], from[256] = "output_grads";
  if (by)
    snprintf(from, sizeof from, "%s of node '%s'",
             by->instance ? by->tag->mapping
                          : ccg_op_name(ccg_node_op(g, by->node)),
             ccg_node_name(g, by->node));
  ccg_shape_format(want, a, sizeof a);
  ccg_shape_format(ccg_value_shape(g, grad), c, sizeof c);
  return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                    "backward: %s gave '%s' a gradient of %s %s; the value "
                    "is %s %s",
                    from, ccg_value_name(g, v),
                    ccg_dtype_name(ccg_value_dtype(g, grad)), c,
                    ccg_dtype_name(ccg_value_dtype(g, v)), a);
}

static ccg_status run_op_rule(bw *b, const unit *u, const ccg_value_id *gout,
                              ccg_value_id *gin, bool *need) {
  ccg_graph *g = b->g;
  ccg_op op = ccg_node_op(g, u->node);
  const ccg__op_info *info = ccg__op_info_of(op);
  if (!info->def->grad)
    return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED,
                      "backward: op %s (node '%s') has no gradient rule",
                      ccg_op_name(op), ccg_node_name(g, u->node));
  ccg__grad gx = {g,      u->node,  op,   u->in, u->n_in,
                  u->out, u->n_out, gout, need,  gin};
  return info->def->grad(&gx);
}

static ccg_status run_mapping_rule(bw *b, const unit *u,
                                   const ccg_value_id *gout,
                                   ccg_value_id *gin) {
  ccg_mapping_grad_args a = CCG_MAPPING_GRAD_ARGS_INIT;
  a.params = u->tag->params;
  a.instance = u->tag->instance;
  a.inputs = u->in;
  a.n_inputs = u->n_in;
  a.outputs = u->out;
  a.n_outputs = u->n_out;
  a.grad_outputs = gout;
  return ccg_mapping_apply_backward(b->g, u->tag->mapping, &a, gin);
}

/* Lists of up to this many inputs or outputs are on the stack. */
#define SMALL_UNIT 16

static ccg_status diff_unit(bw *b, const unit *u) {
  bool any_in = false, any_out = false;
  bool need_s[SMALL_UNIT];
  ccg_value_id gin_s[SMALL_UNIT], gout_s[SMALL_UNIT];
  bool big = u->n_in > SMALL_UNIT || u->n_out > SMALL_UNIT;
  bool *need = big ? calloc(u->n_in + 1, sizeof *need) : need_s;
  ccg_value_id *gin = big ? calloc(u->n_in + 1, sizeof *gin) : gin_s;
  ccg_value_id *gout = big ? calloc(u->n_out + 1, sizeof *gout) : gout_s;
  if (!need || !gin || !gout) {
    free(need), free(gin), free(gout);
    return oom(b);
  }
  for (size_t i = 0; i < u->n_in; i++) {
    need[i] = needed(b, u->in[i]);
    any_in |= need[i];
    gin[i] = CCG_NONE;
  }
  for (size_t i = 0; i < u->n_out; i++) {
    gout[i] = u->out[i] < b->nv ? b->acc[u->out[i]] : CCG_NONE;
    any_out |= gout[i] != CCG_NONE;
  }
  bool p2p = b->o->p2p;
  bool run = (any_in && (any_out || (p2p && u->has_send))) ||
             (p2p && u->has_recv && any_out);
  ccg_status st = CCG_STATUS_OK;
  if (run)
    st = u->instance ? run_mapping_rule(b, u, gout, gin)
                     : run_op_rule(b, u, gout, gin, need);
  for (size_t i = 0; run && st == CCG_STATUS_OK && i < u->n_in; i++)
    if (need[i] && gin[i] != CCG_NONE)
      st = accumulate(b, u->in[i], gin[i], u);
  if (big)
    free(need), free(gin), free(gout);
  return st;
}

/* Ones of v's dtype and shape. */
static ccg_status ones_like(ccg_graph *g, ccg_value_id v, ccg_value_id *out) {
  ccg_value_id z, one;
  CCG_CHECK(ccg__grad_scalar(g, ccg_value_dtype(g, v), 1.0, &one));
  if (ccg_value_shape(g, v)->rank == 0) {
    *out = one;
    return CCG_STATUS_OK;
  }
  CCG_CHECK(ccg__grad_zeros_like(g, v, &z));
  return ccg_add(g, z, one, out);
}

static ccg_status seed(bw *b, ccg_value_id *seeds, size_t *n) {
  ccg_graph *g = b->g;
  const ccg_backward_options *o = b->o;
  *n = 0;
  if (o->loss != CCG_NONE) {
    if (o->loss >= b->nv || !is_float(b, o->loss))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "backward: the loss (id %u) is not a float value of "
                        "graph '%s'",
                        o->loss, ccg_graph_name(g));
    CCG_CHECK(ones_like(g, o->loss, &b->acc[o->loss]));
    seeds[(*n)++] = o->loss;
  }
  for (size_t i = 0; i < o->n_outputs; i++) {
    ccg_value_id v = o->outputs[i], d;
    if (v >= b->nv || !is_float(b, v))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "backward: outputs[%zu] (id %u) is not a float value",
                        i, v);
    if (o->output_grads) {
      d = o->output_grads[i];
    } else {
      char name[512];
      snprintf(name, sizeof name, "grad/%s", ccg_value_name(g, v));
      ccg_shape s = *ccg_value_shape(g, v);
      CCG_CHECK(ccg_graph_add_input(g, name, ccg_value_dtype(g, v), &s, &d));
    }
    CCG_CHECK(accumulate(b, v, d, NULL));
    seeds[(*n)++] = v;
  }
  return CCG_STATUS_OK;
}

/* The wanted values, which name_grads walks in id order, each one's work
 * loaded ahead of it: its value record 16 places on, its name and its
 * gradient's record 8 on, and 4 on its gradient's name is made (into
 * ring[k % GRAD_RING]), hashed and its index slot loaded, and the last use
 * of its gradient, which its Identity links after. At 384 layers these
 * records are past the caches and would otherwise miss one after another. */
#define GRAD_RING 8
typedef char grad_name[512];

static void grad_name_of(const ccg_graph *g, ccg_value_id v, grad_name out) {
  snprintf(out, sizeof(grad_name), "grad/%s", g->values[v].name);
}

__attribute__((always_inline)) static inline void
prefetch_grad(const bw *b, const ccg_value_id *w, size_t n, size_t k,
              grad_name *ring) {
  const ccg_graph *g = b->g;
  if (k + 16 < n)
    __builtin_prefetch(&g->values[w[k + 16]]);
  if (k + 8 < n) {
    ccg_value_id d = b->acc[w[k + 8]];
    __builtin_prefetch(g->values[w[k + 8]].name);
    if (d != CCG_NONE)
      __builtin_prefetch(&g->values[d]);
  }
  if (k + 4 < n) {
    ccg_value_id d = b->acc[w[k + 4]];
    grad_name_of(g, w[k + 4], ring[(k + 4) % GRAD_RING]);
    ccg__strmap_prefetch(&g->value_names,
                         ccg__strhash(ring[(k + 4) % GRAD_RING]));
    if (d != CCG_NONE && g->values[d].last_use != CCG_NONE)
      __builtin_prefetch(&g->uses[g->values[d].last_use], 1);
  }
}

/* grad/<name> for every wanted value (zeros where nothing depends on it). */
static ccg_status name_grads(bw *b) {
  ccg_graph *g = b->g;
  ccg_value_id *w = malloc((b->nv + 1) * sizeof *w);
  if (!w)
    return oom(b);
  size_t n = 0;
  for (ccg_value_id v = 0; v < b->nv; v++)
    if (b->wrt[v])
      w[n++] = v;
  grad_name ring[GRAD_RING];
  for (size_t k = 0; k < n && k < 4; k++)
    grad_name_of(g, w[k], ring[k]);
  ccg_status st = CCG_STATUS_OK;
  for (size_t k = 0; k < n && st == CCG_STATUS_OK; k++) {
    prefetch_grad(b, w, n, k, ring);
    ccg_value_id v = w[k], d = b->acc[v];
    ccg_node_id id;
    if (d == CCG_NONE)
      CCG_CHECK_GOTO(ccg__grad_zeros_like(g, v, &d), st, out);
    const char *names[1] = {ring[k % GRAD_RING]};
    ccg_node_desc nd = CCG_NODE_DESC_INIT;
    nd.inputs = &d;
    nd.n_inputs = 1;
    nd.output_names = names;
    CCG_CHECK_GOTO(ccg__graph_add_node_op(g, CCG_OP_IDENTITY, &nd, &id), st,
                   out);
    if (b->o->add_outputs)
      st = ccg_graph_add_output(g, ccg_node_output(g, id, 0));
  }
out:
  free(w);
  return st;
}

/* The nodes a unit's rule made (from n0 on) run in the schedule slot its
 * forward node names for its gradient (a pipeline microbatch's backward). */
static ccg_status slot_grads(bw *b, const unit *u, size_t n0) {
  const char *slot = ccg_node_meta(b->g, u->node, CCG_META_GRAD_SLOT);
  for (size_t n = n0; slot && n < ccg_graph_num_nodes(b->g); n++)
    CCG_CHECK(ccg_node_set_meta(b->g, (ccg_node_id)n, CCG_META_SLOT, slot));
  return CCG_STATUS_OK;
}

/* Units are differentiated in reverse order, and each reads its forward
 * values' records (shape, dtype), their contents' records (the known
 * elements of shape tensors), their entries in acc, requires and useful,
 * and its nodes' lists, which at 384 layers the passes before and the
 * nodes this pass adds have pushed out of the caches. Five units on, a
 * unit has its lists loaded; four on, its value records and their entries
 * (many units, those of shape arithmetic, take almost no time: two units
 * ahead was too close); the next one its contents' records, while this
 * one runs. Always inlined: GCC drops a call of a function that only
 * prefetches where it does not inline it early. */
__attribute__((always_inline)) static inline void prefetch_lists(const bw *b,
                                                                 size_t k) {
  const unit *u = &b->units[b->order[k]];
  __builtin_prefetch(u->in);
  __builtin_prefetch(u->out);
  __builtin_prefetch(&b->g->nodes[u->node]);
}

__attribute__((always_inline)) static inline void prefetch_values(const bw *b,
                                                                  size_t k) {
  const unit *u = &b->units[b->order[k]];
  const ccg__value *vals = b->g->values;
  for (size_t i = 0; i < u->n_in && i < SMALL_UNIT; i++)
    if (u->in[i] < b->nv) {
      __builtin_prefetch(&vals[u->in[i]]);
      __builtin_prefetch(&b->acc[u->in[i]]);
      __builtin_prefetch(&b->requires[u->in[i]]);
      __builtin_prefetch(&b->useful[u->in[i]]);
    }
  for (size_t i = 0; i < u->n_out && i < SMALL_UNIT; i++)
    if (u->out[i] < b->nv) {
      __builtin_prefetch(&vals[u->out[i]]);
      __builtin_prefetch(&b->acc[u->out[i]]);
    }
}

__attribute__((always_inline)) static inline void prefetch_contents(const bw *b,
                                                                    size_t k) {
  const unit *u = &b->units[b->order[k]];
  const ccg__value *vals = b->g->values;
  for (size_t i = 0; i < u->n_in && i < SMALL_UNIT; i++)
    if (u->in[i] < b->nv && vals[u->in[i]].c) {
      __builtin_prefetch(vals[u->in[i]].c);
      __builtin_prefetch(&vals[u->in[i]].c->n_known);
    }
}

static ccg_status run(bw *b) {
  ccg_graph *g = b->g;
  b->requires = calloc(b->nv + 1, sizeof *b->requires);
  b->useful = calloc(b->nv + 1, sizeof *b->useful);
  b->wrt = calloc(b->nv + 1, sizeof *b->wrt);
  b->acc = malloc((b->nv + 1) * sizeof *b->acc);
  ccg_value_id *seeds = calloc(b->o->n_outputs + 2, sizeof *seeds);
  if (!b->requires || !b->useful || !b->wrt || !b->acc || !seeds) {
    free(seeds);
    return oom(b);
  }
  for (size_t v = 0; v <= b->nv; v++)
    b->acc[v] = CCG_NONE;
  ccg_status st = CCG_STATUS_OK;
  size_t ns = 0;
  CCG_CHECK_GOTO(match_wrt(b), st, out);
  CCG_CHECK_GOTO(make_units(b), st, out);
  CCG_CHECK_GOTO(order_units(b), st, out);
  CCG_CHECK_GOTO(seed(b, seeds, &ns), st, out);
  mark_requires(b);
  mark_useful(b, seeds, ns);
  for (size_t k = b->nu; k-- > 0;) {
    if (k >= 5)
      prefetch_lists(b, k - 5);
    if (k >= 4)
      prefetch_values(b, k - 4);
    if (k >= 1)
      prefetch_contents(b, k - 1);
    size_t n0 = ccg_graph_num_nodes(g);
    CCG_CHECK_GOTO(diff_unit(b, &b->units[b->order[k]]), st, out);
    CCG_CHECK_GOTO(slot_grads(b, &b->units[b->order[k]], n0), st, out);
  }
  CCG_CHECK_GOTO(name_grads(b), st, out);
out:
  free(seeds);
  return st;
}

ccg_status ccg_backward(ccg_graph *g, const ccg_backward_options *o) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "backward: graph is NULL");
  if (!o || o->size < sizeof *o)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "backward: options are NULL or their size is wrong (use "
                      "CCG_BACKWARD_OPTIONS_INIT)");
  if (o->loss == CCG_NONE && o->n_outputs == 0 && !o->p2p)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "backward: give a loss or output gradients (or p2p, "
                      "for a stage whose gradients arrive by Send)");
  if ((o->n_outputs && !o->outputs) || (o->n_wrt && !o->wrt))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "backward: outputs or wrt is NULL with a count");
  bw b = {.g = g,
          .o = o,
          .nv = ccg_graph_num_values(g),
          .nn = ccg_graph_num_nodes(g)};
  ccg__mark mark = ccg__mark_get(g);
  /* A backward adds about twice the forward's values, 2.2 times its uses
   * and up to 2.4 times its nodes (a GPT, sharded or not): its tables and
   * name indexes are grown there at once (with room to spare) rather than
   * copied (an index rehashed) into new memory at each doubling on the way.
   * A hint: growth goes on past it, and without the memory the pass still
   * runs. */
  size_t more_nodes = 3 * b.nn, more_values = b.nv * 5 / 2;
  if (ccg__graph_reserve(g, more_nodes, more_values, g->n_uses * 5 / 2) !=
      CCG_STATUS_OK)
    ccg_clear_error(g);
  ccg_status st = ccg_graph_push_scope(g, "grad");
  if (st == CCG_STATUS_OK) {
    st = run(&b);
    if (st == CCG_STATUS_OK)
      st = ccg__fsdp_regather(g, b.nn);
    ccg_graph_pop_scope(g);
  }
  if (st != CCG_STATUS_OK)
    ccg__rollback(g, &mark);
  free(b.units), free(b.ids), free(b.unit_of), free(b.made_by), free(b.order);
  free(b.requires), free(b.useful), free(b.wrt), free(b.acc);
  return st;
}
