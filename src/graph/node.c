/* Nodes: the one path that adds them (add_node: validates everything, runs
 * the op's shape rule, and commits only when nothing can fail any more),
 * their uses, rollback, accessors, tags and metadata. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"

/* Outputs name_ahead names before the node's arity is checked: more than
 * any op has but the variadic ones. */
#define NAME_AHEAD_MAX 64

/* ---- nodes -------------------------------------------------------------- */

/* "<scope>/<Op>_<k>", in the scratch arena; *hash: its ccg__strhash. */
static const char *node_name_at(ccg_graph *g, ccg_op op, size_t k,
                                uint32_t *hash) {
  /* the scope, if any, and "/<Op>" joined by hand */
  char base[64];
  size_t n = strlen(ccg_op_name(op));
  base[0] = '/';
  memcpy(base + 1, ccg_op_name(op), n + 1);
  const char *a = *g->scope ? g->scope : "";
  const char *b = *g->scope ? base : base + 1;
  char *name = ccg__arena_name(&g->scratch, a, b, k);
  if (name)
    *hash = ccg__strhash(name);
  return name;
}

/* node_name_at with the first free k from `from` on. */
static const char *make_node_name(ccg_graph *g, ccg_op op, size_t from,
                                  uint32_t *hash) {
  for (size_t k = from;; k++) {
    const char *name = node_name_at(g, op, k, hash);
    if (!name || !ccg__strmap_get_h(&g->node_names, name, *hash, NULL))
      return name;
  }
}

/* Arity, inputs and attributes of a node about to be added. */
static ccg_status check_node_args(ccg_graph *g, const ccg__op_info *info,
                                  ccg_op op, const char *nm,
                                  const ccg_value_id *in, size_t n_in,
                                  const ccg_attr *attrs, size_t n_attrs,
                                  size_t n_out) {
  if ((int)n_in < info->min_in ||
      (info->max_in >= 0 && (int)n_in > info->max_in))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "node '%s' (%s): %zu inputs given, expected %d to %d", nm,
                      info->name, n_in, info->min_in,
                      info->max_in >= 0 ? info->max_in : 1 << 30);
  if ((int)n_out < info->min_out ||
      (info->max_out >= 0 && (int)n_out > info->max_out))
    return ccg__error(
        &g->ctx, CCG_STATUS_INVALID_ARG,
        "node '%s' (%s): %zu outputs asked for, expected %d to %d", nm,
        info->name, n_out, info->min_out,
        info->max_out >= 0 ? info->max_out : 1 << 30);
  if (n_in && !in)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "node '%s' (%s): inputs array is NULL", nm, info->name);
  for (size_t i = 0; i < n_in; i++) {
    if (in[i] == CCG_NONE) {
      if ((int)i < info->min_in || info->max_in < 0)
        return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                          "node '%s' (%s): required input %zu is missing", nm,
                          info->name, i);
      continue;
    }
    if (!ccg__value_ok(g, in[i]))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "node '%s' (%s): input %zu is value id %u, which does "
                        "not exist in graph '%s'",
                        nm, info->name, i, in[i], g->name);
  }
  if (n_attrs && !attrs)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "node '%s' (%s): attributes array is NULL", nm,
                      info->name);
  return ccg__check_attrs(g, op, nm, attrs, n_attrs);
}

/* Node nm's arguments checked and its shape rule run, into *ix. */
static ccg_status run_rule(ccg_graph *g, const ccg__op_info *info, ccg_op op,
                           const char *nm, const ccg_value_id *in, size_t n_in,
                           const ccg_attr *attrs, size_t n_attrs, size_t n_out,
                           ccg__infer *ix) {
  *ix = (ccg__infer){g,       op,    nm,   in,   n_in, attrs,
                     n_attrs, n_out, NULL, NULL, NULL, NULL};
  CCG_CHECK(check_node_args(g, info, op, nm, in, n_in, attrs, n_attrs, n_out));
  return ccg__run_infer(ix);
}

/* Whether output shape s (a shape rule's, not imported) is the interned
 * shape t: numbers equal, symbols the same pointers. */
