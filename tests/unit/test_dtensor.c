/* DTensor mappings: golden graphs (forward + backward) of redistribute for
 * every transition of MAPPINGS.md on tp=4, dp=2 x tp=2 and tp=1 meshes,
 * uneven (torch.chunk) sizes, the styles on a small Linear / LayerNorm, the
 * old helpers, errors, placements of the values made, and typed calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

#include "mapping_golden.h"

#define D(nm) "dtensor." nm
#define TP4 "tp=4"
#define DP2TP2 "dp=2,tp=2"
#define TP1 "tp=1"

/* A case, and the placements of its first input (";" between mesh axes,
 * NULL = none: a local tensor). */
typedef struct dt_case {
  golden_case c;
  const char *placed;
} dt_case;

#define C(stem, mesh, map, params, placed, ...)                                \
  { {"dtensor", stem, mesh, D(map), params, {__VA_ARGS__, NULL}, 0}, placed }

/* 1-D params and the same on axis tp of dp x tp (dp Replicate). */
#define RD(stem, from, to, extra, s4, s22, s1)                                 \
  RDX(stem, from, to, extra, extra, s4, s22, s1)
#define RDX(stem, from, to, extra, extra2, s4, s22, s1)                        \
  C(stem "_tp4", TP4, "redistribute",                                          \
    "{\"from\": \"" from "\", \"to\": \"" to "\"" extra "}", NULL, s4),        \
      C(stem "_dp2tp2", DP2TP2, "redistribute",                                \
        "{\"from\": [\"Replicate\", \"" from "\"], \"to\": [\"Replicate\", "   \
        "\"" to "\"]" extra2 "}",                                              \
        NULL, s22),                                                            \
      C(stem "_tp1", TP1, "redistribute",                                      \
        "{\"from\": \"" from "\", \"to\": \"" to "\"" extra "}", NULL, s1)

