/* Shape family: Reshape, Transpose, Concat, Split, Slice, Gather, Unsqueeze,
 * Squeeze, Expand, Shape, Constant, ConstantOfShape. Static and symbolic
 * dims, known contents through torch-style shape chains, and every refusal
 * naming node, op and values while leaving the graph unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

/* ---- helpers ------------------------------------------------------------ */

static ccg_value_id vec_i64(ccg_graph *g, const char *name, const int64_t *v,
                            size_t n) {
  ccg_tensor t = {CCG_DTYPE_I64, 1, {(int64_t)n}, v};
  ccg_value_id id = CCG_NONE;
  if (ccg_graph_add_initializer(g, name, &t, &id) != CCG_STATUS_OK)
    fail_msg("initializer %s: %s", name, ccg_last_error(g));
  return id;
}

static ccg_value_id scalar_i64(ccg_graph *g, const char *name, int64_t v) {
  ccg_tensor t = {CCG_DTYPE_I64, 0, {0}, &v};
  ccg_value_id id = CCG_NONE;
  if (ccg_graph_add_initializer(g, name, &t, &id) != CCG_STATUS_OK)
    fail_msg("initializer %s: %s", name, ccg_last_error(g));
  return id;
}

/* Known contents as "[batch,64]", or "unknown" (static buffer). */
static const char *known_str(ccg_graph *g, ccg_value_id v) {
  static char buf[256];
  ccg_shape s;
  memset(&s, 0, sizeof s);
  s.rank = ccg_value_known(g, v, s.dims);
  if (s.rank < 0)
    return "unknown";
  ccg_shape_format(&s, buf, sizeof buf);
  return buf;
}

/* Dim d of v is a fresh symbol named after the node (op name inside). */
static void assert_fresh(ccg_graph *g, ccg_value_id v, int d, const char *op) {
  const ccg_shape *s = ccg_value_shape(g, v);
  assert_true(d < s->rank);
  assert_true(ccg_dim_is_sym(s->dims[d]));
  if (!strstr(s->dims[d].sym, op))
    fail_msg("dim %d of %s is '%s', not a fresh %s symbol", d,
             ccg_value_name(g, v), s->dims[d].sym, op);
}

/* A node through the generic path (attributes the builders never write). */
static ccg_status add(ccg_graph *g, const char *op, const ccg_value_id *in,
                      size_t n_in, const ccg_attr *attrs, size_t n_attrs,
                      size_t n_out, ccg_value_id *outs) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.n_outputs = n_out;
  ccg_node_id n;
  ccg_status st = ccg_graph_add_node(g, &d, &n);
  for (size_t i = 0; st == CCG_STATUS_OK && i < n_out; i++)
    outs[i] = ccg_node_output(g, n, i);
  return st;
}

typedef struct counts {
  size_t nodes, values, inits;
} counts;

static counts counts_of(const ccg_graph *g) {
  return (counts){ccg_graph_num_nodes(g), ccg_graph_num_values(g),
                  ccg_graph_num_initializers(g)};
}

#define assert_unchanged(g, c)                                                 \
  do {                                                                         \
    assert_int_equal(ccg_graph_num_nodes(g), (c).nodes);                       \
    assert_int_equal(ccg_graph_num_values(g), (c).values);                     \
    assert_int_equal(ccg_graph_num_initializers(g), (c).inits);                \
  } while (0)

/* ---- Reshape ------------------------------------------------------------ */

