/* The mapping registry: look-ups, docs, parameter parsing and canonical
 * text, apply argument checks, tags and instances, and docs/mappings.md
 * against the registry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

#include "mapping_golden.h"

#define DOCS_PATH CCG_TEST_DATA_DIR "/../../docs/mappings.md"

static void test_every_entry_is_findable(void **state) {
  (void)state;
  size_t n = ccg_mapping_count();
  assert_true(n >= 23);
  assert_null(ccg_mapping_at(n));
  for (size_t i = 0; i < n; i++) {
    const ccg_mapping *m = ccg_mapping_at(i), *f = NULL;
    const char *name = ccg_mapping_name(m);
    assert_int_equal(ccg_mapping_find(name, &f), CCG_STATUS_OK);
    assert_ptr_equal(f, m); /* names are unique */
    assert_non_null(strchr(name, '.'));
    assert_true(strlen(ccg_mapping_forward_doc(m)) > 0);
    assert_true(strlen(ccg_mapping_backward_doc(m)) > 0);
    int min_in, max_in, max_out;
    ccg_mapping_arity(m, &min_in, &max_in, &max_out);
    assert_true(min_in >= 0 && (max_in < 0 || max_in >= min_in));
    bool required = false;
    for (size_t k = 0; k < ccg_mapping_num_params(m); k++) {
      const char *dflt = NULL, *doc = NULL;
      assert_non_null(ccg_mapping_param_info(m, k, &dflt, &doc));
      assert_true(doc && *doc);
      required = required || !dflt;
    }
    assert_null(
        ccg_mapping_param_info(m, ccg_mapping_num_params(m), NULL, NULL));
    /* Defaults are valid JSON of the right kind. */
    char *text = NULL;
    ccg_status st = ccg_mapping_canonical_params(name, NULL, &text);
    if (required) {
      ccg_test_assert_fails(NULL, CCG_STATUS_INVALID_ARG, st, name, __FILE__,
                            __LINE__,
                            (const char *[]){name, "is required", NULL});
    } else {
      if (st != CCG_STATUS_OK)
        fail_msg("%s: defaults: %s", name, ccg_last_error(NULL));
      free(text);
    }
  }
}

static void test_unknown_name(void **state) {
  (void)state;
  const ccg_mapping *m = NULL;
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED,
               ccg_mapping_find("megatron.no_such_region", &m),
               "mapping 'megatron.no_such_region' is not in the registry");
  assert_null(m);
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8]"), y;
  size_t n = 1;
  assert_fails(g, CCG_STATUS_UNSUPPORTED,
               ccg_mapping_apply(g, "colossal.nothing", NULL, &x, 1, &y, &n),
               "mapping 'colossal.nothing'");
  ccg_graph_free(g);
}

static void canonical_is(const char *name, const char *params,
                         const char *want) {
  char *text = NULL;
  if (ccg_mapping_canonical_params(name, params, &text) != CCG_STATUS_OK)
    fail_msg("%s %s: %s", name, params, ccg_last_error(NULL));
  assert_string_equal(text, want);
  free(text);
}

static void test_canonical_params(void **state) {
  (void)state;
  canonical_is("megatron.gather_from_sequence_parallel_region",
               "{\"use_global_buffer\": true, \"group\": \"dp,tp\"}",
               "{\"group\":\"dp,tp\",\"tensor_parallel_output_grad\":true,"
               "\"output_split_sizes\":null,\"use_global_buffer\":true}");
  canonical_is("megatron.all_to_all",
               " { \"input_split_sizes\" : [1, 2], \"output_split_sizes\": "
               "[2,1] } ",
               "{\"group\":\"tp\",\"output_split_sizes\":[2,1],"
               "\"input_split_sizes\":[1,2]}");
  canonical_is("opensora.split_forward_gather_backward",
               "{\"dim\": 1, \"grad_scale\": 2}",
               "{\"group\":\"sp\",\"dim\":1,\"grad_scale\":2.0}");
  canonical_is("opensora.all_to_all", "",
               "{\"group\":\"sp\",\"scatter_dim\":2,"
               "\"gather_dim\":1}");
}

static void bad_params(const char *name, const char *params, ccg_status want,
                       const char *frag1, const char *frag2) {
  char *text = NULL;
  ccg_status st = ccg_mapping_canonical_params(name, params, &text);
  ccg_test_assert_fails(NULL, want, st, params, __FILE__, __LINE__,
                        (const char *[]){name, frag1, frag2, NULL});
  assert_null(text);
  /* The same through apply, on the graph, changing nothing. */
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,8]"), y;
  size_t n = 1, nodes = ccg_graph_num_nodes(g);
  st = ccg_mapping_apply(g, name, params, &x, 1, &y, &n);
  ccg_test_assert_fails(g, want, st, params, __FILE__, __LINE__,
                        (const char *[]){name, frag1, frag2, NULL});
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  ccg_graph_free(g);
}

