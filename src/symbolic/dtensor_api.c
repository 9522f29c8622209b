/* The typed DTensor calls: each is ccg_mapping_apply of its "dtensor.*"
 * entry with the same parameters, so typed and by-name calls insert the
 * same nodes with the same tags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolic/dtensor_internal.h"

static json_t *layout_json(const ccg_placement *p) {
  ccg__placements pl = {true, 1, {*p}};
  return ccg__emit_layout(&pl);
}

/* ---- typed entry points: ccg_mapping_apply with the same parameters ----- */

static json_t *placements_json(const ccg_placement *p, int n) {
  ccg__placements pl = {true, n, {{0}}};
  memcpy(pl.p, p, (size_t)n * sizeof *p);
  return ccg__emit_placements(&pl);
}

ccg_status ccg_dtensor_redistribute(ccg_graph *g, ccg_value_id x,
                                    const ccg_placement *from,
                                    const ccg_placement *to,
                                    ccg_value_id *out) {
  const ccg_mesh *m = g ? ccg_graph_mesh(g) : NULL;
  if (!m || !to)
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "dtensor.redistribute: a graph with a mesh and target "
                      "placements are required");
  json_t *p = ccg__mset(json_object(), "to", placements_json(to, m->ndims));
  if (from)
    p = ccg__mset(p, "from", placements_json(from, m->ndims));
  return ccg__mapply1(g, "dtensor.redistribute", p, x, out);
}

ccg_status ccg_dtensor_apply_helper(ccg_graph *g, ccg_dtensor_helper h,
                                    ccg_value_id x, const char *mesh_axis,
                                    int64_t dim, ccg_value_id *y) {
  if ((unsigned)h >= CCG_DTENSOR_HELPER_COUNT)
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "dtensor helper %d does not exist", (int)h);
  char name[64];
  snprintf(name, sizeof name, "dtensor.%s", ccg_dtensor_helper_name(h));
  json_t *p = ccg__mset(json_object(), "mesh_axis",
                        json_string(mesh_axis ? mesh_axis : "tp"));
  if (h == CCG_DTENSOR_MAKE_INPUT_SHARD_1D ||
      h == CCG_DTENSOR_MAKE_OUTPUT_SHARD_1D)
    p = ccg__mset(p, "dim", json_integer(dim));
  return ccg__mapply1(g, name, p, x, y);
}

static const char *const helper_names[] = {
    "make_input_shard_1d",        "make_input_shard_1d_last_dim",
    "make_input_replicate_1d",    "make_input_reshard_replicate",
    "make_output_shard_1d",       "make_output_replicate_1d",
    "make_output_tensor",         "make_sharded_output_tensor",
    "make_output_reshard_tensor",
};
_Static_assert(sizeof helper_names / sizeof helper_names[0] ==
                   CCG_DTENSOR_HELPER_COUNT,
               "one name per helper");

const char *ccg_dtensor_helper_name(ccg_dtensor_helper h) {
  return (unsigned)h < CCG_DTENSOR_HELPER_COUNT ? helper_names[h] : NULL;
}

/* The styles' options as params. */
static json_t *style_json(const ccg_dtensor_style_options *o, bool seq) {
  ccg_dtensor_style_options d = CCG_DTENSOR_STYLE_OPTIONS_INIT;
  if (o && o->size > sizeof(size_t))
    memcpy(&d, o, o->size < sizeof d ? o->size : sizeof d);
  json_t *p = ccg__mset(json_object(), "mesh_axis",
                        json_string(d.mesh_axis ? d.mesh_axis : "tp"));
  if (seq) {
    p = ccg__mset(p, "sequence_dim", json_integer(d.sequence_dim));
    p = ccg__mset(p, "epsilon", json_real(d.epsilon));
  }
  if (!seq && d.has_input_layout)
    p = ccg__mset(p, "input_layouts", layout_json(&d.input_layout));
  if (!seq && d.has_output_layout)
    p = ccg__mset(p, "output_layouts", layout_json(&d.output_layout));
  if (o)
    p = ccg__mset(p, "use_local_output", json_boolean(d.use_local_output));
  return p;
}

/* Inputs without the absent (CCG_NONE) optional ones. */
static size_t pack(const ccg_value_id *v, size_t n, ccg_value_id *out) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i] != CCG_NONE)
      out[k++] = v[i];
  return k;
}

/* A Linear or LayerNorm style on x and its two parameters (an absent
 * CCG_NONE bias left out). */
static ccg_status style3(ccg_graph *g, const char *name, ccg_value_id x,
                         ccg_value_id a, ccg_value_id b,
                         const ccg_dtensor_style_options *opt, bool seq,
                         ccg_value_id *y) {
  ccg_value_id in[3];
  size_t n = pack((ccg_value_id[]){x, a, b}, 3, in);
  return ccg__mapply(g, name, style_json(opt, seq), in, n, y, 1, NULL);
}

ccg_status ccg_dtensor_colwise_parallel(ccg_graph *g, ccg_value_id x,
                                        ccg_value_id w, ccg_value_id b,
                                        const ccg_dtensor_style_options *opt,
                                        ccg_value_id *y) {
  return style3(g, "dtensor.colwise_parallel", x, w, b, opt, false, y);
}

ccg_status ccg_dtensor_rowwise_parallel(ccg_graph *g, ccg_value_id x,
                                        ccg_value_id w, ccg_value_id b,
                                        const ccg_dtensor_style_options *opt,
                                        ccg_value_id *y) {
  return style3(g, "dtensor.rowwise_parallel", x, w, b, opt, false, y);
}

ccg_status ccg_dtensor_sequence_parallel(ccg_graph *g, ccg_value_id x,
                                         ccg_value_id scale, ccg_value_id bias,
                                         const ccg_dtensor_style_options *opt,
                                         ccg_value_id *y) {
  return style3(g, "dtensor.sequence_parallel", x, scale, bias, opt, true, y);
}

ccg_status ccg_dtensor_pairwise_parallel(ccg_graph *g, ccg_value_id x,
                                         ccg_value_id w1, ccg_value_id b1,
                                         ccg_value_id w2, ccg_value_id b2,
                                         const ccg_dtensor_style_options *opt,
                                         ccg_value_id *y) {
  if ((b1 == CCG_NONE) != (b2 == CCG_NONE))
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "dtensor.pairwise_parallel: give both biases or none");
  ccg_value_id in[5];
  size_t n = pack((ccg_value_id[]){x, w1, b1, w2, b2}, 5, in);
  const char *axis = opt && opt->mesh_axis ? opt->mesh_axis : "tp";
  json_t *p = ccg__mset(json_object(), "mesh_axis", json_string(axis));
  return ccg__mapply(g, "dtensor.pairwise_parallel", p, in, n, y, 1, NULL);
}
