/* The ccgraph tool: subcommand dispatch, usage, exit codes. Each subcommand
 * is one row of the table below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ccgraph/ccgraph.h"
#include "cli/cli.h"

static int cmd_ops(int argc, char **argv);
static int cmd_mesh(int argc, char **argv);

static const command ops_command = {
    "ops", "list the op registry (ops, domains, arity, attributes)",
    "usage: ccgraph ops [--json | --markdown]\n"
    "\n"
    "Lists every op of the IR: name, domain, inputs, outputs and attributes\n"
    "(with their types and defaults).\n"
    "  --json       one JSON document instead of a table\n"
    "  --markdown   the op table of docs/ops.md: family, oldest ONNX opset,\n"
    "               dtypes, gradient, shard rule and kernel files\n",
    cmd_ops};
static const command mesh_command = {
    "mesh", "show a device mesh: ranks, coordinates and groups",
    "usage: ccgraph mesh SPEC [--axes AXES] [--json]\n"
    "\n"
    "SPEC names the mesh axes and sizes, e.g. tp=4 or dp=2,pp=2,tp=2.\n"
    "Prints each rank's coordinates and, for the group over AXES (default:\n"
    "every axis in turn), the ranks of each group in group order.\n"
    "  --axes AXES  comma-separated mesh axes of the group, e.g. dp,tp\n"
    "  --json       one JSON document instead of text\n",
    cmd_mesh};

/* Each subcommand: one row here, its code in its own file (cli/cli.h). */
/* clang-format off */
static const command *const commands[] = {
    &cli_demo_command,
    &cli_grad_command,
    &cli_shard_command,
    &cli_plan_command,
    &cli_export_command,
    &cli_inspect_command,
    &cli_run_command,
    &ops_command,
    &mesh_command,
    &cli_verify_command,
    &cli_cost_command,
};
/* clang-format on */
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void print_main_usage(FILE *f) {
  fprintf(f, "usage: ccgraph [--version] [--help] COMMAND [ARGS]\n\n"
             "Parallel model graphs with explicit collectives.\n\n"
             "Commands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-8s %s\n", commands[i]->name, commands[i]->summary);
  fprintf(f, "\n'ccgraph COMMAND --help' shows a command's options.\n\n"
             "Exit status: 0 ok, 1 usage error, 2 bad input (a file, a shape,\n"
             "a plan, a mesh), 3 runtime or communication failure, 4 a\n"
             "comparison above its tolerance (demo, run --check).\n"
             "Environment: CCG_LOG=debug|info|warn|error|off sets the log "
             "level.\n");
}

/* ---- ops ----------------------------------------------------------------- */

/* "f32 f16 ..." of a dtype mask into buf. */
static const char *dtypes_str(unsigned mask, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int d = 1; d < CCG_DTYPE_COUNT && used < size; d++)
    if (mask & (1u << d))
      used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? " " : "",
                               ccg_dtype_name((ccg_dtype)d));
  return mask ? buf : "-";
}

/* The files of src/exec that hold a family's CPU and CUDA kernels: the
 * families older than the per-family CUDA files share gpu_ops.c. */
static void kernel_files(ccg_op_family f, char *cpu, char *gpu, size_t size) {
  const char *name = ccg_op_family_name(f);
  switch (f) {
  case CCG_OP_FAMILY_COLLECTIVE:
    snprintf(cpu, size, "collective.c");
    snprintf(gpu, size, "cuda/gpu_coll.c");
    return;
  case CCG_OP_FAMILY_LOGIC:
  case CCG_OP_FAMILY_LOSS:
  case CCG_OP_FAMILY_DATA:
  case CCG_OP_FAMILY_SELECT:
  case CCG_OP_FAMILY_VISION:
    snprintf(gpu, size, "cuda/gpu_%s.c", name);
    break;
  default:
    snprintf(gpu, size, "cuda/gpu_ops.c");
    break;
  }
  snprintf(cpu, size, "cpu/%s.c", name);
}

