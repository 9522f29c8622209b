/* Reads an ONNX model and writes it back through the IR (for the
 * conformance test over ONNX's node test models).
 * usage: onnx_convert --list-ops | IN.onnx OUT.onnx
 * The converted model is also exported, imported and exported again, which
 * must give the same bytes. Exit status: 0 converted, 3 refused as
 * unsupported (the message names what), 1 any other failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccgraph/ccgraph.h"

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--list-ops") == 0) {
    for (int op = 0; op < CCG_OP_COUNT; op++)
      printf("%s %s\n",
             *ccg_op_domain((ccg_op)op) ? ccg_op_domain((ccg_op)op) : "ai.onnx",
             ccg_op_name((ccg_op)op));
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: onnx_convert --list-ops | IN.onnx OUT.onnx\n");
    return 1;
  }
  ccg_graph *g = NULL;
  ccg_status st = ccg_onnx_import_file(argv[1], NULL, &g);
  if (st != CCG_STATUS_OK) {
    fprintf(stderr, "%s: %s\n", ccg_status_name(st), ccg_last_error(NULL));
    return st == CCG_STATUS_UNSUPPORTED ? 3 : 1;
  }
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.external_threshold = SIZE_MAX;
  st = ccg_onnx_export_file(g, argv[2], &o);
  if (st != CCG_STATUS_OK) {
    fprintf(stderr, "%s: %s\n", ccg_status_name(st), ccg_last_error(g));
    ccg_graph_free(g);
    return st == CCG_STATUS_UNSUPPORTED ? 3 : 1;
  }
  /* Once in ccgraph's form, a model must come back byte for byte. */
  int rc = 0;
  void *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  ccg_graph *h = NULL;
  if (ccg_onnx_export_buffer(g, &o, &b1, &n1) != CCG_STATUS_OK ||
      ccg_onnx_import_buffer(b1, n1, NULL, NULL, &h) != CCG_STATUS_OK ||
      ccg_onnx_export_buffer(h, &o, &b2, &n2) != CCG_STATUS_OK) {
    fprintf(stderr, "second round trip failed: %s / %s\n", ccg_last_error(NULL),
            ccg_last_error(g));
    rc = 1;
  } else if (n1 != n2 || memcmp(b1, b2, n1) != 0) {
    fprintf(stderr,
            "export -> import -> export changed the bytes (%zu vs %zu)\n", n1,
            n2);
    rc = 1;
  }
  free(b1);
  free(b2);
  ccg_graph_free(h);
  ccg_graph_free(g);
  return rc;
}
