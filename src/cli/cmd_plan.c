/* ccgraph plan: proposes a Megatron-style parallel plan for a
 * transformer-shaped ONNX model (ccg_plan_propose) and says why for each
 * entry. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static int run_plan(int argc, char **argv);

typedef struct plan_args {
  const char *model, *mesh, *axis, *out;
  bool sp, json;
} plan_args;

/* Writes the plan to `path` through a temporary file renamed at the end. */
static int write_plan(const command *self, const char *path, const char *json) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return cli_fail(self, EXIT_BAD_INPUT, "%s: path too long", path);
  FILE *f = fopen(tmp, "w");
  if (!f)
    return cli_fail(self, EXIT_BAD_INPUT, "%s: cannot write", path);
  bool ok = fputs(json, f) >= 0 && fputc('\n', f) != EOF;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    remove(tmp);
    return cli_fail(self, EXIT_RUNTIME, "%s: cannot write", path);
  }
  return EXIT_OK;
}

static void print_notes(FILE *out, const ccg_plan_report *r, bool proposed) {
  size_t width = 0;
  for (size_t i = 0; i < ccg_plan_report_num_notes(r); i++) {
    const ccg_plan_note *n = ccg_plan_report_note(r, i);
    if (n->proposed == proposed && strlen(n->pattern) > width)
      width = strlen(n->pattern);
  }
  for (size_t i = 0; i < ccg_plan_report_num_notes(r); i++) {
    const ccg_plan_note *n = ccg_plan_report_note(r, i);
    if (n->proposed != proposed)
      continue;
    fprintf(out, "  %-*s  %-17s %s: %s\n", (int)width, n->pattern,
            ccg_plan_style_name(n->style), n->role, n->why);
  }
}

static size_t left_out(const ccg_plan_report *r) {
  size_t left = 0;
  for (size_t i = 0; i < ccg_plan_report_num_notes(r); i++)
    left += !ccg_plan_report_note(r, i)->proposed;
  return left;
}

static void print_text(const plan_args *a, const ccg_plan_report *r,
                       bool planned) {
  size_t left = left_out(r);
  printf("%s on %s: %s\n", a->model, a->mesh, ccg_plan_report_summary(r));
  if (planned)
    print_notes(stdout, r, true);
  if (left) {
    printf("left out:\n");
    print_notes(stdout, r, false);
  }
  if (!planned)
    return;
  printf("plan:\n%s\n", ccg_plan_report_json(r));
  printf("shard it with: ccgraph shard %s --plan PLAN.json --mesh %s -o "
         "DIR%s%s%s\n",
         a->model, a->mesh, a->sp ? " --sequence-parallel" : "",
         a->axis ? " --axis " : "", a->axis ? a->axis : "");
}

static int run_plan(int argc, char **argv) {
  const command *self = &cli_plan_command;
  plan_args a = {0};
  const option opts[] = {
      {"--mesh", &a.mesh, NULL},
      {"--axis", &a.axis, NULL},
      {"-o", &a.out, NULL},
      {"--out", &a.out, NULL},
      {"--sequence-parallel", NULL, &a.sp},
      {"--json", NULL, &a.json},
  };
  int rc = parse_args(self, argc, argv, opts, sizeof opts / sizeof *opts,
                      &a.model, 1);
  if (rc >= 0)
    return rc;
  if (!a.model)
    return usage_error(self, "missing the MODEL.onnx");
  if (!a.mesh)
    return usage_error(self, "--mesh is required");
  ccg_mesh mesh;
  if (ccg_mesh_parse(a.mesh, &mesh) != CCG_STATUS_OK)
    return cli_fail(self, EXIT_BAD_INPUT, "%s", ccg_last_error(NULL));
  ccg_graph *g = NULL;
  rc = cli_import(self->name, a.model, &g);
  if (rc != EXIT_OK)
    return rc;
  ccg_plan_propose_options po = CCG_PLAN_PROPOSE_OPTIONS_INIT;
  po.mesh_axis = a.axis;
  po.sequence_parallel = a.sp;
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  ccg_status st = ccg_plan_propose(g, &mesh, &po, &plan, &rep);
  if (rep && !a.json)
    print_text(&a, rep, plan != NULL);
  if (rep && a.json && left_out(rep)) {
    /* stdout keeps the plan alone; what stays out is said on stderr */
    fprintf(stderr, "ccgraph plan: left out:\n");
    print_notes(stderr, rep, false);
  }
  if (st != CCG_STATUS_OK) {
    if (rep && a.json)
      printf("{}\n");
    rc = cli_fail(self, cli_status_code(st), "%s: %s", a.model,
                  ccg_last_error(g));
  } else {
    rc = a.out ? write_plan(self, a.out, ccg_plan_report_json(rep)) : EXIT_OK;
    if (rc == EXIT_OK && a.json)
      printf("%s\n", ccg_plan_report_json(rep));
    else if (rc == EXIT_OK && a.out)
      printf("wrote %s\n", a.out);
  }
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
  return rc;
}

const command cli_plan_command = {
    "plan", "propose a Megatron-style parallel plan for a transformer model",
    "usage: ccgraph plan MODEL.onnx --mesh tp=4[,dp=2] [--sequence-parallel]\n"
    "                    [--axis tp] [-o PLAN.json] [--json]\n"
    "\n"
    "Finds the transformer parts of an unsharded model by structure and\n"
    "proposes a plan for `ccgraph shard` (schemas/plan.schema.json):\n"
    "attention input projections (q/k/v or a fused qkv: the MatMul/Gemm\n"
    "nodes with 2-D weights whose outputs reach Softmax through MatMul)\n"
    "colwise and the output projection rowwise; an MLP's first projections\n"
    "(up/gate, before the activation) colwise and its last rowwise; the\n"
    "word embeddings (a Gather of token ids) vocab_parallel and the LM head\n"
    "colwise with its output Replicate; with --sequence-parallel the\n"
    "LayerNorms sequence_parallel. Keys are module paths, with layer\n"
    "indices as '*' where every layer agrees. A part whose heads, widths or\n"
    "vocabulary the axis size does not divide is left out, and says so.\n"
    "Prints a line per entry saying which nodes matched, then the plan.\n"
    "  --mesh SPEC           device mesh, e.g. tp=4 or dp=2,tp=4\n"
    "  --sequence-parallel   LayerNorms on sequence shards (then shard with\n"
    "                        --sequence-parallel too)\n"
    "  --axis AXIS           the mesh axis the plan shards over (default tp)\n"
    "  -o, --out PLAN.json   write the plan to a file as well\n"
    "  --json                only the plan, as JSON, on stdout ({} when\n"
    "                        nothing is proposed)\n"
    "Exit status: 0 ok, 1 usage, 2 bad input (model, mesh, a model that is\n"
    "not transformer-shaped or whose parts the mesh divides none of: the\n"
    "plan is empty), 3 runtime.\n",
    run_plan};
