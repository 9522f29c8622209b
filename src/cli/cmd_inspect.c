/* ccgraph inspect: a model's graph, mesh, collectives and placements (the
 * graph dumps), or a per-rank summary of a folder of rank models. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int run_inspect(int argc, char **argv);

/* One rank model's summary line or JSON object. */
static json_t *summary(ccg_graph *g, const char *path) {
  size_t counts[CCG_OP_COUNT];
  size_t n_coll = cli_count_collectives(g, counts);
  size_t bytes = 0;
  for (size_t i = 0; i < ccg_graph_num_initializers(g); i++) {
    size_t b = 0;
    const ccg_tensor *t = ccg_value_data(g, ccg_graph_initializer(g, i));
    if (t && ccg_tensor_nbytes(t, &b) == CCG_STATUS_OK)
      bytes += b;
  }
  char mesh[128] = "none";
  if (ccg_graph_mesh(g))
    ccg_mesh_format(ccg_graph_mesh(g), mesh, sizeof mesh);
  return json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:o}", "file", path, "graph",
                   ccg_graph_name(g), "mesh", mesh, "nodes",
                   (json_int_t)ccg_graph_num_nodes(g), "collectives_total",
                   (json_int_t)n_coll, "weights",
                   (json_int_t)ccg_graph_num_initializers(g), "weight_bytes",
                   (json_int_t)bytes, "collectives",
                   cli_collectives_json(counts));
}

static int inspect_dir(const command *self, const char *dir, bool json) {
  cli_program prog;
  int rc = cli_load_program(self->name, &dir, 1, NULL, &prog);
  if (rc != EXIT_OK)
    return rc;
  json_t *ranks = json_array();
  size_t n = prog.n;
  for (size_t r = 0; r < n; r++) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.rank%zu.onnx", dir, prog.name, r);
    json_array_append_new(ranks, summary(prog.graphs[r], path));
  }
  cli_program_free(&prog);
  if (json)
    return print_json(json_pack("{s:s,s:I,s:o}", "folder", dir, "ranks",
                                (json_int_t)n, "models", ranks));
  size_t i;
  json_t *m;
  json_array_foreach(ranks, i, m) {
    char coll[512] = "";
    size_t used = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(m, "collectives"), k, v) {
      if (used < sizeof coll)
        used += (size_t)snprintf(coll + used, sizeof coll - used, "%s%s %lld",
                                 used ? ", " : "", k,
                                 (long long)json_integer_value(v));
    }
    printf("rank %zu: %s (mesh %s): %lld nodes, %lld weights (%lld bytes), "
           "collectives: %s\n",
           i, json_string_value(json_object_get(m, "file")),
           json_string_value(json_object_get(m, "mesh")),
           (long long)json_integer_value(json_object_get(m, "nodes")),
           (long long)json_integer_value(json_object_get(m, "weights")),
           (long long)json_integer_value(json_object_get(m, "weight_bytes")),
           used ? coll : "none");
  }
  json_decref(ranks);
  return EXIT_OK;
}

static int run_inspect(int argc, char **argv) {
  const command *self = &cli_inspect_command;
  const char *path = NULL, *format = NULL;
  const option opts[] = {{"--format", &format, NULL}};
  int rc = parse_args(self, argc, argv, opts, 1, &path, 1);
  if (rc >= 0)
    return rc;
  if (!path)
    return usage_error(self, "missing the MODEL or DIR");
  ccg_dump_format fmt = CCG_DUMP_TEXT;
  if (format && ccg_dump_format_parse(format, &fmt) != CCG_STATUS_OK)
    return usage_error(self, "--format must be text, json or dot, not '%s'",
                       format);
  if (cli_is_dir(path)) {
    if (fmt == CCG_DUMP_DOT)
      return usage_error(self, "a folder has no single graph to draw; "
                               "give one of its rank models");
    return inspect_dir(self, path, fmt == CCG_DUMP_JSON);
  }
  ccg_graph *g = NULL;
  rc = cli_import(self->name, path, &g);
  if (rc != EXIT_OK)
    return rc;
  ccg_status st = ccg_graph_dump(g, fmt, stdout);
  if (st != CCG_STATUS_OK)
    rc = cli_fail(self, EXIT_RUNTIME, "%s", ccg_last_error(g));
  ccg_graph_free(g);
  return rc;
}

const command cli_inspect_command = {
    "inspect", "show a model (graph, mesh, collectives, placements)",
    "usage: ccgraph inspect MODEL.onnx|DIR [--format text|json|dot]\n"
    "\n"
    "For a model: its graph, one line per node (text), the stable JSON dump,\n"
    "or Graphviz DOT with collective nodes drawn distinctly (render with\n"
    "`dot -Tsvg`); the mesh, placements and mapping tags are part of each.\n"
    "For a folder of rank models (<name>.rank<r>.onnx, as `ccgraph shard`\n"
    "writes): one summary per rank (nodes, weights, collectives by kind),\n"
    "as text or JSON.\n"
    "  --format text|json|dot   default text\n"
    "Exit status: 0 ok, 1 usage, 2 bad input (missing or bad model), 3 "
    "runtime.\n",
    run_inspect};
