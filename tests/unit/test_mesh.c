/* Device meshes: parsing, coordinates, groups on 1-D, 2-D and 3-D meshes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

static void test_parse_and_format(void **state) {
  (void)state;
  ccg_mesh m;
  assert_int_equal(ccg_mesh_parse("dp=2,pp=3,tp=4", &m), CCG_STATUS_OK);
  assert_int_equal(m.ndims, 3);
  assert_string_equal(m.names[1], "pp");
  assert_int_equal(m.sizes[2], 4);
  assert_int_equal(ccg_mesh_world_size(&m), 24);
  assert_int_equal(ccg_mesh_axis(&m, "tp"), 2);
  assert_int_equal(ccg_mesh_axis(&m, "ep"), -1);
  char buf[64];
  assert_int_equal(ccg_mesh_format(&m, buf, sizeof buf), 14);
  assert_string_equal(buf, "dp=2,pp=3,tp=4");
  /* snprintf semantics: a short buffer is truncated, the length is full. */
  char small[5];
  assert_int_equal(ccg_mesh_format(&m, small, sizeof small), 14);
  assert_string_equal(small, "dp=2");

  static const struct {
    const char *spec, *frag;
  } bad[] = {
      {"", "empty mesh"},
      {"tp", "'tp' is not NAME=SIZE"},
      {"tp=0", "positive integer, got '0'"},
      {"tp=-2", "got '-2'"},
      {"tp=x", "got 'x'"},
      {"tp=", "got ''"},
      {"1tp=2", "axis name '1tp'"},
      {"=2", "axis name ''"},
      {"tp=2,tp=2", "axis 'tp' appears twice"},
      {"a=1,b=1,c=1,d=1,e=1", "more than 4 axes"},
      {"tp=2,", "trailing comma"},
      {"averyveryverylongname=2", "at most 15 characters"},
      {"a=65536,b=65536", "more than 2147483647 ranks"},
      {"tp=99999999999999", "positive integer"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ccg_mesh keep = m;
    ccg_status st = ccg_mesh_parse(bad[i].spec, &m);
    if (st != CCG_STATUS_PARSE || !strstr(ccg_last_error(NULL), bad[i].frag))
      fail_msg("mesh '%s': %s '%s', expected '%s'", bad[i].spec,
               ccg_status_name(st), ccg_last_error(NULL), bad[i].frag);
    assert_memory_equal(&m, &keep, sizeof m); /* untouched on error */
  }
}

static void test_groups_2d(void **state) {
  (void)state;
  ccg_mesh m;
  assert_int_equal(ccg_mesh_parse("dp=2,tp=2", &m), CCG_STATUS_OK);
  unsigned tp, dp, both;
  assert_int_equal(ccg_mesh_axes_mask(&m, "tp", &tp), CCG_STATUS_OK);
  assert_int_equal(ccg_mesh_axes_mask(&m, "dp", &dp), CCG_STATUS_OK);
  assert_int_equal(ccg_mesh_axes_mask(&m, "dp,tp", &both), CCG_STATUS_OK);
  assert_int_equal(tp, 2u);
  assert_int_equal(dp, 1u);
  assert_int_equal(both, 3u);
  assert_int_equal(ccg_mesh_group_size(&m, tp), 2);
  assert_int_equal(ccg_mesh_group_size(&m, both), 4);
  /* rank = dp * 2 + tp */
  int64_t expect_tp[4] = {0, 1, 0, 1}, expect_dp[4] = {0, 0, 1, 1};
  for (int64_t r = 0; r < 4; r++) {
    assert_int_equal(ccg_mesh_rank_in_group(&m, r, tp), expect_tp[r]);
    assert_int_equal(ccg_mesh_rank_in_group(&m, r, dp), expect_dp[r]);
    assert_int_equal(ccg_mesh_rank_in_group(&m, r, both), r);
  }
  int64_t g[4];
  assert_int_equal(ccg_mesh_group_ranks(&m, 3, tp, g), CCG_STATUS_OK);
  assert_int_equal(g[0], 2);
  assert_int_equal(g[1], 3);
  assert_int_equal(ccg_mesh_group_ranks(&m, 1, dp, g), CCG_STATUS_OK);
  assert_int_equal(g[0], 1);
  assert_int_equal(g[1], 3);
  assert_int_equal(ccg_mesh_rank_in_group(&m, 4, tp), -1);
  assert_int_equal(ccg_mesh_group_ranks(&m, 4, tp, g), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(NULL), "rank 4 is outside"));
  unsigned mask = 77;
  assert_int_equal(ccg_mesh_axes_mask(&m, "ep", &mask), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(NULL), "'ep' is not in the mesh"));
  assert_int_equal(ccg_mesh_axes_mask(&m, "tp,tp", &mask),
                   CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(NULL), "named twice"));
  assert_int_equal(ccg_mesh_axes_mask(&m, "", &mask), CCG_STATUS_INVALID_ARG);
  assert_int_equal(mask, 77u);
}

static void test_groups_3d(void **state) {
  (void)state;
  ccg_mesh m;
  assert_int_equal(ccg_mesh_parse("dp=2,pp=2,tp=2", &m), CCG_STATUS_OK);
  int64_t c[CCG_MAX_MESH_AXES];
  assert_int_equal(ccg_mesh_coords(&m, 6, c), CCG_STATUS_OK);
  assert_int_equal(c[0], 1);
  assert_int_equal(c[1], 1);
  assert_int_equal(c[2], 0);
  unsigned dp_tp;
  assert_int_equal(ccg_mesh_axes_mask(&m, "tp,dp", &dp_tp), CCG_STATUS_OK);
  /* Group order is row-major over the mesh's axis order, whatever order the
   * axes are named in. */
  int64_t g[4];
  assert_int_equal(ccg_mesh_group_ranks(&m, 7, dp_tp, g), CCG_STATUS_OK);
  int64_t want[4] = {2, 3, 6, 7};
  assert_memory_equal(g, want, sizeof want);
  for (int k = 0; k < 4; k++)
    assert_int_equal(ccg_mesh_rank_in_group(&m, want[k], dp_tp), k);
  /* Every rank lies in exactly one group per mask. */
  for (unsigned mask = 1; mask < 8; mask++) {
    int seen[8] = {0};
    int64_t ranks[8];
    for (int64_t r = 0; r < 8; r++) {
      if (ccg_mesh_rank_in_group(&m, r, mask) != 0)
        continue;
      assert_int_equal(ccg_mesh_group_ranks(&m, r, mask, ranks), CCG_STATUS_OK);
      for (int64_t k = 0; k < ccg_mesh_group_size(&m, mask); k++)
        seen[ranks[k]]++;
    }
    for (int r = 0; r < 8; r++)
      assert_int_equal(seen[r], 1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_and_format),
      cmocka_unit_test(test_groups_2d),
      cmocka_unit_test(test_groups_3d),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
