/* ONNX's multi-device annotations (IR 11, opset 23 on): what export writes
 * for the Megatron MLP at tp=2 and for every Shard/Replicate mix on a
 * dp=2,tp=2 mesh, read back by import with ccgraph's own placement metadata
 * removed; none below opset 23; and the malformed annotations import
 * refuses, each naming the node and the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "onnx.pb-c.h"
#include "onnx_graphs.h"

#ifndef CCG_ONNX_IR11_DIR
#error "CCG_ONNX_IR11_DIR must name the folder for the opset-23 models"
#endif

static Onnx__ModelProto *export_model(ccg_graph *g, int64_t opset) {
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.opset = opset;
  void *data = NULL;
  size_t size = 0;
  assert_ok(g, ccg_onnx_export_buffer(g, &o, &data, &size));
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, data);
  free(data);
  assert_non_null(m);
  return m;
}

static Onnx__StringStringEntryProto *meta_entry(Onnx__ModelProto *m,
                                                const char *key) {
  for (size_t i = 0; i < m->n_metadata_props; i++)
    if (strcmp(m->metadata_props[i]->key, key) == 0)
      return m->metadata_props[i];
  return NULL;
}

/* Packs m and imports it; with `drop` the named metadata keys are renamed
 * away for the import (restored before returning, so m stays freeable). */
static ccg_status import_model(Onnx__ModelProto *m, const char *const *drop,
                               ccg_graph **out) {
  Onnx__StringStringEntryProto *e[4] = {NULL};
  char *saved[4] = {NULL};
  for (int i = 0; drop && drop[i]; i++)
    if ((e[i] = meta_entry(m, drop[i]))) {
      saved[i] = e[i]->key;
      e[i]->key = "dropped.by.test";
    }
  size_t size = onnx__model_proto__get_packed_size(m);
  void *buf = malloc(size);
  assert_non_null(buf);
  onnx__model_proto__pack(m, buf);
  for (int i = 0; i < 4; i++)
    if (e[i])
      e[i]->key = saved[i];
  *out = NULL;
  ccg_status st = ccg_onnx_import_buffer(buf, size, NULL, NULL, out);
  free(buf);
  return st;
}

static const char *const no_placements[] = {"ccgraph.placements", NULL};
static const char *const no_ccgraph_meta[] = {"ccgraph.placements",
                                              "ccgraph.mesh", NULL};

static const Onnx__NodeProto *node_of(const Onnx__ModelProto *m,
                                      const char *op_type, int nth) {
  for (size_t i = 0; i < m->graph->n_node; i++)
    if (strcmp(m->graph->node[i]->op_type, op_type) == 0 && nth-- == 0)
      return m->graph->node[i];
  fail_msg("no %s node", op_type);
  return NULL;
}

static const Onnx__ShardingSpecProto *spec_of(const Onnx__NodeProto *np,
                                              const char *tensor) {
  if (np->n_device_configurations != 1)
    return NULL;
  const Onnx__NodeDeviceConfigurationProto *dc = np->device_configurations[0];
  for (size_t i = 0; i < dc->n_sharding_spec; i++)
    if (strcmp(dc->sharding_spec[i]->tensor_name, tensor) == 0)
      return dc->sharding_spec[i];
  return NULL;
}

static void assert_devices(const Onnx__ShardingSpecProto *sp, size_t n,
                           const int64_t *want) {
  assert_int_equal(sp->n_device, n);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(sp->device[i], want[i]);
}

static void assert_split(const Onnx__ShardingSpecProto *sp, size_t k,
                         int64_t axis, int64_t shards, int64_t whole) {
  assert_true(k < sp->n_sharded_dim);
  const Onnx__ShardedDimProto *sd = sp->sharded_dim[k];
  assert_int_equal(sd->axis, axis);
  assert_int_equal(sd->n_simple_sharding, 1);
  assert_int_equal(sd->simple_sharding[0]->num_shards, shards);
  if (whole < 0) {
    assert_int_equal(sd->simple_sharding[0]->dim_case,
                     ONNX__SIMPLE_SHARDED_DIM_PROTO__DIM__NOT_SET);
  } else {
    assert_int_equal(sd->simple_sharding[0]->dim_case,
                     ONNX__SIMPLE_SHARDED_DIM_PROTO__DIM_DIM_VALUE);
    assert_int_equal(sd->simple_sharding[0]->dim_value, whole);
  }
}

