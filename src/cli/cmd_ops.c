/* ccgraph ops: the op registry as a table or JSON. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* ---- ops ----------------------------------------------------------------- */

static int run_ops(const cli_command *self, int argc, char **argv) {
  bool json = false;
  const cli_option opts[] = {{"--json", NULL, &json, NULL, NULL, 0}};
  int rc = cli_parse_args(self, argc, argv, opts, 1, NULL, 0, NULL);
  if (rc >= 0)
    return rc;
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
    return cli_print_json(
        json_pack("{s:i,s:o}", "count", CCG_OP_COUNT, "ops", arr));
  printf("\n%d ops ('!' = required attribute; -1 max = unbounded)\n",
         CCG_OP_COUNT);
  return CLI_OK;
}

const cli_command cli_cmd_ops = {
    "ops", "list the op registry (ops, domains, arity, attributes)",
    "usage: ccgraph ops [--json]\n"
    "\n"
    "Lists every op of the IR: name, domain, inputs, outputs and attributes\n"
    "(with their types and defaults).\n"
    "  --json   one JSON document instead of a table\n",
    run_ops};