static void test_reshape_static(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F16, "[2,3,4]");
  ccg_value_id y;
  assert_ok(g, ccg_reshape_to(g, x, (const int64_t[]){6, 4}, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[6,4]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F16);
  assert_ok(g, ccg_reshape_to(g, x, (const int64_t[]){0, -1}, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,12]");
  assert_ok(g, ccg_reshape_to(g, x, (const int64_t[]){-1}, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[24]");
  assert_ok(g, ccg_reshape_to(g, x, (const int64_t[]){4, 0, -1}, 3, &y));
  assert_string_equal(ccg_test_shape(g, y), "[4,3,2]");

  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_reshape_to(g, x, (const int64_t[]){5, 5}, 2, &y),
               "(Reshape)", "Reshape_", "[2,3,4]", "24 elements", "[5,5]",
               "25 elements");
  assert_unchanged(g, c);
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_reshape_to(g, x, (const int64_t[]){-1, 2, -1}, 3, &y),
               "[-1,2,-1]", "more than one -1");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_reshape_to(g, x, (const int64_t[]){-2, 12}, 2, &y),
               "[-2,12]", "-2 at position 0");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_reshape_to(g, x, (const int64_t[]){-1, 5}, 2, &y), "[2,3,4]",
               "[-1,5]", "24 is not divisible by 5");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_reshape_to(g, x, (const int64_t[]){1, 1, 1, 0}, 4, &y),
               "[1,1,1,0]", "position 3", "rank 3");
  assert_unchanged(g, c);

  ccg_value_id f = ccg_test_input(g, "f", CCG_DTYPE_F32, "[2]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_reshape(g, x, f, &y), "'f'", "f32",
               "i64");
  ccg_value_id m = ccg_test_input(g, "m", CCG_DTYPE_I64, "[2,2]");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_reshape(g, x, m, &y), "'m'", "[2,2]",
               "1-D");
  c = counts_of(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_reshape_to(g, 9999, (const int64_t[]){1}, 1, &y), "9999");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_reshape_allowzero(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[0,4]");
  ccg_value_id s = vec_i64(g, "s", (const int64_t[]){4, 0}, 2);
  ccg_value_id in[2] = {x, s}, y;
  ccg_attr az = CCG_ATTR_I("allowzero", 1);
  assert_ok(g, add(g, "Reshape", in, 2, &az, 1, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[4,0]");
  /* Without allowzero the 0 copies input dim 1 (4): 16 != 0 elements. */
  assert_fails(g, CCG_STATUS_SHAPE, add(g, "Reshape", in, 2, NULL, 0, 1, &y),
               "[4,4]", "0 elements", "16 elements");
  /* A -1 next to a 0 (literal or copied) has no answer. */
  in[1] = vec_i64(g, "s2", (const int64_t[]){0, -1}, 2);
  assert_fails(g, CCG_STATUS_SHAPE, add(g, "Reshape", in, 2, &az, 1, 1, &y),
               "[0,-1]", "cannot infer the -1");
  assert_fails(g, CCG_STATUS_SHAPE, add(g, "Reshape", in, 2, NULL, 0, 1, &y),
               "[0,-1]", "cannot infer the -1");
  in[1] = vec_i64(g, "s3", (const int64_t[]){-1, 2, 2}, 3);
  assert_ok(g, add(g, "Reshape", in, 2, NULL, 0, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[0,2,2]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_reshape_symbolic(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,768]");
  ccg_value_id y;
  assert_ok(g, ccg_reshape_to(g, x, (const int64_t[]){0, -1}, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,768*seq]");
  assert_ok(g, ccg_reshape_to(g, x, (const int64_t[]){0, 0, 12, 64}, 4, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,seq,12,64]");
  assert_ok(g, ccg_reshape_to(g, x, (const int64_t[]){-1, 768}, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch*seq,768]");
  assert_ok(g, ccg_reshape_to(g, y, (const int64_t[]){-1, 12, 64}, 3, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch*seq,12,64]");
  /* A -1 no monomial expresses becomes a fresh symbol. */
  ccg_value_id k = ccg_test_input(g, "k", CCG_DTYPE_F32, "[n]");
  ccg_value_id h = ccg_test_input(g, "h", CCG_DTYPE_F32, "[heads]");
  ccg_value_id sh, cat;
  assert_ok(g, ccg_shape_of(g, h, 0, INT64_MAX, &sh));
  ccg_value_id m1 = vec_i64(g, "m1", (const int64_t[]){-1}, 1);
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){m1, sh}, 2, 0, &cat));
  assert_ok(g, ccg_reshape(g, k, cat, &y));
  assert_string_equal(known_str(g, cat), "[-1,heads]");
  assert_fresh(g, y, 0, "Reshape");
  assert_string_equal(ccg_value_shape(g, y)->dims[1].sym, "heads");
  /* Unknown target contents: the rank comes from the shape's length. */
  ccg_value_id t = ccg_test_input(g, "t", CCG_DTYPE_I64, "[3]");
  assert_ok(g, ccg_reshape(g, x, t, &y));
  assert_int_equal(ccg_value_shape(g, y)->rank, 3);
  for (int d = 0; d < 3; d++)
    assert_fresh(g, y, d, "Reshape");
  ccg_value_id tn = ccg_test_input(g, "tn", CCG_DTYPE_I64, "[r]");
  /* a rank set by data is beyond the IR (unsupported), not a bad model */
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_reshape(g, x, tn, &y), "'tn'",
               "[r]", "unknown contents");
  ccg_value_id t9 = ccg_test_input(g, "t9", CCG_DTYPE_I64, "[9]");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_reshape(g, x, t9, &y), "'t9'", "[9]",
               "<= 8");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* torch.onnx.export with dynamic axes: the reshape target of attention
 * heads is computed from the input's runtime shape. */
static void test_dynamic_reshape_chain(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,768]");
  ccg_value_id shape, b, s, ub, us, cat, y;
  assert_ok(g, ccg_shape_of(g, x, 0, INT64_MAX, &shape));
  assert_string_equal(ccg_test_shape(g, shape), "[3]");
  assert_int_equal(ccg_value_dtype(g, shape), CCG_DTYPE_I64);
  assert_string_equal(known_str(g, shape), "[batch,seq,768]");
  assert_ok(g, ccg_gather(g, shape, scalar_i64(g, "i0", 0), 0, &b));
  assert_string_equal(ccg_test_shape(g, b), "[]");
  assert_string_equal(known_str(g, b), "[batch]");
  /* torch writes its index constants as Constant nodes. */
  int64_t one = 1;
  ccg_tensor t1 = {CCG_DTYPE_I64, 0, {0}, &one};
  ccg_value_id i1;
  assert_ok(g, ccg_constant(g, &t1, &i1));
  assert_ok(g, ccg_gather(g, shape, i1, 0, &s));
  assert_string_equal(known_str(g, s), "[seq]");
  int64_t zero = 0;
  assert_ok(g, ccg_unsqueeze(g, b, &zero, 1, &ub));
  assert_ok(g, ccg_unsqueeze(g, s, &zero, 1, &us));
  assert_string_equal(ccg_test_shape(g, ub), "[1]");
  assert_string_equal(known_str(g, us), "[seq]");
  ccg_value_id heads = vec_i64(g, "heads", (const int64_t[]){12, 64}, 2);
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){ub, us, heads}, 3, 0, &cat));
  assert_string_equal(ccg_test_shape(g, cat), "[4]");
  assert_string_equal(known_str(g, cat), "[batch,seq,12,64]");
  assert_ok(g, ccg_reshape(g, x, cat, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,seq,12,64]");
  /* And back: [batch, seq, -1] from the same gathered dims. */
  ccg_value_id m1 = vec_i64(g, "m1", (const int64_t[]){-1}, 1), back, z;
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){ub, us, m1}, 3, 0, &back));
  assert_ok(g, ccg_reshape(g, y, back, &z));
  assert_string_equal(ccg_test_shape(g, z), "[batch,seq,768]");
  assert_ok(g, ccg_graph_add_output(g, z));
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* ---- Transpose ---------------------------------------------------------- */

