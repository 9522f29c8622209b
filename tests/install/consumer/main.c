/* A program outside the tree, built against an installed ccgraph. */
#include <stdio.h>
#include <string.h>

#include <ccgraph/ccgraph.h>

int main(void) {
  ccg_graph *g = NULL;
  if (ccg_graph_new(NULL, &g) != CCG_STATUS_OK)
    return 1;
  ccg_shape s = {1, {ccg_dim_num(8)}};
  ccg_value_id x, y;
  if (ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x) != CCG_STATUS_OK ||
      ccg_relu(g, x, &y) != CCG_STATUS_OK ||
      ccg_graph_validate(g) != CCG_STATUS_OK) {
    fprintf(stderr, "consumer: %s\n", ccg_last_error(g));
    return 1;
  }
  printf("consumer: ccgraph %s, %zu node(s)\n", ccg_version(),
         ccg_graph_num_nodes(g));
  ccg_graph_free(g);
  return 0;
}
