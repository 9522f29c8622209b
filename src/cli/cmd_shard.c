/* ccgraph shard: applies a DTensor-style plan to an unsharded ONNX model and
 * writes one model per rank. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

static int run_shard(int argc, char **argv);

/* "path/to/gpt.onnx" -> "gpt". */
static void model_name(const char *path, char *buf, size_t size) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t len = strlen(base);
  if (len > 5 && strcmp(base + len - 5, ".onnx") == 0)
    len -= 5;
  if (len >= size)
    len = size - 1;
  memcpy(buf, base, len);
  buf[len] = '\0';
}

typedef struct shard_args {
  const char *model, *plan, *mesh, *out, *dialect, *axis, *opset;
  bool sp, json;
  cli_pp_args pp;
} shard_args;

static int export_all(const command *self, ccg_graph *s, const shard_args *a,
                      const char *name, const ccg_onnx_export_options *eo) {
  cli_progress("exporting", 0, 1);
  /* the folder is made if missing, and nothing is left on failure */
  int rc = cli_export_spmd(self, s, a->out, name, eo);
  cli_progress_done();
  return rc;
}

static int report(const shard_args *a, ccg_graph *s, const char *name,
                  const ccg_shard_report *rep) {
  size_t counts[CCG_OP_COUNT];
  cli_count_collectives(s, counts);
  const ccg_mesh *m = ccg_graph_mesh(s);
  int64_t world = ccg_mesh_world_size(m);
  char mesh[128];
  ccg_mesh_format(m, mesh, sizeof mesh);
  if (a->json) {
    json_t *files = json_array();
    for (int64_t r = 0; r < world; r++)
      json_array_append_new(files, json_sprintf("%s/%s.rank%lld.onnx", a->out,
                                                name, (long long)r));
    return print_json(json_pack(
        "{s:s,s:s,s:I,s:I,s:o,s:I,s:I,s:b,s:o}", "model", name, "mesh", mesh,
        "ranks", (json_int_t)world, "nodes", (json_int_t)ccg_graph_num_nodes(s),
        "collectives", cli_collectives_json(counts), "sharded_params",
        (json_int_t)rep->n_sharded_params, "reshape_rewrites",
        (json_int_t)rep->n_reshape_rewrites, "sequence_parallel", a->sp,
        "files", files));
  }
  char coll[512];
  cli_format_collectives(counts, coll, sizeof coll);
  printf("sharded '%s' on %s%s: %lld ranks, %zu nodes per rank\n", name, mesh,
         a->sp ? " (sequence parallel)" : "", (long long)world,
         ccg_graph_num_nodes(s));
  printf("  collectives: %s\n", coll);
  printf("  weights split: %zu; reshape targets rewritten: %zu\n",
         rep->n_sharded_params, rep->n_reshape_rewrites);
  printf("wrote %s/%s.rank0.onnx .. rank%lld.onnx\n", a->out, name,
         (long long)(world - 1));
  return EXIT_OK;
}