#define LIN "[2,4,16]"
static const dt_case cases[] = {
    /* S(d) -> R: AllGather; backward keeps the chunk (grad Replicate) or
     * reduce-scatters (grad Partial). */
    RD("s2r", "Shard(0)", "Replicate", "", "[4,8]", "[4,8]", "[4,8]"),
    RD("s2r_last", "Shard(-1)", "Replicate", "", "[2,4,8]", "[2,4,8]",
       "[2,4,8]"),
    RDX("s2r_partial_grad", "Shard(1)", "Replicate",
        ", \"grad\": [\"Partial\"]", ", \"grad\": [\"Replicate\", \"Partial\"]",
        "[2,4,8]", "[2,4,8]", "[2,4,8]"),
    /* R -> S(d): keep chunk r; backward AllGather. */
    RD("r2s", "Replicate", "Shard(1)", "", "[2,16,8]", "[2,16,8]", "[2,16,8]"),
    /* P -> R: AllReduce; backward identity. */
    RD("p2r", "Partial", "Replicate", "", "[4,8]", "[4,8]", "[4,8]"),
    RD("p2r_max", "Partial(max)", "Replicate", "", "[4,8]", "[4,8]", "[4,8]"),
    /* P -> S(d): ReduceScatter; backward AllGather. */
    RD("p2s", "Partial", "Shard(0)", "", "[16,8]", "[16,8]", "[16,8]"),
    /* S(a) -> S(b): AllToAll; backward AllToAll back. */
    RD("s2s", "Shard(0)", "Shard(1)", "", "[4,16]", "[4,16]", "[4,16]"),
    /* R -> P: divide by W; backward AllReduce (grad Partial). */
    RD("r2p", "Replicate", "Partial", "", "[4,8]", "[4,8]", "[4,8]"),
    C("r2p_replicated_grad_tp4", TP4, "redistribute",
      "{\"from\": \"Replicate\", \"to\": \"Partial\", \"grad\": "
      "\"Replicate\"}",
      NULL, "[4,8]"),
    C("r2p_avg_tp4", TP4, "redistribute",
      "{\"from\": \"Replicate\", \"to\": \"Partial(avg)\"}", NULL, "[4,8]"),
    C("same_tp4", TP4, "redistribute",
      "{\"from\": \"Shard(0)\", \"to\": \"Shard(0)\"}", NULL, "[4,8]"),
    /* Uneven: torch.chunk sizes 3,3,3,1 of 10; the gather reads them back
     * from the rank-dependent dim. */
    C("r2s_uneven_tp4", TP4, "redistribute",
      "{\"from\": \"Replicate\", \"to\": \"Shard(0)\"}", NULL, "[10,8]"),
    C("r2s_uneven_tail_tp4", TP4, "redistribute",
      "{\"from\": \"Replicate\", \"to\": \"Shard(1)\"}", NULL, "[2,5]"),
    C("s2r_uneven_tp4", TP4, "redistribute",
      "{\"from\": \"Shard(0)\", \"to\": \"Replicate\"}", NULL,
      "[tp{3,5,4,4},8]"),
    C("p2s_uneven_tp4", TP4, "redistribute",
      "{\"from\": \"Partial\", \"to\": \"Shard(0)\"}", NULL, "[10,8]"),
    C("s2s_uneven_tp4", TP4, "redistribute",
      "{\"from\": \"Shard(0)\", \"to\": \"Shard(1)\"}", NULL,
      "[tp{3,3,3,1},6]"),
    /* 2-D: nested shards are gathered innermost first; one axis at a time. */
    C("nested_s2r_dp2tp2", DP2TP2, "redistribute",
      "{\"from\": [\"Shard(0)\", \"Shard(0)\"], \"to\": [\"Replicate\", "
      "\"Replicate\"]}",
      NULL, "[2,8]"),
    C("nested_r2s_dp2tp2", DP2TP2, "redistribute",
      "{\"from\": [\"Replicate\", \"Replicate\"], \"to\": [\"Shard(0)\", "
      "\"Shard(0)\"]}",
      NULL, "[8,8]"),
    C("partial_and_shard_dp2tp2", DP2TP2, "redistribute",
      "{\"from\": [\"Partial\", \"Shard(1)\"], \"to\": [\"Replicate\", "
      "\"Replicate\"]}",
      NULL, "[4,4]"),
    C("swap_axes_dp2tp2", DP2TP2, "redistribute",
      "{\"from\": [\"Shard(0)\", \"Replicate\"], \"to\": [\"Replicate\", "
      "\"Shard(0)\"]}",
      NULL, "[4,8]"),
    /* "from" null: the input's own placements. */
    C("own_placements_dp2tp2", DP2TP2, "redistribute",
      "{\"to\": [\"Shard(0)\", \"Replicate\"]}", "Shard(0);Partial", "[4,8]"),

    /* Styles on x [B,S,H], a Linear w [in,out] shard and b. */
    C("colwise_tp4", TP4, "colwise_parallel", NULL, NULL, LIN, "[16,8]", "[8]"),
    C("colwise_dp2tp2", DP2TP2, "colwise_parallel", NULL, NULL, LIN, "[16,8]",
      "[8]"),
    C("colwise_tp1", TP1, "colwise_parallel", NULL, NULL, LIN, "[16,32]",
      "[32]"),
    C("colwise_no_bias_tp4", TP4, "colwise_parallel", NULL, NULL, LIN,
      "[16,8]"),
    C("colwise_seq_input_tp4", TP4, "colwise_parallel",
      "{\"input_layouts\": \"Shard(1)\"}", NULL, "[2,1,16]", "[16,8]", "[8]"),
    C("colwise_replicated_output_tp4", TP4, "colwise_parallel",
      "{\"output_layouts\": \"Replicate\", \"use_local_output\": false}", NULL,
      LIN, "[16,8]", "[8]"),
    C("rowwise_tp4", TP4, "rowwise_parallel", NULL, NULL, "[2,4,4]", "[4,16]",
      "[16]"),
    C("rowwise_dp2tp2", DP2TP2, "rowwise_parallel", NULL, NULL, "[2,4,8]",
      "[8,16]", "[16]"),
    C("rowwise_tp1", TP1, "rowwise_parallel", NULL, NULL, LIN, "[16,16]",
      "[16]"),
    C("rowwise_seq_output_tp4", TP4, "rowwise_parallel",
      "{\"output_layouts\": \"Shard(1)\"}", NULL, "[2,4,4]", "[4,16]", "[16]"),
    C("rowwise_replicated_input_tp4", TP4, "rowwise_parallel",
      "{\"input_layouts\": \"Replicate\"}", NULL, LIN, "[4,16]", "[16]"),
    C("sequence_parallel_tp4", TP4, "sequence_parallel", NULL, NULL, LIN,
      "[16]", "[16]"),
    C("sequence_parallel_dp2tp2", DP2TP2, "sequence_parallel", NULL, NULL, LIN,
      "[16]", "[16]"),
    C("sequence_parallel_tp1", TP1, "sequence_parallel", NULL, NULL, LIN,
      "[16]", "[16]"),
    C("sequence_parallel_dim0_no_bias_tp4", TP4, "sequence_parallel",
      "{\"sequence_dim\": 0}", NULL, "[4,2,16]", "[16]"),
    C("sequence_parallel_replicated_input_tp4", TP4, "sequence_parallel", NULL,
      "Replicate", "[2,8,16]", "[16]", "[16]"),
    /* 3-D: the style acts on tp only; dp and pp placements are kept. */
    C("colwise_dp2pp2tp2", "dp=2,pp=2,tp=2", "colwise_parallel",
      "{\"input_layouts\": \"Shard(1)\"}", NULL, "[2,2,16]", "[16,8]", "[8]"),
    C("redistribute_dp2pp2tp2", "dp=2,pp=2,tp=2", "redistribute",
      "{\"from\": [\"Shard(0)\", \"Replicate\", \"Partial\"], \"to\": "
      "[\"Shard(0)\", \"Replicate\", \"Shard(1)\"]}",
      NULL, "[2,8]"),
    C("pairwise_tp4", TP4, "pairwise_parallel", NULL, NULL, LIN, "[16,8]",
      "[8]", "[8,16]", "[16]"),
    C("pairwise_dp2tp2", DP2TP2, "pairwise_parallel", NULL, NULL, LIN, "[16,8]",
      "[8]", "[8,16]", "[16]"),
    C("pairwise_tp1", TP1, "pairwise_parallel", NULL, NULL, LIN, "[16,32]",
      "[32]", "[32,16]", "[16]"),
    C("pairwise_no_bias_tp4", TP4, "pairwise_parallel", NULL, NULL, LIN,
      "[16,8]", "[8,16]"),

/* The old helpers: input helpers on a local tensor and on a DTensor,
 * output helpers on a DTensor. */
#define H3(stem, map, params, placed1, placed2, shape)                         \
  C(stem "_tp4", TP4, map, params, placed1, shape),                            \
      C(stem "_dp2tp2", DP2TP2, map, params, placed2, shape),                  \
      C(stem "_tp1", TP1, map, params, placed1, shape)
    H3("make_input_shard_1d_local", "make_input_shard_1d", "{\"dim\": 1}", NULL,
       NULL, "[8,4]"),
    H3("make_input_shard_1d", "make_input_shard_1d", "{\"dim\": 1}",
       "Replicate", "Shard(0);Replicate", "[8,16]"),
    H3("make_input_shard_1d_last_dim", "make_input_shard_1d_last_dim", NULL,
       "Replicate", "Replicate;Replicate", "[8,16]"),
    H3("make_input_replicate_1d", "make_input_replicate_1d", NULL, "Shard(0)",
       "Replicate;Shard(0)", "[4,16]"),
    H3("make_input_replicate_1d_local", "make_input_replicate_1d", NULL, NULL,
       NULL, "[4,16]"),
    H3("make_input_reshard_replicate", "make_input_reshard_replicate", NULL,
       NULL, NULL, "[4,16]"),
    H3("make_output_shard_1d", "make_output_shard_1d", "{\"dim\": 0}",
       "Partial", "Replicate;Partial", "[8,16]"),
    H3("make_output_replicate_1d", "make_output_replicate_1d", NULL, "Shard(1)",
       "Replicate;Shard(1)", "[8,4]"),
    H3("make_output_tensor", "make_output_tensor", NULL, "Partial",
       "Shard(0);Partial", "[8,16]"),
    H3("make_sharded_output_tensor", "make_sharded_output_tensor", NULL,
       "Shard(0)", "Replicate;Shard(0)", "[2,16]"),
    H3("make_output_reshard_tensor", "make_output_reshard_tensor", NULL,
       "Partial", "Replicate;Partial", "[8,16]"),
};