static void test_transpose(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_BF16, "[b,4,8]");
  ccg_value_id y;
  assert_ok(g, ccg_transpose(g, x, (const int64_t[]){2, 0, 1}, 3, &y));
  assert_string_equal(ccg_test_shape(g, y), "[8,b,4]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_BF16);
  assert_ok(g, ccg_transpose(g, x, NULL, 0, &y));
  assert_string_equal(ccg_test_shape(g, y), "[8,4,b]");
  assert_null(ccg_node_attr(g, ccg_value_producer(g, y), "perm"));
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[]");
  assert_ok(g, ccg_transpose(g, s, NULL, 0, &y));
  assert_string_equal(ccg_test_shape(g, y), "[]");
  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_transpose(g, x, (const int64_t[]){0, 0, 1}, 3, &y),
               "Transpose_", "(Transpose)", "perm [0,0,1]",
               "not a permutation of 0..2", "[b,4,8]");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_transpose(g, x, (const int64_t[]){1, 0}, 2, &y),
               "perm [1,0]");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_transpose(g, x, (const int64_t[]){0, 1, 2, 3}, 4, &y),
               "perm [0,1,2,3]");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_transpose(g, x, (const int64_t[]){0, -1, 1}, 3, &y),
               "perm [0,-1,1]");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* ---- Concat ------------------------------------------------------------- */

static void test_concat(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[b,2,8]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[b,3,8]");
  ccg_value_id y;
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){a, b, a}, 3, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,7,8]");
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){a, b}, 2, -2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,5,8]");
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){a, a}, 2, 0, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2*b,2,8]");
  assert_ok(g, ccg_concat(g, &a, 1, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,2,8]");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[b,s,8]");
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){a, s}, 2, 1, &y));
  assert_fresh(g, y, 1, "Concat");

  ccg_value_id h = ccg_test_input(g, "h", CCG_DTYPE_F16, "[b,3,8]");
  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_concat(g, (ccg_value_id[]){a, h}, 2, 1, &y), "(Concat)",
               "'a'", "f32", "'h'", "f16");
  ccg_value_id r = ccg_test_input(g, "r", CCG_DTYPE_F32, "[b,3]");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_concat(g, (ccg_value_id[]){a, r}, 2, 1, &y), "'r'", "[b,3]",
               "differ in rank");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[b,3,9]");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_concat(g, (ccg_value_id[]){a, w}, 2, 1, &y), "[b,2,8]",
               "[b,3,9]", "dim 2");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_concat(g, (ccg_value_id[]){a, b}, 2, 3, &y), "axis 3",
               "rank 3");
  ccg_value_id z = ccg_test_input(g, "z", CCG_DTYPE_F32, "[]");
  c = counts_of(g);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_concat(g, &z, 1, 0, &y), "'z'",
               "scalar");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               add(g, "Concat", (ccg_value_id[]){a, b}, 2, NULL, 0, 1, &y),
               "required attribute 'axis'");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_concat_known(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id p = vec_i64(g, "p", (const int64_t[]){1, 2, 3}, 3);
  ccg_value_id q = vec_i64(g, "q", (const int64_t[]){4, 5, 6}, 3);
  ccg_value_id u = ccg_test_input(g, "u", CCG_DTYPE_I64, "[3]");
  ccg_value_id y;
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){p, q}, 2, 0, &y));
  assert_string_equal(known_str(g, y), "[1,2,3,4,5,6]");
  /* Past CCG_MAX_RANK elements, or with an unknown part: not known. */
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){p, q, p}, 3, 0, &y));
  assert_string_equal(ccg_test_shape(g, y), "[9]");
  assert_string_equal(known_str(g, y), "unknown");
  assert_ok(g, ccg_concat(g, (ccg_value_id[]){p, u}, 2, 0, &y));
  assert_string_equal(known_str(g, y), "unknown");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* ---- Split -------------------------------------------------------------- */

