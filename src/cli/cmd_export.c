/* ccgraph export: reads a model, or every rank's model of a program, and
 * writes it again with other export options: the ONNX Runtime dialect of
 * the collectives (com.microsoft ops), another ai.onnx opset, or the
 * initializers inline. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int cmd_export(int argc, char **argv);

const command cli_export_command = {
    "export", "write a model (or per-rank models) with other export options",
    "usage: ccgraph export MODEL.onnx|DIR -o OUT [--dialect ccgraph|ort]\n"
    "                      [--opset N] [--inline] [--name NAME] [--json]\n"
    "\n"
    "Imports a model, or the per-rank models <name>.rank<r>.onnx of a\n"
    "folder, and writes it again: one model to the file OUT, per-rank\n"
    "models into the folder OUT (made if missing). Every rank's graph,\n"
    "mesh, placements and mapping tags go through unchanged; what changes\n"
    "is how they are written. If any rank fails, nothing is left.\n"
    "  -o, --out OUT          the model file, or the folder for per-rank\n"
    "                         models\n"
    "  --dialect ccgraph|ort  collectives in the ccgraph domain (default) or\n"
    "                         as ONNX Runtime's com.microsoft ops\n"
    "  --opset N              ai.onnx opset, 17..24 (default 17)\n"
    "  --inline               every initializer inside the model (default:\n"
    "                         those above 1 MiB in OUT.data beside it)\n"
    "  --name NAME            the program in a folder holding several\n"
    "  --json                 one JSON document on stdout\n",
    cmd_export};

static int cmd_export(int argc, char **argv) {
  const command *self = &cli_export_command;
  const char *path = NULL, *out = NULL, *dialect = NULL, *opset = NULL,
             *name = NULL;
  bool inl = false, json = false;
  const option opts[] = {{"-o", &out, NULL},
                         {"--out", &out, NULL},
                         {"--dialect", &dialect, NULL},
                         {"--opset", &opset, NULL},
                         {"--inline", NULL, &inl},
                         {"--name", &name, NULL},
                         {"--json", NULL, &json}};
  int rc =
      parse_args(self, argc, argv, opts, sizeof opts / sizeof *opts, &path, 1);
  if (rc >= 0)
    return rc;
  if (!path)
    return usage_error(self, "missing the model or folder");
  if (!out)
    return usage_error(self, "missing -o OUT");
  ccg_onnx_export_options eo = CCG_ONNX_EXPORT_OPTIONS_INIT;
  rc = cli_export_options(self, opset, dialect, &eo);
  if (rc >= 0)
    return rc;
  if (inl)
    eo.external_threshold = SIZE_MAX;
  cli_program p;
  const char *paths[1] = {path};
  rc = cli_load_program(self->name, paths, 1, name, &p);
  if (rc != EXIT_OK)
    return rc;
  rc = cli_write_program(self, &p, out, &eo);
  if (rc == EXIT_OK && json) {
    json_t *doc = json_pack(
        "{s:s,s:I,s:b,s:I,s:s}", "out", out, "models", (json_int_t)p.n,
        "per_rank", p.per_rank, "opset", (json_int_t)eo.opset, "dialect",
        eo.dialect == CCG_ONNX_DIALECT_ORT ? "ort" : "ccgraph");
    rc = doc ? print_json(doc) : cli_fail(self, EXIT_RUNTIME, "out of memory");
  } else if (rc == EXIT_OK) {
    printf("ccgraph export: %zu model%s written to %s (opset %lld, %s "
           "dialect)\n",
           p.n, p.n == 1 ? "" : "s", out, (long long)eo.opset,
           eo.dialect == CCG_ONNX_DIALECT_ORT ? "ort" : "ccgraph");
  }
  cli_program_free(&p);
  return rc;
}