static ccg_value_id find(ccg_graph *g, const char *name) {
  ccg_value_id v = CCG_NONE;
  assert_ok(g, ccg_graph_find_value(g, name, &v));
  return v;
}

/* Every value of `want` has the same placements in `got`, except Partial
 * ones unless `all`: the annotations cannot carry them (none in `got`). */
static void assert_placements(ccg_graph *want, ccg_graph *got, bool all) {
  size_t checked = 0;
  for (ccg_value_id v = 0; v < ccg_graph_num_values(want); v++) {
    ccg_placement p[CCG_MAX_MESH_AXES], q[CCG_MAX_MESH_AXES];
    const char *name = ccg_value_name(want, v);
    ccg_value_id w = find(got, name);
    int n = ccg_value_placements(want, v, p);
    int k = ccg_value_placements(got, w, q);
    bool partial = false;
    for (int i = 0; i < n; i++)
      partial |= !all && p[i].kind == CCG_PLACEMENT_PARTIAL;
    if (partial || n == 0) {
      if (k != 0)
        fail_msg("value '%s' has placements after import", name);
      continue;
    }
    if (k != n)
      fail_msg("value '%s': %d placements, %d after import", name, n, k);
    for (int i = 0; i < n; i++) {
      assert_int_equal(p[i].kind, q[i].kind);
      if (p[i].kind == CCG_PLACEMENT_SHARD)
        assert_int_equal(p[i].dim, q[i].dim);
      if (p[i].kind == CCG_PLACEMENT_PARTIAL)
        assert_int_equal(p[i].reduce, q[i].reduce);
    }
    checked++;
  }
  assert_true(checked > 0);
}

static void assert_same_placements(ccg_graph *want, ccg_graph *got) {
  assert_placements(want, got, false);
}

/* ---- the Megatron MLP at tp=2 ------------------------------------------ */

static void test_mlp_annotations(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(2, 8);
  Onnx__ModelProto *m = export_model(g, 23);
  assert_int_equal(m->ir_version, 11);
  assert_int_equal(m->n_configuration, 1);
  const Onnx__DeviceConfigurationProto *c = m->configuration[0];
  assert_string_equal(c->name, "tp=2");
  assert_int_equal(c->num_devices, 2);
  assert_int_equal(c->n_device, 2);
  assert_string_equal(c->device[1], "rank1");

  /* x is replicated: no split dim, one group of both devices. */
  const Onnx__NodeProto *id = node_of(m, "Identity", 0);
  const Onnx__ShardingSpecProto *sp = spec_of(id, "x");
  assert_non_null(sp);
  assert_string_equal(id->device_configurations[0]->configuration_id, "tp=2");
  assert_int_equal(sp->n_sharded_dim, 0);
  assert_devices(sp, 1, (const int64_t[]){2});
  assert_int_equal(sp->n_index_to_device_group_map, 1);
  assert_int_equal(sp->index_to_device_group_map[0]->key, 2);
  assert_int_equal(sp->index_to_device_group_map[0]->n_value, 2);

  /* Column-parallel: fc1.weight [8,16] per rank, S(1) -> 32 in 2 shards. */
  const Onnx__NodeProto *mm1 = node_of(m, "MatMul", 0);
  sp = spec_of(mm1, "fc1.weight");
  assert_non_null(sp);
  assert_int_equal(sp->n_sharded_dim, 1);
  assert_split(sp, 0, 1, 2, 32);
  assert_devices(sp, 2, (const int64_t[]){0, 1});
  assert_int_equal(sp->n_index_to_device_group_map, 0);
  sp = spec_of(mm1, mm1->output[0]);
  assert_non_null(sp);
  assert_split(sp, 0, 1, 2, 32);
  assert_null(spec_of(mm1, mm1->input[0])); /* no placement */

  /* Row-parallel: fc2.weight S(0); its output is Partial: no spec. */
  const Onnx__NodeProto *mm2 = node_of(m, "MatMul", 1);
  sp = spec_of(mm2, "fc2.weight");
  assert_non_null(sp);
  assert_split(sp, 0, 0, 2, 32);
  assert_null(spec_of(mm2, mm2->output[0]));
  const Onnx__NodeProto *ar = node_of(m, "AllReduce", 0);
  assert_null(spec_of(ar, ar->input[0]));
  assert_non_null(spec_of(ar, ar->output[0]));
  onnx__model_proto__free_unpacked(m, NULL);

  /* Opset 24 (IR 12) writes them too; opset 21 (IR 10) does not. */
  m = export_model(g, 24);
  assert_int_equal(m->n_configuration, 1);
  assert_int_equal(node_of(m, "MatMul", 0)->n_device_configurations, 1);
  onnx__model_proto__free_unpacked(m, NULL);
  m = export_model(g, 21);
  assert_int_equal(m->n_configuration, 0);
  for (size_t i = 0; i < m->graph->n_node; i++)
    assert_int_equal(m->graph->node[i]->n_device_configurations, 0);
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);
}

