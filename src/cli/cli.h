/* Private to the tool: what every subcommand shares. A subcommand lives in
 * its own file, defines a `command` and is listed in main.c's table. */
#ifndef CCG_CLI_CLI_H
#define CCG_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "ccgraph/ccgraph.h"

/* Exit codes, documented in `ccgraph --help` and the README. */
enum {
  EXIT_OK = 0,
  EXIT_USAGE = 1,
  EXIT_BAD_INPUT = 2,
  EXIT_RUNTIME = 3,
  EXIT_CHECK = 4, /* a comparison above its tolerance (demo, run --check) */
};

typedef struct command {
  const char *name;
  const char *summary;
  const char *usage;
  int (*run)(int argc, char **argv);
} command;

/* One option of a subcommand: "--name VALUE" when `value` is set, a flag
 * "--name" when `flag` is set. */
typedef struct option {
  const char *name;
  const char **value;
  bool *flag;
  /* A repeatable "--name VALUE": values appended to list (max_list room),
   * *n_list counting them. */
  const char **list;
  size_t *n_list;
  size_t max_list;
} option;

/* Prints "ccgraph NAME: <message>" and the usage to stderr; EXIT_USAGE. */
int usage_error(const command *c, const char *fmt, ...) CCG_PRINTF(2, 3);
/* Prints "ccgraph NAME: <message>" to stderr and returns `code`. */
int cli_fail(const command *self, int code, const char *fmt, ...)
    CCG_PRINTF(3, 4);
/* The exit code for a library status: bad input (2) for what the user gave
 * (argument, shape, dtype, parse, unsupported, i/o), runtime (3) else. */
int cli_status_code(ccg_status st);
/* A progress line on stdout, only when stdout is a terminal: "\r<what>
 * i/n"; cli_progress_done clears it. */
void cli_progress(const char *what, size_t i, size_t n);
void cli_progress_done(void);
/* True if `path` is a folder. */
bool cli_is_dir(const char *path);
/* Collective nodes of g by op: counts[op] (CCG_OP_COUNT entries); returns
 * the total. */
size_t cli_count_collectives(const ccg_graph *g, size_t *counts);
/* "AllReduce 4, AllGather 2" (or "none") into buf. */
void cli_format_collectives(const size_t *counts, char *buf, size_t size);
/* {"AllReduce": 4, ...}. */
json_t *cli_collectives_json(const size_t *counts);
bool is_help(const char *a);
/* Parses a subcommand's arguments (argv[0] is its name) into options and up
 * to max_pos positional arguments. Returns -1 to go on, or the exit status:
 * 0 after --help, EXIT_USAGE on a usage error. */
int parse_args(const command *self, int argc, char **argv, const option *opts,
               size_t n_opts, const char **pos, size_t max_pos);
/* Prints a JSON document to stdout (steals doc); runtime failure if it
 * cannot. */
int print_json(json_t *doc);

/* load.c: the graphs of one program from model files or a folder of
 * per-rank models (<name>.rank<r>.onnx). `paths` are n_paths files or one
 * folder; `name` picks the program in a folder holding several (may be
 * NULL). "new": free with cli_program_free. Errors are printed as
 * "ccgraph CMD: ..." and give EXIT_BAD_INPUT. */
typedef struct cli_program {
  ccg_graph **graphs;
  size_t n;
  bool per_rank;  /* read from <name>.rank<r>.onnx files */
  char name[256]; /* that <name> */
} cli_program;
int cli_load_program(const char *cmd, const char *const *paths, size_t n_paths,
                     const char *name, cli_program *out);
/* One model file; on failure prints "ccgraph CMD: ..." and returns
 * EXIT_BAD_INPUT. "new": ccg_graph_free. */
int cli_import(const char *cmd, const char *path, ccg_graph **out);

/* The arguments of a subcommand that reads a program: model paths and
 * --name, --stage-axis, --json, plus the command's own options. */
#define CLI_MAX_PATHS 256
#define CLI_MAX_DIMS 16
typedef struct cli_program_args {
  const char *paths[CLI_MAX_PATHS];
  size_t n_paths;
  const char *name, *stage_axis, *dims;
  bool json;
  char dim_text[512]; /* --dims split into names */
  const char *dim_names[CLI_MAX_DIMS];
  int64_t dim_values[CLI_MAX_DIMS];
  size_t n_dims;
} cli_program_args;
/* parse_args for such a command (at most 8 extra options), --dims
 * NAME=V,... included; -1 to go on, else the exit status (a missing path or
 * a bad --dims is a usage error). */
