/* Loading the graphs of one program: model files given one by one, or a
 * folder of per-rank models <name>.rank<r>.onnx (ccg_onnx_export_ranks). A
 * single file <name>.rank<r>.onnx stands for all ranks of <name> beside
 * it; any other single file is one SPMD model. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

#define MAX_RANKS 4096

void cli_program_free(cli_program *p) {
  for (size_t i = 0; p->graphs && i < p->n; i++)
    ccg_graph_free(p->graphs[i]);
  free(p->graphs);
  p->graphs = NULL;
  p->n = 0;
}

/* "<name>.rank<r>.onnx": the name's length and r; false otherwise. */
static bool parse_rank_file(const char *file, size_t *name_len, long *rank) {
  size_t n = strlen(file);
  if (n < 5 || strcmp(file + n - 5, ".onnx") != 0)
    return false;
  size_t end = n - 5, d = end;
  while (d > 0 && file[d - 1] >= '0' && file[d - 1] <= '9')
    d--;
  if (d == end || d < 6 || strncmp(file + d - 5, ".rank", 5) != 0)
    return false;
  if (end - d > 6 || (file[d] == '0' && end - d > 1))
    return false;
  *rank = strtol(file + d, NULL, 10);
  *name_len = d - 5;
  return *name_len > 0;
}

int cli_import(const char *cmd, const char *path, ccg_graph **out) {
  if (ccg_onnx_import_file(path, NULL, out) != CCG_STATUS_OK) {
    fprintf(stderr, "ccgraph %s: %s\n", cmd, ccg_last_error(NULL));
    return EXIT_BAD_INPUT;
  }
  return EXIT_OK;
}

/* Every rank of `name` in `dir`: ranks 0..n-1, none missing. */
static int load_ranks(const char *cmd, const char *dir, const char *name,
                      cli_program *out) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "ccgraph %s: cannot open folder '%s'\n", cmd, dir);
    return EXIT_BAD_INPUT;
  }
  long max_rank = -1;
  size_t count = 0;
  char first[256] = "";
  int rc = EXIT_OK;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t nl;
    long r;
    if (!parse_rank_file(e->d_name, &nl, &r))
      continue;
    if (name && (strlen(name) != nl || strncmp(e->d_name, name, nl) != 0))
      continue;
    if (!name && !*first)
      snprintf(first, sizeof first, "%.*s", (int)nl, e->d_name);
    else if (!name && (strlen(first) != nl || strncmp(e->d_name, first, nl))) {
      fprintf(stderr,
              "ccgraph %s: '%s' holds the models of several programs ('%s' "
              "and '%.*s'); pick one with --name\n",
              cmd, dir, first, (int)nl, e->d_name);
      rc = EXIT_BAD_INPUT;
      break;
    }
    if (r >= MAX_RANKS) {
      fprintf(stderr, "ccgraph %s: '%s/%s': rank %ld is above %d\n", cmd, dir,
              e->d_name, r, MAX_RANKS - 1);
      rc = EXIT_BAD_INPUT;
      break;
    }
    count++;
    if (r > max_rank)
      max_rank = r;
  }
  closedir(d);
  const char *prog = name ? name : first;
  if (rc == EXIT_OK && count == 0) {
    fprintf(stderr, "ccgraph %s: no per-rank models %s.rank<r>.onnx in '%s'\n",
            cmd, name ? name : "<name>", dir);
    return EXIT_BAD_INPUT;
  }
  if (rc != EXIT_OK)
    return rc;
  size_t n = (size_t)max_rank + 1;
  out->graphs = calloc(n, sizeof *out->graphs);
  if (!out->graphs) {
    fprintf(stderr, "ccgraph %s: out of memory\n", cmd);
    return EXIT_RUNTIME;
  }
  out->n = n;
  out->per_rank = true;
  snprintf(out->name, sizeof out->name, "%s", prog);
  for (size_t r = 0; r < n && rc == EXIT_OK; r++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.rank%zu.onnx", dir, prog, r);
    struct stat st;
    if (stat(path, &st) != 0) {
      fprintf(stderr,
              "ccgraph %s: '%s' is missing (found ranks up to %ld of '%s')\n",
              cmd, path, max_rank, prog);
      rc = EXIT_BAD_INPUT;
    } else {
      rc = cli_import(cmd, path, &out->graphs[r]);
    }
  }
  if (rc != EXIT_OK)
    cli_program_free(out);
  return rc;
}