static bool same_as_interned(const ccg_shape *s, const ccg_shape *t) {
  if (s->rank != t->rank)
    return false;
  for (int d = 0; d < s->rank; d++) {
    ccg_dim x = s->dims[d], y = t->dims[d];
    if (x.size != y.size || (x.size < 0 && x.sym != y.sym))
      return false;
  }
  return true;
}

/* Output shape s made the graph's: an input's interned shape when it is
 * the same (most outputs: elementwise ops), else imported in place (*same
 * NULL), for ccg__shape_intern once every output is checked. An output
 * with only symbols of the inputs needs no lookup in the symbol table. */
static ccg_status out_shape(ccg_graph *g, const ccg__infer *ix, ccg_shape *s,
                            const ccg_shape **same) {
  *same = NULL;
  if (s->rank < 0 || s->rank > CCG_MAX_RANK)
    return ccg__shape_import(g, s, s); /* the error */
  for (size_t i = 0; i < ix->n_in; i++)
    if (ix->in[i] != CCG_NONE &&
        same_as_interned(s, g->values[ix->in[i]].shape)) {
      *same = g->values[ix->in[i]].shape;
      return CCG_STATUS_OK;
    }
  ccg_shape t;
  memset(&t, 0, sizeof t);
  t.rank = s->rank;
  for (int d = 0; d < s->rank; d++) {
    ccg_dim x = s->dims[d];
    if (x.size >= 0) {
      t.dims[d] = ccg_dim_num(x.size);
      continue;
    }
    bool found = false;
    for (size_t i = 0; i < ix->n_in && !found; i++) {
      if (ix->in[i] == CCG_NONE)
        continue;
      const ccg_shape *in = g->values[ix->in[i]].shape;
      for (int k = 0; k < in->rank && !found; k++)
        found = x.size == CCG_DIM_SYMBOLIC && in->dims[k].sym == x.sym && x.sym;
    }
    if (!found)
      return ccg__shape_import(g, s, s);
    t.dims[d] = x;
  }
  *s = t;
  return CCG_STATUS_OK;
}

/* Output names (given or generated) and their hashes, made ahead of the
 * checks for node `node` (name_ahead), and the interned output shapes; the
 * lists in the scratch arena. */
typedef struct named_outputs {
  const char *node; /* NULL: the names are not made yet */
  const char **names;
  uint32_t *hash;
  const ccg_shape **shapes;
} named_outputs;

/* Names the outputs of node nm and starts loading their slots in the
 * value-name index: in a large graph the lookups of a new node's names
 * miss the cache, and this way those misses overlap each other and the
 * shape rule instead of coming one after another. Only prepares: the
 * checks come in name_outputs, and o->node stays NULL where this cannot
 * name them (n_out not checked yet and large, OOM). */
static void name_ahead(ccg_graph *g, const char *nm,
                       const char *const *out_names, size_t n_out,
                       named_outputs *o) {
  memset(o, 0, sizeof *o);
  if (n_out > NAME_AHEAD_MAX)
    return;
  size_t m = n_out ? n_out : 1;
  o->names = ccg__arena_calloc(&g->scratch, m, sizeof *o->names);
  o->hash = ccg__arena_calloc(&g->scratch, m, sizeof *o->hash);
  o->shapes = ccg__arena_calloc(&g->scratch, m, sizeof *o->shapes);
  if (!o->names || !o->hash || !o->shapes)
    return;
  for (size_t i = 0; i < n_out; i++) {
    const char *want = out_names ? out_names[i] : NULL;
    o->names[i] =
        want && *want ? want : ccg__arena_name(&g->scratch, nm, "_output", i);
    if (!o->names[i])
      return;
    o->hash[i] = ccg__strhash(o->names[i]);
    ccg__strmap_prefetch(&g->value_names, o->hash[i]);
  }
  o->node = nm;
}