static void test_mlp_round_trip(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(2, 8);
  Onnx__ModelProto *m = export_model(g, 23);
  ccg_graph *back = NULL;
  /* Placements from the annotations alone. */
  assert_ok(NULL, import_model(m, no_placements, &back));
  assert_same_placements(g, back);
  ccg_graph_free(back);
  /* And the mesh from the configuration's name. */
  assert_ok(NULL, import_model(m, no_ccgraph_meta, &back));
  char spec[64];
  ccg_mesh_format(ccg_graph_mesh(back), spec, sizeof spec);
  assert_string_equal(spec, "tp=2");
  assert_same_placements(g, back);
  ccg_graph_free(back);
  /* With its own metadata, the Partial placement comes back too, and the
   * model exports to the same bytes. */
  assert_ok(NULL, import_model(m, NULL, &back));
  ccg_placement p[CCG_MAX_MESH_AXES];
  const Onnx__NodeProto *mm2 = node_of(m, "MatMul", 1);
  assert_int_equal(ccg_value_placements(back, find(back, mm2->output[0]), p),
                   1);
  assert_int_equal(p[0].kind, CCG_PLACEMENT_PARTIAL);
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.opset = 23;
  void *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  assert_ok(g, ccg_onnx_export_buffer(g, &o, &a, &na));
  assert_ok(back, ccg_onnx_export_buffer(back, &o, &b, &nb));
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a);
  free(b);
  ccg_graph_free(back);
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);
}

/* ---- every Shard/Replicate mix on dp=2,tp=2 ----------------------------- */

#define R                                                                      \
  { CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM }
#define S(d)                                                                   \
  { CCG_PLACEMENT_SHARD, d, CCG_REDUCE_SUM }
#define P                                                                      \
  { CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_SUM }

static ccg_graph *mesh2d_graph(void) {
  static const ccg_placement pl[][2] = {{S(0), S(1)}, {R, S(0)}, {S(1), R},
                                        {S(0), S(0)}, {R, R},    {P, S(1)},
                                        {S(1), S(0)}};
  ccg_graph *g = ccg_test_graph_named("mesh2d", "dp=2,tp=2");
  for (size_t i = 0; i < sizeof pl / sizeof pl[0]; i++) {
    char name[16];
    snprintf(name, sizeof name, "in%zu", i);
    ccg_value_id x = ccg_test_input(g, name, CCG_DTYPE_F32, "[4,batch]"), y;
    assert_ok(g, ccg_value_set_placements(g, x, pl[i], 2));
    assert_ok(g, ccg_relu(g, x, &y));
    assert_ok(g, ccg_value_set_placements(g, y, pl[i], 2));
    assert_ok(g, ccg_graph_add_output(g, y));
  }
  return g;
}

