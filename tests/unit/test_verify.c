/* The verify pass: correct programs (Megatron MLP on tp=2, tp=4 and
 * dp=2 x tp=2, a ColossalAI 2-stage pipeline with tensor meta, Ulysses
 * all-to-all, an uneven MoE all-to-all, an uneven SPMD all-gather) pass as
 * one SPMD graph, per rank, per stage and after a per-rank ONNX round trip;
 * each injected mismatch is caught with its kind, ranks, nodes, position
 * and message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"

#include "verify_programs.h"

#define MAXR 8

typedef struct prog {
  ccg_graph *g[MAXR];
  size_t n;
} prog;

static void prog_free(prog *p) {
  for (size_t i = 0; i < p->n; i++)
    ccg_graph_free(p->g[i]);
}

static prog mlp_ranks(const char *mesh, int world, vmut m, int mut_rank) {
  prog p = {{NULL}, (size_t)world};
  for (int r = 0; r < world; r++) {
    p.g[r] = vp_mlp(mesh, r, m, mut_rank);
    assert_non_null(p.g[r]);
  }
  return p;
}

static prog two(ccg_graph *(*fn)(int, vmut, int), vmut m, int mut_rank) {
  prog p = {{fn(0, m, mut_rank), fn(1, m, mut_rank)}, 2};
  assert_non_null(p.g[0]);
  assert_non_null(p.g[1]);
  return p;
}

static void expect_ok(prog *p, const char *stage_axis, int buffer) {
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  o.stage_axis = stage_axis;
  o.p2p_buffer = buffer;
  ccg_verify_report rep;
  ccg_status st = ccg_verify_program(p->g, p->n, &o, &rep);
  if (st != CCG_STATUS_OK)
    fail_msg("verify: %s: %s", ccg_status_name(st), ccg_last_error(NULL));
  assert_int_equal(rep.kind, CCG_VERIFY_OK);
  assert_true(rep.n_calls > 0);
}

/* The program fails with `kind` between ranks a and b at `pos`, and the
 * message holds every fragment. */
#define expect_bad(p, axis, kind, a, b, pos, ...)                              \
  expect_bad_((p), (axis), (kind), (a), (b), (pos),                            \
              (const char *[]){__VA_ARGS__, NULL}, __LINE__)

static void expect_bad_(prog *p, const char *stage_axis, ccg_verify_kind kind,
                        int a, int b, int64_t pos, const char *const *frags,
                        int line) {
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  o.stage_axis = stage_axis;
  ccg_verify_report rep;
  ccg_status st = ccg_verify_program(p->g, p->n, &o, &rep);
  if (st != CCG_STATUS_COMM)
    fail_msg("line %d: verify gave %s, expected COMM (%s)", line,
             ccg_status_name(st), ccg_last_error(NULL));
  if (rep.kind != kind || rep.rank_a != a || rep.rank_b != b ||
      rep.position != pos)
    fail_msg("line %d: got %s ranks %d/%d position %lld (%s); expected %s "
             "ranks %d/%d position %lld",
             line, ccg_verify_kind_name(rep.kind), rep.rank_a, rep.rank_b,
             (long long)rep.position, rep.message, ccg_verify_kind_name(kind),
             a, b, (long long)pos);
  assert_string_equal(rep.message, ccg_last_error(NULL));
  for (const char *const *f = frags; *f; f++)
    if (!strstr(rep.message, *f))
      fail_msg("line %d: message \"%s\" lacks \"%s\"", line, rep.message, *f);
  prog_free(p);
}

/* ---- correct programs -------------------------------------------------- */

static void test_mlp_passes(void **state) {
  (void)state;
  static const struct {
    const char *mesh;
    int world;
  } meshes[] = {{"tp=2", 2}, {"tp=4", 4}, {"dp=2,tp=2", 4}};
  for (size_t i = 0; i < sizeof meshes / sizeof meshes[0]; i++) {
    prog p = mlp_ranks(meshes[i].mesh, meshes[i].world, VM_NONE, -1);
    expect_ok(&p, NULL, 16);
    expect_ok(&p, NULL, 0);
    prog spmd = {{p.g[0]}, 1};
    expect_ok(&spmd, NULL, 16);
    ccg_verify_report rep;
    assert_int_equal(ccg_verify_program(p.g, 1, NULL, &rep), CCG_STATUS_OK);
    /* three collectives on every rank */
    assert_int_equal(rep.n_calls, (size_t)(3 * meshes[i].world));
    prog_free(&p);
  }
}