/* docs/ops.md's table (scripts/ops-doc.py keeps the page equal to it). */
static int ops_markdown(void) {
  printf("| op | domain | family | ONNX since | dtypes | gradient | shard | "
         "CPU | CUDA |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < CCG_OP_COUNT; i++) {
    ccg_op op = (ccg_op)i;
    const char *fam = ccg_op_family_name(ccg_op_family_of(op));
    bool coll = ccg_op_is_collective(op);
    char since[16], dts[128];
    snprintf(since, sizeof since, "%d", ccg_op_onnx_since(op));
    char cpu[48], gpu[48];
    kernel_files(ccg_op_family_of(op), cpu, gpu, sizeof cpu);
    printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", ccg_op_name(op),
           *ccg_op_domain(op) ? ccg_op_domain(op) : "ai.onnx", fam,
           coll ? "-" : since, dtypes_str(ccg_op_dtypes(op), dts, sizeof dts),
           ccg_op_has_grad(op) ? "yes" : "no",
           ccg_op_shard_name(ccg_op_shard_rule(op)), cpu, gpu);
  }
  return EXIT_OK;
}

static int cmd_ops(int argc, char **argv) {
  bool json = false, markdown = false;
  const option opts[] = {{"--json", NULL, &json},
                         {"--markdown", NULL, &markdown}};
  int rc = parse_args(&ops_command, argc, argv, opts, 2, NULL, 0);
  if (rc >= 0)
    return rc;
  if (markdown)
    return ops_markdown();
  json_t *arr = json ? json_array() : NULL;
  if (!json)
    printf("%-20s %-8s %-7s %-7s %s\n", "op", "domain", "inputs", "outputs",
           "attributes");
  for (int op = 0; op < CCG_OP_COUNT; op++) {
    int imin, imax, omin, omax;
    ccg_op_arity((ccg_op)op, &imin, &imax, &omin, &omax);
    const char *dom =
        *ccg_op_domain((ccg_op)op) ? ccg_op_domain((ccg_op)op) : "ai.onnx";
    char in[16], out[16], attrs[512] = "";
    snprintf(in, sizeof in,
             imax < 0       ? "%d+"
             : imin == imax ? "%d"
                            : "%d-%d",
             imin, imax);
    snprintf(out, sizeof out,
             omax < 0       ? "%d+"
             : omin == omax ? "%d"
                            : "%d-%d",
             omin, omax);
    json_t *jattrs = json ? json_array() : NULL;
    size_t used = 0;
    for (size_t a = 0; a < ccg_op_num_attrs((ccg_op)op); a++) {
      ccg_attr_type t;
      bool req;
      const char *name = ccg_op_attr_info((ccg_op)op, a, &t, &req);
      if (json)
        json_array_append_new(jattrs, json_pack("{s:s,s:s,s:b}", "name", name,
                                                "type", ccg_attr_type_name(t),
                                                "required", req));
      else if (used < sizeof attrs)
        used += (size_t)snprintf(attrs + used, sizeof attrs - used, "%s%s:%s%s",
                                 a ? " " : "", name, ccg_attr_type_name(t),
                                 req ? "!" : "");
    }
    if (json)
      json_array_append_new(
          arr,
          json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:b,s:o}", "op",
                    ccg_op_name((ccg_op)op), "domain", dom, "min_inputs", imin,
                    "max_inputs", imax, "min_outputs", omin, "max_outputs",
                    omax, "collective", ccg_op_is_collective((ccg_op)op),
                    "attributes", jattrs));
    else
      printf("%-20s %-8s %-7s %-7s %s\n", ccg_op_name((ccg_op)op), dom, in, out,
             attrs);
  }
  if (json)
    return print_json(
        json_pack("{s:i,s:o}", "count", CCG_OP_COUNT, "ops", arr));
  printf("\n%d ops ('!' = required attribute; -1 max = unbounded)\n",
         CCG_OP_COUNT);
  return EXIT_OK;
}

/* ---- mesh ---------------------------------------------------------------- */

static json_t *group_json(const ccg_mesh *m, unsigned mask) {
  json_t *groups = json_array();
  int64_t world = ccg_mesh_world_size(m), w = ccg_mesh_group_size(m, mask);
  int64_t *ranks = calloc((size_t)w, sizeof *ranks);
  if (!ranks)
    return groups;
  for (int64_t r = 0; r < world; r++) {
    if (ccg_mesh_rank_in_group(m, r, mask) != 0)
      continue; /* each group once, from its first rank */
    ccg_mesh_group_ranks(m, r, mask, ranks);
    json_t *g = json_array();
    for (int64_t k = 0; k < w; k++)
      json_array_append_new(g, json_integer(ranks[k]));
    json_array_append_new(groups, g);
  }
  free(ranks);
  return groups;
}