static void test_bad_params_name_the_key(void **state) {
  (void)state;
  const char *gsp = "megatron.gather_from_sequence_parallel_region";
  bad_params(gsp, "{\"tensor_parallel_output_grads\": true}",
             CCG_STATUS_INVALID_ARG,
             "unknown params key 'tensor_parallel_output_grads'",
             "tensor_parallel_output_grad");
  bad_params(gsp, "{\"tensor_parallel_output_grad\": 1}",
             CCG_STATUS_INVALID_ARG, "'tensor_parallel_output_grad'",
             "true or false, got 1");
  bad_params(gsp, "{\"output_split_sizes\": [1, \"2\"]}",
             CCG_STATUS_INVALID_ARG, "'output_split_sizes'",
             "a list of integers or null");
  bad_params(gsp, "{\"output_split_sizes\": 4}", CCG_STATUS_INVALID_ARG,
             "'output_split_sizes'", "got 4");
  bad_params(gsp, "{\"group\": 4}", CCG_STATUS_INVALID_ARG, "'group'",
             "a string");
  bad_params(gsp, "[1, 2]", CCG_STATUS_PARSE, "a JSON object", "");
  bad_params(gsp, "{\"group\": ", CCG_STATUS_PARSE, "a JSON object", "");
  bad_params(gsp, "{\"group\": \"tp\", \"group\": \"dp\"}", CCG_STATUS_PARSE,
             "a JSON object", "duplicate");
  bad_params("opensora.all_to_all", "{\"scatter_dim\": 1.5}",
             CCG_STATUS_INVALID_ARG, "'scatter_dim'", "an integer");
  bad_params("opensora.gather_forward_split_backward", "{}",
             CCG_STATUS_INVALID_ARG, "'dim' is required", "");
  bad_params("opensora.gather_forward_split_backward",
             "{\"dim\": 0, \"grad_scale\": [1]}", CCG_STATUS_INVALID_ARG,
             "'grad_scale' must be", "got [1]");
  bad_params("megatron.reduce", "{\"tensor_parallel_output_grad\": true}",
             CCG_STATUS_INVALID_ARG, "unknown params key", "(keys: group)");
}

static void test_apply_arguments(void **state) {
  (void)state;
  const char *name = "megatron.reduce";
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8]"), y[2];
  ccg_value_id xs[2] = {x, x};
  size_t n = 1;
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_mapping_apply(NULL, name, NULL, &x, 1, y, &n),
               "megatron.reduce", "graph is NULL");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_mapping_apply(g, name, NULL, xs, 2, y, &n),
               "megatron.reduce: 2 inputs given, expected 1 to 1");
  n = 0;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_mapping_apply(g, name, NULL, &x, 1, y, &n),
               "room for 0 outputs");
  n = 1;
  ccg_value_id bad = 999;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_mapping_apply(g, name, NULL, &bad, 1, y, &n),
               "inputs[0] (id 999) is not a value");
  assert_int_equal(ccg_graph_num_nodes(g), 0);
  ccg_graph_free(g);
}

/* Instances number the applications; tags hold the canonical params; a
 * backward with instance 0 gets a fresh one; no gradient, no nodes. */
