/* ccgraph grad: adds the backward of a model, or of every rank's model, from
 * a loss value (ccg_backward) and writes the forward+backward models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int cmd_grad(int argc, char **argv);

const command cli_grad_command = {
    "grad", "add the backward of a model (or of per-rank models)",
    "usage: ccgraph grad MODEL.onnx|DIR --loss NAME -o OUT [--wrt P,...]\n"
    "                    [--bucket-mb M] [--name NAME] [--opset N] [--json]\n"
    "                    [--dims NAME=V,...]\n"
    "\n"
    "Derives the gradients of the sum of value NAME's elements (a scalar\n"
    "loss, or any float value) with respect to the inputs and initializers\n"
    "matched by --wrt (names or fnmatch patterns; default every float\n"
    "initializer), and adds each as a graph output grad/<name>. Collectives\n"
    "tagged with a mapping take the mapping's backward rule; untagged ones\n"
    "the replicated-loss convention (docs/autodiff.md). A per-rank model\n"
    "without the loss that sends values on (an earlier pipeline stage) is\n"
    "differentiated from what its Sends' peers send back.\n"
    "\n"
    "For one model OUT is the new model file. For per-rank models (a folder\n"
    "of <name>.rank<r>.onnx, or one such file) every rank is differentiated\n"
    "and OUT is a folder that receives <name>.rank<r>.onnx; if any rank\n"
    "fails, none is left.\n"
    "\n"
    "Models sharded over a data-parallel axis (ccgraph shard --mesh dp=N)\n"
    "get their parameters' gradients reduced over it; those all-reduces\n"
    "(reduce-scatters under --zero 1 and 3) are grouped into buckets of at\n"
    "most M MB (DDP's bucket_cap_mb), each right after its last gradient,\n"
    "so that they overlap the rest of the backward (docs/parallelism.md).\n"
    "  --loss NAME   the value whose elements' sum is the loss\n"
    "  -o OUT        the model file, or the folder for per-rank models\n"
    "  --wrt P,...   what to differentiate for (comma-separated)\n"
    "  --bucket-mb M data-parallel gradient buckets of at most M MB\n"
    "                (default 25; 0: one collective per gradient)\n"
    "  --name NAME   the program in a folder holding several\n"
    "  --dims NAME=V,...  pin symbolic input dims first (batch=8,seq=16),\n"
    "                for backward rules that need numbers\n"
    "  --opset N     ai.onnx opset of the written models (17..24, default "
    "17)\n"
    "  --json        one JSON document on stdout: the models written, their\n"
    "                nodes and the gradients (rank 0's)\n",
    cmd_grad};

#define MAX_WRT 64

/* The backward of g for the loss named `loss`. */
static int differentiate(ccg_graph *g, const char *loss, const char *const *wrt,
                         size_t n_wrt, size_t bucket_bytes, const char *what) {
  ccg_value_id l = CCG_NONE;
  bool sends = false; /* a pipeline stage before the loss's */
  for (ccg_node_id n = 0; n < ccg_graph_num_nodes(g); n++)
    sends |= ccg_node_op(g, n) == CCG_OP_SEND;
  if (ccg_graph_find_value(g, loss, &l) != CCG_STATUS_OK)
    l = CCG_NONE;
  if (l == CCG_NONE && !sends) {
    fprintf(stderr,
            "ccgraph grad: %s: no value named '%s' to use as the "
            "loss\n",
            what, loss);
    return EXIT_BAD_INPUT;
  }
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = l;
  o.wrt = n_wrt ? wrt : NULL;
  o.n_wrt = n_wrt;
  if (ccg_backward(g, &o) != CCG_STATUS_OK ||
      ccg_ddp_bucket_gradients(g, bucket_bytes, NULL) != CCG_STATUS_OK) {
    fprintf(stderr, "ccgraph grad: %s: %s\n", what, ccg_last_error(g));
    return EXIT_BAD_INPUT;
  }
  return EXIT_OK;
}

/* --json: what was written and rank 0's gradients (its grad/ outputs). */
static int print_summary(const cli_program *p, const char *out) {
  ccg_graph *g = p->graphs[0];
  json_t *grads = json_array();
  for (size_t i = 0; grads && i < ccg_graph_num_outputs(g); i++) {
    const char *n = ccg_value_name(g, ccg_graph_output(g, i));
    if (n && strncmp(n, "grad/", 5) == 0)
      json_array_append_new(grads, json_string(n));
  }
  json_t *doc =
      json_pack("{s:s,s:I,s:b,s:I,s:o*}", "out", out, "models",
                (json_int_t)p->n, "per_rank", p->per_rank, "nodes_rank0",
                (json_int_t)ccg_graph_num_nodes(g), "gradients", grads);
  if (!doc)
    return cli_fail(&cli_grad_command, EXIT_RUNTIME, "out of memory");
  return print_json(doc);
}

