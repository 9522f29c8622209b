/* Argument parsing and output helpers every subcommand shares. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

int usage_error(const command *c, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "ccgraph %s: ", c->name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n%s", c->usage);
  return EXIT_USAGE;
}

bool is_help(const char *a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* Parses a subcommand's arguments (argv[0] is its name) into options and up
 * to max_pos positional arguments. Returns -1 to go on, or the exit status:
 * 0 after --help, EXIT_USAGE on a usage error. */
int parse_args(const command *self, int argc, char **argv, const option *opts,
               size_t n_opts, const char **pos, size_t max_pos) {
  size_t n_pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (is_help(a)) {
      fputs(self->usage, stdout);
      return EXIT_OK;
    }
    const option *o = NULL;
    for (size_t k = 0; a[0] == '-' && k < n_opts; k++)
      if (strcmp(a, opts[k].name) == 0)
        o = &opts[k];
    if (o && o->flag) {
      *o->flag = true;
    } else if (o) {
      if (++i == argc)
        return usage_error(self, "%s needs a value", a);
      if (o->list) {
        if (*o->n_list == o->max_list)
          return usage_error(self, "%s: at most %zu times", a, o->max_list);
        o->list[(*o->n_list)++] = argv[i];
      } else {
        *o->value = argv[i];
      }
    } else if (a[0] == '-' && a[1] != '\0') {
      return usage_error(self, "unknown option '%s'", a);
    } else if (n_pos < max_pos) {
      pos[n_pos++] = a;
    } else {
      return usage_error(self, "unexpected argument '%s'", a);
    }
  }
  return -1;
}

/* Prints a JSON document to stdout; runtime failure if it cannot. */
int print_json(json_t *doc) {
  if (!doc || json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) != 0) {
    json_decref(doc);
    fprintf(stderr, "ccgraph: cannot write JSON output\n");
    return EXIT_RUNTIME;
  }
  json_decref(doc);
  fputc('\n', stdout);
  return EXIT_OK;
}

/* ---- shared by the subcommands ---------------------------------------- */

int cli_fail(const command *self, int code, const char *fmt, ...) {
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
    return EXIT_OK;
  case CCG_STATUS_INVALID_ARG:
  case CCG_STATUS_SHAPE:
  case CCG_STATUS_DTYPE:
  case CCG_STATUS_UNSUPPORTED:
  case CCG_STATUS_PARSE:
  case CCG_STATUS_IO:
    return EXIT_BAD_INPUT;
  default:
    return EXIT_RUNTIME;
  }
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

bool cli_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
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
