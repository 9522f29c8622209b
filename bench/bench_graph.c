/* Graph construction throughput: builds a transformer-like chain of N nodes
 * (MatMul, Add, Gelu, Reshape through known shape values, collectives on a
 * dp x tp mesh) with symbolic dims, then times validation, topological
 * order and each dump. Prints a table and one JSON line.
 * usage: bench_graph [--nodes N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccgraph/ccgraph.h"
#include "graph/internal.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(g, call)                                                         \
  do {                                                                         \
    if ((call) != CCG_STATUS_OK) {                                             \
      fprintf(stderr, "bench_graph: %s\n", ccg_last_error(g));                 \
      exit(3);                                                                 \
    }                                                                          \
  } while (0)

/* One block: 8 nodes plus 1 initializer. */
static ccg_value_id block(ccg_graph *g, ccg_value_id x, ccg_value_id w,
                          ccg_value_id b) {
  static const int64_t shape[3] = {0, 0, 64};
  ccg_value_id h;
  CHECK(g, ccg_matmul(g, x, w, &h));
  CHECK(g, ccg_add(g, h, b, &h));
  CHECK(g, ccg_gelu(g, h, "tanh", &h));
  CHECK(g, ccg_reshape_to(g, h, shape, 3, &h));
  CHECK(g, ccg_reshape_to(g, h, (const int64_t[]){0, 0, 64}, 3, &h));
  CHECK(g, ccg_all_reduce(g, h, "tp", CCG_REDUCE_SUM, &h));
  CHECK(g, ccg_all_gather(g, h, "dp", 0, NULL, &h));
  CHECK(g, ccg_reduce_scatter(g, h, "dp", 0, CCG_REDUCE_SUM, NULL, &h));
  return h;
}

int main(int argc, char **argv) {
  long target = 100000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc)
      target = atol(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_graph [--nodes N]\n");
      return 1;
    }
  }
  ccg_graph *g;
  ccg_mesh m;
  if (ccg_graph_new(NULL, &g) != CCG_STATUS_OK ||
      ccg_mesh_parse("dp=2,tp=4", &m) != CCG_STATUS_OK)
    return 3;
  CHECK(g, ccg_graph_set_mesh(g, &m));
  ccg_shape xs = {3,
                  {ccg_dim_sym("batch"), ccg_dim_sym("seq"), ccg_dim_num(64)}};
  static float wdata[64 * 64], bdata[64];
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {64, 64}, wdata};
  ccg_tensor bt = {CCG_DTYPE_F32, 1, {64}, bdata};
  ccg_value_id x, w, b;
  CHECK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  CHECK(g, ccg_graph_add_initializer(g, "w", &wt, &w));
  CHECK(g, ccg_graph_add_initializer(g, "b", &bt, &b));

  double t0 = now();
  for (long k = 0; (long)ccg_graph_num_nodes(g) < target; k++) {
    char scope[32];
    snprintf(scope, sizeof scope, "layers.%ld", k);
    CHECK(g, ccg_graph_push_scope(g, scope));
    x = block(g, x, w, b);
    ccg_graph_pop_scope(g);
  }
  CHECK(g, ccg_graph_add_output(g, x));
  double t_build = now() - t0;
  size_t n = ccg_graph_num_nodes(g);

  t0 = now();
  CHECK(g, ccg_graph_validate(g));
  double t_validate = now() - t0;

  ccg_node_id *order = malloc(n * sizeof *order);
  t0 = now();
  CHECK(g, ccg_graph_topo_order(g, order));
  double t_topo = now() - t0;
  free(order);

  double t_dump[CCG_DUMP_FORMAT_COUNT];
  size_t dump_bytes[CCG_DUMP_FORMAT_COUNT];
  for (int f = 0; f < CCG_DUMP_FORMAT_COUNT; f++) {
    char *s = NULL;
    t0 = now();
    CHECK(g, ccg_graph_dump_string(g, (ccg_dump_format)f, &s));
    t_dump[f] = now() - t0;
    dump_bytes[f] = strlen(s);
    free(s);
  }
  size_t arena = g->arena.used;

  printf("%-12s %12s %14s\n", "step", "seconds", "nodes/s");
  printf("%-12s %12.4f %14.0f\n", "build", t_build, (double)n / t_build);
  printf("%-12s %12.4f %14.0f\n", "validate", t_validate,
         (double)n / t_validate);
  printf("%-12s %12.4f %14.0f\n", "topo order", t_topo, (double)n / t_topo);
  static const char *const names[] = {"dump text", "dump json", "dump dot"};
  for (int f = 0; f < CCG_DUMP_FORMAT_COUNT; f++)
    printf("%-12s %12.4f %14.0f  (%zu bytes)\n", names[f], t_dump[f],
           (double)n / t_dump[f], dump_bytes[f]);
  printf("%zu nodes, %zu values, %.0f arena bytes per node\n", n,
         ccg_graph_num_values(g), (double)arena / (double)n);
  printf("{\"bench\":\"graph\",\"nodes\":%zu,\"build_nodes_per_s\":%.0f,"
         "\"validate_nodes_per_s\":%.0f,\"topo_nodes_per_s\":%.0f,"
         "\"json_nodes_per_s\":%.0f,\"arena_bytes_per_node\":%.0f}\n",
         n, (double)n / t_build, (double)n / t_validate, (double)n / t_topo,
         (double)n / t_dump[CCG_DUMP_JSON], (double)arena / (double)n);
  ccg_graph_free(g);
  return 0;
}
