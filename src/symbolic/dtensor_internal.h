/* Private: what dtensor.c, dtensor_styles.c and colossal.c share: one
 * application of a mapping (its nodes tagged, or rolled back on failure),
 * placement helpers and split sizes. */
#ifndef CCG_SYMBOLIC_DTENSOR_INTERNAL_H
#define CCG_SYMBOLIC_DTENSOR_INTERNAL_H

#include "ccgraph/dtensor.h"
#include "graph/internal.h"

/* One application of a mapping: nodes added between begin and end get the
 * tag {mapping, instance, params, backward}; a failure removes them. */
typedef struct ccg__app {
  ccg_graph *g;
  ccg__mark mark;
  const char *mapping;
  char params[512];
  bool backward;
} ccg__app;

void ccg__app_begin(ccg__app *a, ccg_graph *g, const char *mapping,
                    bool backward);
/* Finishes: on success tags the new nodes (adding an Identity of *out when
 * the mapping inserted none, so that W = 1 stays visible and tagged) and
 * returns OK; on failure rolls back and returns st. */
ccg_status ccg__app_end(ccg__app *a, ccg_status st, ccg_value_id *out);
/* Appends `"key":value` to the params JSON text (value already JSON). */
void ccg__app_param(ccg__app *a, const char *key, const char *json_value);
void ccg__app_param_int(ccg__app *a, const char *key, int64_t v);
void ccg__app_param_str(ccg__app *a, const char *key, const char *v);
void ccg__app_param_placements(ccg__app *a, const char *key,
                               const ccg_placement *p, int n);

/* The mesh axis index of `name` on g's mesh, or INVALID_ARG naming the
 * mapping, the axis and the mesh. */
ccg_status ccg__mesh_axis_of(ccg_graph *g, const char *mapping,
                             const char *name, int *axis);
/* x's placements, or all Replicate when it has none (*had = false). */
void ccg__placements_or_replicate(const ccg_graph *g, ccg_value_id x,
                                  ccg_placement *p, bool *had);

/* Rank-dependent split sizes of dim `d` over mesh axis `axis` (W ranks):
 * from a symbol "axis{..}" (true, sizes written), else false. */
bool ccg__rank_sizes(ccg_dim d, const char *axis, int64_t w, int64_t *sizes);
/* torch.chunk sizes of `n` over w ranks; false (nothing written) when w
 * divides n (an even split needs no list). */
bool ccg__chunk_sizes(int64_t n, int64_t w, int64_t *sizes);

/* Redistribution on one mesh axis of the graph (the core of
 * ccg_dtensor_redistribute). hint: a shape whose dim, if rank-dependent over
 * that axis, gives split sizes when sharding (NULL = torch.chunk). */
ccg_status ccg__redistribute(ccg_graph *g, const char *mapping, ccg_value_id x,
                             const ccg_placement *from, const ccg_placement *to,
                             const ccg_shape *hint, ccg_value_id *out);

#endif
