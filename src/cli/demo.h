/* Private to the tool: the demo's model (demo_model.c), shared with the
 * demo command (demo.c). */
#ifndef CCG_CLI_DEMO_H
#define CCG_CLI_DEMO_H

#include <stdint.h>

#include "ccgraph/ccgraph.h"

typedef struct demo_sizes {
  int64_t seq, batch, hidden, heads, ffn;
} demo_sizes;

/* The block's parameters, in this order (names: demo_param_names). */
enum {
  DEMO_LN1_S,
  DEMO_LN1_B,
  DEMO_QKV_W,
  DEMO_QKV_B,
  DEMO_PROJ_W,
  DEMO_PROJ_B,
  DEMO_LN2_S,
  DEMO_LN2_B,
  DEMO_FC1_W,
  DEMO_FC1_B,
  DEMO_FC2_W,
  DEMO_FC2_B,
  DEMO_NP
};
extern const char *const demo_param_names[DEMO_NP];

/* An f32 tensor owning its data (malloc). */
typedef struct demo_tensor {
  int rank;
  int64_t dims[2];
  float *data;
} demo_tensor;

/* The unsharded parameters p[DEMO_NP] from a seed; -1 on OOM (free what
 * was made with demo_tensors_free either way). */
int demo_params_new(const demo_sizes *z, uint32_t seed, demo_tensor *p);
void demo_tensors_free(demo_tensor *p, int n);

/* The shape of a rank's part (of w) of parameter i into out (data NULL);
 * returns its element count. */
size_t demo_shard_dims(const demo_sizes *z, int i, int w, demo_tensor *out);
/* Rank r's part (of w) of parameter i, or of its gradient, cut from the
 * unsharded `full` into *out (new data); -1 on OOM. */
int demo_shard(const demo_sizes *z, int i, const float *full, int w, int r,
               demo_tensor *out);

/* The block on mesh tp=w (sequence parallel when w > 1), each rank's
 * parameter shards as its own initializer data: inputs x and dy
 * [S/w, B, H] (S when w = 1), outputs "y", "loss" = sum(y * dy) and the
 * backward's "grad/<name>" of every parameter and of x. Errors are
 * printed. */
ccg_status demo_build(const demo_sizes *z, int w, const demo_tensor *full,
                      ccg_graph **out);

#endif