static void test_mesh2d(void **state) {
  (void)state;
  ccg_graph *g = mesh2d_graph();
  Onnx__ModelProto *m = export_model(g, 23);
  assert_string_equal(m->configuration[0]->name, "dp=2,tp=2");
  assert_int_equal(m->configuration[0]->num_devices, 4);
  /* [S(0),S(1)]: shard (i,j) on rank 2i+j. */
  const Onnx__ShardingSpecProto *sp = spec_of(node_of(m, "Relu", 0), "in0");
  assert_int_equal(sp->n_sharded_dim, 2);
  assert_split(sp, 0, 0, 2, 8);
  assert_split(sp, 1, 1, 2, -1); /* a symbolic dim: no dim_value */
  assert_devices(sp, 4, (const int64_t[]){0, 1, 2, 3});
  /* [R,S(0)]: dim 0 split over tp, each shard on a dp group. */
  sp = spec_of(node_of(m, "Relu", 1), "in1");
  assert_int_equal(sp->n_sharded_dim, 1);
  assert_split(sp, 0, 0, 2, 8);
  assert_devices(sp, 2, (const int64_t[]){4, 5});
  assert_int_equal(sp->n_index_to_device_group_map, 2);
  const Onnx__IntIntListEntryProto *e = sp->index_to_device_group_map[1];
  assert_int_equal(e->key, 5);
  assert_int_equal(e->n_value, 2);
  assert_int_equal(e->value[0], 1);
  assert_int_equal(e->value[1], 3);
  /* [S(0),S(0)]: dim 0 in 4 shards, dp-major as DTensor. */
  sp = spec_of(node_of(m, "Relu", 3), "in3");
  assert_int_equal(sp->n_sharded_dim, 1);
  assert_split(sp, 0, 0, 4, 16);
  assert_devices(sp, 4, (const int64_t[]){0, 1, 2, 3});
  /* [P,S(1)]: Partial cannot be said; neither Relu input nor output. */
  assert_int_equal(node_of(m, "Relu", 5)->n_device_configurations, 0);
  /* [S(1),S(0)]: split dims ascending, shard (i,j) = (tp, dp). */
  sp = spec_of(node_of(m, "Relu", 6), "in6");
  assert_split(sp, 0, 0, 2, 8);
  assert_split(sp, 1, 1, 2, -1);
  assert_devices(sp, 4, (const int64_t[]){0, 2, 1, 3});

  ccg_graph *back = NULL;
  assert_ok(NULL, import_model(m, no_ccgraph_meta, &back));
  char spec[64];
  ccg_mesh_format(ccg_graph_mesh(back), spec, sizeof spec);
  assert_string_equal(spec, "dp=2,tp=2");
  assert_same_placements(g, back);
  ccg_graph_free(back);
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);
}

/* Renames the model's configuration (and every reference to it) to `to`,
 * or back with to == NULL. */
static void rename_config(Onnx__ModelProto *m, const char *to) {
  static char *saved[64];
  size_t k = 0;
  if (to)
    saved[k] = m->configuration[0]->name;
  m->configuration[0]->name = to ? (char *)to : saved[k];
  k++;
  for (size_t i = 0; i < m->graph->n_node; i++) {
    Onnx__NodeProto *np = m->graph->node[i];
    if (!np->n_device_configurations)
      continue;
    assert_true(k < 64);
    if (to)
      saved[k] = np->device_configurations[0]->configuration_id;
    np->device_configurations[0]->configuration_id = to ? (char *)to : saved[k];
    k++;
  }
}

/* A configuration whose name is no mesh: one axis "world". */
static void test_mesh_from_plain_configuration(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(2, 8);
  Onnx__ModelProto *m = export_model(g, 23);
  rename_config(m, "gpus");
  ccg_graph *back = NULL;
  /* With ccgraph.mesh, the configuration must match it in size. */
  assert_ok(NULL, import_model(m, no_placements, &back));
  assert_same_placements(g, back);
  ccg_graph_free(back);
  /* Without, the mesh is world=2, which the AllReduce over tp cannot use. */
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               import_model(m, no_ccgraph_meta, &back), "AllReduce", "tp");
  assert_null(back);
  rename_config(m, NULL);
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);

  /* A graph without collectives reads the mesh world=4 from "gpus". Only
   * 1-D layouts are placements there: [S(0),S(1)] is not. */
  g = mesh2d_graph();
  m = export_model(g, 23);
  rename_config(m, "gpus");
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED,
               import_model(m, no_ccgraph_meta, &back), "node '",
               "sharding_spec[0]", "'in0'", "world=4");
  assert_null(back);
  rename_config(m, NULL);
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);
}

/* ---- malformed annotations ---------------------------------------------- */

typedef struct bad_case {
  const char *what;
  void (*mutate)(Onnx__ModelProto *m, int undo);
  ccg_status want;
  const char *frag[3];
} bad_case;

