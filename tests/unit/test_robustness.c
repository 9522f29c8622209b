/* Bad input never crashes: thousands of random nodes of every op, with
 * random inputs (every dtype, ranks 0..8, numeric and symbolic dims) and
 * random attributes (extreme numbers, wrong lengths, odd strings), each
 * either accepted, in which case the graph still validates, or refused with
 * a status and a message that names the node and the op. Run under ASan and
 * UBSan in CI, this covers overflow and bounds in every shape rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng_state;
static uint64_t next_u64(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}
static int64_t pick(int64_t n) { return (int64_t)(next_u64() % (uint64_t)n); }

/* Mostly small values an op might accept, sometimes extremes. */
static int64_t random_int(void) {
  static const int64_t extremes[] = {
      INT64_MIN, INT64_MIN + 1, -1000000007,     -9, 0, 1,
      INT32_MAX, INT64_MAX,     (int64_t)1 << 40};
  if (pick(8) == 0)
    return extremes[pick(sizeof extremes / sizeof *extremes)];
  return pick(13) - 4;
}

static const char *random_string(void) {
  static const char *const s[] = {
      "sum", "max",  "avg", "none",  "tanh",  "tp", "dp",  "dp,tp",  "f32",
      "i64", "bool", "",    "bogus", "tp,tp", "ep", "f12", "x\"y\\z"};
  return s[pick(sizeof s / sizeof *s)];
}

static ccg_tensor random_tensor(int64_t *buf) {
  static const ccg_dtype dts[] = {CCG_DTYPE_F32, CCG_DTYPE_I64, CCG_DTYPE_BOOL,
                                  CCG_DTYPE_I32};
  ccg_tensor t = {dts[pick(4)], (int)pick(3), {0}, buf};
  for (int i = 0; i < t.rank; i++)
    t.dims[i] = pick(3);
  if (pick(10) == 0)
    t.dims[0] = -1; /* a bad tensor */
  for (int i = 0; i < 8; i++)
    buf[i] = random_int();
  return t;
}

/* Random values of one attribute of the right type (mostly) or a wrong one. */
static void random_attr(ccg_attr *a, const char *name, ccg_attr_type type,
                        int64_t *ints, float *floats, const char **strs,
                        ccg_tensor *tensor, int64_t *tbuf) {
  memset(a, 0, sizeof *a);
  a->name = pick(40) == 0 ? "no_such_attr" : name;
  a->type = pick(30) == 0 ? (ccg_attr_type)pick(CCG_ATTR_TYPE_COUNT) : type;
  size_t n = (size_t)pick(6);
  for (size_t i = 0; i < 6; i++) {
    ints[i] = random_int();
    floats[i] = (float)random_int() / 3.0f;
    strs[i] = random_string();
  }
  a->i = random_int();
  a->f = pick(10) == 0 ? 1e30f : (float)random_int() / 4.0f;
  a->s = random_string();
  a->ints = ints;
  a->floats = floats;
  a->strings = strs;
  a->n = n;
  *tensor = random_tensor(tbuf);
  a->t = tensor;
}

/* A pool of values of many dtypes and shapes to draw inputs from. */
static void make_pool(ccg_graph *g, ccg_value_id *pool, size_t n) {
  static const ccg_dtype dts[] = {CCG_DTYPE_F32, CCG_DTYPE_F16, CCG_DTYPE_BF16,
                                  CCG_DTYPE_F64, CCG_DTYPE_I64, CCG_DTYPE_I32,
                                  CCG_DTYPE_I8,  CCG_DTYPE_U8,  CCG_DTYPE_BOOL};
  static const char *const syms[] = {"batch", "seq", "seq/4", "2*heads",
                                     "tp{3,5,4,4}"};
  for (size_t i = 0; i < n; i++) {
    ccg_shape s;
    memset(&s, 0, sizeof s);
    s.rank = (int)pick(CCG_MAX_RANK + 1);
    if (i % 3 == 0)
      s.rank = (int)pick(3);
    for (int d = 0; d < s.rank; d++)
      s.dims[d] = pick(4) == 0 ? ccg_dim_sym(syms[pick(5)])
                               : ccg_dim_num(pick(4) == 0 ? 1 : 1 + pick(12));
    char name[32];
    snprintf(name, sizeof name, "v%zu", i);
    if (i % 4 == 1) { /* small integer vectors with known contents */
      int64_t data[8];
      for (int k = 0; k < 8; k++)
        data[k] = random_int();
      ccg_tensor t = {CCG_DTYPE_I64, 1, {1 + pick(4)}, data};
      if (ccg_graph_add_initializer(g, name, &t, &pool[i]) != CCG_STATUS_OK)
        fail_msg("pool: %s", ccg_last_error(g));
      continue;
    }
    if (ccg_graph_add_input(g, name, dts[pick(9)], &s, &pool[i]) !=
        CCG_STATUS_OK)
      fail_msg("pool: %s", ccg_last_error(g));
  }
}