static void test_pipeline_passes(void **state) {
  (void)state;
  prog p = two(vp_pipeline, VM_NONE, -1);
  expect_ok(&p, "pp", 16);
  expect_ok(&p, "pp", 0); /* rendezvous: every Send meets its Recv */
  expect_ok(&p, NULL, 1); /* one graph per rank of pp=2: the same program */
  prog_free(&p);
}

static void test_alltoall_passes(void **state) {
  (void)state;
  prog u = two(vp_ulysses, VM_NONE, -1);
  expect_ok(&u, NULL, 16);
  prog spmd = {{u.g[0]}, 1};
  expect_ok(&spmd, NULL, 16);
  prog_free(&u);
  prog moe = two(vp_moe, VM_NONE, -1);
  expect_ok(&moe, NULL, 16);
  prog_free(&moe);
  prog un = {{vp_uneven_gather()}, 1};
  assert_non_null(un.g[0]);
  expect_ok(&un, NULL, 16);
  prog_free(&un);
}

/* Export per rank, import each file, verify the imported program. */
static void test_onnx_round_trip(void **state) {
  (void)state;
  char dir[] = "/tmp/ccg_verify_XXXXXX";
  assert_non_null(mkdtemp(dir));
  prog p = two(vp_moe, VM_NONE, -1);
  prog in = {{NULL}, 2};
  for (int r = 0; r < 2; r++) {
    char name[16], path[256];
    snprintf(name, sizeof name, "moe%d", r);
    assert_ok(p.g[r], ccg_onnx_export_ranks(p.g[r], dir, name, NULL));
    snprintf(path, sizeof path, "%s/%s.rank%d.onnx", dir, name, r);
    assert_ok(NULL, ccg_onnx_import_file(path, NULL, &in.g[r]));
    for (int k = 0; k < 2; k++) {
      snprintf(path, sizeof path, "%s/%s.rank%d.onnx", dir, name, k);
      unlink(path);
    }
  }
  rmdir(dir);
  expect_ok(&in, NULL, 16);
  prog_free(&p);
  prog_free(&in);
}

/* ---- mutations ---------------------------------------------------------- */

static void test_mutations_mlp(void **state) {
  (void)state;
  prog p;
  p = mlp_ranks("tp=2", 2, VM_OP, 1);
  expect_bad(&p, NULL, CCG_VERIFY_OP, 0, 1, 1, "op mismatch at position 1",
             "over tp [0 1]", "AllReduce '", "on rank 0", "but Reduce '",
             "on rank 1");
  p = mlp_ranks("tp=4", 4, VM_COUNT, 2);
  expect_bad(&p, NULL, CCG_VERIFY_COUNT, 0, 2, 0,
             "count mismatch at position 0", "has [4,8] (32 elements)",
             "on rank 2 has [8,8] (64 elements)");
  p = mlp_ranks("tp=2", 2, VM_DTYPE, 1);
  expect_bad(&p, NULL, CCG_VERIFY_DTYPE, 0, 1, 1,
             "dtype mismatch at position 1", "is f32 but", "on rank 1 is f16");
  p = mlp_ranks("tp=2", 2, VM_SHAPE, 0);
  expect_bad(&p, NULL, CCG_VERIFY_SHAPE, 0, 1, 1,
             "shape mismatch at position 1", "on rank 0 has [8,4] but",
             "on rank 1 has [4,8]");
  p = mlp_ranks("tp=4", 4, VM_ROOT, 3);
  expect_bad(&p, NULL, CCG_VERIFY_ROOT, 0, 3, 0, "root mismatch at position 0",
             "has root 0 but Broadcast", "on rank 3 has root 1");
  p = mlp_ranks("dp=2,tp=2", 4, VM_REDUCE_OP, 3);
  expect_bad(&p, NULL, CCG_VERIFY_REDUCE_OP, 2, 3, 1,
             "reduce_op mismatch at position 1", "over tp [2 3]",
             "reduces with sum but", "on rank 3 with max");
  p = mlp_ranks("tp=2", 2, VM_ORDER, 1);
  expect_bad(&p, NULL, CCG_VERIFY_OP, 0, 1, 1, "op mismatch at position 1",
             "AllReduce '", "but AllGather '", "on rank 1");
  p = mlp_ranks("tp=4", 4, VM_MISSING, 1);
  expect_bad(&p, NULL, CCG_VERIFY_MISSING, 0, 1, 2,
             "missing collective at position 2 of the collectives over tp "
             "[0 1 2 3]",
             "AllGather '",
             "has no partner on rank 1, which issues only 2 "
             "collectives over that group");
  p = mlp_ranks("tp=2", 2, VM_AXIS, 1);
  expect_bad(&p, NULL, CCG_VERIFY_AXIS, 0, 1, 2, "axis mismatch at position 2",
             "AllGather '", "on rank 0 works on axis 0 but AllGather",
             "on rank 1 on axis 1");
  p = mlp_ranks("dp=2,tp=2", 4, VM_GROUP, 1);
  expect_bad(&p, NULL, CCG_VERIFY_GROUP, 0, 1, 1, "group mismatch",
             "on rank 0 is over tp [0 1] (position 1)",
             "on rank 1 is over dp,tp [0 1 2 3] (position 0)");
}