/* The spec of fc1.weight on the first MatMul. */
static Onnx__ShardingSpecProto *w1_spec(Onnx__ModelProto *m) {
  return (Onnx__ShardingSpecProto *)spec_of(node_of(m, "MatMul", 0),
                                            "fc1.weight");
}

static char *saved_str;
static int64_t saved_int;

static void mut_tensor_name(Onnx__ModelProto *m, int undo) {
  Onnx__ShardingSpecProto *sp =
      node_of(m, "MatMul", 0)->device_configurations[0]->sharding_spec[0];
  if (!undo) {
    saved_str = sp->tensor_name;
    sp->tensor_name = "fc2.weight";
  } else {
    sp->tensor_name = saved_str;
  }
}

static void mut_config_id(Onnx__ModelProto *m, int undo) {
  Onnx__NodeDeviceConfigurationProto *dc =
      node_of(m, "MatMul", 0)->device_configurations[0];
  if (!undo) {
    saved_str = dc->configuration_id;
    dc->configuration_id = "tp=4";
  } else {
    dc->configuration_id = saved_str;
  }
}

static void mut_device_range(Onnx__ModelProto *m, int undo) {
  Onnx__ShardingSpecProto *sp = w1_spec(m);
  if (!undo) {
    saved_int = sp->device[1];
    sp->device[1] = 7;
  } else {
    sp->device[1] = saved_int;
  }
}

static void mut_device_twice(Onnx__ModelProto *m, int undo) {
  Onnx__ShardingSpecProto *sp = w1_spec(m);
  sp->device[1] = undo ? 1 : 0;
}

static void mut_device_count(Onnx__ModelProto *m, int undo) {
  w1_spec(m)->n_device = undo ? 2 : 1;
}

static void mut_not_divisible(Onnx__ModelProto *m, int undo) {
  w1_spec(m)->sharded_dim[0]->simple_sharding[0]->dim_value = undo ? 32 : 33;
}

static void mut_whole_dim(Onnx__ModelProto *m, int undo) {
  w1_spec(m)->sharded_dim[0]->simple_sharding[0]->dim_value = undo ? 32 : 16;
}

static void mut_num_shards(Onnx__ModelProto *m, int undo) {
  w1_spec(m)->sharded_dim[0]->simple_sharding[0]->num_shards = undo ? 2 : 0;
}

static void mut_axis(Onnx__ModelProto *m, int undo) {
  w1_spec(m)->sharded_dim[0]->axis = undo ? 1 : 2;
}

static void mut_group_range(Onnx__ModelProto *m, int undo) {
  Onnx__ShardingSpecProto *sp =
      (Onnx__ShardingSpecProto *)spec_of(node_of(m, "Identity", 0), "x");
  sp->index_to_device_group_map[0]->value[1] = undo ? 1 : -1;
}

static void mut_swapped(Onnx__ModelProto *m, int undo) {
  Onnx__ShardingSpecProto *sp = w1_spec(m);
  sp->device[0] = undo ? 0 : 1;
  sp->device[1] = undo ? 1 : 0;
}

static void mut_num_devices(Onnx__ModelProto *m, int undo) {
  m->configuration[0]->num_devices = undo ? 2 : 0;
}

static void mut_no_tensor_name(Onnx__ModelProto *m, int undo) {
  Onnx__ShardingSpecProto *sp =
      node_of(m, "MatMul", 0)->device_configurations[0]->sharding_spec[0];
  if (!undo) {
    saved_str = sp->tensor_name;
    sp->tensor_name = "";
  } else {
    sp->tensor_name = saved_str;
  }
}

static void mut_pipeline_stage(Onnx__ModelProto *m, int undo) {
  Onnx__NodeDeviceConfigurationProto *dc =
      node_of(m, "MatMul", 0)->device_configurations[0];
  dc->has_pipeline_stage = !undo;
  dc->pipeline_stage = undo ? 0 : -1;
}

static void mut_fused(Onnx__ModelProto *m, int undo) {
  static Onnx__SimpleShardedDimProto **saved, *two[2];
  Onnx__ShardedDimProto *sd = w1_spec(m)->sharded_dim[0];
  if (!undo) {
    saved = sd->simple_sharding;
    two[0] = two[1] = saved[0];
    sd->simple_sharding = two;
    sd->n_simple_sharding = 2;
  } else {
    sd->simple_sharding = saved;
    sd->n_simple_sharding = 1;
  }
}