#define N_CASES (sizeof cases / sizeof cases[0])

/* Sets "Shard(0);Partial" on v. */
static void place(ccg_graph *g, ccg_value_id v, const char *text) {
  ccg_placement p[CCG_MAX_MESH_AXES];
  int n = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", text);
  for (char *s = strtok(buf, ";"); s; s = strtok(NULL, ";"))
    if (ccg_placement_parse(s, &p[n++]) != CCG_STATUS_OK)
      fail_msg("%s", ccg_last_error(NULL));
  assert_ok(g, ccg_value_set_placements(g, v, p, n));
}

/* golden_dump with the first input placed before the forward. */
static char *dt_dump(const dt_case *t) {
  const golden_case *c = &t->c;
  ccg_graph *g = ccg_test_graph_named(c->name, c->mesh);
  ccg_value_id in[GOLDEN_MAX_IO], out[GOLDEN_MAX_IO];
  size_t n_in = golden_inputs(g, c, CCG_DTYPE_F32, in), n_out = GOLDEN_MAX_IO;
  if (t->placed)
    place(g, in[0], t->placed);
  assert_ok(g,
            ccg_mapping_apply(g, c->mapping, c->params, in, n_in, out, &n_out));
  golden_backward(g, c, in, n_in, out, n_out);
  return golden_dump_of(g);
}

