/* Private: what dtensor.c and dtensor_styles.c share: the params of every
 * dtensor.* entry, placement parameters, split sizes, and the one-axis-at-
 * a-time redistribution all of them build on. */
#ifndef CCG_SYMBOLIC_DTENSOR_INTERNAL_H
#define CCG_SYMBOLIC_DTENSOR_INTERNAL_H

#include "ccgraph/dtensor.h"
#include "graph/internal.h"
#include "symbolic/internal.h"

/* Placements given as params: one per mesh axis ("Shard(0)" or a list);
 * set == false for null. */
typedef struct ccg__placements {
  bool set;
  int n;
  ccg_placement p[CCG_MAX_MESH_AXES];
} ccg__placements;

/* One params struct for every dtensor.* entry; each entry's spec table
 * picks its keys. */
typedef struct ccg__dt_params {
  const char *mesh_axis;
  ccg__placements from, to, grad;              /* redistribute */
  ccg__placements input_layout, output_layout; /* styles: one placement */
  bool use_local_output;
  int64_t sequence_dim;
  double epsilon;
  int64_t dim; /* make_*_shard_1d */
} ccg__dt_params;

/* DTensor's notation, as plans write it: "Replicate", "Shard(-1)" (dims
 * -8..7), "Partial" or "Partial(avg)". False if the text is not one. */
bool ccg__layout_parse(const char *s, ccg_placement *p);

/* CUSTOM parameter kinds: a placement list (string, list of strings, or
 * null) and a single layout (a string). */
bool ccg__parse_placements(const json_t *v, void *field, char *why, size_t n);
json_t *ccg__emit_placements(const void *field);
bool ccg__parse_layout(const json_t *v, void *field, char *why, size_t n);
json_t *ccg__emit_layout(const void *field);

/* Rank-dependent split sizes of dim d over mesh axis `axis` (w ranks), read
 * from a symbol "axis{..}": true with sizes written, else false. */
bool ccg__rank_sizes(ccg_dim d, const char *axis, int64_t w, int64_t *sizes);
/* torch.chunk sizes of n over w ranks; false (nothing written) when w
 * divides n (an even split needs no list). */
bool ccg__chunk_sizes(int64_t n, int64_t w, int64_t *sizes);

/* Redistributes x from `from` to `to` (mesh ndims entries each, Shard dims
 * may be negative), one mesh axis at a time; intermediate and final values
 * are placed. hint: a shape whose rank-dependent dims give the split sizes
 * when cutting (NULL = torch.chunk). *out == x when nothing moves. */
ccg_status ccg__redistribute(ccg__mcall *c, ccg_value_id x,
                             const ccg_placement *from, const ccg_placement *to,
                             const ccg_shape *hint, ccg_value_id *out);

/* The one mesh axis `name` of a helper or a style: its index in *axis
 * (after ccg__mgroup's checks), failing naming the mapping and mesh_axis
 * when it lists several axes. */
ccg_status ccg__dt_axis(ccg__mcall *c, const char *name, int *axis);

/* W = 1 and no-op redistributions still leave a tagged node: an Identity of
 * *v (keeping its placements) when the rule added no node since `mark`. */
ccg_status ccg__dt_ensure_node(ccg__mcall *c, size_t mark, ccg_value_id *v);

/* The styles' rules (dtensor_styles.c). */
ccg_status ccg__dt_colwise_fwd(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, ccg_value_id *out, size_t *n_out);
ccg_status ccg__dt_colwise_bwd(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, const ccg_value_id *out,
                               const ccg_value_id *gout, size_t n_out,
                               ccg_value_id *gin);
ccg_status ccg__dt_rowwise_fwd(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, ccg_value_id *out, size_t *n_out);
ccg_status ccg__dt_rowwise_bwd(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, const ccg_value_id *out,
                               const ccg_value_id *gout, size_t n_out,
                               ccg_value_id *gin);
ccg_status ccg__dt_seq_fwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                           ccg_value_id *out, size_t *n_out);
ccg_status ccg__dt_seq_bwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                           const ccg_value_id *out, const ccg_value_id *gout,
                           size_t n_out, ccg_value_id *gin);
ccg_status ccg__dt_pairwise_fwd(ccg__mcall *c, const ccg_value_id *in,
                                size_t n_in, ccg_value_id *out, size_t *n_out);
ccg_status ccg__dt_pairwise_bwd(ccg__mcall *c, const ccg_value_id *in,
                                size_t n_in, const ccg_value_id *out,
                                const ccg_value_id *gout, size_t n_out,
                                ccg_value_id *gin);

#endif