static int cmd_grad(int argc, char **argv) {
  const command *self = &cli_grad_command;
  const char *loss = NULL, *out = NULL, *wrt_arg = NULL, *name = NULL,
             *opset = NULL, *path = NULL, *bucket = NULL, *dims = NULL;
  bool json = false;
  const option opts[] = {
      {"--loss", &loss, NULL},        {"-o", &out, NULL},
      {"--out", &out, NULL},          {"--wrt", &wrt_arg, NULL},
      {"--name", &name, NULL},        {"--opset", &opset, NULL},
      {"--bucket-mb", &bucket, NULL}, {"--json", NULL, &json},
      {"--dims", &dims, NULL}};
  int rc =
      parse_args(self, argc, argv, opts, sizeof opts / sizeof *opts, &path, 1);
  if (rc >= 0)
    return rc;
  if (!path)
    return usage_error(self, "missing the model%s", "");
  if (!loss)
    return usage_error(self, "missing --loss NAME%s", "");
  if (!out)
    return usage_error(self, "missing -o OUT%s", "");
  double mb = 25;
  if (bucket) {
    char *end;
    mb = strtod(bucket, &end);
    if (end == bucket || *end || !(mb >= 0) || mb > 1e6)
      return usage_error(self,
                         "--bucket-mb takes a size in MB from 0 to "
                         "1e6, not '%s'",
                         bucket);
  }
  size_t bucket_bytes = (size_t)(mb * 1024 * 1024);
  ccg_onnx_export_options eo = CCG_ONNX_EXPORT_OPTIONS_INIT;
  rc = cli_export_options(self, opset, NULL, &eo);
  if (rc >= 0)
    return rc;
  char wrt_text[2048];
  const char *wrt[MAX_WRT];
  size_t n_wrt = 0;
  if (wrt_arg) {
    if (strlen(wrt_arg) >= sizeof wrt_text)
      return usage_error(self, "--wrt is too long%s", "");
    snprintf(wrt_text, sizeof wrt_text, "%s", wrt_arg);
    for (char *save = NULL, *t = strtok_r(wrt_text, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
      if (n_wrt == MAX_WRT)
        return usage_error(self, "--wrt: at most 64 patterns%s", "");
      wrt[n_wrt++] = t;
    }
    if (!n_wrt)
      return usage_error(self, "--wrt '%s' names nothing", wrt_arg);
  }
  char dim_text[512];
  const char *dim_names[CLI_MAX_DIMS];
  int64_t dim_values[CLI_MAX_DIMS];
  size_t n_dims = 0;
  if (dims && !cli_parse_dims(dims, dim_text, sizeof dim_text, dim_names,
                              dim_values, CLI_MAX_DIMS, &n_dims))
    return usage_error(self, "--dims '%s' is not NAME=VALUE,...", dims);
  cli_program p;
  const char *paths[1] = {path};
  rc = cli_load_program(self->name, paths, 1, name, &p);
  if (rc != EXIT_OK)
    return rc;
  /* a backward rule may need numbers where the export has symbols */
  for (size_t r = 0; n_dims && r < p.n; r++)
    if (ccg_graph_pin_dims(&p.graphs[r], dim_names, dim_values, n_dims) !=
        CCG_STATUS_OK) {
      rc = cli_fail(self, cli_status_code(ccg_last_status(p.graphs[r])),
                    "%s: %s", path, ccg_last_error(p.graphs[r]));
      cli_program_free(&p);
      return rc;
    }
  size_t with_loss = 0;
  for (size_t r = 0; r < p.n; r++) {
    ccg_value_id l;
    with_loss += ccg_graph_find_value(p.graphs[r], loss, &l) == CCG_STATUS_OK;
  }
  if (with_loss == 0) {
    fprintf(stderr,
            "ccgraph grad: %s: no value named '%s' to use as the "
            "loss%s\n",
            p.per_rank ? p.name : path, loss, p.n > 1 ? " on any rank" : "");
    cli_program_free(&p);
    return EXIT_BAD_INPUT;
  }
  for (size_t r = 0; r < p.n && rc == EXIT_OK; r++) {
    char what[300];
    if (p.per_rank)
      snprintf(what, sizeof what, "%s rank %zu", p.name, r);
    else
      snprintf(what, sizeof what, "%s", path);
    rc = differentiate(p.graphs[r], loss, wrt, n_wrt, bucket_bytes, what);
  }
  if (rc == EXIT_OK)
    rc = cli_write_program(self, &p, out, &eo);
  if (rc == EXIT_OK && json)
    rc = print_summary(&p, out);
  else if (rc == EXIT_OK)
    printf("ccgraph grad: %zu model%s written to %s (%zu nodes%s)\n", p.n,
           p.n == 1 ? "" : "s", out, ccg_graph_num_nodes(p.graphs[0]),
           p.n == 1 ? "" : " on rank 0");
  cli_program_free(&p);
  return rc;
}