int cli_load_program(const char *cmd, const char *const *paths, size_t n_paths,
                     const char *name, cli_program *out) {
  memset(out, 0, sizeof *out);
  struct stat st;
  if (n_paths == 1 && stat(paths[0], &st) == 0 && S_ISDIR(st.st_mode))
    return load_ranks(cmd, paths[0], name, out);
  if (n_paths == 1) {
    const char *slash = strrchr(paths[0], '/');
    const char *file = slash ? slash + 1 : paths[0];
    size_t nl;
    long r;
    if (!name && parse_rank_file(file, &nl, &r)) {
      char dir[4096], prog[256];
      if (!slash)
        snprintf(dir, sizeof dir, ".");
      else if (slash == paths[0])
        snprintf(dir, sizeof dir, "/");
      else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - paths[0]), paths[0]);
      snprintf(prog, sizeof prog, "%.*s", (int)nl, file);
      return load_ranks(cmd, dir, prog, out);
    }
  }
  out->graphs = calloc(n_paths ? n_paths : 1, sizeof *out->graphs);
  if (!out->graphs) {
    fprintf(stderr, "ccgraph %s: out of memory\n", cmd);
    return EXIT_RUNTIME;
  }
  out->n = n_paths;
  for (size_t i = 0; i < n_paths; i++) {
    int rc = cli_import(cmd, paths[i], &out->graphs[i]);
    if (rc != EXIT_OK) {
      cli_program_free(out);
      return rc;
    }
  }
  return EXIT_OK;
}

bool cli_parse_dims(const char *text, char *buf, size_t size,
                    const char **names, int64_t *values, size_t max,
                    size_t *n) {
  *n = 0;
  if (strlen(text) >= size)
    return false;
  strcpy(buf, text);
  for (char *p = buf; *p;) {
    char *eq = strchr(p, '='), *comma = strchr(p, ',');
    if (!eq || eq == p || (comma && comma < eq) || *n == max)
      return false;
    *eq = '\0';
    char *end;
    long long v = strtoll(eq + 1, &end, 10);
    if (end == eq + 1 || v < 0 || (*end != ',' && *end != '\0'))
      return false;
    names[*n] = p;
    values[(*n)++] = v;
    p = *end ? end + 1 : end;
    *end = '\0';
  }
  return *n > 0;
}

int cli_parse_program_args(const command *self, int argc, char **argv,
                           const option *extra, size_t n_extra,
                           cli_program_args *a) {
  memset(a, 0, sizeof *a);
  option opts[4 + 8] = {{"--json", NULL, &a->json},
                        {"--name", &a->name, NULL},
                        {"--stage-axis", &a->stage_axis, NULL},
                        {"--dims", &a->dims, NULL}};
  size_t n = 4;
  for (size_t i = 0; i < n_extra && n < sizeof opts / sizeof opts[0]; i++)
    opts[n++] = extra[i];
  int rc = parse_args(self, argc, argv, opts, n, a->paths, CLI_MAX_PATHS);
  if (rc >= 0)
    return rc;
  while (a->n_paths < CLI_MAX_PATHS && a->paths[a->n_paths])
    a->n_paths++;
  if (a->n_paths == 0)
    return usage_error(self, "%s", "missing DIR or MODEL.onnx");
  if (a->dims &&
      !cli_parse_dims(a->dims, a->dim_text, sizeof a->dim_text, a->dim_names,
                      a->dim_values, CLI_MAX_DIMS, &a->n_dims))
    return usage_error(self, "--dims '%s' is not NAME=VALUE,...", a->dims);
  return -1;
}

void cli_program_options(const cli_program_args *a, ccg_verify_options *o) {
  o->stage_axis = a->stage_axis;
  o->dim_names = a->dim_names;
  o->dim_values = a->dim_values;
  o->n_dims = a->n_dims;
}

