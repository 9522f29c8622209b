/* The op registry: every row has a shape rule, names are unique and found
 * by (domain, name), attribute specs are well formed, collectives are
 * marked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "graph/internal.h"

static void test_table(void **state) {
  (void)state;
  assert_true(CCG_OP_COUNT >= 40);
  for (int i = 0; i < CCG_OP_COUNT; i++) {
    const ccg__op_info *o = ccg__op_info_of((ccg_op)i);
    assert_non_null(o);
    assert_non_null(o->def);
    assert_non_null(o->def->infer);
    assert_true(o->min_in >= 0);
    assert_true(o->max_in < 0 || o->max_in >= o->min_in);
    assert_true(o->max_out < 0 || o->max_out >= o->min_out);
    ccg_op found;
    assert_int_equal(ccg_op_find(o->domain, o->name, &found), CCG_STATUS_OK);
    assert_int_equal(found, i);
    /* Domain "ccgraph" holds exactly the collectives. */
    bool ours = strcmp(o->domain, CCG_DOMAIN_CCGRAPH) == 0;
    if (ours != ccg_op_is_collective((ccg_op)i))
      fail_msg("op %s: domain '%s' but collective flag %d", o->name, o->domain,
               ccg_op_is_collective((ccg_op)i));
    for (size_t a = 0; a < o->def->n_attrs; a++) {
      const ccg__attr_spec *s = &o->def->attrs[a];
      assert_non_null(s->name);
      assert_true((unsigned)s->type < CCG_ATTR_TYPE_COUNT);
      for (size_t b = 0; b < a; b++)
        assert_string_not_equal(s->name, o->def->attrs[b].name);
      ccg_attr_type t;
      bool req;
      assert_string_equal(ccg_op_attr_info((ccg_op)i, a, &t, &req), s->name);
      assert_int_equal(t, s->type);
      assert_int_equal(req, s->required);
    }
    assert_null(ccg_op_attr_info((ccg_op)i, o->def->n_attrs, NULL, NULL));
  }
  assert_null(ccg__op_info_of(CCG_OP_COUNT));
  assert_string_equal(ccg_op_name(CCG_OP_COUNT), "invalid");
}

