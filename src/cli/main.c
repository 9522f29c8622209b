/* The ccgraph tool: subcommand dispatch, usage, exit codes. Each subcommand
 * lives in its own cmd_<name>.c and is one row of the table below. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const cli_command *const commands[] = {
    &cli_cmd_ops,
    &cli_cmd_mesh,
    &cli_cmd_shard,
    &cli_cmd_inspect,
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void print_main_usage(FILE *f) {
  fprintf(f, "usage: ccgraph [--version] [--help] COMMAND [ARGS]\n\n"
             "Parallel model graphs with explicit collectives.\n\n"
             "Commands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-8s %s\n", commands[i]->name, commands[i]->summary);
  fprintf(f,
          "\n'ccgraph COMMAND --help' shows a command's options.\n\n"
          "Exit status: 0 ok, 1 usage error, 2 bad input (a file, a shape,\n"
          "a plan, a mesh), 3 runtime or communication failure, 4 a --check\n"
          "comparison above its tolerance.\n"
          "Environment: CCG_LOG=debug|info|warn|error|off sets the log "
          "level.\n");
}

static bool is_help(const char *a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

static const cli_command *find(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(name, commands[i]->name) == 0)
      return commands[i];
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_main_usage(stderr);
    return CLI_USAGE;
  }
  const char *cmd = argv[1];
  if (is_help(cmd) || strcmp(cmd, "help") == 0) {
    if (argc > 2 && strcmp(cmd, "help") == 0) {
      const cli_command *c = find(argv[2]);
      if (c) {
        fputs(c->usage, stdout);
        return CLI_OK;
      }
      fprintf(stderr, "ccgraph: unknown command '%s'\n", argv[2]);
      return CLI_USAGE;
    }
    print_main_usage(stdout);
    return CLI_OK;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("ccgraph %s\n", ccg_version());
    return CLI_OK;
  }
  const cli_command *c = find(cmd);
  if (c)
    return c->run(c, argc - 1, argv + 1);
  fprintf(stderr, "ccgraph: unknown command '%s'\n\n", cmd);
  print_main_usage(stderr);
  return CLI_USAGE;
}
