/* (being written) */
#include "graph/internal.h"
ccg_status ccg_graph_dump(ccg_graph *g, ccg_dump_format fmt, FILE *out) {
  (void)fmt; (void)out;
  return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED, "dump not yet written");
}
ccg_status ccg_graph_dump_string(ccg_graph *g, ccg_dump_format fmt, char **out) {
  (void)fmt; (void)out;
  return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED, "dump not yet written");
}