static void test_split(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[b,12]");
  ccg_value_id o[3];
  assert_ok(g, ccg_split(g, x, 1, NULL, 3, o));
  for (int i = 0; i < 3; i++)
    assert_string_equal(ccg_test_shape(g, o[i]), "[b,4]");
  assert_ok(g, ccg_split(g, x, -1, (const int64_t[]){2, 10}, 2, o));
  assert_string_equal(ccg_test_shape(g, o[0]), "[b,2]");
  assert_string_equal(ccg_test_shape(g, o[1]), "[b,10]");
  assert_ok(g, ccg_split(g, x, 1, (const int64_t[]){0, 12}, 2, o));
  assert_string_equal(ccg_test_shape(g, o[0]), "[b,0]");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[seq,4]");
  assert_ok(g, ccg_split(g, s, 0, NULL, 2, o));
  assert_string_equal(ccg_test_shape(g, o[1]), "[seq/2,4]");
  assert_ok(g, ccg_split(g, s, 0, (const int64_t[]){1, 5}, 2, o));
  assert_string_equal(ccg_test_shape(g, o[1]), "[5,4]");

  ccg_value_id t = ccg_test_input(g, "t", CCG_DTYPE_F32, "[b,10]");
  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_split(g, t, 1, NULL, 3, o), "Split_",
               "(Split)", "[b,10]", "(10)", "3 equal parts");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_split(g, x, 1, (const int64_t[]){2, 3}, 2, o), "[2,3]",
               "sums to 5", "[b,12]", "12");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_split(g, x, 1, (const int64_t[]){-2, 14}, 2, o), "[-2,14]",
               "negative");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_split(g, x, 2, NULL, 2, o),
               "axis 2");
  ccg_attr three = CCG_ATTR_IS("split", ((const int64_t[]){4, 4, 4}), 3);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               add(g, "Split", &x, 1, &three, 1, 2, o), "[4,4,4]",
               "3 sizes for 2 outputs");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_split_known(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[b,s,4,8]");
  ccg_value_id sh, o[2];
  assert_ok(g, ccg_shape_of(g, x, 0, INT64_MAX, &sh));
  assert_ok(g, ccg_split(g, sh, 0, (const int64_t[]){1, 3}, 2, o));
  assert_string_equal(known_str(g, o[0]), "[b]");
  assert_string_equal(known_str(g, o[1]), "[s,4,8]");
  assert_ok(g, ccg_split(g, sh, 0, NULL, 2, o));
  assert_string_equal(known_str(g, o[1]), "[4,8]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* ---- Slice -------------------------------------------------------------- */

static void test_slice_static(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[10,20,30]");
  ccg_value_id y;
  assert_ok(g, ccg_slice(g, x, (const int64_t[]){2}, (const int64_t[]){8},
                         (const int64_t[]){1}, NULL, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,6,30]");
  assert_int_equal(ccg_node_num_inputs(g, ccg_value_producer(g, y)), 4);
  assert_ok(g,
            ccg_slice(g, x, (const int64_t[]){-3}, (const int64_t[]){INT64_MAX},
                      (const int64_t[]){-1}, NULL, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,20,3]");
  /* No axes: 0..n-1. Out-of-range bounds clamp; empty when start >= end. */
  assert_ok(g, ccg_slice(g, x, (const int64_t[]){-100, 15},
                         (const int64_t[]){100, 5}, NULL, NULL, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,0,30]");
  assert_int_equal(ccg_node_num_inputs(g, ccg_value_producer(g, y)), 3);
  /* Steps: ceil((end - start) / step); negative steps walk backwards. */
  assert_ok(g,
            ccg_slice(g, x, (const int64_t[]){0, 1}, (const int64_t[]){10, 30},
                      (const int64_t[]){0, 2}, (const int64_t[]){3, 4}, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[4,20,8]");
  assert_ok(g,
            ccg_slice(g, x, (const int64_t[]){-1}, (const int64_t[]){INT64_MIN},
                      NULL, (const int64_t[]){-1}, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,20,30]");
  assert_ok(g, ccg_slice(g, x, (const int64_t[]){100}, (const int64_t[]){2},
                         (const int64_t[]){1}, (const int64_t[]){-5}, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,4,30]");
  assert_ok(g, ccg_slice(g, x, (const int64_t[]){5}, (const int64_t[]){-100},
                         (const int64_t[]){2}, (const int64_t[]){INT64_MIN}, 1,
                         &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,20,1]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_slice_symbolic_and_known(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[b,s,768]");
  ccg_value_id y;
  assert_ok(g,
            ccg_slice(g, x, (const int64_t[]){0}, (const int64_t[]){INT64_MAX},
                      (const int64_t[]){1}, NULL, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,s,768]");
  assert_ok(g,
            ccg_slice(g, x, (const int64_t[]){0, 0}, (const int64_t[]){4, 256},
                      (const int64_t[]){1, 2}, NULL, 2, &y));
  assert_fresh(g, y, 1, "Slice");
  assert_int_equal(ccg_value_shape(g, y)->dims[2].size, 256);
  assert_string_equal(ccg_value_shape(g, y)->dims[0].sym, "b");
  /* Bounds with unknown contents: the sliced axes get fresh symbols. */
  ccg_value_id st = ccg_test_input(g, "st", CCG_DTYPE_I64, "[1]");
  ccg_value_id en = ccg_test_input(g, "en", CCG_DTYPE_I32, "[1]");
  ccg_value_id ax = vec_i64(g, "ax", (const int64_t[]){-1}, 1);
  ccg_value_id in[4] = {x, st, st, ax};
  assert_ok(g, add(g, "Slice", in, 4, NULL, 0, 1, &y));
  assert_string_equal(ccg_value_shape(g, y)->dims[1].sym, "s");
  assert_fresh(g, y, 2, "Slice");
  in[2] = en;
  assert_ok(g, add(g, "Slice", in, 3, NULL, 0, 1, &y));
  assert_fresh(g, y, 0, "Slice");
  assert_string_equal(ccg_value_shape(g, y)->dims[1].sym, "s");
  /* A known vector slices through: Shape(x)[1:] = [s,768]. */
  ccg_value_id sh;
  assert_ok(g, ccg_shape_of(g, x, 0, INT64_MAX, &sh));
  assert_ok(g, ccg_slice(g, sh, (const int64_t[]){1},
                         (const int64_t[]){INT64_MAX}, NULL, NULL, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2]");
  assert_string_equal(known_str(g, y), "[s,768]");
  assert_ok(g, ccg_slice(g, sh, (const int64_t[]){-1}, (const int64_t[]){-4},
                         NULL, (const int64_t[]){-2}, 1, &y));
  assert_string_equal(known_str(g, y), "[768,b]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* torch's F.pad exports turn the pads vector into a [n,2] view, reverse its
 * rows, transpose it and flatten it: known contents survive every step
 * (row-major), so Pad gets numeric dims. */
static void test_known_through_views(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id p = vec_i64(g, "p", (const int64_t[]){1, 2, 3, 4}, 4), m, r, t,
               f;
  assert_ok(g, ccg_reshape_to(g, p, (const int64_t[]){-1, 2}, 2, &m));
  assert_string_equal(known_str(g, m), "[1,2,3,4]");
  assert_ok(g, ccg_slice(g, m, (const int64_t[]){-1},
                         (const int64_t[]){-INT64_MAX}, (const int64_t[]){0},
                         (const int64_t[]){-1}, 1, &r));
  assert_string_equal(known_str(g, r), "[3,4,1,2]");
  assert_ok(g, ccg_transpose(g, r, (const int64_t[]){1, 0}, 2, &t));
  assert_string_equal(ccg_test_shape(g, t), "[2,2]");
  assert_string_equal(known_str(g, t), "[3,1,4,2]");
  assert_ok(g, ccg_reshape_to(g, t, (const int64_t[]){-1}, 1, &f));
  assert_string_equal(known_str(g, f), "[3,1,4,2]");
  /* a slice of the inner axis keeps the rows: [[1],[3]] */
  assert_ok(g, ccg_slice(g, m, (const int64_t[]){0}, (const int64_t[]){1},
                         (const int64_t[]){1}, NULL, 1, &r));
  assert_string_equal(known_str(g, r), "[1,3]");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_I64, "[2,8]"), y;
  ccg_value_id in[2] = {x, f};
  assert_ok(g, add(g, "Pad", in, 2, NULL, 0, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[9,11]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_slice_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[10,20]");
  ccg_value_id y;
  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_slice(g, x, (const int64_t[]){0}, (const int64_t[]){5}, NULL,
                         (const int64_t[]){0}, 1, &y),
               "Slice_", "(Slice)", "steps[0]", "is 0");
  assert_unchanged(g, c);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_slice(g, x, (const int64_t[]){0}, (const int64_t[]){5},
                         (const int64_t[]){2}, NULL, 1, &y),
               "axis 2", "rank 2");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_slice(g, x, (const int64_t[]){0, 0}, (const int64_t[]){5, 5},
                         (const int64_t[]){1, -1}, NULL, 2, &y),
               "axis 1 appears twice");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_slice(g, x, NULL, NULL, NULL, NULL, 1, &y), "Slice", "NULL");
  assert_unchanged(g, c);
  ccg_value_id f = ccg_test_input(g, "f", CCG_DTYPE_F32, "[1]");
  ccg_value_id two = vec_i64(g, "two", (const int64_t[]){0, 1}, 2);
  ccg_value_id one = vec_i64(g, "one", (const int64_t[]){5}, 1);
  assert_fails(g, CCG_STATUS_DTYPE,
               add(g, "Slice", (ccg_value_id[]){x, f, one}, 3, NULL, 0, 1, &y),
               "'f'", "f32", "i64");
  assert_fails(
      g, CCG_STATUS_SHAPE,
      add(g, "Slice", (ccg_value_id[]){x, two, one}, 3, NULL, 0, 1, &y),
      "starts has 2 elements", "ends has 1");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[]");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_slice(g, s, (const int64_t[]){0}, (const int64_t[]){1}, NULL,
                         NULL, 1, &y),
               "'s'", "scalar");
  /* n = 0 slices nothing. */
  assert_ok(g, ccg_slice(g, x, NULL, NULL, NULL, NULL, 0, &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,20]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* ---- Gather ------------------------------------------------------------- */

static void test_gather(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id emb = ccg_test_input(g, "emb", CCG_DTYPE_F32, "[100,16]");
  ccg_value_id ids = ccg_test_input(g, "ids", CCG_DTYPE_I64, "[b,s]");
  ccg_value_id i32 = ccg_test_input(g, "i32", CCG_DTYPE_I32, "[]");
  ccg_value_id y;
  assert_ok(g, ccg_gather(g, emb, ids, 0, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,s,16]");
  assert_ok(g, ccg_gather(g, emb, i32, -1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[100]");
  assert_ok(g, ccg_gather(g, emb, ids, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[100,b,s]");
  /* Negative known indices wrap; known data gives known results. */
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[b,s,768]"), sh;
  assert_ok(g, ccg_shape_of(g, x, 0, INT64_MAX, &sh));
  assert_ok(g, ccg_gather(g, sh, scalar_i64(g, "m1", -1), 0, &y));
  assert_string_equal(known_str(g, y), "[768]");
  assert_ok(
      g, ccg_gather(g, sh, vec_i64(g, "v", (const int64_t[]){2, 0}, 2), 0, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2]");
  assert_string_equal(known_str(g, y), "[768,b]");
  /* Unknown indices: shape only. */
  ccg_value_id ui = ccg_test_input(g, "ui", CCG_DTYPE_I64, "[]");
  assert_ok(g, ccg_gather(g, sh, ui, 0, &y));
  assert_string_equal(known_str(g, y), "unknown");

  ccg_value_id fi = ccg_test_input(g, "fi", CCG_DTYPE_F32, "[2]");
  ccg_value_id five = scalar_i64(g, "five", 5);
  ccg_value_id neg = scalar_i64(g, "neg", -101);
  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_DTYPE, ccg_gather(g, emb, fi, 0, &y), "Gather_",
               "(Gather)", "'fi'", "f32", "i32 or i64");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_gather(g, emb, ids, 2, &y),
               "axis 2", "rank 2");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_gather(g, sh, five, 0, &y),
               "index 5", "'five'", "size 3");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_gather(g, emb, neg, 0, &y),
               "index -101", "size 100");
  ccg_value_id big =
      ccg_test_input(g, "big", CCG_DTYPE_I64, "[1,1,1,1,1,1,1,1]");
  c = counts_of(g);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_gather(g, emb, big, 0, &y), "rank 9");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* ---- Unsqueeze, Squeeze ------------------------------------------------- */

static void test_unsqueeze(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[b,4]");
  ccg_value_id y;
  assert_ok(g, ccg_unsqueeze(g, x, (const int64_t[]){0, -1}, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[1,b,4,1]");
  /* Axes count against the output rank: -1 is the new last dim. */
  assert_ok(g, ccg_unsqueeze(g, x, (const int64_t[]){-1}, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,4,1]");
  assert_ok(g, ccg_unsqueeze(g, x, (const int64_t[]){3, 1}, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,1,4,1]");
  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_unsqueeze(g, x, (const int64_t[]){1, -3}, 2, &y),
               "Unsqueeze_", "(Unsqueeze)", "axes [1,-3]", "dim 1 twice");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_unsqueeze(g, x, (const int64_t[]){3}, 1, &y), "axis 3",
               "rank 3");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_unsqueeze(g, x, NULL, 0, &y),
               "axes is empty");
  assert_fails(
      g, CCG_STATUS_SHAPE,
      ccg_unsqueeze(g, x, (const int64_t[]){0, 1, 2, 3, 4, 5, 6}, 7, &y),
      "[b,4]", "7 new axes");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               add(g, "Unsqueeze", &x, 1, NULL, 0, 1, &y),
               "required attribute 'axes'");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_squeeze(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[1,b,1,4]");
  ccg_value_id y;
  assert_ok(g, ccg_squeeze(g, x, NULL, 0, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,4]");
  assert_null(ccg_node_attr(g, ccg_value_producer(g, y), "axes"));
  assert_ok(g, ccg_squeeze(g, x, (const int64_t[]){-2}, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[1,b,4]");
  /* A listed symbolic dim is assumed to be 1. */
  assert_ok(g, ccg_squeeze(g, x, (const int64_t[]){1, 0}, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[1,4]");
  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_squeeze(g, x, (const int64_t[]){3}, 1, &y), "Squeeze_",
               "(Squeeze)", "dim 3", "[1,b,1,4]", "is 4, not 1");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_squeeze(g, x, (const int64_t[]){4}, 1, &y), "axis 4",
               "rank 4");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_squeeze(g, x, (const int64_t[]){0, -4}, 2, &y),
               "axes [0,-4]", "twice");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_squeeze_unsqueeze_known(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id k = scalar_i64(g, "k", 7);
  ccg_value_id v, s, w;
  int64_t zero = 0;
  assert_ok(g, ccg_unsqueeze(g, k, &zero, 1, &v));
  assert_string_equal(ccg_test_shape(g, v), "[1]");
  assert_string_equal(known_str(g, v), "[7]");
  assert_ok(g, ccg_squeeze(g, v, NULL, 0, &s));
  assert_string_equal(ccg_test_shape(g, s), "[]");
  assert_string_equal(known_str(g, s), "[7]");
  /* A static rank-2 result keeps its contents, row-major. */
  assert_ok(g, ccg_unsqueeze(g, v, &zero, 1, &w));
  assert_string_equal(known_str(g, w), "[7]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* ---- Expand ------------------------------------------------------------- */

static void test_expand(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,1]");
  ccg_value_id y;
  ccg_value_id t = vec_i64(g, "t", (const int64_t[]){2, 3, 4}, 3);
  assert_ok(g, ccg_expand(g, x, t, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,3,4]");
  /* Bidirectional: a 1 in the target keeps the input dim. */
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[b,1]");
  ccg_value_id t2 = vec_i64(g, "t2", (const int64_t[]){1, 8}, 2);
  assert_ok(g, ccg_expand(g, b, t2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,8]");
  ccg_value_id u = ccg_test_input(g, "u", CCG_DTYPE_I64, "[3]");
  assert_ok(g, ccg_expand(g, x, u, &y));
  assert_fresh(g, y, 0, "Expand");
  assert_int_equal(ccg_value_shape(g, y)->dims[1].size, 3);
  assert_fresh(g, y, 2, "Expand");
  /* Targets from Shape carry symbols. */
  ccg_value_id r = ccg_test_input(g, "r", CCG_DTYPE_F32, "[1,6]"), sh;
  assert_ok(g, ccg_shape_of(g, b, 0, INT64_MAX, &sh));
  assert_ok(g, ccg_expand(g, r, sh, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,6]");

  ccg_value_id bad = vec_i64(g, "bad", (const int64_t[]){2, 5, 4}, 3);
  ccg_value_id neg = vec_i64(g, "neg", (const int64_t[]){-1, 3}, 2);
  ccg_value_id f = ccg_test_input(g, "f", CCG_DTYPE_F32, "[2]");
  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_expand(g, x, bad, &y), "Expand_",
               "(Expand)", "[3,1]", "[2,5,4]", "do not broadcast");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_expand(g, x, neg, &y), "[-1,3]",
               "negative");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_expand(g, x, f, &y), "'f'", "f32");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* ---- Shape -------------------------------------------------------------- */

static void test_shape(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_BF16, "[b,s,768]");
  ccg_value_id y;
  assert_ok(g, ccg_shape_of(g, x, 1, INT64_MAX, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2]");
  assert_string_equal(known_str(g, y), "[s,768]");
  ccg_node_id n = ccg_value_producer(g, y);
  assert_null(ccg_node_attr(g, n, "end"));
  int64_t end;
  assert_ok(g, ccg_node_attr_int(g, n, "end", &end));
  assert_true(end == INT64_MAX);
  assert_ok(g, ccg_shape_of(g, x, -1, 99, &y));
  assert_string_equal(known_str(g, y), "[768]");
  assert_ok(g, ccg_shape_of(g, x, 0, -1, &y));
  assert_string_equal(known_str(g, y), "[b,s]");
  assert_ok(g, ccg_shape_of(g, x, 2, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[0]");
  assert_string_equal(known_str(g, y), "[]");
  assert_ok(g, ccg_shape_of(g, x, INT64_MIN, INT64_MIN, &y));
  assert_string_equal(ccg_test_shape(g, y), "[0]");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[]");
  assert_ok(g, ccg_shape_of(g, s, 0, INT64_MAX, &y));
  assert_string_equal(ccg_test_shape(g, y), "[0]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I64);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_shape_of(g, 4242, 0, 1, &y),
               "4242");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* ---- Constant, ConstantOfShape ------------------------------------------ */

static void test_constant(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  int64_t v[3] = {4, -1, 64};
  ccg_tensor tv = {CCG_DTYPE_I64, 1, {3}, v};
  ccg_value_id y;
  assert_ok(g, ccg_constant(g, &tv, &y));
  assert_string_equal(ccg_test_shape(g, y), "[3]");
  assert_string_equal(known_str(g, y), "[4,-1,64]");
  int32_t w = 9;
  ccg_tensor ts = {CCG_DTYPE_I32, 0, {0}, &w};
  assert_ok(g, ccg_constant(g, &ts, &y));
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I32);
  assert_string_equal(ccg_test_shape(g, y), "[]");
  assert_string_equal(known_str(g, y), "[9]");
  float f[6] = {0};
  ccg_tensor tf = {CCG_DTYPE_F32, 2, {2, 3}, f};
  assert_ok(g, ccg_constant(g, &tf, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,3]");
  assert_string_equal(known_str(g, y), "unknown");

  counts c = counts_of(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_constant(g, NULL, &y), "Constant",
               "NULL");
  ccg_tensor bad = {CCG_DTYPE_UNDEFINED, 1, {3}, v};
  assert_fails(g, CCG_STATUS_DTYPE, ccg_constant(g, &bad, &y), "Constant_",
               "(Constant)", "no valid dtype");
  ccg_tensor negd = {CCG_DTYPE_I64, 2, {3, -2}, v};
  assert_fails(g, CCG_STATUS_SHAPE, ccg_constant(g, &negd, &y), "[3,-2]");
  ccg_tensor nodata = {CCG_DTYPE_F32, 1, {4}, NULL};
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_constant(g, &nodata, &y),
               "no data");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_constant_of_shape(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id s = vec_i64(g, "s", (const int64_t[]){2, 3}, 2);
  ccg_value_id y;
  assert_ok(g, ccg_constant_of_shape(g, s, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,3]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F32);
  int64_t one = 1;
  ccg_tensor v = {CCG_DTYPE_I64, 1, {1}, &one};
  assert_ok(g, ccg_constant_of_shape(g, s, &v, &y));
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I64);
  /* a small integer vector of one value is known (torch's Expand targets) */
  ccg_dim k[CCG_MAX_RANK];
  assert_int_equal(ccg_value_known(g, y, k), -1); /* [2,3] is no vector */
  ccg_value_id s3 = vec_i64(g, "s3", (const int64_t[]){3}, 1), y3;
  assert_ok(g, ccg_constant_of_shape(g, s3, &v, &y3));
  assert_int_equal(ccg_value_known(g, y3, k), 3);
  assert_int_equal(k[0].size, 1);
  assert_int_equal(k[2].size, 1);
  assert_ok(g, ccg_constant_of_shape(g, s3, NULL, &y3)); /* f32: not known */
  assert_int_equal(ccg_value_known(g, y3, k), -1);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[b,s,768]"), sh;
  assert_ok(g, ccg_shape_of(g, x, 0, INT64_MAX, &sh));
  assert_ok(g, ccg_constant_of_shape(g, sh, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,s,768]");
  ccg_value_id u = ccg_test_input(g, "u", CCG_DTYPE_I64, "[2]");
  assert_ok(g, ccg_constant_of_shape(g, u, NULL, &y));
  assert_fresh(g, y, 0, "ConstantOfShape");
  assert_fresh(g, y, 1, "ConstantOfShape");

  ccg_value_id neg = vec_i64(g, "neg", (const int64_t[]){2, -3}, 2);
  ccg_value_id i32 = ccg_test_input(g, "i32", CCG_DTYPE_I32, "[2]");
  counts c = counts_of(g);
  int64_t two[2] = {1, 2};
  ccg_tensor v2 = {CCG_DTYPE_I64, 1, {2}, two};
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_constant_of_shape(g, s, &v2, &y),
               "ConstantOfShape_", "(ConstantOfShape)", "[2]", "one element");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_constant_of_shape(g, neg, NULL, &y),
               "'neg'", "[2,-3]", "-3 at position 1");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_constant_of_shape(g, i32, NULL, &y),
               "'i32'", "i64");
  assert_unchanged(g, c);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reshape_static),
      cmocka_unit_test(test_reshape_allowzero),
      cmocka_unit_test(test_reshape_symbolic),
      cmocka_unit_test(test_dynamic_reshape_chain),
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_concat),
      cmocka_unit_test(test_concat_known),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_split_known),
      cmocka_unit_test(test_slice_static),
      cmocka_unit_test(test_slice_symbolic_and_known),
      cmocka_unit_test(test_known_through_views),
      cmocka_unit_test(test_slice_errors),
      cmocka_unit_test(test_gather),
      cmocka_unit_test(test_unsqueeze),
      cmocka_unit_test(test_squeeze),
      cmocka_unit_test(test_squeeze_unsqueeze_known),
      cmocka_unit_test(test_expand),
      cmocka_unit_test(test_shape),
      cmocka_unit_test(test_constant),
      cmocka_unit_test(test_constant_of_shape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