static ccg_status name_outputs(ccg_graph *g, ccg__infer *ix,
                               const char *const *out_names, named_outputs *o) {
  const char *opn = ccg_op_name(ix->op), *nm = ix->node_name;
  if (o->node != nm) {
    size_t m = ix->n_out ? ix->n_out : 1;
    o->names = ccg__arena_calloc(&g->scratch, m, sizeof *o->names);
    o->hash = ccg__arena_calloc(&g->scratch, m, sizeof *o->hash);
    o->shapes = ccg__arena_calloc(&g->scratch, m, sizeof *o->shapes);
    if (!o->names || !o->hash || !o->shapes)
      return ccg__graph_oom(g, "naming outputs");
    for (size_t i = 0; i < ix->n_out; i++) {
      const char *want = out_names ? out_names[i] : NULL;
      o->names[i] =
          want && *want ? want : ccg__arena_name(&g->scratch, nm, "_output", i);
      if (!o->names[i])
        return ccg__graph_oom(g, "naming outputs");
      o->hash[i] = ccg__strhash(o->names[i]);
    }
  }
  const char **names = o->names;
  const ccg_shape **shapes = o->shapes;
  for (size_t i = 0; i < ix->n_out; i++) {
    if (ccg__strmap_get_h(&g->value_names, names[i], o->hash[i], NULL))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "node '%s' (%s): output %zu '%s': a value of that name "
                        "already exists (values are assigned once)",
                        nm, opn, i, names[i]);
    for (size_t j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0)
        return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                          "node '%s' (%s): outputs %zu and %zu are both named "
                          "'%s'",
                          nm, opn, j, i, names[i]);
    if (out_shape(g, ix, &ix->out_shape[i], &shapes[i]) != CCG_STATUS_OK)
      return ccg__error_prefix(&g->ctx, "node '%s' (%s): output %zu", nm, opn,
                               i);
  }
  /* last: a refused node leaves no shape behind */
  for (size_t i = 0; i < ix->n_out; i++)
    if (!shapes[i] && !(shapes[i] = ccg__shape_intern(g, &ix->out_shape[i])))
      return ccg__graph_oom(g, "interning a shape");
  return CCG_STATUS_OK;
}

/* Everything the node keeps, copied into the graph's arena, and room in
 * every table, so that the commit after it cannot fail half-way. */
typedef struct node_copy {
  const char *name;
  uint32_t name_hash;
  const char **onames;
  const uint32_t *ohash;
  const ccg_shape *const *oshapes;
  ccg_attr *attrs;
  ccg_value_id *in, *out;
  ccg__contents **known; /* per output: what is known of it, or NULL */
} node_copy;

