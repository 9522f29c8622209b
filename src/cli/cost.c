/* ccgraph cost: bytes each collective moves, nccl-tests bus bytes, and the
 * communication time of one step at a link bandwidth (ccg_cost_program). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define DEFAULT_GBPS 100.0

static int cmd_cost(int argc, char **argv);

const command cli_cost_command = {
    "cost", "communication bytes and time per collective and per step",
    "usage: ccgraph cost DIR|MODEL.onnx... [--link-gbps X] [--name NAME]\n"
    "                    [--stage-axis AXIS] [--dims NAME=V,...] [--json]\n"
    "\n"
    "For every collective of the program (once per group; a Send once, on\n"
    "its sender): the message size S as nccl-tests counts it, the bus factor\n"
    "(AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n;\n"
    "Broadcast, Reduce, Send/Recv 1), bus bytes S*factor and the time at the\n"
    "link bandwidth. Per step: each rank's bus bytes and the largest, whose\n"
    "time is the step's estimate (calls do not overlap), and per mesh axis\n"
    "the busiest rank's bus bytes over that axis alone (a data-parallel\n"
    "axis: its gradient reductions). Models are read as\n"
    "`ccgraph verify` reads them; every dim must be a number (--dims).\n"
    "The bytes S summed per mesh axis of the calls follow (axes joined by\n"
    "'+' for a call over several).\n"
    "For the stages of a pipeline (ccgraph shard --mesh pp=P,...) also the\n"
    "estimated compute of each stage, the bubble fraction of its schedule\n"
    "(1 - M sum(c) / (P (sum(c) + (M-1) max(c))) for stage costs c; equal\n"
    "stages give (P-1)/(M+P-1)) and the bytes sent between stages.\n"
    "  --link-gbps X      link (bus) bandwidth in Gbit/s (default 100)\n"
    "  --name NAME        the program in a folder holding several\n"
    "  --stage-axis AXIS  the models are the stages along mesh axis AXIS\n"
    "  --dims NAME=V,...  values of named dims (batch=8,seq=128)\n"
    "  --json             one JSON document on stdout\n",
    cmd_cost};

static const char *axis_name(const ccg_mesh *m, int a) {
  return m && a < m->ndims ? m->names[a] : "?";
}

static json_t *cost_json(const ccg_cost_report *r, double gbps,
                         const ccg_mesh *m) {
  json_t *items = json_array(), *ranks = json_array(), *axes = json_object();
  for (int a = 0; a < r->n_axes; a++)
    json_object_set_new(axes, axis_name(m, a),
                        json_pack("{s:f,s:f,s:f}", "bytes", r->axis_bytes[a],
                                  "bus_bytes", r->axis_bus_bytes[a], "time_s",
                                  r->axis_bus_bytes[a] / r->link_bytes_per_s));
  for (size_t i = 0; i < r->n_items; i++) {
    const ccg_cost_item *it = &r->items[i];
    json_array_append_new(
        items, json_pack("{s:s,s:s,s:i,s:i,s:f,s:f,s:f,s:f}", "op",
                         ccg_op_name(it->op), "node", it->node, "first_rank",
                         it->first_rank, "group_size", it->group_size, "bytes",
                         it->bytes, "bus_factor", it->bus_factor, "bus_bytes",
                         it->bus_bytes, "time_s", it->time_s));
  }
  for (int q = 0; q < r->n_ranks; q++)
    json_array_append_new(
        ranks, json_pack("{s:i,s:f,s:f,s:f}", "rank", q, "bytes",
                         r->rank_bytes[q], "bus_bytes", r->rank_bus_bytes[q],
                         "time_s", r->rank_bus_bytes[q] / r->link_bytes_per_s));
  return json_pack("{s:f,s:f,s:o,s:o,s:o,s:f,s:{s:f,s:f}}", "link_gbps", gbps,
                   "link_bytes_per_s", r->link_bytes_per_s, "collectives",
                   items, "ranks", ranks, "axes", axes, "multi_axis_bus_bytes",
                   r->multi_axis_bus_bytes, "step", "bus_bytes",
                   r->step_bus_bytes, "time_s", r->step_time_s);
}

static void cost_text(const ccg_cost_report *r, double gbps,
                      const ccg_mesh *m) {
  printf("%-18s %-40s %5s %6s %14s %7s %14s %12s\n", "op", "node", "first",
         "ranks", "bytes", "factor", "bus_bytes", "time_us");
  for (size_t i = 0; i < r->n_items; i++) {
    const ccg_cost_item *it = &r->items[i];
    printf("%-18s %-40s %5d %6d %14.0f %7.4f %14.1f %12.3f\n",
           ccg_op_name(it->op), it->node, it->first_rank, it->group_size,
           it->bytes, it->bus_factor, it->bus_bytes, it->time_s * 1e6);
  }
  printf("\nper rank (bus bytes):");
  for (int q = 0; q < r->n_ranks; q++)
    printf(" %d:%.0f", q, r->rank_bus_bytes[q]);
  printf("\nper axis (busiest rank, calls over that axis alone):");
  for (int a = 0; a < r->n_axes; a++)
    printf(" %s %.0f bus bytes (%.3f us);", axis_name(m, a),
           r->axis_bus_bytes[a],
           r->axis_bus_bytes[a] / r->link_bytes_per_s * 1e6);
  if (r->multi_axis_bus_bytes > 0)
    printf(" several axes %.0f bus bytes;", r->multi_axis_bus_bytes);
  printf("\nstep: %.0f bus bytes on the busiest rank, %.3f us at %g Gbit/s\n",
         r->step_bus_bytes, r->step_time_s * 1e6, gbps);
}

/* A pipeline program's stages (ccg_pipeline_info_of): the estimated
 * compute of each stage's graph, the bubble fraction of its schedule and
 * the bytes its Sends move in a step. False when it is not one. */
