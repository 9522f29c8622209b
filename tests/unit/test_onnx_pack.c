/* src/onnx/pack.c: the parts of a model shared by its ranks are packed
 * element by element into segments that grow up to 1 MiB. A model whose
 * node and value-info parts span many segments, the largest ones included,
 * gives in a buffer and in a file the bytes protobuf-c packs for the whole
 * model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "onnx/internal.h"
#include "test_util.h"

enum { CHAIN = 30000 };

static uint8_t *read_all(const char *path, size_t want) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  uint8_t *got = malloc(want + 1);
  assert_non_null(got);
  assert_int_equal(fread(got, 1, want + 1, f), want);
  fclose(f);
  return got;
}

static void test_parts_over_many_segments(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,8]");
  for (int i = 0; i < CHAIN; i++)
    assert_ok(g, ccg_relu(g, x, &x));
  assert_ok(g, ccg_graph_add_output(g, x));

  ccg_onnx_export_options o;
  assert_ok(g, ccg__onnx_export_opts(g, NULL, &o));
  ccg_arena a;
  ccg__arena_init(&a, NULL, 0);
  Onnx__ModelProto *m = NULL;
  assert_ok(g, ccg__onnx_build_model(g, &o, o.rank, &a, NULL, &m));
  size_t n = onnx__model_proto__get_packed_size(m);
  uint8_t *whole = malloc(n);
  assert_non_null(whole);
  assert_int_equal(onnx__model_proto__pack(m, whole), n);
  /* the nodes and the value infos each past 1 MiB: several segments of
   * the largest size */
  size_t nodes = 0, infos = 0;
  for (size_t i = 0; i < m->graph->n_node; i++)
    nodes += onnx__node_proto__get_packed_size(m->graph->node[i]);
  for (size_t i = 0; i < m->graph->n_value_info; i++)
    infos += onnx__value_info_proto__get_packed_size(m->graph->value_info[i]);
  assert_true(nodes > ((size_t)1 << 20) && infos > ((size_t)1 << 20));

  void *data = NULL;
  size_t size = 0;
  assert_ok(g, ccg_onnx_export_buffer(g, NULL, &data, &size));
  assert_int_equal(size, n);
  assert_memory_equal(data, whole, n);
  free(data);

  char dir[] = "/tmp/test_onnx_pack.XXXXXX", path[64];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/chain.onnx", dir);
  assert_ok(g, ccg_onnx_export_file(g, path, NULL));
  uint8_t *got = read_all(path, n);
  assert_memory_equal(got, whole, n);
  free(got);
  unlink(path);
  rmdir(dir);

  free(whole);
  ccg__arena_free(&a);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parts_over_many_segments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