static ccg_status copy_node(ccg_graph *g, const ccg__infer *ix,
                            const char *const *onames, node_copy *c) {
  size_t m = ix->n_out ? ix->n_out : 1;
  ccg_status st = CCG_STATUS_OK;
  /* most nodes have no attributes: for them no zeroed record, only a
   * pointer that is not NULL (readers pass it on with a count of 0) */
  c->attrs = ix->n_attrs ? ccg__copy_attrs(g, ix->attrs, ix->n_attrs, &st,
                                           ix->node_name)
                         : ccg__arena_alloc(&g->arena, 0, 8);
  if (!c->attrs)
    return ix->n_attrs ? st : ccg__graph_oom(g, "adding a node");
  /* The lists in one block and the names in another: a node's few small
   * allocations were a good part of adding it. */
  size_t lists = 2 * m * sizeof(void *) + (m + ix->n_in) * sizeof *c->in;
  size_t chars = strlen(ix->node_name) + 1;
  for (size_t i = 0; i < ix->n_out; i++)
    chars += strlen(onames[i]) + 1;
  void **p = ccg__arena_alloc(&g->arena, lists, 8);
  char *s = ccg__arena_alloc(&g->arena, chars, 1);
  if (!p || !s)
    return ccg__graph_oom(g, "adding a node");
  memset(p, 0, 2 * m * sizeof *p + m * sizeof *c->out);
  c->onames = (const char **)p;
  c->known = (ccg__contents **)(p + m);
  c->out = (ccg_value_id *)(p + 2 * m);
  c->in = c->out + m;
  if (ix->n_in) /* in may be NULL then */
    memcpy(c->in, ix->in, ix->n_in * sizeof *ix->in);
  size_t n = strlen(ix->node_name) + 1;
  c->name = memcpy(s, ix->node_name, n);
  s += n;
  for (size_t i = 0; i < ix->n_out; i++) {
    n = strlen(onames[i]) + 1;
    c->onames[i] = memcpy(s, onames[i], n);
    s += n;
    if (ix->out_n_known[i] < 0)
      continue;
    /* the record and its elements in one block */
    ccg__contents *k = ccg__arena_alloc(
        &g->arena, sizeof *k + sizeof ix->out_known[i], _Alignof(ccg_dim));
    if (!k)
      return ccg__graph_oom(g, "adding a node");
    *k = (ccg__contents){.known = (ccg_dim *)(k + 1),
                         .n_known = ix->out_n_known[i]};
    memcpy(k->known, ix->out_known[i], sizeof ix->out_known[i]);
    c->known[i] = k;
  }
  if (g->n_nodes >= CCG_NONE - 1 || g->n_values + ix->n_out >= CCG_NONE - 1 ||
      !ccg__table_reserve(g, (void **)&g->nodes, &g->cap_nodes, &g->nodes_bulk,
                          g->n_nodes + 1, sizeof *g->nodes) ||
      !ccg__table_reserve(g, (void **)&g->values, &g->cap_values,
                          &g->values_bulk, g->n_values + ix->n_out,
                          sizeof *g->values) ||
      !ccg__table_reserve(g, (void **)&g->uses, &g->cap_uses, &g->uses_bulk,
                          g->n_uses + ix->n_in, sizeof *g->uses) ||
      ccg__strmap_reserve(&g->node_names, g->node_names.count + 1) !=
          CCG_STATUS_OK ||
      ccg__strmap_reserve(&g->value_names, g->value_names.count + ix->n_out) !=
          CCG_STATUS_OK)
    return ccg__graph_oom(g, "adding a node");
  return CCG_STATUS_OK;
}

void ccg__link_use(ccg_graph *g, ccg_value_id v, ccg_node_id n, uint32_t slot) {
  uint32_t u = (uint32_t)g->n_uses++;
  ccg__value *x = &g->values[v];
  g->uses[u] = (ccg__use){n, slot, x->last_use, CCG_NONE};
  if (x->last_use == CCG_NONE)
    x->first_use = u;
  else
    g->uses[x->last_use].next = u;
  x->last_use = u;
  x->n_uses++;
}

/* Use u out of its value x's list. */
static void unlink_use(ccg_graph *g, ccg__value *x, uint32_t u) {
  uint32_t prev = g->uses[u].prev, next = g->uses[u].next;
  if (prev == CCG_NONE)
    x->first_use = next;
  else
    g->uses[prev].next = next;
  if (next == CCG_NONE)
    x->last_use = prev;
  else
    g->uses[next].prev = prev;
  x->n_uses--;
}

/* Use u into x's list where its place in the table puts it: a list in
 * table order keeps the last use in the table its value's last, which
 * ccg__rollback relies on. */
static void link_use_at(ccg_graph *g, ccg__value *x, uint32_t u) {
  uint32_t prev = x->last_use;
  while (prev != CCG_NONE && prev > u)
    prev = g->uses[prev].prev;
  uint32_t next = prev == CCG_NONE ? x->first_use : g->uses[prev].next;
  g->uses[u].prev = prev;
  g->uses[u].next = next;
  if (prev == CCG_NONE)
    x->first_use = u;
  else
    g->uses[prev].next = u;
  if (next == CCG_NONE)
    x->last_use = u;
  else
    g->uses[next].prev = u;
  x->n_uses++;
}