typedef struct pp_cost {
  ccg_pipeline_info info;
  double stage_cost[CCG_PIPELINE_MAX_STAGES];
  double bubble, equal_bubble, send_bytes;
} pp_cost;

static bool pipeline_cost(const cli_program *p, const ccg_cost_report *r,
                          pp_cost *c) {
  memset(c, 0, sizeof *c);
  bool seen[CCG_PIPELINE_MAX_STAGES] = {false};
  for (size_t i = 0; i < p->n; i++) {
    ccg_pipeline_info in;
    if (!ccg_pipeline_info_of(p->graphs[i], &in) ||
        in.n_stages > CCG_PIPELINE_MAX_STAGES)
      return false;
    c->info = in;
    if (seen[in.stage])
      continue;
    seen[in.stage] = true;
    for (ccg_node_id n = 0; n < ccg_graph_num_nodes(p->graphs[i]); n++)
      c->stage_cost[in.stage] += ccg_node_cost(p->graphs[i], n);
  }
  if (p->n == 0)
    return false;
  for (size_t i = 0; i < r->n_items; i++)
    if (r->items[i].op == CCG_OP_SEND)
      c->send_bytes += r->items[i].bytes;
  int64_t P = c->info.n_stages, M = c->info.microbatches;
  c->bubble = ccg_pipeline_bubble(c->stage_cost, P, M);
  c->equal_bubble = (double)(P - 1) / (double)(M + P - 1);
  return true;
}

static json_t *pipeline_json(const pp_cost *c) {
  json_t *costs = json_array();
  for (int64_t s = 0; s < c->info.n_stages; s++)
    json_array_append_new(costs, json_real(c->stage_cost[s]));
  return json_pack("{s:I,s:I,s:s,s:o,s:f,s:f,s:f}", "stages",
                   (json_int_t)c->info.n_stages, "microbatches",
                   (json_int_t)c->info.microbatches, "schedule",
                   ccg_pipeline_schedule_name(c->info.schedule), "stage_cost",
                   costs, "bubble", c->bubble, "equal_stage_bubble",
                   c->equal_bubble, "send_bytes", c->send_bytes);
}

static void pipeline_text(const pp_cost *c) {
  printf("pipeline: %lld stages, %lld microbatches, %s; stage compute "
         "(FLOPs+bytes):",
         (long long)c->info.n_stages, (long long)c->info.microbatches,
         ccg_pipeline_schedule_name(c->info.schedule));
  for (int64_t s = 0; s < c->info.n_stages; s++)
    printf(" %.3g", c->stage_cost[s]);
  printf("\nbubble fraction %.4f ((p-1)/(M+p-1) = %.4f for equal stages); "
         "sends between stages: %.0f bytes per step\n",
         c->bubble, c->equal_bubble, c->send_bytes);
}

static int cmd_cost(int argc, char **argv) {
  const command *self = &cli_cost_command;
  const char *gbps_s = NULL;
  const option extra[] = {{"--link-gbps", &gbps_s, NULL}};
  cli_program_args a;
  int rc = cli_parse_program_args(self, argc, argv, extra, 1, &a);
  if (rc >= 0)
    return rc;
  double gbps = DEFAULT_GBPS;
  if (gbps_s) {
    char *end;
    gbps = strtod(gbps_s, &end);
    if (*end || end == gbps_s || !(gbps > 0.0) || gbps > 1e9)
      return usage_error(self, "--link-gbps '%s' is not a positive number",
                         gbps_s);
  }
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  cli_program_options(&a, &o);
  cli_program prog;
  rc = cli_load_program(self->name, a.paths, a.n_paths, a.name, &prog);
  if (rc != EXIT_OK)
    return rc;
  ccg_cost_report *r = NULL;
  ccg_status st = ccg_cost_program(prog.graphs, prog.n, &o, gbps, &r);
  if (st != CCG_STATUS_OK) {
    fprintf(stderr, "ccgraph cost: %s\n", ccg_last_error(NULL));
    cli_program_free(&prog);
    return st == CCG_STATUS_OOM ? EXIT_RUNTIME : EXIT_BAD_INPUT;
  }
  pp_cost pc;
  bool pipe = pipeline_cost(&prog, r, &pc);
  if (a.json) {
    json_t *doc = cost_json(r, gbps, ccg_graph_mesh(prog.graphs[0]));
    if (doc && pipe)
      json_object_set_new(doc, "pipeline", pipeline_json(&pc));
    rc = print_json(doc);
  } else {
    cost_text(r, gbps, ccg_graph_mesh(prog.graphs[0]));
    if (pipe)
      pipeline_text(&pc);
    rc = EXIT_OK;
  }
  ccg_cost_report_free(r);
  cli_program_free(&prog); /* node names are borrowed from the graphs */
  return rc;
}
