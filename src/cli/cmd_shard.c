/* ccgraph shard: applies a DTensor-style plan to an unsharded ONNX model and
 * writes one model per rank. */
#include <errno.h>
#include <stdlib.h>
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
  const char *dp_axis, *zero, *dp_reduce, *dp_inputs, *batch_dim, *dims;
  bool sp, json;
  char dim_text[512]; /* --dims split into names */
  const char *dim_names[CLI_MAX_DIMS];
  int64_t dim_values[CLI_MAX_DIMS];
  size_t n_dims;
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
    const char *prov = ccg_graph_meta(s, CCG_SHARD_PROVENANCE);
    json_t *provenance = prov ? json_loads(prov, 0, NULL) : json_null();
    return print_json(json_pack(
        "{s:s,s:s,s:I,s:I,s:o,s:I,s:I,s:b,s:{s:I,s:I,s:I},s:o,s:o*}", "model",
        name, "mesh", mesh, "ranks", (json_int_t)world, "nodes",
        (json_int_t)ccg_graph_num_nodes(s), "collectives",
        cli_collectives_json(counts), "sharded_params",
        (json_int_t)rep->n_sharded_params, "reshape_rewrites",
        (json_int_t)rep->n_reshape_rewrites, "sequence_parallel", a->sp,
        "data_parallel", "batch_inputs", (json_int_t)rep->n_dp_inputs, "params",
        (json_int_t)rep->n_dp_params, "params_sharded",
        (json_int_t)rep->n_dp_sharded, "files", files, "provenance",
        provenance));
  }
  char coll[512];
  cli_format_collectives(counts, coll, sizeof coll);
  printf("sharded '%s' on %s%s: %lld ranks, %zu nodes per rank\n", name, mesh,
         a->sp ? " (sequence parallel)" : "", (long long)world,
         ccg_graph_num_nodes(s));
  printf("  collectives: %s\n", coll);
  printf("  weights split: %zu; reshape targets rewritten: %zu\n",
         rep->n_sharded_params, rep->n_reshape_rewrites);
  if (rep->n_dp_params || rep->n_dp_inputs)
    printf("  data parallel: %zu batch inputs split, %zu parameters "
           "synchronised (%zu stored as dp shards)\n",
           rep->n_dp_inputs, rep->n_dp_params, rep->n_dp_sharded);
  printf("wrote %s/%s.rank0.onnx .. rank%lld.onnx\n", a->out, name,
         (long long)(world - 1));
  return EXIT_OK;
}

/* A whole number in [lo, hi], else a usage error naming the option. */
static int int_option(const command *self, const char *opt, const char *v,
                      long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi)
    return usage_error(self,
                       "%s takes a whole number from %ld to %ld, not "
                       "'%s'",
                       opt, lo, hi, v);
  *out = x;
  return -1;
}