ccg_status ccg__node_set_input(ccg_graph *g, ccg_node_id n, size_t slot,
                               ccg_value_id v) {
  if (!ccg__node_ok(g, n) || slot >= g->nodes[n].n_inputs ||
      g->nodes[n].inputs[slot] == CCG_NONE || !ccg__value_ok(g, v))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "rewiring input %zu of node %u to value %u: no such "
                      "node, input or value",
                      slot, n, v);
  ccg__value *old = &g->values[g->nodes[n].inputs[slot]];
  uint32_t u = old->first_use;
  while (u != CCG_NONE && (g->uses[u].node != n || g->uses[u].slot != slot))
    u = g->uses[u].next;
  if (u == CCG_NONE)
    return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                      "node '%s' input %zu: not in its value's use list",
                      g->nodes[n].name, slot);
  unlink_use(g, old, u);
  link_use_at(g, &g->values[v], u);
  g->nodes[n].inputs[slot] = v;
  g->order_unsure = true;
  return CCG_STATUS_OK;
}

/* Removes the last use in the table, which is its value's last use: uses
 * are unlinked in the reverse of the order they were linked. */
static void unlink_last_use(ccg_graph *g, ccg_value_id v) {
  unlink_use(g, &g->values[v], (uint32_t)--g->n_uses);
}

size_t ccg_value_num_uses(const ccg_graph *g, ccg_value_id v) {
  return ccg__value_ok(g, v) ? g->values[v].n_uses : 0;
}

bool ccg_value_next_use(const ccg_graph *g, ccg_value_id v, size_t *cursor,
                        ccg_node_id *node, size_t *slot) {
  if (!ccg__value_ok(g, v) || !cursor)
    return false;
  /* *cursor: 0 before the first use, else 1 + the last use given */
  uint32_t u = *cursor == 0              ? g->values[v].first_use
               : *cursor - 1 < g->n_uses ? g->uses[*cursor - 1].next
                                         : CCG_NONE;
  if (u == CCG_NONE)
    return false;
  *cursor = (size_t)u + 1;
  if (node)
    *node = g->uses[u].node;
  if (slot)
    *slot = g->uses[u].slot;
  return true;
}

/* Cannot fail: copy_node made room for everything. */
static ccg_node_id commit_node(ccg_graph *g, const ccg__infer *ix,
                               const node_copy *c) {
  ccg_node_id nid = (ccg_node_id)g->n_nodes;
  ccg__strmap_put_h(&g->node_names, c->name, c->name_hash, nid);
  for (size_t i = 0; i < ix->n_out; i++) {
    ccg_value_id vid;
    (void)ccg__push_value(g, c->onames[i], c->ohash[i], ix->out_dtype[i],
                          c->oshapes[i], CCG_VALUE_NODE_OUTPUT, &vid);
    ccg__value *v = &g->values[vid];
    v->producer = nid;
    v->producer_slot = (uint32_t)i;
    v->c = c->known[i];
    c->out[i] = vid;
  }
  ccg__node *node = &g->nodes[g->n_nodes++];
  memset(node, 0, sizeof *node);
  node->op = ix->op;
  node->name = c->name;
  node->inputs = c->in;
  node->n_inputs = (uint32_t)ix->n_in;
  node->outputs = c->out;
  node->n_outputs = (uint32_t)ix->n_out;
  node->attrs = c->attrs;
  node->n_attrs = (uint32_t)ix->n_attrs;
  for (size_t i = 0; i < ix->n_in; i++)
    if (c->in[i] != CCG_NONE)
      ccg__link_use(g, c->in[i], nid, (uint32_t)i);
  return nid;
}

/* The one way nodes enter a graph. Work that a refused node may leave
 * behind goes to the scratch arena, which is reset on every call, so
 * refused calls do not grow the graph. */
