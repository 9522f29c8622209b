/* Shared pieces of the tool's subcommands (cli.h). */
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_help(const char *a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

int cli_usage_error(const cli_command *self, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ccgraph %s: ", self->name);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n%s", self->usage);
  return CLI_USAGE;
}

int cli_fail(const cli_command *self, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ccgraph %s: ", self->name);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return code;
}

int cli_status_code(ccg_status st) {
  switch (st) {
  case CCG_STATUS_OK:
    return CLI_OK;
  case CCG_STATUS_INVALID_ARG:
  case CCG_STATUS_SHAPE:
  case CCG_STATUS_DTYPE:
  case CCG_STATUS_UNSUPPORTED:
  case CCG_STATUS_PARSE:
  case CCG_STATUS_IO:
    return CLI_BAD_INPUT;
  default:
    return CLI_RUNTIME;
  }
}

int cli_parse_args(const cli_command *self, int argc, char **argv,
                   const cli_option *opts, size_t n_opts, const char **pos,
                   size_t max_pos, size_t *n_pos) {
  size_t np = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (is_help(a)) {
      fputs(self->usage, stdout);
      return CLI_OK;
    }
    const cli_option *o = NULL;
    for (size_t k = 0; a[0] == '-' && k < n_opts; k++)
      if (strcmp(a, opts[k].name) == 0)
        o = &opts[k];
    if (o && o->flag) {
      *o->flag = true;
    } else if (o) {
      if (++i == argc)
        return cli_usage_error(self, "%s needs a value", a);
      if (o->list) {
        if (*o->n_list >= o->max_list)
          return cli_usage_error(self, "%s given more than %zu times", a,
                                 o->max_list);
        o->list[(*o->n_list)++] = argv[i];
      } else {
        *o->value = argv[i];
      }
    } else if (a[0] == '-' && a[1] != '\0') {
      return cli_usage_error(self, "unknown option '%s'", a);
    } else if (np < max_pos) {
      pos[np++] = a;
    } else {
      return cli_usage_error(self, "unexpected argument '%s'", a);
    }
  }
  if (n_pos)
    *n_pos = np;
  return -1;
}

int cli_print_json(json_t *doc) {
  if (!doc || json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) != 0) {
    json_decref(doc);
    fprintf(stderr, "ccgraph: cannot write JSON output\n");
    return CLI_RUNTIME;
  }
  json_decref(doc);
  fputc('\n', stdout);
  return CLI_OK;
}

void cli_progress(const char *what, size_t i, size_t n) {
  if (!isatty(STDOUT_FILENO))
    return;
  printf("\r%s %zu/%zu", what, i, n);
  fflush(stdout);
}

void cli_progress_done(void) {
  if (!isatty(STDOUT_FILENO))
    return;
  printf("\r\033[K");
  fflush(stdout);
}

bool cli_parse_int(const char *text, long long min, long long max,
                   long long *out) {
  if (!text || !*text)
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || v < min || v > max)
    return false;
  *out = v;
  return true;
}

bool cli_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

void cli_free_paths(char **paths, size_t n) {
  for (size_t i = 0; paths && i < n; i++)
    free(paths[i]);
  free(paths);
}

/* "<name>.rank<r>.onnx" -> r, and the name's length; -1 if not of that
 * form. */
static long long rank_of(const char *file, size_t *name_len) {
  size_t len = strlen(file);
  if (len < 11 || strcmp(file + len - 5, ".onnx") != 0)
    return -1;
  const char *p = file + len - 5;
  const char *digits = p;
  while (digits > file && digits[-1] >= '0' && digits[-1] <= '9')
    digits--;
  if (digits == p || digits - file < 6 || strncmp(digits - 5, ".rank", 5))
    return -1;
  char buf[16];
  size_t nd = (size_t)(p - digits);
  if (nd >= sizeof buf)
    return -1;
  memcpy(buf, digits, nd);
  buf[nd] = '\0';
  *name_len = (size_t)(digits - 5 - file);
  return atoll(buf);
}