static void test_tags_and_instances(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("dp=2,tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,8]"), y1, y2;
  size_t n = 1;
  assert_ok(g, ccg_mapping_apply(g, "megatron.reduce_scatter_along_first_dim",
                                 "{\"input_split_sizes\": [3, 5]}", &x, 1, &y1,
                                 &n));
  assert_ok(g,
            ccg_megatron_copy_to_tensor_model_parallel_region(g, x, "dp", &y2));
  const ccg_tag *t1 = golden_tag_of(g, y1), *t2 = golden_tag_of(g, y2);
  assert_non_null(t1);
  assert_non_null(t2);
  assert_string_equal(t1->mapping, "megatron.reduce_scatter_along_first_dim");
  assert_int_equal(t1->instance, 1);
  assert_false(t1->backward);
  assert_string_equal(t1->params, "{\"group\":\"tp\",\"input_split_sizes\":"
                                  "[3,5],\"use_global_buffer\":false}");
  assert_int_equal(t2->instance, 2);
  assert_string_equal(t2->params, "{\"group\":\"dp\"}");

  ccg_value_id gy = CCG_NONE, gx = 0;
  ccg_mapping_grad_args a = CCG_MAPPING_GRAD_ARGS_INIT;
  a.params = t2->params;
  a.inputs = &x;
  a.n_inputs = 1;
  a.outputs = &y2;
  a.n_outputs = 1;
  a.grad_outputs = &gy;
  size_t nodes = ccg_graph_num_nodes(g);
  assert_ok(g,
            ccg_mapping_apply_backward(
                g, "megatron.copy_to_tensor_model_parallel_region", &a, &gx));
  assert_int_equal(gx, CCG_NONE);
  assert_int_equal(ccg_graph_num_nodes(g), nodes);

  gy = ccg_test_input(g, "gy", CCG_DTYPE_F32, "[8,8]");
  assert_ok(g,
            ccg_mapping_apply_backward(
                g, "megatron.copy_to_tensor_model_parallel_region", &a, &gx));
  const ccg_tag *tb = golden_tag_of(g, gx);
  assert_non_null(tb);
  assert_true(tb->backward);
  assert_int_equal(tb->instance, 3);
  assert_int_equal(ccg_node_op(g, ccg_value_producer(g, gx)),
                   CCG_OP_ALL_REDUCE);

  /* The instance's inputs and outputs, from the tags alone. */
  ccg_value_id ins[2], outs[2];
  size_t ni = 2, no = 2;
  assert_ok(g, ccg_mapping_instance_io(g, 1, ins, &ni, outs, &no));
  assert_int_equal(ni, 1);
  assert_int_equal(ins[0], x);
  assert_int_equal(no, 1);
  assert_int_equal(outs[0], y1);
  ni = 0;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_mapping_instance_io(g, 1, ins, &ni, outs, &no),
               "mapping instance 1 has more inputs or outputs than the room");
  ni = 2;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_mapping_instance_io(g, 3, ins, &ni, outs, &no),
               "no forward node", "instance 3");

  a.size = 0;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_mapping_apply_backward(
                   g, "megatron.copy_to_tensor_model_parallel_region", &a, &gx),
               "ccg_mapping_grad_args");
  ccg_graph_free(g);
}

/* A step that fails after earlier steps added nodes and constants rolls
 * them back: hp2sp flattens [3,2,4] to [6,4] (a Reshape and its shape
 * constant) before the exchange finds 6 rows not divisible by 4. */
static void test_rollback_after_partial_build(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,2,4]"), y;
  size_t values = ccg_graph_num_values(g);
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_megatron_all_to_all_hp2sp(g, x, NULL, &y),
               "megatron.all_to_all_hp2sp", "dim 0", "size 6");
  assert_int_equal(ccg_graph_num_nodes(g), 0);
  assert_int_equal(ccg_graph_num_values(g), values);
  assert_int_equal(ccg_graph_num_initializers(g), 0);
  ccg_graph_free(g);
}

/* docs/mappings.md has one table row per entry and no other rows. */
static void test_docs_match_registry(void **state) {
  (void)state;
  char *doc = golden_read(DOCS_PATH);
  if (!doc)
    fail_msg("cannot read %s", DOCS_PATH);
  size_t n = ccg_mapping_count();
  int *seen = calloc(n, sizeof *seen);
  assert_non_null(seen);
  for (char *line = doc; line && *line;) {
    char *next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    if (strncmp(line, "| `", 3) == 0) {
      char *end = strchr(line + 3, '`');
      assert_non_null(end);
      *end = '\0';
      const ccg_mapping *m = NULL;
      if (ccg_mapping_find(line + 3, &m) != CCG_STATUS_OK)
        fail_msg("docs/mappings.md has a row for '%s', which is not a "
                 "registry entry",
                 line + 3);
      for (size_t i = 0; i < n; i++)
        if (ccg_mapping_at(i) == m)
          seen[i]++;
    }
    line = next;
  }
  for (size_t i = 0; i < n; i++)
    if (seen[i] != 1)
      fail_msg("docs/mappings.md has %d rows for '%s' (expected 1)", seen[i],
               ccg_mapping_name(ccg_mapping_at(i)));
  free(seen);
  free(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_entry_is_findable),
      cmocka_unit_test(test_unknown_name),
      cmocka_unit_test(test_canonical_params),
      cmocka_unit_test(test_bad_params_name_the_key),
      cmocka_unit_test(test_apply_arguments),
      cmocka_unit_test(test_tags_and_instances),
      cmocka_unit_test(test_rollback_after_partial_build),
      cmocka_unit_test(test_docs_match_registry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