static ccg_status add_node(ccg_graph *g, ccg_op op, const char *name,
                           const ccg_value_id *in, size_t n_in,
                           const ccg_attr *attrs, size_t n_attrs, size_t n_out,
                           const char *const *out_names, ccg_node_id *out_node,
                           ccg_value_id *outs) {
  const ccg__op_info *info = ccg__op_info_of(op);
  if (!info)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG, "op id %d is invalid",
                      (int)op);
  ccg__arena_reset(&g->scratch);
  if (name && !*name)
    name = NULL;
  /* The node's name (a generated one: the first choice, almost always
   * free) and its outputs' names are hashed and their index slots loaded
   * before any is looked up (see name_ahead). */
  uint32_t name_hash = 0;
  const char *nm = name ? name : node_name_at(g, op, g->n_nodes, &name_hash);
  if (!nm)
    return ccg__graph_oom(g, "naming a node");
  if (name)
    name_hash = ccg__strhash(name);
  ccg__strmap_prefetch(&g->node_names, name_hash);
  named_outputs o;
  name_ahead(g, nm, out_names, n_out, &o);
  /* The name is looked up after the shape rule has run, which hides the
   * cache miss behind the rule; where a generated name is taken (rare),
   * the rule runs again under the next free one, as it may make symbols
   * from the name. A given name that is taken is the error, whatever the
   * rule said. */
  ccg__infer ix;
  ccg_status st =
      run_rule(g, info, op, nm, in, n_in, attrs, n_attrs, n_out, &ix);
  if (ccg__strmap_get_h(&g->node_names, nm, name_hash, NULL)) {
    if (name)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "node '%s' (%s): a node of that name already exists",
                        name, info->name);
    if (!(nm = make_node_name(g, op, g->n_nodes + 1, &name_hash)))
      return ccg__graph_oom(g, "naming a node");
    st = run_rule(g, info, op, nm, in, n_in, attrs, n_attrs, n_out, &ix);
  }
  CCG_CHECK(st);
  CCG_CHECK(name_outputs(g, &ix, out_names, &o));
  node_copy c = {0};
  c.name_hash = name_hash;
  c.ohash = o.hash;
  c.oshapes = o.shapes;
  CCG_CHECK(copy_node(g, &ix, o.names, &c));
  ccg_node_id nid = commit_node(g, &ix, &c);
  if (out_node)
    *out_node = nid;
  if (outs)
    memcpy(outs, c.out, n_out * sizeof *outs);
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_add_node(ccg_graph *g, const ccg_node_desc *d,
                              ccg_node_id *out) {
  if (!d || d->size < sizeof(ccg_node_desc))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "ccg_node_desc is NULL or its size is wrong (use "
                      "CCG_NODE_DESC_INIT)");
  ccg_op op;
  if (ccg_op_find(d->domain, d->op, &op) != CCG_STATUS_OK) {
    ccg__error_copy(&g->ctx, NULL);
    return ccg__error_prefix(&g->ctx, "node '%s'", d->name ? d->name : "?");
  }
  return ccg__graph_add_node_op(g, op, d, out);
}

ccg_status ccg__graph_add_node_op(ccg_graph *g, ccg_op op,
                                  const ccg_node_desc *d, ccg_node_id *out) {
  return add_node(g, op, d->name, d->inputs, d->n_inputs, d->attrs, d->n_attrs,
                  d->n_outputs, d->output_names, out, NULL);
}

ccg_status ccg__graph_reserve(ccg_graph *g, size_t nodes, size_t values,
                              size_t uses) {
  if (!ccg__table_reserve(g, (void **)&g->nodes, &g->cap_nodes, &g->nodes_bulk,
                          g->n_nodes + nodes, sizeof *g->nodes) ||
      !ccg__table_reserve(g, (void **)&g->values, &g->cap_values,
                          &g->values_bulk, g->n_values + values,
                          sizeof *g->values) ||
      !ccg__table_reserve(g, (void **)&g->uses, &g->cap_uses, &g->uses_bulk,
                          g->n_uses + uses, sizeof *g->uses) ||
      ccg__strmap_reserve(&g->node_names, g->node_names.count + nodes) !=
          CCG_STATUS_OK ||
      ccg__strmap_reserve(&g->value_names, g->value_names.count + values) !=
          CCG_STATUS_OK)
    return ccg__graph_oom(g, "reserving room for nodes");
  return CCG_STATUS_OK;
}

ccg_status ccg__build(ccg_graph *g, ccg_op op, const ccg_value_id *in,
                      size_t n_in, const ccg_attr *attrs, size_t n_attrs,
                      size_t n_out, ccg_value_id *outs, ccg_node_id *node) {
  return add_node(g, op, NULL, in, n_in, attrs, n_attrs, n_out, NULL, node,
                  outs);
}

