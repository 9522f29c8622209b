/* Parallel plans: loading, defaults, errors naming the key, and per-segment
 * wildcard matching. The sample plans under tests/data/plans are the same
 * ones tests/schema/check_plans.py runs the JSON schema on: good/ loads,
 * bad/ fails, in both. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

#define PLANS CCG_TEST_DATA_DIR "/plans"

static ccg_plan *load(const char *rel) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", PLANS, rel);
  ccg_plan *p = NULL;
  ccg_status st = ccg_plan_load(path, &p);
  if (st != CCG_STATUS_OK)
    fail_msg("%s: %s", rel, ccg_last_error(NULL));
  return p;
}

static void expect_placement(ccg_placement p, ccg_placement_kind kind,
                             int dim) {
  assert_int_equal(p.kind, kind);
  if (kind == CCG_PLACEMENT_SHARD)
    assert_int_equal(p.dim, dim);
}

static void test_mlp_plan(void **state) {
  (void)state;
  ccg_plan *p = load("good/mlp.json");
  assert_int_equal(ccg_plan_num_entries(p), 3);
  const ccg_plan_entry *e = ccg_plan_entry_at(p, 0);
  assert_string_equal(e->pattern, "layers.*.mlp.fc1");
  assert_int_equal(e->style, CCG_PLAN_COLWISE);
  /* DTensor's defaults: colwise R -> S(-1), rowwise S(-1) -> R. */
  expect_placement(e->input_layouts.p[0], CCG_PLACEMENT_REPLICATE, 0);
  expect_placement(e->output_layouts.p[0], CCG_PLACEMENT_SHARD, -1);
  assert_true(e->use_local_output);
  e = ccg_plan_entry_at(p, 1);
  assert_int_equal(e->style, CCG_PLAN_ROWWISE);
  expect_placement(e->input_layouts.p[0], CCG_PLACEMENT_SHARD, -1);
  expect_placement(e->output_layouts.p[0], CCG_PLACEMENT_REPLICATE, 0);
  e = ccg_plan_entry_at(p, 2);
  assert_string_equal(e->pattern, "lm_head");
  expect_placement(e->output_layouts.p[0], CCG_PLACEMENT_REPLICATE, 0);
  assert_null(ccg_plan_entry_at(p, 3));
  ccg_plan_free(p);
}

static void test_sequence_parallel_plan(void **state) {
  (void)state;
  ccg_plan *p = load("good/sequence_parallel.json");
  assert_int_equal(ccg_plan_num_entries(p), 8);
  const ccg_plan_entry *e = ccg_plan_lookup(p, "layers.3.norm1.weight");
  assert_non_null(e);
  assert_int_equal(e->style, CCG_PLAN_SEQUENCE_PARALLEL);
  assert_false(e->use_local_output);
  assert_int_equal(e->sequence_dim, 1);
  e = ccg_plan_lookup(p, "layers.0.attn.out");
  assert_non_null(e);
  expect_placement(e->output_layouts.p[0], CCG_PLACEMENT_SHARD, 1);
  assert_false(e->use_local_output);
  e = ccg_plan_lookup(p, "layers.2.attn.core");
  assert_int_equal(e->style, CCG_PLAN_ULYSSES);
  assert_int_equal(e->sequence_dim, -3);
  e = ccg_plan_lookup(p, "final_norm");
  assert_int_equal(e->style, CCG_PLAN_SEQUENCE_PARALLEL);
  e = ccg_plan_lookup(p, "layers.1.mlp.fc2.bias");
  assert_non_null(e);
  assert_string_equal(e->pattern, "layers.[0-3].mlp.fc?");
  assert_int_equal(e->input_layouts.n, 2);
  assert_false(e->input_layouts.present[0]);
  assert_true(e->input_layouts.present[1]);
  expect_placement(e->input_layouts.p[1], CCG_PLACEMENT_SHARD, -1);
  assert_int_equal(e->output_layouts.p[0].kind, CCG_PLACEMENT_PARTIAL);
  assert_int_equal(e->output_layouts.p[0].reduce, CCG_REDUCE_SUM);
  assert_null(ccg_plan_lookup(p, "layers.4.mlp.fc2"));
  e = ccg_plan_lookup(p, "pos");
  assert_int_equal(e->style, CCG_PLAN_REPLICATE);
  assert_int_equal(e->input_layouts.n, 0);
  ccg_plan_free(p);
}

