/* SplitToSequence whose sequence is only read by SequenceAt at constant
 * positions (torch's dynamo exporter writes it for torch.split): the IR has
 * no sequences, so the pattern becomes one Split whose outputs take the
 * SequenceAt outputs' names (a Squeeze each where ONNX drops the axis). Any
 * other use of the sequence is refused, naming the node and why. */
#include <stdio.h>
#include <string.h>

#include "onnx/import.h"

static bool is_op(const Onnx__NodeProto *np, const char *op) {
  const char *d = np->domain ? np->domain : "";
  return (!*d || strcmp(d, "ai.onnx") == 0) && np->op_type &&
         strcmp(np->op_type, op) == 0;
}

bool ccg__onnx_seq_at_of_split(const im *m, const Onnx__NodeProto *np) {
  if (!is_op(np, "SequenceAt") || np->n_input < 1 || !np->input[0])
    return false;
  for (size_t i = 0; i < m->gp->n_node; i++) {
    const Onnx__NodeProto *p = m->gp->node[i];
    if (is_op(p, "SplitToSequence") && p->n_output == 1 && p->output[0] &&
        strcmp(p->output[0], np->input[0]) == 0)
      return true;
  }
  return false;
}

/* The readers of the sequence: every use must be a SequenceAt's input 0. */
static ccg_status readers(im *m, const Onnx__NodeProto *np, const char *seq,
                          const Onnx__NodeProto ***out, size_t *n_out) {
  for (size_t i = 0; i < m->gp->n_output; i++)
    if (m->gp->output[i]->name && strcmp(m->gp->output[i]->name, seq) == 0)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                                 "its sequence '%s' is a graph output; ccgraph "
                                 "has no sequences",
                                 seq);
  const Onnx__NodeProto **r =
      ccg__arena_calloc(&m->a, m->gp->n_node + 1, sizeof *r);
  if (!r)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "its readers");
  size_t n = 0;
  for (size_t i = 0; i < m->gp->n_node; i++) {
    const Onnx__NodeProto *u = m->gp->node[i];
    for (size_t k = 0; k < u->n_input; k++) {
      if (!u->input[k] || strcmp(u->input[k], seq) != 0)
        continue;
      if (!is_op(u, "SequenceAt") || k != 0 || u->n_input != 2 ||
          u->n_output != 1)
        return ccg__onnx_node_fail(
            m, np, CCG_STATUS_UNSUPPORTED,
            "its sequence is used by '%s' (%s), which ccgraph cannot read "
            "as a tensor (only SequenceAt at constant positions is read)",
            ccg__onnx_node_label(u), u->op_type ? u->op_type : "");
      r[n++] = u;
    }
  }
  *out = r;
  *n_out = n;
  return CCG_STATUS_OK;
}

/* The part sizes along the axis: 1-D split as given; a scalar split (or
 * none: 1) is a chunk size with a shorter last chunk, which needs the dim's
 * size. A 1-element split reads as a chunk size: for a valid model (its one
 * entry is the dim) both give one part. */
static ccg_status part_sizes(im *m, const Onnx__NodeProto *np, ccg_dim d,
                             const int64_t **sizes, size_t *n) {
  const int64_t *vals = NULL;
  size_t nv = 0;
  int64_t chunk = 1;
  if (np->n_input > 1 && np->input[1] && *np->input[1]) {
    CCG_CHECK(ccg__onnx_const_ints(m, np, np->input[1], &vals, &nv));
    if (nv == 0)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_PARSE,
                                 "input 'split' is empty");
    for (size_t i = 0; i < nv; i++)
      if (vals[i] <= 0)
        return ccg__onnx_node_fail(m, np, CCG_STATUS_PARSE,
                                   "split entry %zu is %lld (must be > 0)", i,
                                   (long long)vals[i]);
    if (nv > 1) {
      *sizes = vals;
      *n = nv;
      return CCG_STATUS_OK;
    }
    chunk = vals[0];
  }
  if (ccg_dim_is_sym(d))
    return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                               "the split axis has run-time size '%s'; "
                               "chunks of %lld need it known",
                               d.sym, (long long)chunk);
  size_t count = d.size ? (size_t)((d.size + chunk - 1) / chunk) : 0;
  if (count == 0)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                               "the split axis has size 0 (an empty sequence)");
  int64_t *s = ccg__arena_calloc(&m->a, count, sizeof *s);
  if (!s)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "split sizes");
  for (size_t i = 0; i < count; i++)
    s[i] = i + 1 < count ? chunk : d.size - chunk * (int64_t)(count - 1);
  *sizes = s;
  *n = count;
  return CCG_STATUS_OK;
}

/* Which part each reader takes: constant positions, negative ones from the
 * back, each part read at most once (its value takes the reader's name). */
static ccg_status positions(im *m, const Onnx__NodeProto *np,
                            const Onnx__NodeProto **r, size_t n_r, size_t count,
                            const Onnx__NodeProto **by_part) {
  for (size_t i = 0; i < n_r; i++) {
    const int64_t *v = NULL;
    size_t nv = 0;
    CCG_CHECK(ccg__onnx_const_ints(m, r[i], r[i]->input[1], &v, &nv));
    if (nv != 1)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                                 "SequenceAt '%s' reads %zu positions (one "
                                 "scalar expected)",
                                 ccg__onnx_node_label(r[i]), nv);
    int64_t p = v[0] < 0 ? v[0] + (int64_t)count : v[0];
    if (p < 0 || p >= (int64_t)count)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_PARSE,
                                 "SequenceAt '%s' reads position %lld of a "
                                 "sequence of %zu",
                                 ccg__onnx_node_label(r[i]), (long long)v[0],
                                 count);
    if (by_part[p])
      return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                                 "SequenceAt '%s' and '%s' both read position "
                                 "%lld",
                                 ccg__onnx_node_label(by_part[p]),
                                 ccg__onnx_node_label(r[i]), (long long)p);
    by_part[p] = r[i];
  }
  return CCG_STATUS_OK;
}