/* Gelu reads the first MatMul's output as split on dim 0, not 1. */
static void mut_differs(Onnx__ModelProto *m, int undo) {
  const Onnx__NodeProto *gelu = node_of(m, "Gelu", 0);
  Onnx__ShardingSpecProto *sp =
      (Onnx__ShardingSpecProto *)spec_of(gelu, gelu->input[0]);
  sp->sharded_dim[0]->axis = undo ? 1 : 0;
}

static const bad_case bad_cases[] = {
    {"tensor not of the node",
     mut_tensor_name,
     CCG_STATUS_PARSE,
     {"sharding_spec[0].tensor_name 'fc2.weight'", "not an input or output",
      "/MatMul"}},
    {"unknown configuration",
     mut_config_id,
     CCG_STATUS_PARSE,
     {"configuration_id 'tp=4'", "device_configurations[0]", "/MatMul"}},
    {"device out of range",
     mut_device_range,
     CCG_STATUS_PARSE,
     {".device: device 7 is out of range", "2 devices", "/MatMul"}},
    {"device twice",
     mut_device_twice,
     CCG_STATUS_PARSE,
     {"device 0 holds two shards", "/MatMul", NULL}},
    {"device count",
     mut_device_count,
     CCG_STATUS_PARSE,
     {".device has 1 entries for 2 shards", "/MatMul", NULL}},
    {"num_shards does not divide",
     mut_not_divisible,
     CCG_STATUS_PARSE,
     {"num_shards 2 does not divide dim_value 33", "sharded_dim[0]",
      "/MatMul"}},
    {"logical shape",
     mut_whole_dim,
     CCG_STATUS_UNSUPPORTED,
     {"dim_value 16 in 2 shards", "per-rank", "/MatMul"}},
    {"num_shards 0",
     mut_num_shards,
     CCG_STATUS_PARSE,
     {"num_shards 0", "/MatMul", NULL}},
    {"axis out of range",
     mut_axis,
     CCG_STATUS_PARSE,
     {"sharded_dim[0].axis 2 is out of range", "rank 2", "/MatMul"}},
    {"group member out of range",
     mut_group_range,
     CCG_STATUS_PARSE,
     {"index_to_device_group_map: device -1 is out of range", "Identity",
      NULL}},
    {"no placement",
     mut_swapped,
     CCG_STATUS_UNSUPPORTED,
     {"layout of 'fc1.weight'", "mesh tp=2", "/MatMul"}},
    {"no tensor_name",
     mut_no_tensor_name,
     CCG_STATUS_PARSE,
     {"sharding_spec[0] has no tensor_name", "/MatMul", NULL}},
    {"negative pipeline_stage",
     mut_pipeline_stage,
     CCG_STATUS_PARSE,
     {"device_configurations[0].pipeline_stage is -1", "/MatMul", NULL}},
    {"fused axes",
     mut_fused,
     CCG_STATUS_UNSUPPORTED,
     {"sharded_dim[0].simple_sharding has 2 entries", "/MatMul", NULL}},
    {"two layouts of one tensor",
     mut_differs,
     CCG_STATUS_PARSE,
     {"laid out otherwise by an earlier node", "Gelu", "MatMul_1_output"}},
    {"num_devices 0",
     mut_num_devices,
     CCG_STATUS_PARSE,
     {"configuration[0] ('tp=2'): num_devices 0", NULL, NULL}},
};

static void test_bad_annotations(void **state) {
  (void)state;
  ccg_graph *g = onnx_test_megatron_mlp(2, 8);
  Onnx__ModelProto *m = export_model(g, 23);
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    const bad_case *c = &bad_cases[i];
    ccg_graph *back = NULL;
    c->mutate(m, 0);
    ccg_status st = import_model(m, no_placements, &back);
    const char *msg = ccg_last_error(NULL);
    if (st != c->want)
      fail_msg("%s: %s (%s), expected %s", c->what, ccg_status_name(st), msg,
               ccg_status_name(c->want));
    for (int k = 0; k < 3 && c->frag[k]; k++)
      if (!strstr(msg, c->frag[k]))
        fail_msg("%s: message \"%s\" lacks \"%s\"", c->what, msg, c->frag[k]);
    assert_null(back);
    /* A malformed annotation is refused with ccgraph's metadata too; a
     * well-formed one that is no placement (or disagrees with another) is
     * then simply not used. */
    st = import_model(m, NULL, &back);
    if (c->mutate == mut_swapped || c->mutate == mut_differs) {
      assert_ok(NULL, st);
      assert_placements(g, back, true); /* from ccgraph.placements */
      ccg_graph_free(back);
    } else if (st != c->want) {
      fail_msg("%s with metadata: %s (%s)", c->what, ccg_status_name(st),
               ccg_last_error(NULL));
    }
    c->mutate(m, 1);
  }
  /* Undone, the model reads again. */
  ccg_graph *back = NULL;
  assert_ok(NULL, import_model(m, no_placements, &back));
  ccg_graph_free(back);
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);
}