/* Each bad sample and the key (or part) its message must name. */
static const struct {
  const char *file;
  const char *frag[2];
} bad_plans[] = {
    {"bad_layout.json", {"plan key 'fc1'", "output_layouts 'Shard(x)'"}},
    {"bad_layout_item.json", {"plan key 'fc1'", "input_layouts 'shard(0)'"}},
    {"bool_type.json", {"plan key 'fc1'", "use_local_output"}},
    {"dim_range.json", {"plan key 'norm'", "sequence_dim"}},
    {"dim_type.json", {"plan key 'norm'", "sequence_dim"}},
    {"duplicate_key.json", {"duplicate", "fc1"}},
    {"empty.json", {"no entries", NULL}},
    {"empty_layouts.json", {"plan key 'fc1'", "input_layouts"}},
    {"empty_segment.json", {"plan key 'layers..fc1'", "segments"}},
    {"missing_style.json", {"plan key 'fc1'", "no 'style'"}},
    {"not_object.json", {"top level is an object", NULL}},
    {"partial_op.json", {"plan key 'fc1'", "'Partial(mean)'"}},
    {"replicate_option.json",
     {"plan key 'pos'", "'use_local_output' is not one of style 'replicate'"}},
    {"style_type.json", {"plan key 'fc1'", "a style is a name"}},
    {"ulysses_option.json",
     {"plan key 'attn'", "'output_layouts' is not one of style 'ulysses'"}},
    {"unknown_option.json",
     {"plan key 'fc1'", "'sequence_dim' is not one of style 'colwise'"}},
    {"unknown_style.json",
     {"plan key 'layers.*.fc2'", "unknown style 'rowise'"}},
};
#define N_BAD (sizeof bad_plans / sizeof bad_plans[0])

static void test_bad_plans(void **state) {
  (void)state;
  for (size_t i = 0; i < N_BAD; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad/%s", PLANS, bad_plans[i].file);
    ccg_plan *p = NULL;
    ccg_status st = ccg_plan_load(path, &p);
    if (st != CCG_STATUS_PARSE)
      fail_msg("%s: got %s (%s)", bad_plans[i].file, ccg_status_name(st),
               ccg_last_error(NULL));
    assert_null(p);
    const char *msg = ccg_last_error(NULL);
    if (!strstr(msg, bad_plans[i].file))
      fail_msg("%s: the message does not name the file: %s", bad_plans[i].file,
               msg);
    for (int k = 0; k < 2 && bad_plans[i].frag[k]; k++)
      if (!strstr(msg, bad_plans[i].frag[k]))
        fail_msg("%s: \"%s\" lacks \"%s\"", bad_plans[i].file, msg,
                 bad_plans[i].frag[k]);
  }
}

/* Every sample file is covered: good/ loads, bad/ is in the table above, so
 * the C loader and the schema (check_plans.py) agree on the same split. */
static void test_samples_cover_dirs(void **state) {
  (void)state;
  const char *kinds[] = {"good", "bad"};
  for (int k = 0; k < 2; k++) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", PLANS, kinds[k]);
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t seen = 0;
    for (struct dirent *de; (de = readdir(d));) {
      size_t n = strlen(de->d_name);
      if (n < 5 || strcmp(de->d_name + n - 5, ".json") != 0)
        continue;
      seen++;
      char rel[300];
      snprintf(rel, sizeof rel, "%s/%s", kinds[k], de->d_name);
      if (k == 0) {
        ccg_plan_free(load(rel));
        continue;
      }
      bool listed = false;
      for (size_t i = 0; i < N_BAD; i++)
        listed = listed || strcmp(bad_plans[i].file, de->d_name) == 0;
      if (!listed)
        fail_msg("bad/%s has no expected message in test_plan.c", de->d_name);
    }
    closedir(d);
    assert_true(k == 0 ? seen >= 3 : seen == N_BAD);
  }
}

