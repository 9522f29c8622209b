/* ccgraph passes: pipeline parallelism. Splits a model (unsharded, or the
 * SPMD graph of the shard pass) into contiguous stages of its repeated
 * layer modules along the pipeline mesh axis: one SPMD graph per stage,
 * joined by Send/Recv, with M microbatches scheduled GPipe or 1F1B and the
 * schedule written into each stage graph (node slots, CCG_META_SLOT).
 * docs/parallelism.md, "Pipeline parallelism", describes the rules. */
#ifndef CCGRAPH_PIPELINE_H
#define CCGRAPH_PIPELINE_H

#include "ccgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CCG_PIPELINE_MAX_STAGES 64

typedef enum ccg_pipeline_schedule {
  CCG_PIPELINE_GPIPE, /* every forward, then every backward */
  CCG_PIPELINE_1F1B,  /* warm-up forwards, then one forward one backward */
  CCG_PIPELINE_SCHEDULE_COUNT
} ccg_pipeline_schedule;

typedef struct ccg_pipeline_options {
  size_t size;          /* sizeof(ccg_pipeline_options) */
  const char *axis;     /* the pipeline mesh axis; NULL = "pp" */
  const char *stages;   /* "h.0-h.5|h.6-h.11": the layers of each stage;
                           NULL = balanced by estimated compute */
  int64_t microbatches; /* M >= 1; the batch (dim 0 of the inputs that
                           carry it) must divide by M */
  ccg_pipeline_schedule schedule;
} ccg_pipeline_options;
#define CCG_PIPELINE_OPTIONS_INIT                                              \
  { sizeof(ccg_pipeline_options), NULL, NULL, 1, CCG_PIPELINE_1F1B }

/* What the split did: per stage its first and last layer (module paths;
 * borrowed from the report) and its estimated cost (FLOPs + bytes of one
 * forward of the whole batch). */
typedef struct ccg_pipeline_report {
  int64_t n_stages;
  size_t n_layers;
  const char *first_layer[CCG_PIPELINE_MAX_STAGES];
  const char *last_layer[CCG_PIPELINE_MAX_STAGES];
  double stage_cost[CCG_PIPELINE_MAX_STAGES];
  size_t n_p2p; /* Send nodes over all stages */
  char text[CCG_PIPELINE_MAX_STAGES * 2][256];
} ccg_pipeline_report;

/* Splits g (unchanged; it must have a mesh with the pipeline axis, whose
 * size is the stage count) into one graph per stage. Layers are the
 * modules h.N, layers.N, layer.N, block.N and blocks.N found from node
 * module paths; nodes before the first layer go to stage 0, after the last
 * to the last stage; a value used on a later stage is sent there (one
 * message per stage boundary and microbatch). Each stage graph keeps g's
 * mesh, its own parameters (with their per-rank data) and the graph inputs
 * it reads; the last stage has g's outputs (a scalar output the mean or the
 * sum of its microbatches' values, as its reduction over the batch is a
 * mean or a sum; others are concatenated on dim 0). Errors (on g): a stage
 * spec naming a missing layer, more stages than layers, a batch M does not
 * divide, a reshape microbatching cannot rewrite, a scalar output that is
 * neither a mean nor a sum over the batch, a symbolic shape crossing a
 * stage boundary (pin it first: ccg_graph_pin_dims). "new":
 * *stages (n entries) is freed with ccg_pipeline_stages_free. */
CCG_API ccg_status ccg_pipeline_split(ccg_graph *g,
                                      const ccg_pipeline_options *opts,
                                      ccg_graph ***stages, size_t *n,
                                      ccg_pipeline_report *report);
CCG_API void ccg_pipeline_stages_free(ccg_graph **stages, size_t n);

/* "gpipe" or "1f1b"; -1 for anything else. */
CCG_API int ccg_pipeline_schedule_parse(const char *s,
                                        ccg_pipeline_schedule *out);
CCG_API const char *ccg_pipeline_schedule_name(ccg_pipeline_schedule s);

/* The step index (0-based) of microbatch m's forward or backward on stage
 * `stage` of p with M microbatches; the slot written is the step + 1. */
CCG_API int64_t ccg_pipeline_step(ccg_pipeline_schedule s, int64_t p,
                                  int64_t stage, int64_t M, int64_t m,
                                  bool backward);

/* The bubble fraction of a pipeline of p stages whose forward+backward of
 * one microbatch costs stage_cost[s] on stage s, with M microbatches: the
 * idle share of the busiest-bound step time T = sum(cost) + (M-1)max(cost),
 * 1 - M sum(cost) / (p T). Equal stages give (p-1)/(M+p-1) (GPipe and 1F1B
 * alike). */
CCG_API double ccg_pipeline_bubble(const double *stage_cost, int64_t p,
                                   int64_t M);

/* What a stage graph of ccg_pipeline_split says of its pipeline (node
 * metadata CCG_META_PIPELINE on its Send/Recv nodes: "stage=S,stages=P,
 * microbatches=M,schedule=1f1b"). */
#define CCG_META_PIPELINE "ccgraph.pipeline"
typedef struct ccg_pipeline_info {
  int64_t stage, n_stages, microbatches;
  ccg_pipeline_schedule schedule;
} ccg_pipeline_info;
/* True and *out filled when g is such a stage graph. */
CCG_API bool ccg_pipeline_info_of(const ccg_graph *g, ccg_pipeline_info *out);

/* The estimated compute of node n (FLOPs: 2MNK for MatMul and Gemm, one per
 * output element otherwise) plus the bytes of its outputs. */
CCG_API double ccg_node_cost(ccg_graph *g, ccg_node_id n);

#ifdef __cplusplus
}
#endif
#endif