/* A node with many tensors (20 inputs, split over tp): its names are
 * looked up through a map. */
static void test_many_inputs(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph_named("concat", "tp=2");
  ccg_placement s0 = S(0);
  ccg_value_id xs[20], y;
  for (int i = 0; i < 20; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    xs[i] = ccg_test_input(g, name, CCG_DTYPE_F32, "[2,3]");
    assert_ok(g, ccg_value_set_placements(g, xs[i], &s0, 1));
  }
  assert_ok(g, ccg_concat(g, xs, 20, 1, &y));
  assert_ok(g, ccg_value_set_placements(g, y, &s0, 1));
  assert_ok(g, ccg_graph_add_output(g, y));
  Onnx__ModelProto *m = export_model(g, 23);
  Onnx__NodeDeviceConfigurationProto *dc =
      m->graph->node[0]->device_configurations[0];
  assert_int_equal(dc->n_sharding_spec, 21);
  ccg_graph *back = NULL;
  assert_ok(NULL, import_model(m, no_placements, &back));
  assert_same_placements(g, back);
  ccg_graph_free(back);
  char *saved = dc->sharding_spec[19]->tensor_name;
  dc->sharding_spec[19]->tensor_name = "x20";
  assert_fails(NULL, CCG_STATUS_PARSE, import_model(m, no_placements, &back),
               "sharding_spec[19].tensor_name 'x20' is not an input");
  dc->sharding_spec[19]->tensor_name = saved;
  onnx__model_proto__free_unpacked(m, NULL);
  ccg_graph_free(g);
}

/* Per-rank export carries them on every rank. The models stay in
 * CCG_ONNX_IR11_DIR for onnx_checker_ir11 (a current onnx.checker). */
static void test_rank_models(void **state) {
  (void)state;
  mkdir(CCG_ONNX_IR11_DIR, 0755);
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.opset = 23;
  ccg_graph *g = onnx_test_megatron_mlp(2, 8);
  assert_ok(g, ccg_onnx_export_ranks(g, CCG_ONNX_IR11_DIR, "megatron_mlp", &o));
  ccg_graph *h = mesh2d_graph();
  assert_ok(h, ccg_onnx_export_file(h, CCG_ONNX_IR11_DIR "/mesh2d.onnx", &o));
  ccg_graph_free(h);
  for (int r = 0; r < 2; r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/megatron_mlp.rank%d.onnx",
             CCG_ONNX_IR11_DIR, r);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof buf);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, buf);
    assert_non_null(m);
    assert_int_equal(m->n_configuration, 1);
    assert_string_equal(m->configuration[0]->name, "tp=2");
    const Onnx__ShardingSpecProto *sp =
        spec_of(node_of(m, "MatMul", 0), "fc1.weight");
    assert_non_null(sp);
    assert_split(sp, 0, 1, 2, 32);
    onnx__model_proto__free_unpacked(m, NULL);
    /* and read back through the file path */
    ccg_graph *back = NULL;
    assert_ok(NULL, ccg_onnx_import_file(path, NULL, &back));
    assert_placements(g, back, true);
    ccg_graph_free(back);
  }
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp_annotations),
      cmocka_unit_test(test_mlp_round_trip),
      cmocka_unit_test(test_mesh2d),
      cmocka_unit_test(test_mesh_from_plain_configuration),
      cmocka_unit_test(test_bad_annotations),
      cmocka_unit_test(test_many_inputs),
      cmocka_unit_test(test_rank_models),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