static void test_match_per_segment(void **state) {
  (void)state;
  assert_true(ccg_plan_match("layers.*.fc1", "layers.0.fc1"));
  assert_true(ccg_plan_match("layers.*.fc1", "layers.17.fc1"));
  assert_false(ccg_plan_match("layers.*.fc1", "layers.0.mlp.fc1"));
  assert_false(ccg_plan_match("layers.*.fc1", "layers.fc1"));
  assert_true(ccg_plan_match("layers.*.mlp.fc1", "layers.0.mlp.fc1"));
  assert_false(ccg_plan_match("layers.*.mlp.fc1", "layers.0.mlp.fc12"));
  assert_true(ccg_plan_match("layers.[0-3].attn.q?", "layers.2.attn.qk"));
  assert_false(ccg_plan_match("layers.[0-3].attn.q?", "layers.4.attn.qk"));
  assert_true(ccg_plan_match("*", "embed"));
  assert_false(ccg_plan_match("*", "embed.weight"));
  assert_true(ccg_plan_match("*.*", "embed.weight"));
  assert_true(ccg_plan_match("fc1", "fc1"));
  assert_false(ccg_plan_match("fc1", "fc10"));
  assert_false(ccg_plan_match(NULL, "fc1"));
  assert_false(ccg_plan_match("fc1", NULL));
}

static void test_lookup_order_and_params(void **state) {
  (void)state;
  ccg_plan *p = NULL;
  assert_ok(NULL, ccg_plan_parse("{\"layers.0.fc1\": \"rowwise\", "
                                 "\"layers.*.fc1\": \"colwise\"}",
                                 &p));
  /* First match in file order wins. */
  assert_int_equal(ccg_plan_lookup(p, "layers.0.fc1")->style, CCG_PLAN_ROWWISE);
  assert_int_equal(ccg_plan_lookup(p, "layers.1.fc1")->style, CCG_PLAN_COLWISE);
  /* A parameter name matches its module's pattern. */
  assert_int_equal(ccg_plan_lookup(p, "layers.1.fc1.weight")->style,
                   CCG_PLAN_COLWISE);
  assert_null(ccg_plan_lookup(p, "layers.1.mlp.fc1.weight"));
  assert_null(ccg_plan_lookup(p, "layers"));
  ccg_plan_free(p);
}

static void test_parse_errors(void **state) {
  (void)state;
  ccg_plan *p = NULL;
  assert_fails(NULL, CCG_STATUS_PARSE, ccg_plan_parse("{\"fc1\": ", &p),
               "plan: line 1");
  assert_null(p);
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_plan_parse("{\"a.b\": {\"style\": \"colwise\", "
                              "\"input_layouts\": [\"Replicate\", 3]}}",
                              &p),
               "plan key 'a.b'", "input_layouts", "layout string or null");
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_plan_parse("{\".fc1\": \"colwise\"}", &p),
               "plan key '.fc1'");
  assert_fails(NULL, CCG_STATUS_PARSE,
               ccg_plan_parse("{\"fc1\": {\"style\": \"rowwise\", "
                              "\"outputs\": \"Replicate\"}}",
                              &p),
               "plan key 'fc1'", "unknown option 'outputs'");
  assert_fails(NULL, CCG_STATUS_IO,
               ccg_plan_load(PLANS "/no_such_plan.json", &p),
               "no_such_plan.json");
  assert_fails(NULL, CCG_STATUS_INVALID_ARG, ccg_plan_parse(NULL, &p),
               "ccg_plan_parse");
  /* Integral reals are integers, as in the schema. */
  assert_ok(NULL, ccg_plan_parse("{\"n\": {\"style\": \"sequence_parallel\", "
                                 "\"sequence_dim\": 0.0}}",
                                 &p));
  assert_int_equal(ccg_plan_entry_at(p, 0)->sequence_dim, 0);
  ccg_plan_free(p);
  assert_null(ccg_plan_style_name(CCG_PLAN_STYLE_COUNT));
  assert_string_equal(ccg_plan_style_name(CCG_PLAN_ULYSSES), "ulysses");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp_plan),
      cmocka_unit_test(test_sequence_parallel_plan),
      cmocka_unit_test(test_bad_plans),
      cmocka_unit_test(test_samples_cover_dirs),
      cmocka_unit_test(test_match_per_segment),
      cmocka_unit_test(test_lookup_order_and_params),
      cmocka_unit_test(test_parse_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