int cli_rank_models(const cli_command *self, const char *dir, char ***paths,
                    size_t *n) {
  DIR *d = opendir(dir);
  if (!d)
    return cli_fail(self, CLI_BAD_INPUT, "cannot open folder '%s': %s", dir,
                    strerror(errno));
  char name[256] = "";
  long long max_rank = -1;
  size_t count = 0;
  int rc = CLI_OK;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t nl;
    long long r = rank_of(e->d_name, &nl);
    if (r < 0)
      continue;
    if (nl >= sizeof name) {
      rc = cli_fail(self, CLI_BAD_INPUT, "'%s/%s': model name too long", dir,
                    e->d_name);
      break;
    }
    if (!count) {
      memcpy(name, e->d_name, nl);
      name[nl] = '\0';
    } else if (strlen(name) != nl || strncmp(name, e->d_name, nl) != 0) {
      rc = cli_fail(self, CLI_BAD_INPUT,
                    "folder '%s' holds the rank models of two models ('%s' "
                    "and '%.*s')",
                    dir, name, (int)nl, e->d_name);
      break;
    }
    count++;
    if (r > max_rank)
      max_rank = r;
  }
  closedir(d);
  if (rc != CLI_OK)
    return rc;
  if (!count)
    return cli_fail(self, CLI_BAD_INPUT,
                    "folder '%s' holds no per-rank model (<name>.rank<r>.onnx)",
                    dir);
  if (max_rank + 1 != (long long)count)
    return cli_fail(self, CLI_BAD_INPUT,
                    "folder '%s': %zu rank models of '%s' but the highest "
                    "rank is %lld (a rank is missing)",
                    dir, count, name, max_rank);
  char **p = calloc(count, sizeof *p);
  if (!p)
    return cli_fail(self, CLI_RUNTIME, "out of memory");
  for (size_t r = 0; r < count; r++) {
    size_t len = strlen(dir) + strlen(name) + 32;
    p[r] = malloc(len);
    if (!p[r]) {
      cli_free_paths(p, count);
      return cli_fail(self, CLI_RUNTIME, "out of memory");
    }
    snprintf(p[r], len, "%s/%s.rank%zu.onnx", dir, name, r);
    if (access(p[r], R_OK) != 0) {
      rc = cli_fail(self, CLI_BAD_INPUT, "cannot read '%s': %s", p[r],
                    strerror(errno));
      cli_free_paths(p, count);
      return rc;
    }
  }
  *paths = p;
  *n = count;
  return CLI_OK;
}

int cli_import(const cli_command *self, const char *path, ccg_graph **out) {
  ccg_status st = ccg_onnx_import_file(path, NULL, out);
  if (st != CCG_STATUS_OK)
    return cli_fail(self, cli_status_code(st), "%s", ccg_last_error(NULL));
  return CLI_OK;
}

size_t cli_count_collectives(const ccg_graph *g, size_t *counts) {
  size_t total = 0;
  memset(counts, 0, CCG_OP_COUNT * sizeof *counts);
  for (size_t n = 0; n < ccg_graph_num_nodes(g); n++) {
    ccg_op op = ccg_node_op(g, (ccg_node_id)n);
    if (ccg_op_is_collective(op)) {
      counts[op]++;
      total++;
    }
  }
  return total;
}

void cli_format_collectives(const size_t *counts, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int op = 0; op < CCG_OP_COUNT && used < size; op++)
    if (counts[op])
      used += (size_t)snprintf(buf + used, size - used, "%s%s %zu",
                               used ? ", " : "", ccg_op_name((ccg_op)op),
                               counts[op]);
  if (!used)
    snprintf(buf, size, "none");
}

json_t *cli_collectives_json(const size_t *counts) {
  json_t *o = json_object();
  for (int op = 0; op < CCG_OP_COUNT; op++)
    if (counts[op])
      json_object_set_new(o, ccg_op_name((ccg_op)op),
                          json_integer((json_int_t)counts[op]));
  return o;
}