static void test_find(void **state) {
  (void)state;
  ccg_op op;
  assert_int_equal(ccg_op_find("", "MatMul", &op), CCG_STATUS_OK);
  assert_int_equal(op, CCG_OP_MATMUL);
  assert_int_equal(ccg_op_find("ai.onnx", "Softmax", &op), CCG_STATUS_OK);
  assert_int_equal(op, CCG_OP_SOFTMAX);
  assert_int_equal(ccg_op_find(NULL, "Gelu", &op), CCG_STATUS_OK);
  assert_int_equal(op, CCG_OP_GELU);
  assert_int_equal(ccg_op_find("ccgraph", "AllToAll", &op), CCG_STATUS_OK);
  assert_int_equal(op, CCG_OP_ALL_TO_ALL);
  op = CCG_OP_COUNT;
  assert_int_equal(ccg_op_find("", "AllToAll", &op), CCG_STATUS_UNSUPPORTED);
  assert_non_null(strstr(ccg_last_error(NULL),
                         "op 'AllToAll' of domain 'ai.onnx' is not in the "
                         "registry"));
  assert_int_equal(op, CCG_OP_COUNT);
  assert_int_equal(ccg_op_find("ccgraph", "matmul", &op),
                   CCG_STATUS_UNSUPPORTED);
  assert_int_equal(ccg_op_find("", NULL, &op), CCG_STATUS_INVALID_ARG);
  char longname[300];
  memset(longname, 'A', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  assert_int_equal(ccg_op_find("", longname, &op), CCG_STATUS_UNSUPPORTED);
  int imin, imax, omin, omax;
  ccg_op_arity(CCG_OP_CONCAT, &imin, &imax, &omin, &omax);
  assert_int_equal(imin, 1);
  assert_int_equal(imax, -1);
  ccg_op_arity(CCG_OP_SEND, &imin, &imax, &omin, &omax);
  assert_int_equal(omax, 0);
}

static void test_enum_names(void **state) {
  (void)state;
  for (int i = 1; i < CCG_DTYPE_COUNT; i++) {
    ccg_dtype dt;
    assert_int_equal(ccg_dtype_parse(ccg_dtype_name((ccg_dtype)i), &dt),
                     CCG_STATUS_OK);
    assert_int_equal(dt, i);
    assert_true(ccg_dtype_size((ccg_dtype)i) > 0);
  }
  ccg_dtype dt;
  assert_int_equal(ccg_dtype_parse("float32", &dt), CCG_STATUS_PARSE);
  assert_int_equal(ccg_dtype_parse("undefined", &dt), CCG_STATUS_PARSE);
  assert_int_equal(ccg_dtype_size(CCG_DTYPE_BF16), 2);
  assert_true(ccg_dtype_is_float(CCG_DTYPE_BF16));
  assert_false(ccg_dtype_is_float(CCG_DTYPE_I8));
  assert_true(ccg_dtype_is_int(CCG_DTYPE_U8));
  assert_false(ccg_dtype_is_int(CCG_DTYPE_BOOL));
  for (int i = 0; i < CCG_REDUCE_OP_COUNT; i++) {
    ccg_reduce_op r;
    assert_int_equal(
        ccg_reduce_op_parse(ccg_reduce_op_name((ccg_reduce_op)i), &r),
        CCG_STATUS_OK);
    assert_int_equal(r, i);
  }
  ccg_reduce_op r;
  assert_int_equal(ccg_reduce_op_parse("mean", &r), CCG_STATUS_PARSE);
  assert_non_null(strstr(ccg_last_error(NULL), "'mean'"));
  ccg_dump_format f;
  assert_int_equal(ccg_dump_format_parse("dot", &f), CCG_STATUS_OK);
  assert_int_equal(f, CCG_DUMP_DOT);
  assert_int_equal(ccg_dump_format_parse("svg", &f), CCG_STATUS_PARSE);
  assert_string_equal(ccg_attr_type_name(CCG_ATTR_STRINGS), "strings");
  assert_string_equal(ccg_attr_type_name(CCG_ATTR_TYPE_COUNT), "invalid");
}

static void test_shape_helpers(void **state) {
  (void)state;
  ccg_shape s = CCG_SHAPE(2, 3, 4);
  assert_int_equal(s.rank, 3);
  int64_t n;
  assert_int_equal(ccg_shape_numel(&s, &n), CCG_STATUS_OK);
  assert_int_equal(n, 24);
  ccg_shape sc = CCG_SCALAR_SHAPE;
  assert_int_equal(ccg_shape_numel(&sc, &n), CCG_STATUS_OK);
  assert_int_equal(n, 1);
  char buf[64];
  assert_int_equal(ccg_shape_format(&sc, buf, sizeof buf), 2);
  assert_string_equal(buf, "[]");
  s.dims[1] = ccg_dim_sym("seq");
  assert_int_equal(ccg_shape_numel(&s, &n), CCG_STATUS_SHAPE);
  assert_non_null(strstr(ccg_last_error(NULL), "dim 1 is symbolic (seq)"));
  assert_int_equal(ccg_shape_format(&s, buf, sizeof buf), 9);
  assert_string_equal(buf, "[2,seq,4]");
  char tiny[4];
  assert_int_equal(ccg_shape_format(&s, tiny, sizeof tiny), 9);
  assert_string_equal(tiny, "[2,");
  ccg_shape big = CCG_SHAPE(INT64_MAX / 2, 4);
  assert_int_equal(ccg_shape_numel(&big, &n), CCG_STATUS_SHAPE);
  ccg_shape t = s;
  assert_true(ccg_shape_equal(&s, &t));
  t.dims[1] = ccg_dim_sym("batch");
  assert_false(ccg_shape_equal(&s, &t));
  t.dims[1] = ccg_dim_num(5);
  assert_false(ccg_shape_equal(&s, &t));
  assert_true(ccg_dim_equal(ccg_dim_num(3), ccg_dim_num(3)));
  assert_false(ccg_dim_equal(ccg_dim_num(3), ccg_dim_sym("x")));
  ccg_tensor tt = {CCG_DTYPE_BF16, 2, {3, 5}, NULL};
  size_t nb;
  assert_int_equal(ccg_tensor_nbytes(&tt, &nb), CCG_STATUS_OK);
  assert_int_equal(nb, 30);
  tt.rank = 9;
  assert_int_equal(ccg_tensor_nbytes(&tt, &nb), CCG_STATUS_SHAPE);
  tt.rank = 1;
  tt.dtype = CCG_DTYPE_UNDEFINED;
  assert_int_equal(ccg_tensor_nbytes(&tt, &nb), CCG_STATUS_DTYPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_find),
      cmocka_unit_test(test_enum_names),
      cmocka_unit_test(test_shape_helpers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