int cli_export_options(const command *self, const char *opset,
                       const char *dialect, ccg_onnx_export_options *eo) {
  if (opset) {
    char *end;
    long v = strtol(opset, &end, 10);
    if (*end || end == opset || v < 17 || v > 24)
      return usage_error(self, "--opset '%s': give 17 to 24", opset);
    eo->opset = v;
  }
  if (dialect && ccg_onnx_dialect_parse(dialect, &eo->dialect) != 0)
    return usage_error(self, "--dialect '%s': give ccgraph or ort", dialect);
  return -1;
}

/* Per-rank models in `dir`, graph r (or one SPMD graph, rank r's view,
 * when spmd) as rank r. The ORT dialect lacks ShardSlice and whole-mesh
 * ReduceScatter: each rank's graph is lowered first (ccg_lower), as ONNX
 * Runtime would run it. The message of a failure goes to msg. */
static ccg_status export_ranks(ccg_graph *const *gs, size_t n, bool spmd,
                               const char *dir, const char *name,
                               const ccg_onnx_export_options *eo, char *msg,
                               size_t size) {
  ccg_status st;
  if (eo->dialect != CCG_ONNX_DIALECT_ORT) {
    st = spmd ? ccg_onnx_export_ranks(gs[0], dir, name, eo)
              : ccg_onnx_export_rank_graphs(gs, n, dir, name, eo);
    if (st != CCG_STATUS_OK)
      snprintf(msg, size, "%s", ccg_last_error(gs[0]));
    return st;
  }
  ccg_graph **low = calloc(n, sizeof *low);
  if (!low) {
    snprintf(msg, size, "out of memory lowering %zu ranks", n);
    return CCG_STATUS_OOM;
  }
  st = CCG_STATUS_OK;
  for (size_t r = 0; r < n && st == CCG_STATUS_OK; r++) {
    ccg_graph *g = spmd ? gs[0] : gs[r];
    if ((st = ccg_lower(g, (int64_t)r, CCG_LOWER_ORT, &low[r])) != 0)
      snprintf(msg, size, "rank %zu: %s", r, ccg_last_error(g));
  }
  if (st == CCG_STATUS_OK) {
    ccg_onnx_export_options o = *eo;
    o.rank = -1; /* each lowered graph holds its rank's data */
    if ((st = ccg_onnx_export_rank_graphs(low, n, dir, name, &o)) != 0)
      snprintf(msg, size, "%s", ccg_last_error(low[0]));
  }
  for (size_t r = 0; r < n; r++)
    ccg_graph_free(low[r]);
  free(low);
  return st;
}

int cli_export_spmd(const command *self, ccg_graph *g, const char *dir,
                    const char *name, const ccg_onnx_export_options *eo) {
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  size_t world = mesh ? (size_t)ccg_mesh_world_size(mesh) : 1;
  char msg[1024];
  cli_dirs made = {0};
  int rc = cli_make_dirs(self, dir, &made);
  if (rc != EXIT_OK)
    return rc;
  ccg_status st = export_ranks(&g, world, true, dir, name, eo, msg, sizeof msg);
  if (st != CCG_STATUS_OK) {
    cli_dirs_undo(&made);
    return cli_fail(self, cli_status_code(st), "%s", msg);
  }
  cli_dirs_keep(&made);
  return EXIT_OK;
}

int cli_write_program(const command *self, const cli_program *p,
                      const char *out, const ccg_onnx_export_options *eo) {
  char msg[1024] = "";
  ccg_status st;
  cli_dirs made = {0};
  int rc = p->per_rank ? cli_make_dirs(self, out, &made)
                       : cli_make_parent_dirs(self, out, &made);
  if (rc != EXIT_OK)
    return rc;
  if (p->per_rank) {
    st =
        export_ranks(p->graphs, p->n, false, out, p->name, eo, msg, sizeof msg);
  } else if ((st = ccg_onnx_export_file(p->graphs[0], out, eo)) != 0) {
    snprintf(msg, sizeof msg, "%s", ccg_last_error(p->graphs[0]));
  }
  if (st != CCG_STATUS_OK) {
    cli_dirs_undo(&made);
    return cli_fail(self, cli_status_code(st), "%s", msg);
  }
  cli_dirs_keep(&made);
  return EXIT_OK;
}
