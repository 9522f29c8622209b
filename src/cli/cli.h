/* The ccgraph tool's shared pieces: exit codes, the subcommand record, option
 * parsing, JSON output and the progress line. Each subcommand lives in its
 * own cmd_<name>.c and is one row of main.c's table. */
#ifndef CCG_CLI_H
#define CCG_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "ccgraph/ccgraph.h"

/* Exit codes, documented in `ccgraph --help` and docs/cli.md. */
enum {
  CLI_OK = 0,
  CLI_USAGE = 1,
  CLI_BAD_INPUT = 2,
  CLI_RUNTIME = 3,
  CLI_CHECK_FAILED = 4,
};

typedef struct cli_command {
  const char *name;
  const char *summary;
  const char *usage;
  int (*run)(const struct cli_command *self, int argc, char **argv);
} cli_command;

/* One option: "--name VALUE" when `value` is set, a flag "--name" when `flag`
 * is set, a repeatable "--name VALUE" when `list` is set (values appended to
 * *list, *n_list counting them; the array holds `max_list`). */
typedef struct cli_option {
  const char *name;
  const char **value;
  bool *flag;
  const char **list;
  size_t *n_list;
  size_t max_list;
} cli_option;

/* Parses a subcommand's arguments (argv[0] is its name) into options and up
 * to max_pos positional arguments (*n_pos gets the count; may be NULL).
 * Returns -1 to go on, or the exit status: 0 after --help, CLI_USAGE on a
 * usage error (message and usage on stderr). */
int cli_parse_args(const cli_command *self, int argc, char **argv,
                   const cli_option *opts, size_t n_opts, const char **pos,
                   size_t max_pos, size_t *n_pos);

/* Prints "ccgraph NAME: <message>" and the usage to stderr; CLI_USAGE. */
int cli_usage_error(const cli_command *self, const char *fmt, ...)
    CCG_PRINTF(2, 3);
/* Prints "ccgraph NAME: <message>" to stderr and returns `code`. */
int cli_fail(const cli_command *self, int code, const char *fmt, ...)
    CCG_PRINTF(3, 4);
/* The exit code for a library status: bad input (2) for what the user gave
 * (argument, shape, dtype, parse, unsupported, i/o), runtime (3) else. */
int cli_status_code(ccg_status st);

/* Prints a JSON document to stdout (steals doc); CLI_RUNTIME if it cannot. */
int cli_print_json(json_t *doc);

/* A progress line on stdout, only when stdout is a terminal: "\r<what>
 * i/n"; cli_progress_done clears it. */
void cli_progress(const char *what, size_t i, size_t n);
void cli_progress_done(void);

/* Parses a positive integer option value; false if it is not one. */
bool cli_parse_int(const char *text, long long min, long long max,
                   long long *out);

/* True if `path` is a folder. */
bool cli_is_dir(const char *path);

/* The per-rank models of a folder written by `ccgraph shard`
 * (<name>.rank<r>.onnx for r = 0..n-1): their paths, in rank order. "new":
 * free with cli_free_paths. Errors (message on stderr through self): no
 * such files, a gap in the ranks, or two model names. */
int cli_rank_models(const cli_command *self, const char *dir, char ***paths,
                    size_t *n);
void cli_free_paths(char **paths, size_t n);

/* Imports a model; on failure prints the error and returns the exit code. */
int cli_import(const cli_command *self, const char *path, ccg_graph **out);

/* Collective nodes of g by op: counts[op] (CCG_OP_COUNT entries); returns
 * the total. */
size_t cli_count_collectives(const ccg_graph *g, size_t *counts);
/* "AllReduce 4, AllGather 2" (or "none") into buf. */
void cli_format_collectives(const size_t *counts, char *buf, size_t size);
/* {"AllReduce": 4, ...}. */
json_t *cli_collectives_json(const size_t *counts);

extern const cli_command cli_cmd_ops, cli_cmd_mesh, cli_cmd_shard,
    cli_cmd_inspect;

#endif