static void test_random_nodes(void **state) {
  (void)state;
  rng_state = 0x9e3779b97f4a7c15ull;
  enum { POOL = 48, ROUNDS = 30000 };
  ccg_graph *g = ccg_test_graph("dp=2,tp=4");
  ccg_value_id pool[POOL];
  make_pool(g, pool, POOL);
  size_t accepted = 0, refused[CCG_STATUS_COUNT] = {0};
  for (int round = 0; round < ROUNDS; round++) {
    ccg_op op = (ccg_op)pick(CCG_OP_COUNT);
    int imin, imax, omin, omax;
    ccg_op_arity(op, &imin, &imax, &omin, &omax);
    ccg_value_id in[6];
    size_t n_in = (size_t)(imin + pick((imax < 0 ? 5 : imax) - imin + 1));
    if (pick(20) == 0)
      n_in = (size_t)pick(6); /* wrong arity sometimes */
    for (size_t i = 0; i < n_in; i++)
      in[i] = pick(15) == 0 ? CCG_NONE : pool[pick(POOL)];
    ccg_attr attrs[12];
    int64_t ints[12][6], tbuf[12][8];
    float floats[12][6];
    const char *strs[12][6];
    ccg_tensor tensors[12];
    size_t n_attrs = 0;
    for (size_t a = 0; a < ccg_op_num_attrs(op) && n_attrs < 12; a++) {
      ccg_attr_type t;
      bool req;
      const char *name = ccg_op_attr_info(op, a, &t, &req);
      if (!req && pick(3) == 0)
        continue;
      random_attr(&attrs[n_attrs], name, t, ints[n_attrs], floats[n_attrs],
                  strs[n_attrs], &tensors[n_attrs], tbuf[n_attrs]);
      n_attrs++;
    }
    char node_name[32];
    snprintf(node_name, sizeof node_name, "r%d", round);
    ccg_node_desc d = CCG_NODE_DESC_INIT;
    d.op = ccg_op_name(op);
    d.domain = ccg_op_domain(op);
    d.name = node_name;
    d.inputs = in;
    d.n_inputs = n_in;
    d.attrs = attrs;
    d.n_attrs = n_attrs;
    d.n_outputs =
        (size_t)(omax < 0 ? 1 + pick(4) : omin + pick(omax - omin + 1));
    size_t nodes = ccg_graph_num_nodes(g), values = ccg_graph_num_values(g);
    ccg_node_id nid;
    ccg_status st = ccg_graph_add_node(g, &d, &nid);
    if (st == CCG_STATUS_OK) {
      accepted++;
      /* Accepted outputs join the pool now and then: shape rules also see
       * values other rules made. */
      if (ccg_node_num_outputs(g, nid) && pick(4) == 0)
        pool[pick(POOL)] = ccg_node_output(g, nid, 0);
      continue;
    }
    if ((unsigned)st >= CCG_STATUS_COUNT || st == CCG_STATUS_INTERNAL)
      fail_msg("round %d (%s): status %d: %s", round, d.op, (int)st,
               ccg_last_error(g));
    refused[st]++;
    const char *msg = ccg_last_error(g);
    if (!strstr(msg, node_name) && st != CCG_STATUS_UNSUPPORTED)
      fail_msg("round %d: message does not name node %s: %s", round, node_name,
               msg);
    if (ccg_graph_num_nodes(g) != nodes || ccg_graph_num_values(g) != values)
      fail_msg("round %d (%s): refused node changed the graph", round, d.op);
  }
  assert_ok(g, ccg_graph_validate(g));
  /* Both outcomes happen often: the test exercises the rules, not just
   * their argument checks. */
  size_t total_refused = 0;
  for (int i = 0; i < CCG_STATUS_COUNT; i++)
    total_refused += refused[i];
  print_message("random nodes: %zu accepted, %zu refused (shape %zu, dtype "
                "%zu, invalid %zu)\n",
                accepted, total_refused, refused[CCG_STATUS_SHAPE],
                refused[CCG_STATUS_DTYPE], refused[CCG_STATUS_INVALID_ARG]);
  assert_true(accepted > ROUNDS / 50);
  assert_true(refused[CCG_STATUS_SHAPE] > 0);
  assert_true(refused[CCG_STATUS_DTYPE] > 0);
  assert_true(refused[CCG_STATUS_INVALID_ARG] > 0);
  char *json = NULL;
  assert_ok(g, ccg_graph_dump_string(g, CCG_DUMP_JSON, &json));
  free(json);
  ccg_graph_free(g);
}

/* Random symbol texts never break canonicalization or interning. */
static void test_random_symbols(void **state) {
  (void)state;
  rng_state = 12345;
  static const char alphabet[] = "ab_.*/(){},0123456789 -+x";
  ccg_graph *g = ccg_test_graph(NULL);
  for (int i = 0; i < 5000; i++) {
    char sym[40];
    size_t n = 1 + (size_t)pick(sizeof sym - 2);
    for (size_t k = 0; k < n; k++)
      sym[k] = alphabet[pick(sizeof alphabet - 1)];
    sym[n] = '\0';
    ccg_shape s = {2, {ccg_dim_sym(sym), ccg_dim_num(3)}};
    char name[16];
    snprintf(name, sizeof name, "s%d", i);
    ccg_value_id v;
    ccg_status st = ccg_graph_add_input(g, name, CCG_DTYPE_F32, &s, &v);
    if (st != CCG_STATUS_OK && st != CCG_STATUS_SHAPE)
      fail_msg("symbol '%s': %s", sym, ccg_last_error(g));
    if (st != CCG_STATUS_OK)
      continue;
    /* Canonical text is a fixed point. */
    ccg_shape got = *ccg_value_shape(g, v); /* a copy: the graph grows */
    if (ccg_dim_is_sym(got.dims[0])) {
      ccg_shape again = {1, {ccg_dim_sym(got.dims[0].sym)}};
      char name2[16];
      snprintf(name2, sizeof name2, "t%d", i);
      ccg_value_id w;
      assert_ok(g, ccg_graph_add_input(g, name2, CCG_DTYPE_F32, &again, &w));
      assert_string_equal(ccg_value_shape(g, w)->dims[0].sym, got.dims[0].sym);
    }
    ccg_value_id y;
    ccg_status st2 = ccg_add(g, v, v, &y);
    assert_int_equal(st2, CCG_STATUS_OK);
  }
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_nodes),
      cmocka_unit_test(test_random_symbols),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
