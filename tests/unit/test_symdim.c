/* Symbolic dims: canonical text, monomial arithmetic, atoms that are not
 * identifiers, rank-dependent split symbols. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "graph/internal.h"

static const char *canon(const char *s) {
  static char buf[256];
  assert_true(ccg__sym_canonical(s, buf, sizeof buf));
  return buf;
}

static void test_canonical(void **state) {
  (void)state;
  assert_string_equal(canon("batch"), "batch");
  assert_string_equal(canon("seq*batch"), "batch*seq");
  assert_string_equal(canon("2*seq*3"), "6*seq");
  assert_string_equal(canon("seq*4/8"), "seq/2");
  assert_string_equal(canon("4*seq/8"), "seq/2");
  assert_string_equal(canon("seq*seq"), "seq*seq");
  assert_string_equal(canon("tp{3,5,4,4}"), "tp{3,5,4,4}");
  assert_string_equal(canon("dp.tp{1,2}"), "dp.tp{1,2}");
  /* Not in the grammar: one atom, kept whole. */
  assert_string_equal(canon("batch size"), "batch size");
  assert_string_equal(canon("a+b"), "a+b");
  assert_string_equal(canon("seq/0"), "seq/0");
  assert_string_equal(canon("(batch size)*seq"), "(batch size)*seq");
  char tiny[4];
  assert_false(ccg__sym_canonical("batch*seq", tiny, sizeof tiny));
}

static ccg_dim sym(ccg_graph *g, const char *s) {
  return ccg_dim_sym(ccg__intern(g, s));
}

static void test_arithmetic(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_dim d;
  assert_true(ccg__dim_mul(g, sym(g, "seq"), sym(g, "batch"), &d));
  assert_string_equal(d.sym, "batch*seq");
  assert_true(ccg__dim_mul(g, sym(g, "seq"), ccg_dim_num(4), &d));
  assert_string_equal(d.sym, "4*seq");
  assert_true(ccg__dim_div(g, d, ccg_dim_num(4), &d));
  assert_string_equal(d.sym, "seq");
  assert_true(ccg__dim_div(g, d, ccg_dim_num(4), &d));
  assert_string_equal(d.sym, "seq/4");
  assert_true(ccg__dim_mul(g, d, ccg_dim_num(2), &d));
  assert_string_equal(d.sym, "seq/2");
  assert_true(ccg__dim_mul(g, d, ccg_dim_num(2), &d));
  assert_string_equal(d.sym, "seq");
  /* Symbols cancel. */
  ccg_dim bs;
  assert_true(ccg__dim_mul(g, sym(g, "batch*seq"), ccg_dim_num(768), &bs));
  assert_string_equal(bs.sym, "768*batch*seq");
  assert_true(ccg__dim_div(g, bs, sym(g, "batch"), &d));
  assert_string_equal(d.sym, "768*seq");
  assert_true(ccg__dim_div(g, bs, sym(g, "batch*seq"), &d));
  assert_false(ccg_dim_is_sym(d));
  assert_int_equal(d.size, 768);
  /* Not representable: dividing by an absent symbol, inexact numbers. */
  assert_false(ccg__dim_div(g, sym(g, "seq"), sym(g, "batch"), &d));
  assert_false(ccg__dim_div(g, ccg_dim_num(10), ccg_dim_num(4), &d));
  assert_false(ccg__dim_div(g, ccg_dim_num(10), ccg_dim_num(0), &d));
  assert_true(ccg__dim_div(g, ccg_dim_num(12), ccg_dim_num(4), &d));
  assert_int_equal(d.size, 3);
  assert_true(ccg__dim_div(g, ccg_dim_num(0), sym(g, "seq"), &d));
  assert_int_equal(d.size, 0);
  /* Sums of like terms only. */
  assert_true(ccg__dim_add(g, sym(g, "seq/2"), sym(g, "seq/2"), &d));
  assert_string_equal(d.sym, "seq");
  assert_true(ccg__dim_add(g, sym(g, "seq"), sym(g, "2*seq"), &d));
  assert_string_equal(d.sym, "3*seq");
  assert_false(ccg__dim_add(g, sym(g, "seq"), sym(g, "batch"), &d));
  assert_false(ccg__dim_add(g, sym(g, "seq"), ccg_dim_num(1), &d));
  assert_true(ccg__dim_add(g, ccg_dim_num(3), ccg_dim_num(4), &d));
  assert_int_equal(d.size, 7);
  assert_false(ccg__dim_add(g, ccg_dim_num(INT64_MAX), ccg_dim_num(1), &d));
  assert_false(ccg__dim_mul(g, ccg_dim_num(INT64_MAX), ccg_dim_num(2), &d));
  /* Raw atoms are parenthesized inside products and round-trip. */
  assert_true(ccg__dim_mul(g, sym(g, "batch size"), sym(g, "seq"), &d));
  assert_string_equal(d.sym, "(batch size)*seq");
  assert_true(ccg__dim_div(g, d, sym(g, "seq"), &d));
  assert_string_equal(d.sym, "batch size");
  /* Equal text means equal size: interned once. */
  ccg_dim a, b;
  assert_true(ccg__dim_mul(g, sym(g, "x"), sym(g, "y"), &a));
  assert_true(ccg__dim_mul(g, sym(g, "y"), sym(g, "x"), &b));
  assert_ptr_equal(a.sym, b.sym);
  ccg_graph_free(g);
}

static void test_shapes_canonicalized_on_entry(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_shape s = {
      3, {ccg_dim_sym("seq*batch"), ccg_dim_sym("2*3"), ccg_dim_num(5)}};
  ccg_value_id v;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &v));
  assert_string_equal(ccg_test_shape(g, v), "[batch*seq,6,5]");
  assert_false(ccg_shape_is_static(ccg_value_shape(g, v)));
  ccg_shape bad = {1, {{-7, NULL}}};
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_graph_add_input(g, "y", CCG_DTYPE_F32, &bad, &v), "'y'",
               "dim 0 is -7");
  ccg_shape empty = {1, {ccg_dim_sym("")}};
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_graph_add_input(g, "z", CCG_DTYPE_F32, &empty, &v), "'z'");
  ccg_shape rank9 = {9, {{1, NULL}}};
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_graph_add_input(g, "w", CCG_DTYPE_F32, &rank9, &v),
               "rank 9");
  assert_int_equal(ccg_graph_num_values(g), 1);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_canonical),
      cmocka_unit_test(test_arithmetic),
      cmocka_unit_test(test_shapes_canonicalized_on_entry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