static void test_mutations_p2p(void **state) {
  (void)state;
  prog p;
  p = two(vp_pipeline, VM_UNMATCHED_SEND, 0);
  expect_bad(&p, "pp", CCG_VERIFY_UNMATCHED_SEND, 0, 1, 5,
             "unmatched send: Send '", "on rank 0 (message 5 to rank 1, tag 7)",
             "rank 1 finishes without a matching Recv");
  p = two(vp_pipeline, VM_UNMATCHED_RECV, 1);
  expect_bad(&p, "pp", CCG_VERIFY_UNMATCHED_RECV, 1, 0, 5,
             "unmatched recv: Recv '",
             "on rank 1 waits for message 5 from rank 0 (tag 9)",
             "rank 0 finishes without sending it");
  p = two(vp_pipeline, VM_P2P_CYCLE, 0);
  expect_bad(&p, "pp", CCG_VERIFY_DEADLOCK, 0, 1, 0,
             "deadlock: a cycle of blocking waits: rank 0 at Recv '",
             "waits for rank 1; rank 1 at Recv '", "waits for rank 0");
  p = two(vp_pipeline, VM_P2P_SHAPE, 1);
  expect_bad(&p, "pp", CCG_VERIFY_SHAPE, 0, 1, 4,
             "shape mismatch on message 4 from rank 0 to rank 1",
             "sends tag 0, f32 [2,8] but Recv", "receives tag 0, f32 [2,4]");
}

static void test_mutations_alltoall(void **state) {
  (void)state;
  prog p;
  p = two(vp_ulysses, VM_AXIS, 1);
  expect_bad(&p, NULL, CCG_VERIFY_SHAPE, 0, 1, 0,
             "shape mismatch at position 0 of the collectives over sp [0 1]",
             "on rank 0 has [2,4,2,8] but AllToAll", "on rank 1 has [2,4,4,4]");
  p = two(vp_moe, VM_SPLITS, 1);
  expect_bad(&p, NULL, CCG_VERIFY_SPLITS, 0, 1, 0,
             "split mismatch at position 0",
             "on rank 0 sends in_splits[1]=3 (48 elements) to rank 1",
             "on rank 1 expects out_splits[0]=2 (32 elements) from it");
}

/* A rendezvous model finds the cycle that buffering hides: both stages
 * send first, then receive. */
static void test_rendezvous_cycle(void **state) {
  (void)state;
  prog p = {{vp_graph("a", "pp=2"), NULL}, 1};
  assert_non_null(p.g[0]);
  ccg_shape s = CCG_SHAPE(2, 2);
  ccg_value_id x, y;
  ccg_node_id sn;
  assert_ok(p.g[0], ccg_graph_add_input(p.g[0], "x", CCG_DTYPE_F32, &s, &x));
  assert_ok(p.g[0], ccg_send(p.g[0], x, "pp", 1, 0, &sn));
  assert_ok(p.g[0], ccg_recv(p.g[0], "pp", -1, 0, CCG_DTYPE_F32, &s, &y));
  assert_ok(p.g[0], ccg_graph_add_output(p.g[0], y));
  expect_ok(&p, NULL, 1);
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  o.p2p_buffer = 0;
  ccg_verify_report rep;
  assert_int_equal(ccg_verify_program(p.g, 1, &o, &rep), CCG_STATUS_COMM);
  assert_int_equal(rep.kind, CCG_VERIFY_DEADLOCK);
  assert_non_null(strstr(rep.message, "rank 0 at Send '"));
  assert_non_null(strstr(rep.message, "rank 1 at Send '"));
  prog_free(&p);
}

