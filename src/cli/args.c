/* Argument parsing and output helpers every subcommand shares. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int usage_error(const command *c, const char *fmt, const char *arg) {
  fprintf(stderr, "ccgraph %s: ", c->name);
  fprintf(stderr, fmt, arg);
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
      *o->value = argv[i];
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