static void print_groups(const ccg_mesh *m, unsigned mask, const char *axes) {
  json_t *groups = group_json(m, mask);
  printf("groups over %s (size %lld):", axes,
         (long long)ccg_mesh_group_size(m, mask));
  size_t i, k;
  json_t *g, *r;
  json_array_foreach(groups, i, g) {
    printf(" [");
    json_array_foreach(g, k, r) {
      printf("%s%lld", k ? " " : "", (long long)json_integer_value(r));
    }
    printf("]");
  }
  printf("\n");
  json_decref(groups);
}

static int cmd_mesh(int argc, char **argv) {
  const command *self = &mesh_command;
  const char *spec = NULL, *axes = NULL;
  bool json = false;
  const option opts[] = {{"--json", NULL, &json}, {"--axes", &axes, NULL}};
  int rc = parse_args(self, argc, argv, opts, 2, &spec, 1);
  if (rc >= 0)
    return rc;
  if (!spec)
    return usage_error(self, "%s", "missing the mesh SPEC");
  ccg_mesh m;
  if (ccg_mesh_parse(spec, &m) != CCG_STATUS_OK) {
    fprintf(stderr, "ccgraph mesh: %s\n", ccg_last_error(NULL));
    return EXIT_BAD_INPUT;
  }
  unsigned mask = 0;
  if (axes && ccg_mesh_axes_mask(&m, axes, &mask) != CCG_STATUS_OK) {
    fprintf(stderr, "ccgraph mesh: %s\n", ccg_last_error(NULL));
    return EXIT_BAD_INPUT;
  }
  int64_t world = ccg_mesh_world_size(&m);
  if (json) {
    json_t *jaxes = json_array(), *coords = json_array(),
           *groups = json_object();
    for (int i = 0; i < m.ndims; i++)
      json_array_append_new(jaxes, json_pack("{s:s,s:I}", "name", m.names[i],
                                             "size", (json_int_t)m.sizes[i]));
    for (int64_t r = 0; r < world; r++) {
      int64_t c[CCG_MAX_MESH_AXES];
      ccg_mesh_coords(&m, r, c);
      json_t *jc = json_array();
      for (int i = 0; i < m.ndims; i++)
        json_array_append_new(jc, json_integer(c[i]));
      json_array_append_new(coords, jc);
    }
    for (int i = 0; i < m.ndims && !axes; i++)
      json_object_set_new(groups, m.names[i], group_json(&m, 1u << i));
    if (axes)
      json_object_set_new(groups, axes, group_json(&m, mask));
    return print_json(json_pack("{s:o,s:I,s:o,s:o}", "axes", jaxes, "world",
                                (json_int_t)world, "coords", coords, "groups",
                                groups));
  }
  char buf[128];
  ccg_mesh_format(&m, buf, sizeof buf);
  printf("mesh %s: %lld ranks\n", buf, (long long)world);
  for (int64_t r = 0; r < world; r++) {
    int64_t c[CCG_MAX_MESH_AXES];
    ccg_mesh_coords(&m, r, c);
    printf("  rank %lld:", (long long)r);
    for (int i = 0; i < m.ndims; i++)
      printf(" %s=%lld", m.names[i], (long long)c[i]);
    printf("\n");
  }
  if (axes)
    print_groups(&m, mask, axes);
  for (int i = 0; i < m.ndims && !axes; i++)
    print_groups(&m, 1u << i, m.names[i]);
  return EXIT_OK;
}

/* ---- dispatch ------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (argc < 2) {
    print_main_usage(stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (is_help(cmd) || strcmp(cmd, "help") == 0) {
    if (argc > 2 && strcmp(cmd, "help") == 0) {
      for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[2], commands[i]->name) == 0) {
          fputs(commands[i]->usage, stdout);
          return EXIT_OK;
        }
      fprintf(stderr, "ccgraph: unknown command '%s'\n", argv[2]);
      return EXIT_USAGE;
    }
    print_main_usage(stdout);
    return EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("ccgraph %s\n", ccg_version());
    return EXIT_OK;
  }
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(cmd, commands[i]->name) == 0)
      return commands[i]->run(argc - 1, argv + 1);
  fprintf(stderr, "ccgraph: unknown command '%s'\n\n", cmd);
  print_main_usage(stderr);
  return EXIT_USAGE;
}