static int dp_options(const command *self, const shard_args *a,
                      ccg_shard_options *so) {
  long x;
  int rc;
  so->dp_axis = a->dp_axis;
  so->dp_inputs = a->dp_inputs;
  if (a->zero) {
    if ((rc = int_option(self, "--zero", a->zero, 0, 3, &x)) >= 0)
      return rc;
    if (x == 2)
      return usage_error(self, "--zero 2 (sharded gradients and optimizer "
                               "state, whole parameters) is not supported: "
                               "use 1 (each rank's gradients are its dp "
                               "shard) or 3 (parameters sharded too)");
    so->zero = (int)x;
  }
  if (a->batch_dim) {
    if ((rc = int_option(self, "--batch-dim", a->batch_dim, 0, 7, &x)) >= 0)
      return rc;
    so->dp_batch_dim = x;
  }
  if (a->dp_reduce && strcmp(a->dp_reduce, "mean") != 0 &&
      strcmp(a->dp_reduce, "sum") != 0)
    return usage_error(self, "--dp-reduce takes mean or sum, not '%s'",
                       a->dp_reduce);
  so->dp_sum = a->dp_reduce && strcmp(a->dp_reduce, "sum") == 0;
  return -1;
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
      {"--dp-axis", &a.dp_axis, NULL},
      {"--zero", &a.zero, NULL},
      {"--dp-reduce", &a.dp_reduce, NULL},
      {"--dp-inputs", &a.dp_inputs, NULL},
      {"--batch-dim", &a.batch_dim, NULL},
      {"--dims", &a.dims, NULL},
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
    return usage_error(self, "--mesh and -o are required");
  if (a.dims &&
      !cli_parse_dims(a.dims, a.dim_text, sizeof a.dim_text, a.dim_names,
                      a.dim_values, CLI_MAX_DIMS, &a.n_dims))
    return usage_error(self, "--dims '%s' is not NAME=VALUE,...", a.dims);
  ccg_shard_options so = CCG_SHARD_OPTIONS_INIT;
  rc = dp_options(self, &a, &so);
  if (rc >= 0)
    return rc;
  ccg_mesh mesh;
  if (ccg_mesh_parse(a.mesh, &mesh) != CCG_STATUS_OK)
    return cli_fail(self, EXIT_BAD_INPUT, "%s", ccg_last_error(NULL));
  /* the pipeline axis splits the model into stages: it cannot also split
   * the batch or the plan's tensors */
  const char *ppn = a.pp.axis ? a.pp.axis : "pp";
  const char *dpn = a.dp_axis ? a.dp_axis : "dp", *tpn = a.axis ? a.axis : "tp";
  if (strcmp(ppn, dpn) == 0 || strcmp(ppn, tpn) == 0)
    return usage_error(self,
                       "mesh axis '%s' cannot be both the pipeline axis and "
                       "the %s axis",
                       ppn, strcmp(ppn, dpn) == 0 ? "data" : "plan's");
  ccg_pipeline_options po;
  a.pp.in_mesh = ccg_mesh_axis(&mesh, a.pp.axis ? a.pp.axis : "pp") >= 0;
  rc = cli_pipeline_options(self, &a.pp, &po);
  if (rc >= 0)
    return rc;
  /* no plan: the data axis alone (the shard pass says what is missing when
   * there is none), or a pipeline alone */
  bool dp_in_mesh = ccg_mesh_axis(&mesh, so.dp_axis ? so.dp_axis : "dp") >= 0;
  bool shard = a.plan || dp_in_mesh || !a.pp.in_mesh;
  ccg_onnx_export_options eo = CCG_ONNX_EXPORT_OPTIONS_INIT;
  rc = cli_export_options(self, a.opset, a.dialect, &eo);
  if (rc >= 0)
    return rc;
  ccg_plan *plan = NULL;
  /* without --plan nothing is placed on the plan's axis (data parallel
   * alone, or a pipeline alone) */
  if (a.plan && ccg_plan_load(a.plan, &plan) != CCG_STATUS_OK)
    return cli_fail(self, EXIT_BAD_INPUT, "%s", ccg_last_error(NULL));
  ccg_graph *g = NULL, *s = NULL;
  rc = cli_import(self->name, a.model, &g);
  if (rc != EXIT_OK) {
    ccg_plan_free(plan);
    return rc;
  }
  so.mesh_axis = a.axis;
  so.sequence_parallel = a.sp;
  ccg_shard_report rep;
  cli_progress("sharding", 0, 1);
  /* pinned dims first: every pass after it sees numbers */
  ccg_status st =
      a.n_dims ? ccg_graph_pin_dims(&g, a.dim_names, a.dim_values, a.n_dims)
               : CCG_STATUS_OK;
  if (st == CCG_STATUS_OK)
    st = shard ? ccg_shard_apply(g, plan, &mesh, &so, &s, &rep)
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
    "usage: ccgraph shard MODEL.onnx [--plan PLAN.json] --mesh tp=4[,dp=2]\n"
    "                     -o DIR [--sequence-parallel] [--dialect ort]\n"
    "                     [--opset N] [--axis tp] [--dp-axis dp]\n"
    "                     [--zero 0|1|3] [--dp-reduce mean|sum]\n"
    "                     [--dp-inputs A,B] [--batch-dim D] [--json]\n"
    "                     [--dims NAME=V,...]\n"
    "                     [--pp-axis pp] [--stages 'h.0-h.5|h.6-h.11']\n"
    "                     [--microbatches M] [--schedule gpipe|1f1b]\n"
    "\n"
    "Applies a DTensor-style plan ({module-or-parameter pattern: style},\n"
    "styles colwise, rowwise, sequence_parallel, vocab_parallel, replicate,\n"
    "ulysses, expert_parallel; docs/shard.md) to an unsharded model and\n"
    "writes DIR/<name>.rank<r>.onnx for every rank of the mesh: collectives\n"
    "inserted, local shapes, each rank's weight shards. Module paths come\n"
    "from torch.onnx.export's node names (/h.0/mlp/fc1/MatMul is module\n"
    "h.0.mlp.fc1). Nothing is written when anything fails.\n"
    "A mesh axis named as --dp-axis is data parallel (docs/parallelism.md):\n"
    "the inputs carrying the batch are split on it, each rank runs on its\n"
    "batch chunk, and every float parameter's gradient is reduced over it\n"
    "in the backward (ccgraph grad).\n"
    "  --plan PLAN.json      the parallel plan (schemas/plan.schema.json);\n"
    "                        none: nothing on the plan's axis (dp alone)\n"
    "  --mesh SPEC           device mesh, e.g. tp=4 or dp=2,tp=4\n"
    "  -o, --out DIR         output folder (created if missing)\n"
    "  --sequence-parallel   LayerNorms on sequence shards; rowwise and\n"
    "                        vocab_parallel outputs reduce-scattered on dim 1\n"
    "  --dialect ccgraph|ort collectives in our domain (default) or as\n"
    "                        ONNX Runtime's com.microsoft ops\n"
    "  --opset N             ai.onnx opset of the models, 17..24 (default 17)\n"
    "  --axis AXIS           the mesh axis the plan shards over (default tp)\n"
    "  --dp-axis AXIS        the data-parallel mesh axis (default dp)\n"
    "  --zero 0|1|3          0: gradients all-reduced (DDP, default); 1: each\n"
    "                        parameter stored as its dp shard, all-gathered\n"
    "                        for use, its gradient reduce-scattered; 3: as\n"
    "                        1, gathered again in the backward (FSDP)\n"
    "  --dp-reduce mean|sum  gradients averaged over dp (default) or summed\n"
    "  --dp-inputs A,B       the inputs carrying the batch (default: those\n"
    "                        whose batch dim equals the first input's)\n"
    "  --batch-dim D         the inputs' batch dim (default 0)\n"
    "  --dims NAME=V,...     pin the inputs' symbolic dims to sizes before\n"
    "                        sharding (batch=8,sequence=16): a dynamic-axes\n"
    "                        export as the static model of those sizes\n"
    "  --json                a JSON summary on stdout, with the\n"
    "                        provenance of every rank's weights\n"
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