static ccg_status add(im *m, const ccg_node_desc *d, ccg_node_id *nid) {
  if (ccg_graph_add_node(m->g, d, nid) != CCG_STATUS_OK) {
    ccg__error_copy(NULL, &m->g->ctx);
    return ccg__error_prefix(NULL, "%s", m->src.what);
  }
  return CCG_STATUS_OK;
}

/* keepdims=0 without a split input: each part read loses the axis. */
static ccg_status squeezes(im *m, ccg_node_id split, int64_t axis,
                           const Onnx__NodeProto **by_part, size_t count) {
  int64_t *axes = ccg__arena_calloc(&m->a, 1, sizeof *axes);
  if (!axes)
    return ccg__error(NULL, CCG_STATUS_OOM, "%s: squeeze axes", m->src.what);
  *axes = axis;
  for (size_t i = 0; i < count; i++) {
    if (!by_part[i])
      continue;
    ccg_value_id x = ccg_node_output(m->g, split, i);
    ccg_attr a = CCG_ATTR_IS("axes", axes, 1);
    const char *out = by_part[i]->output[0];
    ccg_node_desc d = CCG_NODE_DESC_INIT;
    d.op = "Squeeze";
    d.name = by_part[i]->name && *by_part[i]->name ? by_part[i]->name : NULL;
    d.inputs = &x;
    d.n_inputs = 1;
    d.attrs = &a;
    d.n_attrs = 1;
    d.n_outputs = 1;
    d.output_names = &out;
    ccg_node_id nid;
    CCG_CHECK(add(m, &d, &nid));
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_split_seq_in(im *m, const Onnx__NodeProto *np) {
  if (np->n_input < 1 || np->n_input > 2 || np->n_output != 1 ||
      !np->output[0] || !*np->output[0])
    return ccg__onnx_node_fail(m, np, CCG_STATUS_PARSE,
                               "has %zu inputs and %zu outputs (1-2 and 1)",
                               np->n_input, np->n_output);
  const Onnx__NodeProto **r = NULL;
  size_t n_r = 0;
  CCG_CHECK(readers(m, np, np->output[0], &r, &n_r));
  uint32_t x;
  if (!np->input[0] || !ccg__strmap_get(&m->g->value_names, np->input[0], &x))
    return ccg__onnx_node_fail(m, np, CCG_STATUS_PARSE,
                               "input '%s' is not defined before the node",
                               np->input[0] ? np->input[0] : "");
  const ccg_shape *s = ccg_value_shape(m->g, x);
  int64_t axis = ccg__onnx_attr_int(np, "axis", 0);
  if (axis < -s->rank || axis >= s->rank)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_SHAPE,
                               "axis %lld is out of range for rank %d",
                               (long long)axis, s->rank);
  if (axis < 0)
    axis += s->rank;
  const int64_t *sizes = NULL;
  size_t count = 0;
  CCG_CHECK(part_sizes(m, np, s->dims[axis], &sizes, &count));
  const Onnx__NodeProto **by_part =
      ccg__arena_calloc(&m->a, count, sizeof *by_part);
  const char **outs = ccg__arena_calloc(&m->a, count, sizeof *outs);
  if (!by_part || !outs)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "its parts");
  CCG_CHECK(positions(m, np, r, n_r, count, by_part));
  /* ONNX ignores keepdims when a split input is given. */
  bool has_split = np->n_input > 1 && np->input[1] && *np->input[1];
  bool squeeze = !has_split && ccg__onnx_attr_int(np, "keepdims", 1) == 0;
  for (size_t i = 0; i < count; i++)
    outs[i] = by_part[i] && !squeeze && by_part[i]->output[0] &&
                      *by_part[i]->output[0]
                  ? by_part[i]->output[0]
                  : NULL;
  ccg_attr attrs[2] = {CCG_ATTR_I("axis", axis),
                       CCG_ATTR_IS("split", sizes, count)};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Split";
  d.name = np->name && *np->name ? np->name : NULL;
  d.inputs = &x;
  d.n_inputs = 1;
  d.attrs = attrs;
  d.n_attrs = 2;
  d.n_outputs = count;
  d.output_names = outs;
  ccg_node_id nid;
  CCG_CHECK(add(m, &d, &nid));
  /* what the model says of the node (torch's module path, ...) */
  for (size_t i = 0; i < np->n_metadata_props; i++) {
    const Onnx__StringStringEntryProto *kv = np->metadata_props[i];
    if (kv->key && *kv->key && kv->value &&
        ccg_node_set_meta(m->g, nid, kv->key, kv->value) != CCG_STATUS_OK) {
      ccg__error_copy(NULL, &m->g->ctx);
      return ccg__error_prefix(NULL, "%s", m->src.what);
    }
  }
  if (squeeze)
    CCG_CHECK(squeezes(m, nid, axis, by_part, count));
  return CCG_STATUS_OK;
}