int cli_parse_program_args(const command *self, int argc, char **argv,
                           const option *extra, size_t n_extra,
                           cli_program_args *a);
/* "batch=8,seq=128" (values >= 0) into names and values (at most max),
 * the names pointing into buf (a copy of text); false when text is not
 * that form or does not fit. */
bool cli_parse_dims(const char *text, char *buf, size_t size,
                    const char **names, int64_t *values, size_t max, size_t *n);
/* The stage axis and named dims of a into o (borrowed from a). */
void cli_program_options(const cli_program_args *a, ccg_verify_options *o);
void cli_program_free(cli_program *p);
/* The export options of --opset and --dialect (either may be NULL: the
 * default). A bad value is a usage error: returns EXIT_USAGE, else -1. */
int cli_export_options(const command *self, const char *opset,
                       const char *dialect, ccg_onnx_export_options *eo);
/* Writes p: one model file `out`, or for per-rank models the folder `out`
 * with <name>.rank<r>.onnx; missing folders (the file's parents, or the
 * folder and its parents) are made. If anything fails, what was written
 * and the folders made are removed. Returns the exit status (messages
 * printed). */
int cli_write_program(const command *self, const cli_program *p,
                      const char *out, const ccg_onnx_export_options *eo);
/* Every rank's view of the SPMD graph g as dir/<name>.rank<r>.onnx, as
 * cli_write_program writes per-rank models (folders made, all or nothing).
 * Returns the exit status. */
int cli_export_spmd(const command *self, ccg_graph *g, const char *dir,
                    const char *name, const ccg_onnx_export_options *eo);

/* dirs.c: output folders. cli_make_dirs makes `path` and every missing
 * folder above it (mkdir -p), cli_make_parent_dirs those above a file,
 * recording each made in d; on failure (message printed, exit status
 * returned) the ones this call made are gone again. cli_dirs_undo removes what
 * d made (deepest first, empty folders only), cli_dirs_keep forgets it. */
#define CLI_MAX_DIRS 64
typedef struct cli_dirs {
  char *made[CLI_MAX_DIRS];
  int n;
} cli_dirs;
int cli_make_dirs(const command *self, const char *path, cli_dirs *d);
int cli_make_parent_dirs(const command *self, const char *file, cli_dirs *d);
void cli_dirs_undo(cli_dirs *d);
void cli_dirs_keep(cli_dirs *d);

/* pipeline.c: `ccgraph shard` with a pipeline axis. The options as given
 * (strings; NULL when absent) and whether the mesh has the axis. */
typedef struct cli_pp_args {
  const char *axis, *stages, *microbatches, *schedule;
  bool in_mesh;
} cli_pp_args;
/* Checks them into *po: -1 to go on, else a usage error's status. */
int cli_pipeline_options(const command *self, const cli_pp_args *a,
                         ccg_pipeline_options *po);
/* Splits g (its mesh has the axis) into stages and writes every rank's
 * stage as out/<name>.rank<r>.onnx (all or nothing); prints the stages.
 * Returns the exit status. */
int cli_shard_pipeline(const command *self, ccg_graph *g,
                       const ccg_pipeline_options *po, const char *out,
                       const char *name, const ccg_onnx_export_options *eo,
                       bool json);

extern const command cli_demo_command;
extern const command cli_grad_command;
extern const command cli_shard_command;
extern const command cli_plan_command;
extern const command cli_inspect_command;
extern const command cli_run_command;
extern const command cli_verify_command;
extern const command cli_cost_command;
extern const command cli_export_command;

/* npy.c: NumPy .npy files (format 1.0-3.0, C order, little-endian; the
 * IR's dtypes but bf16). Reading: errors print "ccgraph CMD: FILE: ..." and
 * give EXIT_BAD_INPUT; *out's data is malloc'd (free it). Writing: through a
 * temporary file renamed at the end. */
int cli_npy_read(const char *cmd, const char *path, ccg_tensor *out);
int cli_npy_write(const char *cmd, const char *path, const ccg_tensor *t);

/* run_partial.c. Output `name` of rank r (of g) placed Partial(avg|sum) on
 * mesh axes: the mean or sum of the values of r's group on those axes
 * (have[q]: rank q's tensor, NULL where not run here) into *out, its data
 * in *owned (freed by the caller). 1 done, 0 not Partial, -1 not possible
 * here (a member missing, another reduce op, not f32/f64). */
int cli_partial_combine(ccg_graph *g, const char *name, int r,
                        const ccg_tensor *const *have, int world,
                        ccg_tensor *out, void **owned);

#endif