ccg_status ccg__add_const(ccg_graph *g, const ccg_tensor *t, const char *hint,
                          ccg_value_id *out) {
  char base[512];
  snprintf(base, sizeof base, "%s%s%s", g->scope, *g->scope ? "/" : "", hint);
  for (size_t k = g->n_values;; k++) {
    ccg__arena_reset(&g->scratch);
    const char *name = ccg__arena_name(&g->scratch, base, "", k);
    if (!name)
      return ccg__graph_oom(g, "naming a constant");
    if (!ccg__strmap_get(&g->value_names, name, NULL))
      return ccg_graph_add_initializer(g, name, t, out);
  }
}

ccg_status ccg__const_i64(ccg_graph *g, const int64_t *v, size_t n,
                          const char *hint, ccg_value_id *out) {
  ccg_tensor t = {CCG_DTYPE_I64, 1, {(int64_t)n}, v};
  return ccg__add_const(g, &t, hint, out);
}

ccg__mark ccg__mark_get(const ccg_graph *g) {
  return (ccg__mark){g->n_values, g->n_nodes, g->n_inputs, g->n_outputs,
                     g->n_inits};
}

void ccg__rollback(ccg_graph *g, const ccg__mark *m) {
  while (g->n_nodes > m->n_nodes) {
    const ccg__node *x = &g->nodes[--g->n_nodes];
    for (uint32_t i = x->n_inputs; i-- > 0;)
      if (x->inputs[i] != CCG_NONE)
        unlink_last_use(g, x->inputs[i]);
    if (x->tag && x->tag->instance >= g->max_instance)
      g->max_instance_stale = true; /* it may have held the largest */
    ccg__strmap_remove(&g->node_names, x->name);
  }
  while (g->n_values > m->n_values)
    ccg__strmap_remove(&g->value_names, g->values[--g->n_values].name);
  g->n_inputs = m->n_inputs;
  for (size_t i = m->n_outputs; i < g->n_outputs; i++)
    if (g->outputs[i] < g->n_values)
      g->values[g->outputs[i]].is_output = false;
  g->n_outputs = m->n_outputs;
  g->n_inits = m->n_inits;
}

uint32_t ccg__graph_max_instance(ccg_graph *g) {
  if (g->max_instance_stale) {
    g->max_instance = 0;
    for (size_t i = 0; i < g->n_nodes; i++)
      if (g->nodes[i].tag && g->nodes[i].tag->instance > g->max_instance)
        g->max_instance = g->nodes[i].tag->instance;
    g->max_instance_stale = false;
  }
  return g->max_instance;
}

ccg_op ccg_node_op(const ccg_graph *g, ccg_node_id n) {
  return ccg__node_ok(g, n) ? g->nodes[n].op : CCG_OP_COUNT;
}
const char *ccg_node_name(const ccg_graph *g, ccg_node_id n) {
  return ccg__node_ok(g, n) ? g->nodes[n].name : NULL;
}
size_t ccg_node_num_inputs(const ccg_graph *g, ccg_node_id n) {
  return ccg__node_ok(g, n) ? g->nodes[n].n_inputs : 0;
}
ccg_value_id ccg_node_input(const ccg_graph *g, ccg_node_id n, size_t i) {
  return ccg__node_ok(g, n) && i < g->nodes[n].n_inputs ? g->nodes[n].inputs[i]
                                                        : CCG_NONE;
}
size_t ccg_node_num_outputs(const ccg_graph *g, ccg_node_id n) {
  return ccg__node_ok(g, n) ? g->nodes[n].n_outputs : 0;
}
ccg_value_id ccg_node_output(const ccg_graph *g, ccg_node_id n, size_t i) {
  return ccg__node_ok(g, n) && i < g->nodes[n].n_outputs
             ? g->nodes[n].outputs[i]
             : CCG_NONE;
}
size_t ccg_node_num_attrs(const ccg_graph *g, ccg_node_id n) {
  return ccg__node_ok(g, n) ? g->nodes[n].n_attrs : 0;
}
ccg_status ccg_node_set_tag(ccg_graph *g, ccg_node_id n, const ccg_tag *tag) {
  if (!ccg__node_ok(g, n))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "tag: node id %u does not exist", n);
  if (!tag || !tag->mapping || !*tag->mapping)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "node '%s': a tag needs a mapping name",
                      g->nodes[n].name);
  ccg_tag *t = ccg__arena_alloc(&g->arena, sizeof *t, 8);
  if (!t)
    return ccg__graph_oom(g, "tagging a node");
  *t = *tag;
  t->mapping = ccg__arena_strdup(&g->arena, tag->mapping);
  t->params = tag->params ? ccg__arena_strdup(&g->arena, tag->params) : NULL;
  if (!t->mapping || (tag->params && !t->params))
    return ccg__graph_oom(g, "tagging a node");
  if (g->nodes[n].tag && g->nodes[n].tag->instance == g->max_instance)
    g->max_instance_stale = true; /* a retag may lower the largest */
  g->nodes[n].tag = t;
  if (t->instance > g->max_instance)
    g->max_instance = t->instance;
  return CCG_STATUS_OK;
}