static int run_shard(int argc, char **argv) {
  const command *self = &cli_shard_command;
  shard_args a = {0};
  const option opts[] = {
      {"--plan", &a.plan, NULL},
      {"--mesh", &a.mesh, NULL},
      {"-o", &a.out, NULL},
      {"--out", &a.out, NULL},
      {"--dialect", &a.dialect, NULL},
      {"--opset", &a.opset, NULL},
      {"--axis", &a.axis, NULL},
      {"--sequence-parallel", NULL, &a.sp},
      {"--json", NULL, &a.json},
      {"--pp-axis", &a.pp.axis, NULL},
      {"--stages", &a.pp.stages, NULL},
      {"--microbatches", &a.pp.microbatches, NULL},
      {"--schedule", &a.pp.schedule, NULL},
  };
  int rc = parse_args(self, argc, argv, opts, sizeof opts / sizeof *opts,
                      &a.model, 1);
  if (rc >= 0)
    return rc;
  if (!a.model)
    return usage_error(self, "missing the MODEL.onnx");
  if (!a.mesh || !a.out)
    return usage_error(self, "--plan, --mesh and -o are required (--plan "
                             "optional with a pipeline axis)");
  ccg_mesh mesh;
  if (ccg_mesh_parse(a.mesh, &mesh) != CCG_STATUS_OK)
    return cli_fail(self, EXIT_BAD_INPUT, "%s", ccg_last_error(NULL));
  ccg_pipeline_options po;
  a.pp.in_mesh = ccg_mesh_axis(&mesh, a.pp.axis ? a.pp.axis : "pp") >= 0;
  rc = cli_pipeline_options(self, &a.pp, &po);
  if (rc >= 0)
    return rc;
  if (!a.plan && !a.pp.in_mesh)
    return usage_error(self,
                       "--plan is required (or a pipeline axis '%s' in "
                       "--mesh)",
                       a.pp.axis ? a.pp.axis : "pp");
  ccg_onnx_export_options eo = CCG_ONNX_EXPORT_OPTIONS_INIT;
  rc = cli_export_options(self, a.opset, a.dialect, &eo);
  if (rc >= 0)
    return rc;
  ccg_plan *plan = NULL;
  if (a.plan && ccg_plan_load(a.plan, &plan) != CCG_STATUS_OK)
    return cli_fail(self, EXIT_BAD_INPUT, "%s", ccg_last_error(NULL));
  ccg_graph *g = NULL, *s = NULL;
  rc = cli_import(self->name, a.model, &g);
  if (rc != EXIT_OK) {
    ccg_plan_free(plan);
    return rc;
  }
  ccg_shard_options so = CCG_SHARD_OPTIONS_INIT;
  so.mesh_axis = a.axis;
  so.sequence_parallel = a.sp;
  ccg_shard_report rep;
  cli_progress("sharding", 0, 1);
  ccg_status st = plan ? ccg_shard_apply(g, plan, &mesh, &so, &s, &rep)
                       : ccg_graph_set_mesh(g, &mesh);
  cli_progress_done();
  if (st != CCG_STATUS_OK) {
    rc = cli_fail(self, cli_status_code(st), "%s: %s", a.model,
                  ccg_last_error(g));
  } else if (a.pp.in_mesh) {
    char name[256];
    model_name(a.model, name, sizeof name);
    rc = cli_shard_pipeline(self, s ? s : g, &po, a.out, name, &eo, a.json);
  } else {
    char name[256];
    model_name(a.model, name, sizeof name);
    rc = export_all(self, s, &a, name, &eo);
    if (rc == EXIT_OK)
      rc = report(&a, s, name, &rep);
  }
  ccg_graph_free(s);
  ccg_graph_free(g);
  ccg_plan_free(plan);
  return rc;
}

const command cli_shard_command = {
    "shard", "apply a parallel plan to an ONNX model: one model per rank",
    "usage: ccgraph shard MODEL.onnx --plan PLAN.json --mesh tp=4[,dp=2]\n"
    "                     -o DIR [--sequence-parallel] [--dialect ort]\n"
    "                     [--opset N] [--axis tp] [--json]\n"
    "                     [--pp-axis pp] [--stages 'h.0-h.5|h.6-h.11']\n"
    "                     [--microbatches M] [--schedule gpipe|1f1b]\n"
    "\n"
    "Applies a DTensor-style plan ({module-or-parameter pattern: style},\n"
    "styles colwise, rowwise, sequence_parallel, vocab_parallel, replicate,\n"
    "ulysses; docs/shard.md) to an unsharded model and writes\n"
    "DIR/<name>.rank<r>.onnx for every rank of the mesh: collectives\n"
    "inserted, local shapes, each rank's weight shards. Module paths come\n"
    "from torch.onnx.export's node names (/h.0/mlp/fc1/MatMul is module\n"
    "h.0.mlp.fc1). Nothing is written when anything fails.\n"
    "  --plan PLAN.json      the parallel plan (schemas/plan.schema.json)\n"
    "  --mesh SPEC           device mesh, e.g. tp=4 or dp=2,tp=4\n"
    "  -o, --out DIR         output folder (created if missing)\n"
    "  --sequence-parallel   LayerNorms on sequence shards; rowwise and\n"
    "                        vocab_parallel outputs reduce-scattered on dim 1\n"
    "  --dialect ccgraph|ort collectives in our domain (default) or as\n"
    "                        ONNX Runtime's com.microsoft ops\n"
    "  --opset N             ai.onnx opset of the models, 17..24 (default 17)\n"
    "  --axis AXIS           the mesh axis the plan shards over (default tp)\n"
    "  --json                a JSON summary on stdout\n"
    "  --pp-axis AXIS        the pipeline axis (default pp); with it in the\n"
    "                        mesh the model's layers (h.N, layers.N, ...)\n"
    "                        are split into contiguous stages joined by\n"
    "                        Send/Recv, rank r running its stage's graph\n"
    "                        (--plan then optional; docs/parallelism.md)\n"
    "  --stages SPEC         the layers of each stage, 'h.0-h.5|h.6-h.11'\n"
    "                        (default: balanced by estimated compute)\n"
    "  --microbatches M      split the batch into M microbatches (default 1)\n"
    "  --schedule S          gpipe or 1f1b (default), written into each\n"
    "                        stage's node order\n"
    "Exit status: 0 ok, 1 usage, 2 bad input (model, plan, mesh, a plan\n"
    "entry that matches nothing, a dim the mesh does not divide), 3 runtime.\n",
    run_shard};
