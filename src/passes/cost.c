/* cost: bytes each communication call moves, with the bus-bandwidth factors
 * of nccl-tests (docs/verify.md), and the time a step spends communicating
 * at a given link bandwidth when calls do not overlap. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "passes/events.h"

double ccg_cost_bus_factor(ccg_op op, int n) {
  if (n < 1)
    return 0.0;
  double f = (double)(n - 1) / (double)n;
  switch (op) {
  case CCG_OP_ALL_REDUCE:
    return 2.0 * f;
  case CCG_OP_ALL_GATHER:
  case CCG_OP_REDUCE_SCATTER:
  case CCG_OP_ALL_TO_ALL:
    return f;
  case CCG_OP_BROADCAST:
  case CCG_OP_REDUCE:
  case CCG_OP_SEND:
  case CCG_OP_RECV:
  case CCG_OP_COLLECTIVE_PERMUTE:
    return 1.0;
  default:
    return 0.0;
  }
}

/* S of one rank's call, as nccl-tests counts it. */
static ccg_status call_bytes(const ccg__cev *e, double *out) {
  const ccg__vshape *v = e->in;
  if (e->op == CCG_OP_ALL_GATHER || e->op == CCG_OP_RECV)
    v = e->out;
  int64_t n;
  char sym[CCG__VSYM_MAX * 4];
  if (!ccg__vshape_numel(v, -1, &n, sym, sizeof sym)) {
    char sb[160];
    return ccg__error(NULL, CCG_STATUS_SHAPE,
                      "%s '%s' on rank %d moves %s: the size %s is symbolic; "
                      "cost needs every dim as a number (bind it)",
                      ccg_op_name(e->op), e->node, e->rank,
                      ccg__vshape_str(v, sb, sizeof sb), sym);
  }
  *out = (double)n * (double)ccg_dtype_size(e->dtype);
  return CCG_STATUS_OK;
}

void ccg_cost_report_free(ccg_cost_report *r) {
  if (!r)
    return;
  free(r->items);
  free(r->rank_bytes);
  free(r->rank_bus_bytes);
  free(r);
}

/* The call of rank q at the same place of the same group as e. */
static const ccg__cev *member_call(const ccg__program *p, int q,
                                   const ccg__cev *e) {
  for (size_t i = 0; i < p->n_ev[q]; i++) {
    const ccg__cev *f = &p->ev[q][i];
    if (!ccg__is_p2p(f->op) && f->key == e->key && f->pos == e->pos)
      return f;
  }
  return NULL;
}

static ccg_status add_item(const ccg__program *p, ccg_cost_report *r,
                           const ccg__cev *e, double bw) {
  double bytes;
  CCG_CHECK(call_bytes(e, &bytes));
  for (int i = 0; !ccg__is_p2p(e->op) && i < e->gsize; i++) {
    const ccg__cev *f = member_call(p, (int)e->group[i], e);
    double b;
    if (f && f != e && call_bytes(f, &b) == CCG_STATUS_OK && b > bytes)
      bytes = b;
  }
  ccg_cost_item *it = &r->items[r->n_items++];
  it->op = e->op;
  it->node = e->node;
  it->first_rank = e->rank;
  it->group_size = e->gsize;
  it->bytes = bytes;
  it->bus_factor = ccg_cost_bus_factor(e->op, e->gsize);
  it->bus_bytes = bytes * it->bus_factor;
  it->time_s = it->bus_bytes / bw;
  it->axes = e->key;
  return CCG_STATUS_OK;
}

/* Rank q's calls by the axis of their group: bytes and bus bytes into
 * r's per-axis figures where they exceed the other ranks'. */
static ccg_status fill_axes(const ccg__program *p, ccg_cost_report *r, int q) {
  double bytes[CCG_MAX_MESH_AXES] = {0}, bus[CCG_MAX_MESH_AXES] = {0};
  double multi = 0;
  for (size_t i = 0; i < p->n_ev[q]; i++) {
    const ccg__cev *e = &p->ev[q][i];
    double b;
    CCG_CHECK(call_bytes(e, &b));
    double bb = b * ccg_cost_bus_factor(e->op, e->gsize);
    int a = -1;
    for (int k = 0; k < r->n_axes; k++)
      if (e->key == 1u << k)
        a = k;
    if (a < 0) {
      multi += bb;
      continue;
    }
    bytes[a] += b;
    bus[a] += bb;
  }
  for (int k = 0; k < r->n_axes; k++) {
    if (bus[k] > r->axis_bus_bytes[k])
      r->axis_bus_bytes[k] = bus[k];
    if (bytes[k] > r->axis_bytes[k])
      r->axis_bytes[k] = bytes[k];
  }
  if (multi > r->multi_axis_bus_bytes)
    r->multi_axis_bus_bytes = multi;
  return CCG_STATUS_OK;
}

static ccg_status fill(const ccg__program *p, ccg_cost_report *r, double bw) {
  r->n_axes = p->mesh ? p->mesh->ndims : 0;
  for (int q = 0; q < p->world; q++)
    CCG_CHECK(fill_axes(p, r, q));
  for (int q = 0; q < p->world; q++)
    for (size_t i = 0; i < p->n_ev[q]; i++) {
      const ccg__cev *e = &p->ev[q][i];
      double b;
      CCG_CHECK(call_bytes(e, &b));
      r->rank_bytes[q] += b;
      r->rank_bus_bytes[q] += b * ccg_cost_bus_factor(e->op, e->gsize);
      bool first = ccg__is_p2p(e->op) ? e->op == CCG_OP_SEND : e->gidx == 0;
      if (first)
        CCG_CHECK(add_item(p, r, e, bw));
    }
  for (int q = 0; q < p->world; q++)
    if (r->rank_bus_bytes[q] > r->step_bus_bytes)
      r->step_bus_bytes = r->rank_bus_bytes[q];
  r->step_time_s = r->step_bus_bytes / bw;
  return CCG_STATUS_OK;
}

ccg_status ccg_cost_program(ccg_graph *const *graphs, size_t n,
                            const ccg_verify_options *opts, double link_gbps,
                            ccg_cost_report **out) {
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  if (opts)
    memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
  if (!out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_cost_program: out is "
                      "NULL");
  *out = NULL;
  if (!(link_gbps > 0.0))
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "link bandwidth must be > 0 Gbit/s (got %g)", link_gbps);
  ccg__program p;
  CCG_CHECK(ccg__program_load(&p, graphs, n, &o));
  size_t total = 0;
  for (int q = 0; q < p.world; q++)
    total += p.n_ev[q];
  ccg_cost_report *r = calloc(1, sizeof *r);
  ccg_status st = CCG_STATUS_OK;
  if (r) {
    r->items = calloc(total ? total : 1, sizeof *r->items);
    r->rank_bytes = calloc((size_t)p.world, sizeof(double));
    r->rank_bus_bytes = calloc((size_t)p.world, sizeof(double));
  }
  if (!r || !r->items || !r->rank_bytes || !r->rank_bus_bytes) {
    st = ccg__error(NULL, CCG_STATUS_OOM, "cost: out of memory");
  } else {
    r->n_ranks = p.world;
    r->link_bytes_per_s = link_gbps * 1e9 / 8.0;
    st = fill(&p, r, r->link_bytes_per_s);
  }
  ccg__program_release(&p);
  if (st != CCG_STATUS_OK) {
    ccg_cost_report_free(r);
    return st;
  }
  *out = r;
  return CCG_STATUS_OK;
}