const ccg_tag *ccg_node_tag(const ccg_graph *g, ccg_node_id n) {
  return ccg__node_ok(g, n) ? g->nodes[n].tag : NULL;
}

/* Sets key in a metadata list (node or graph), replacing its value. */
static ccg_status meta_set(ccg_graph *g, ccg__meta **at, const char *key,
                           const char *value) {
  while (*at && strcmp((*at)->key, key) != 0)
    at = &(*at)->next;
  const char *v = ccg__arena_strdup(&g->arena, value);
  if (!v)
    return ccg__graph_oom(g, "metadata");
  if (*at) {
    (*at)->value = v;
    return CCG_STATUS_OK;
  }
  ccg__meta *m = ccg__arena_alloc(&g->arena, sizeof *m, 8);
  if (!m || !(m->key = ccg__arena_strdup(&g->arena, key)))
    return ccg__graph_oom(g, "metadata");
  m->value = v;
  m->next = NULL;
  *at = m;
  return CCG_STATUS_OK;
}

static const char *meta_find(const ccg__meta *m, const char *key) {
  for (; m && key; m = m->next)
    if (strcmp(m->key, key) == 0)
      return m->value;
  return NULL;
}

static const char *meta_at(const ccg__meta *m, size_t i, const char **value) {
  for (; m && i; i--)
    m = m->next;
  if (!m)
    return NULL;
  if (value)
    *value = m->value;
  return m->key;
}

ccg_status ccg_node_set_meta(ccg_graph *g, ccg_node_id n, const char *key,
                             const char *value) {
  if (!ccg__node_ok(g, n))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "metadata: node id %u does not exist", n);
  if (!key || !*key || !value)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "node '%s': metadata needs a key and a value",
                      g->nodes[n].name);
  if (strcmp(key, CCG_META_SLOT) == 0)
    g->order_unsure = true; /* see ccg_graph_topo_order */
  return meta_set(g, &g->nodes[n].meta, key, value);
}

ccg_status ccg_graph_set_meta(ccg_graph *g, const char *key,
                              const char *value) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_graph_set_meta: graph is NULL");
  if (!key || !*key || !value)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "graph metadata needs a key and a value");
  return meta_set(g, &g->meta, key, value);
}

const char *ccg_graph_meta(const ccg_graph *g, const char *key) {
  return g ? meta_find(g->meta, key) : NULL;
}

const char *ccg_graph_meta_at(const ccg_graph *g, size_t i,
                              const char **value) {
  return g ? meta_at(g->meta, i, value) : NULL;
}

const char *ccg_node_meta(const ccg_graph *g, ccg_node_id n, const char *key) {
  return ccg__node_ok(g, n) ? meta_find(g->nodes[n].meta, key) : NULL;
}

const char *ccg_node_meta_at(const ccg_graph *g, ccg_node_id n, size_t i,
                             const char **value) {
  return ccg__node_ok(g, n) ? meta_at(g->nodes[n].meta, i, value) : NULL;
}
