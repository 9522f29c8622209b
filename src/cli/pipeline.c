/* ccgraph shard with a pipeline axis in the mesh: the (tp-sharded) model
 * split into stages (ccg_pipeline_split), every rank's model its stage's
 * graph, written as <name>.rank<r>.onnx. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_pipeline_options(const command *self, const cli_pp_args *a,
                         ccg_pipeline_options *po) {
  *po = (ccg_pipeline_options)CCG_PIPELINE_OPTIONS_INIT;
  po->axis = a->axis;
  po->stages = a->stages;
  if (a->microbatches) {
    char *end;
    long long m = strtoll(a->microbatches, &end, 10);
    if (*end || end == a->microbatches || m < 1 || m > 4096)
      return usage_error(self, "--microbatches '%s': give 1 to 4096",
                         a->microbatches);
    po->microbatches = m;
  }
  if (a->schedule && ccg_pipeline_schedule_parse(a->schedule, &po->schedule))
    return usage_error(self, "--schedule '%s': give gpipe or 1f1b",
                       a->schedule);
  if ((a->stages || a->microbatches || a->schedule) && !a->in_mesh)
    return usage_error(self,
                       "--stages, --microbatches and --schedule need the "
                       "pipeline axis '%s' in --mesh",
                       a->axis ? a->axis : "pp");
  return -1;
}

static void print_report(const ccg_pipeline_report *r,
                         const ccg_pipeline_options *po, const char *out,
                         const char *name, int64_t world, bool json) {
  double bubble =
      ccg_pipeline_bubble(r->stage_cost, r->n_stages, po->microbatches);
  if (json) {
    json_t *st = json_array();
    for (int64_t s = 0; s < r->n_stages; s++)
      json_array_append_new(st, json_pack("{s:s,s:s,s:f}", "first_layer",
                                          r->first_layer[s], "last_layer",
                                          r->last_layer[s], "cost",
                                          r->stage_cost[s]));
    print_json(json_pack("{s:s,s:I,s:I,s:I,s:s,s:o,s:I,s:f}", "model", name,
                         "ranks", (json_int_t)world, "stages",
                         (json_int_t)r->n_stages, "microbatches",
                         (json_int_t)po->microbatches, "schedule",
                         ccg_pipeline_schedule_name(po->schedule), "stage_list",
                         st, "sends", (json_int_t)r->n_p2p, "bubble", bubble));
    return;
  }
  printf("pipeline: %lld stages of %zu layers, %lld microbatch%s, %s\n",
         (long long)r->n_stages, r->n_layers, (long long)po->microbatches,
         po->microbatches == 1 ? "" : "es",
         ccg_pipeline_schedule_name(po->schedule));
  for (int64_t s = 0; s < r->n_stages; s++)
    printf("  stage %lld: %s .. %s (estimated %.3g FLOPs+bytes)\n",
           (long long)s, r->first_layer[s], r->last_layer[s], r->stage_cost[s]);
  printf("  %zu sends between stages; bubble fraction %.3f\n", r->n_p2p,
         bubble);
  printf("wrote %s/%s.rank0.onnx .. rank%lld.onnx\n", out, name,
         (long long)(world - 1));
}

int cli_shard_pipeline(const command *self, ccg_graph *g,
                       const ccg_pipeline_options *po, const char *out,
                       const char *name, const ccg_onnx_export_options *eo,
                       bool json) {
  ccg_graph **stages = NULL;
  size_t n = 0;
  ccg_pipeline_report rep;
  cli_progress("pipeline stages", 0, 1);
  ccg_status st = ccg_pipeline_split(g, po, &stages, &n, &rep);
  cli_progress_done();
  if (st != CCG_STATUS_OK)
    return cli_fail(self, cli_status_code(st), "%s", ccg_last_error(g));
  const ccg_mesh *m = ccg_graph_mesh(g);
  int64_t world = ccg_mesh_world_size(m);
  int ax = ccg_mesh_axis(m, po->axis ? po->axis : "pp");
  cli_program p;
  memset(&p, 0, sizeof p);
  p.graphs = calloc((size_t)world, sizeof *p.graphs);
  int rc = EXIT_OK;
  if (!p.graphs)
    rc = cli_fail(self, EXIT_RUNTIME, "out of memory");
  for (int64_t r = 0; rc == EXIT_OK && r < world; r++) {
    int64_t c[CCG_MAX_MESH_AXES];
    ccg_mesh_coords(m, r, c);
    p.graphs[r] = stages[c[ax]];
  }
  if (rc == EXIT_OK) {
    p.n = (size_t)world;
    p.per_rank = true;
    snprintf(p.name, sizeof p.name, "%s", name);
    cli_progress("exporting", 0, 1);
    rc = cli_write_program(self, &p, out, eo);
    cli_progress_done();
  }
  if (rc == EXIT_OK)
    print_report(&rep, po, out, name, world, json);
  free(p.graphs); /* the stages' graphs, freed below */
  ccg_pipeline_stages_free(stages, n);
  return rc;
}
