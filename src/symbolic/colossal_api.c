/* The typed ColossalAI calls: each is ccg_mapping_apply of its
 * "colossal.*" entry with the same parameters, so typed and by-name calls
 * insert the same nodes with the same tags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccgraph/colossal.h"
#include "graph/internal.h"
#include "symbolic/internal.h"

#define MAX_OUT CCG__MAPPLY_MAX_OUT

static json_t *group_params(const char *group) {
  return ccg__mparams_group(group ? group : "tp");
}

ccg_status ccg_colossal_all_gather(ccg_graph *g, ccg_value_id x,
                                   const char *group, int64_t dim,
                                   ccg_value_id *out) {
  json_t *p = group_params(group);
  p = ccg__mset(p, "dim", json_integer(dim));
  return ccg__mapply1(g, "colossal.all_gather", p, x, out);
}

ccg_status ccg_colossal_reduce_scatter(ccg_graph *g, ccg_value_id x,
                                       const char *group, int64_t dim,
                                       ccg_reduce_op op, ccg_value_id *out) {
  json_t *p = group_params(group);
  p = ccg__mset(p, "dim", json_integer(dim));
  p = ccg__mset(p, "op", json_string(ccg_reduce_op_name(op)));
  return ccg__mapply1(g, "colossal.reduce_scatter", p, x, out);
}

ccg_status ccg_colossal_all_reduce(ccg_graph *g, ccg_value_id x,
                                   const char *group, ccg_reduce_op op,
                                   ccg_value_id *out) {
  json_t *p = group_params(group);
  p = ccg__mset(p, "op", json_string(ccg_reduce_op_name(op)));
  return ccg__mapply1(g, "colossal.all_reduce", p, x, out);
}

ccg_status ccg_colossal_broadcast(ccg_graph *g, ccg_value_id x,
                                  const char *group, int64_t src,
                                  ccg_value_id *out) {
  json_t *p = group_params(group);
  p = ccg__mset(p, "src", json_integer(src));
  return ccg__mapply1(g, "colossal.broadcast", p, x, out);
}

ccg_status ccg_colossal_reduce(ccg_graph *g, ccg_value_id x, const char *group,
                               int64_t dst, ccg_reduce_op op,
                               ccg_value_id *out) {
  json_t *p = group_params(group);
  p = ccg__mset(p, "dst", json_integer(dst));
  p = ccg__mset(p, "op", json_string(ccg_reduce_op_name(op)));
  return ccg__mapply1(g, "colossal.reduce", p, x, out);
}

ccg_status ccg_colossal_ring_forward(ccg_graph *g, ccg_value_id x,
                                     const char *group, ccg_value_id *out) {
  return ccg__mapply1(g, "colossal.ring_forward", group_params(group), x, out);
}

/* ---- pipeline -------------------------------------------------------------
 */