static void run_case(void **state) {
  const dt_case *t = *state;
  golden_check_text(t->c.system, t->c.name, dt_dump(t));
}

#define E(map, mesh, params, ...)                                              \
  (&(const golden_case){                                                       \
      "dtensor", "error", mesh, D(map), params, {__VA_ARGS__, NULL}, 0})

static void test_errors(void **state) {
  (void)state;
  golden_fails(E("redistribute", TP4,
                 "{\"from\": \"Shard(0)\", \"to\": \"Partial\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "dtensor.redistribute",
               "Shard(0) -> Partial(sum) on mesh axis 'tp' of value 'x'",
               "a shard cannot become partial");
  golden_fails(E("redistribute", DP2TP2,
                 "{\"from\": [\"Replicate\", \"Shard(1)\"], \"to\": "
                 "[\"Replicate\", \"Partial\"]}",
                 "[4,8]"),
               CCG_STATUS_INVALID_ARG, "Shard(1) -> Partial(sum)",
               "mesh axis 'tp'");
  golden_fails(E("redistribute", TP4,
                 "{\"from\": \"Partial\", \"to\": \"Partial(max)\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "Partial(sum) -> Partial(max)",
               "reduce op");
  golden_fails(E("redistribute", TP4,
                 "{\"from\": \"Replicate\", \"to\": \"Partial(prod)\"}",
                 "[4,8]"),
               CCG_STATUS_INVALID_ARG, "Partial(prod)", "not supported");
  golden_fails(E("redistribute", TP4,
                 "{\"from\": \"Shard(2)\", \"to\": \"Replicate\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "source Shard(2) on mesh axis 'tp'",
               "rank 2 of value 'x'");
  golden_fails(E("redistribute", DP2TP2,
                 "{\"from\": \"Shard(0)\", \"to\": \"Replicate\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "params key 'from' has 1 placements",
               "the mesh has 2 axes");
  golden_fails(E("redistribute", TP4, "{\"to\": \"Replicate\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "value 'x' has no placements",
               "'from' is null");
  golden_fails(E("redistribute", TP4, "{\"from\": \"Replicate\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "params key 'to' is required");
  golden_fails(E("redistribute", TP4,
                 "{\"from\": \"Shard(x)\", \"to\": \"Replicate\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "params key 'from'",
               "Replicate, Shard(d)");
  golden_fails(
      E("colwise_parallel", TP4, "{\"mesh_axis\": \"sp\"}", LIN, "[16,8]"),
      CCG_STATUS_INVALID_ARG, "dtensor.colwise_parallel", "group 'sp'");
  golden_fails(E("colwise_parallel", DP2TP2, "{\"mesh_axis\": \"dp,tp\"}", LIN,
                 "[16,8]"),
               CCG_STATUS_INVALID_ARG,
               "mesh_axis 'dp,tp' must be one mesh "
               "axis");
  golden_fails(E("colwise_parallel", TP4, NULL, LIN, "[8,8]"), CCG_STATUS_SHAPE,
               "MatMul");
  golden_fails(E("rowwise_parallel", TP4, "{\"input_layouts\": \"Replicate\"}",
                 "[2,4,6]", "[1,16]"),
               CCG_STATUS_SHAPE, "dtensor.rowwise_parallel", "MatMul",
               "tp{2,2,2,0}");
  golden_fails(
      E("sequence_parallel", TP4, "{\"sequence_dim\": 3}", LIN, "[16]"),
      CCG_STATUS_INVALID_ARG, "dtensor.sequence_parallel",
      "params key 'sequence_dim' 3 is out of range");
  golden_fails(
      E("pairwise_parallel", TP4, NULL, LIN, "[16,8]", "[8]", "[8,16]"),
      CCG_STATUS_INVALID_ARG, "x, w1, w2 or x, w1, b1, w2, b2",
      "4 inputs given");
  golden_fails(E("make_output_tensor", TP4, NULL, "[4,8]"),
               CCG_STATUS_INVALID_ARG, "dtensor.make_output_tensor",
               "value 'x' has no placements", "output helpers take a DTensor");
  golden_fails(E("make_input_shard_1d", TP4, "{\"dim\": 2}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "params key 'dim' 2 is out of range");
}

/* Placements on the values a mapping makes and on the style's inputs. */
static void test_placements_set(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(DP2TP2);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4,8]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[8,16]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[16]"), y;
  ccg_dtensor_style_options o = CCG_DTENSOR_STYLE_OPTIONS_INIT;
  o.has_output_layout = true;
  o.output_layout = (ccg_placement){CCG_PLACEMENT_SHARD, 1, CCG_REDUCE_SUM};
  assert_ok(g, ccg_dtensor_rowwise_parallel(g, x, w, b, &o, &y));
  ccg_placement p[CCG_MAX_MESH_AXES];
  assert_int_equal(ccg_value_placements(g, y, p), 2);
  assert_int_equal(p[0].kind, CCG_PLACEMENT_REPLICATE);
  assert_int_equal(p[1].kind, CCG_PLACEMENT_SHARD);
  assert_int_equal(p[1].dim, 1);
  assert_string_equal(ccg_test_shape(g, y), "[2,2,16]");
  assert_int_equal(ccg_value_placements(g, x, p), 2);
  assert_int_equal(p[1].kind, CCG_PLACEMENT_SHARD);
  assert_int_equal(p[1].dim, 2);
  assert_int_equal(ccg_value_placements(g, w, p), 2);
  assert_int_equal(p[1].dim, 0);
  assert_int_equal(ccg_value_placements(g, b, p), 2);
  assert_int_equal(p[1].kind, CCG_PLACEMENT_REPLICATE);
  ccg_graph_free(g);
}

/* ---- typed functions = by name ----------------------------------------- */

static ccg_graph *by_name(const char *map, const char *params,
                          const char *const *shapes, size_t n) {
  ccg_graph *g = ccg_test_graph_named("typed", TP4);
  ccg_value_id in[8], y;
  for (size_t i = 0; i < n; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "x%zu", i);
    in[i] = ccg_test_input(g, nm, CCG_DTYPE_F32, shapes[i]);
  }
  size_t n_out = 1;
  assert_ok(g, ccg_mapping_apply(g, map, params, in, n, &y, &n_out));
  assert_ok(g, ccg_graph_add_output(g, y));
  return g;
}

static void test_typed_equals_by_name(void **state) {
  (void)state;
  const char *lin[] = {"[2,4,16]", "[16,8]", "[8]"};
  const char *one[] = {"[4,8]"};
  /* redistribute */
  ccg_graph *g = ccg_test_graph_named("typed", TP4);
  ccg_value_id x = ccg_test_input(g, "x0", CCG_DTYPE_F32, "[4,8]"), y;
  ccg_placement s0 = {CCG_PLACEMENT_SHARD, 0, CCG_REDUCE_SUM};
  ccg_placement r = {CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
  assert_ok(g, ccg_dtensor_redistribute(g, x, &s0, &r, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  golden_same_text(
      golden_dump_of(g),
      golden_dump_of(by_name(
          D("redistribute"),
          "{\"to\": [\"Replicate\"], \"from\": [\"Shard(0)\"]}", one, 1)),
      "redistribute");
  /* colwise with options */
  g = ccg_test_graph_named("typed", TP4);
  ccg_value_id in[3];
  for (int i = 0; i < 3; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "x%d", i);
    in[i] = ccg_test_input(g, nm, CCG_DTYPE_F32, lin[i]);
  }
  ccg_dtensor_style_options o = CCG_DTENSOR_STYLE_OPTIONS_INIT;
  o.has_output_layout = true;
  o.output_layout = r;
  assert_ok(g, ccg_dtensor_colwise_parallel(g, in[0], in[1], in[2], &o, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  golden_same_text(
      golden_dump_of(g),
      golden_dump_of(by_name(D("colwise_parallel"),
                             "{\"output_layouts\": \"Replicate\"}", lin, 3)),
      "colwise_parallel");
  /* a helper */
  g = ccg_test_graph_named("typed", TP4);
  x = ccg_test_input(g, "x0", CCG_DTYPE_F32, "[4,8]");
  assert_ok(g, ccg_dtensor_apply_helper(g, CCG_DTENSOR_MAKE_INPUT_SHARD_1D, x,
                                        "tp", 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  golden_same_text(
      golden_dump_of(g),
      golden_dump_of(by_name(D("make_input_shard_1d"), "{\"dim\": 1}", one, 1)),
      "make_input_shard_1d");
  assert_null(ccg_dtensor_helper_name(CCG_DTENSOR_HELPER_COUNT));
  assert_string_equal(ccg_dtensor_helper_name(CCG_DTENSOR_MAKE_OUTPUT_TENSOR),
                      "make_output_tensor");
}

static void test_placement_text(void **state) {
  (void)state;
  ccg_placement p;
  char b[32];
  assert_ok(NULL, ccg_placement_parse("Partial(avg)", &p));
  assert_int_equal(p.kind, CCG_PLACEMENT_PARTIAL);
  assert_int_equal(p.reduce, CCG_REDUCE_AVG);
  ccg_placement_format(&p, b, sizeof b);
  assert_string_equal(b, "Partial(avg)");
  assert_ok(NULL, ccg_placement_parse("Shard(-2)", &p));
  ccg_placement_format(&p, b, sizeof b);
  assert_string_equal(b, "Shard(-2)");
  assert_fails(NULL, CCG_STATUS_PARSE, ccg_placement_parse("Shard(9)", &p),
               "'Shard(9)'");
  assert_fails(NULL, CCG_STATUS_PARSE, ccg_placement_parse("replicate", &p),
               "'replicate'");
}

int main(void) {
  struct CMUnitTest tests[N_CASES + 4];
  for (size_t i = 0; i < N_CASES; i++)
    tests[i] = (struct CMUnitTest){cases[i].c.name, run_case, NULL, NULL,
                                   (void *)&cases[i]};
  tests[N_CASES] = (struct CMUnitTest)cmocka_unit_test(test_errors);
  tests[N_CASES + 1] = (struct CMUnitTest)cmocka_unit_test(test_placements_set);
  tests[N_CASES + 2] =
      (struct CMUnitTest)cmocka_unit_test(test_typed_equals_by_name);
  tests[N_CASES + 3] = (struct CMUnitTest)cmocka_unit_test(test_placement_text);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