/* Two all-reduces over tp and dp in opposite orders on alternate ranks of
 * dp=2 x tp=2: each group sees matching sequences, yet 0 waits for 1 (tp),
 * 1 for 3 (dp), 3 for 2 (tp) and 2 for 0 (dp). */
static ccg_graph *tp_dp(bool tp_first) {
  ccg_graph *g = vp_graph("tpdp", "dp=2,tp=2");
  assert_non_null(g);
  ccg_shape s = CCG_SHAPE(4);
  ccg_value_id x, a, b;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x));
  const char *first = tp_first ? "tp" : "dp", *second = tp_first ? "dp" : "tp";
  assert_ok(g, ccg_all_reduce(g, x, first, CCG_REDUCE_SUM, &a));
  assert_ok(g, ccg_all_reduce(g, x, second, CCG_REDUCE_SUM, &b));
  assert_ok(g, ccg_graph_add_output(g, a));
  assert_ok(g, ccg_graph_add_output(g, b));
  return g;
}

static void test_cross_group_deadlock(void **state) {
  (void)state;
  prog p = {{tp_dp(true), tp_dp(false), tp_dp(false), tp_dp(true)}, 4};
  expect_bad(&p, NULL, CCG_VERIFY_DEADLOCK, 0, 1, 0,
             "deadlock: a cycle of blocking waits: rank 0 at AllReduce '",
             "over tp [0 1] waits for rank 1; rank 1 at AllReduce '",
             "over dp [1 3] waits for rank 3; rank 3 at AllReduce '",
             "over tp [2 3] waits for rank 2; rank 2 at AllReduce '",
             "over dp [0 2] waits for rank 0");
  /* the same order everywhere is fine, and so is a ring over tp */
  prog q = {{tp_dp(true)}, 1};
  assert_ok(q.g[0],
            ccg_colossal_ring_forward(q.g[0], ccg_graph_input(q.g[0], 0), "tp",
                                      &(ccg_value_id){0}));
  expect_ok(&q, NULL, 16);
  prog_free(&q);
}

/* Programs the pass cannot replay. */
static void test_bad_programs(void **state) {
  (void)state;
  prog p = mlp_ranks("tp=4", 4, VM_NONE, -1);
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_verify_program(p.g, 3, NULL, NULL),
               "3 graphs for a mesh of 4 ranks");
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  o.stage_axis = "pp";
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_verify_program(p.g, 4, &o, NULL),
               "stage axis 'pp' is not in the mesh");
  ccg_graph *other = vp_mlp("tp=2", 0, VM_NONE, -1);
  ccg_graph *mixed[] = {p.g[0], other, p.g[2], p.g[3]};
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_verify_program(mixed, 4, NULL, NULL),
               "graph 1 ('mlp') has mesh tp=2 but graph 0 ('mlp') has tp=4");
  ccg_graph_free(other);
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_verify_program(NULL, 0, NULL, NULL), "no graphs");
  /* an SPMD graph whose rank 1 names itself as the peer */
  ccg_graph *self = ccg_test_graph("pp=2");
  ccg_value_id x = ccg_test_input(self, "x", CCG_DTYPE_F32, "[4]");
  ccg_node_id sn;
  assert_ok(self, ccg_send_peer(self, x, "pp", 1, 3, &sn));
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_verify_program(&self, 1, NULL, NULL),
               "(Send) on rank 1: peer 1 is the rank's own index on axis 'pp'");
  ccg_graph_free(self);
  assert_string_equal(ccg_verify_kind_name(CCG_VERIFY_DEADLOCK), "deadlock");
  assert_string_equal(ccg_verify_kind_name(CCG_VERIFY_KIND_COUNT), "invalid");
  prog_free(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp_passes),
      cmocka_unit_test(test_pipeline_passes),
      cmocka_unit_test(test_alltoall_passes),
      cmocka_unit_test(test_onnx_round_trip),
      cmocka_unit_test(test_mutations_mlp),
      cmocka_unit_test(test_mutations_p2p),
      cmocka_unit_test(test_mutations_alltoall),
      cmocka_unit_test(test_rendezvous_cycle),
      cmocka_unit_test(test_cross_group_deadlock),
      cmocka_unit_test(test_bad_programs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