static json_t *shape_json(const ccg_shape *s) {
  if (!s)
    return json_null();
  json_t *a = json_array();
  for (int i = 0; a && i < s->rank; i++)
    if (json_array_append_new(a, json_integer(s->dims[i].size)) != 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

/* The stage's params; shapes must be static (INVALID_ARG naming them). */
static ccg_status stage_params(ccg_graph *g, const char *name,
                               const ccg_colossal_stage *in, json_t **out) {
  ccg_colossal_stage s = CCG_COLOSSAL_STAGE_INIT;
  if (in && in->size > sizeof(size_t))
    memcpy(&s, in, in->size < sizeof s ? in->size : sizeof s);
  const ccg_shape *shapes[2] = {s.input_tensor_shape, s.output_grad_shape};
  for (int i = 0; i < 2; i++)
    if (shapes[i] && !ccg_shape_is_static(shapes[i]))
      return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                        "%s: %s must be static (Recv allocates it)", name,
                        i ? "output_grad_shape" : "input_tensor_shape");
  json_t *p = group_params(s.group ? s.group : "pp");
  p = ccg__mset(p, "stage", json_integer(s.stage));
  p = ccg__mset(p, "num_stages", json_integer(s.num_stages));
  p = ccg__mset(p, "input_tensor_shape", shape_json(s.input_tensor_shape));
  p = ccg__mset(p, "output_grad_shape", shape_json(s.output_grad_shape));
  p = ccg__mset(p, "dtype",
                json_string(ccg_dtype_name(
                    s.dtype == CCG_DTYPE_UNDEFINED ? CCG_DTYPE_F32 : s.dtype)));
  p = ccg__mset(p, "scatter_gather_tensors",
                json_boolean(s.scatter_gather_tensors));
  p = ccg__mset(p, "tp_group", json_string(s.tp_group ? s.tp_group : "tp"));
  *out = p;
  return CCG_STATUS_OK;
}

/* Whether the stage has a previous / next peer (as the rule decides it; a
 * bad stage is refused by the rule itself). */
static void peers(ccg_graph *g, const ccg_colossal_stage *s, bool *prev,
                  bool *next) {
  const ccg_mesh *m = g ? ccg_graph_mesh(g) : NULL;
  const char *axis = s && s->group ? s->group : "pp";
  int a = m ? ccg_mesh_axis(m, axis) : -1;
  int64_t stage = s ? s->stage : 0;
  *prev = stage > 0;
  *next = a >= 0 && stage < m->sizes[a] - 1;
}

/* A p2p entry: sends `in`, and the received tensors go to *y_prev (from the
 * previous stage) and *y_next (from the next), CCG_NONE where none. */
static ccg_status p2p(ccg_graph *g, const char *name,
                      const ccg_colossal_stage *s, const ccg_value_id *in,
                      size_t n_in, ccg_value_id *y_prev, ccg_value_id *y_next) {
  json_t *p = NULL;
  CCG_CHECK(stage_params(g, name, s, &p));
  ccg_value_id out[MAX_OUT];
  size_t n = 0;
  CCG_CHECK(ccg__mapply(g, name, p, in, n_in, out, MAX_OUT, &n));
  bool prev, next;
  peers(g, s, &prev, &next);
  size_t k = 0;
  if (y_prev)
    *y_prev = prev && k < n ? out[k++] : CCG_NONE;
  if (y_next)
    *y_next = next && k < n ? out[k++] : CCG_NONE;
  return CCG_STATUS_OK;
}

ccg_status ccg_colossal_send_forward(ccg_graph *g, ccg_value_id x,
                                     const ccg_colossal_stage *s) {
  return p2p(g, "colossal.send_forward", s, &x, 1, NULL, NULL);
}

ccg_status ccg_colossal_recv_forward(ccg_graph *g, const ccg_colossal_stage *s,
                                     ccg_value_id *y) {
  return p2p(g, "colossal.recv_forward", s, NULL, 0, y, NULL);
}

ccg_status ccg_colossal_send_backward(ccg_graph *g, ccg_value_id dx,
                                      const ccg_colossal_stage *s) {
  return p2p(g, "colossal.send_backward", s, &dx, 1, NULL, NULL);
}

ccg_status ccg_colossal_recv_backward(ccg_graph *g, const ccg_colossal_stage *s,
                                      ccg_value_id *dy) {
  return p2p(g, "colossal.recv_backward", s, NULL, 0, NULL, dy);
}

ccg_status ccg_colossal_send_forward_recv_backward(ccg_graph *g, ccg_value_id x,
                                                   const ccg_colossal_stage *s,
                                                   ccg_value_id *dy) {
  return p2p(g, "colossal.send_forward_recv_backward", s, &x, 1, NULL, dy);
}

ccg_status ccg_colossal_send_backward_recv_forward(ccg_graph *g,
                                                   ccg_value_id dx,
                                                   const ccg_colossal_stage *s,
                                                   ccg_value_id *y) {
  return p2p(g, "colossal.send_backward_recv_forward", s, &dx, 1, y, NULL);
}

ccg_status ccg_colossal_send_forward_recv_forward(ccg_graph *g, ccg_value_id x,
                                                  const ccg_colossal_stage *s,
                                                  ccg_value_id *y) {
  return p2p(g, "colossal.send_forward_recv_forward", s, &x, 1, y, NULL);
}

ccg_status ccg_colossal_send_backward_recv_backward(ccg_graph *g,
                                                    ccg_value_id dx,
                                                    const ccg_colossal_stage *s,
                                                    ccg_value_id *dy) {
  return p2p(g, "colossal.send_backward_recv_backward", s, &dx, 1, NULL, dy);
}

ccg_status ccg_colossal_send_forward_backward_recv_forward_backward(
    ccg_graph *g, ccg_value_id x, ccg_value_id dx, const ccg_colossal_stage *s,
    ccg_value_id *y, ccg_value_id *dy) {
  ccg_value_id in[2] = {x, dx};
  return p2p(g, "colossal.send_forward_backward_recv_forward_backward", s, in,
             2, y, dy);
}

/* The tensor-meta entries' params: only the stage keys belong to them. */
static ccg_status meta_params(ccg_graph *g, const char *name,
                              const ccg_colossal_stage *s, json_t **out) {
  json_t *p = NULL;
  CCG_CHECK(stage_params(g, name, s, &p));
  json_t *q = json_object();
  const char *keys[] = {"group", "stage", "num_stages"};
  for (int i = 0; p && i < 3; i++)
    q = ccg__mset(q, keys[i], json_incref(json_object_get(p, keys[i])));
  json_decref(p);
  *out = q;
  return CCG_STATUS_OK;
}

ccg_status ccg_colossal_send_tensor_meta(ccg_graph *g, const ccg_value_id *xs,
                                         size_t n,
                                         const ccg_colossal_stage *s) {
  json_t *q = NULL;
  CCG_CHECK(meta_params(g, "colossal.send_tensor_meta", s, &q));
  return ccg__mapply(g, "colossal.send_tensor_meta", q, xs, n, NULL, MAX_OUT,
                     NULL);
}

ccg_status ccg_colossal_recv_tensor_meta(ccg_graph *g, const int64_t *ndims,
                                         size_t n, const ccg_colossal_stage *s,
                                         ccg_value_id *outs, size_t *n_out) {
  json_t *q = NULL;
  CCG_CHECK(meta_params(g, "colossal.recv_tensor_meta", s, &q));
  json_t *a = json_array();
  for (size_t i = 0; a && ndims && i < n; i++)
    if (json_array_append_new(a, json_integer(ndims[i])) != 0) {
      json_decref(a);
      a = NULL;
    }
  q = ccg__mset(q, "ndims", a);
  return ccg__mapply(g, "colossal.recv_tensor_meta", q, NULL, 0, outs, MAX_OUT,
                     n_out);
}
