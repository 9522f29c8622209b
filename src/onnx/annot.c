/* ONNX's multi-device annotations (IR 11): ModelProto.configuration names
 * the mesh, and NodeProto.device_configurations carries one
 * ShardingSpecProto per placed input or output of a node. They say for
 * other readers what ccgraph.placements says for ccgraph; import reads them
 * back when that metadata is absent (docs/onnx.md, "Sharding annotations").
 *
 * A layout is what a spec describes: the split tensor dims in the order of
 * its sharded_dim list, their shard counts, and the shard (row-major over
 * that list) each device holds. A placement with Shard and Replicate only
 * has exactly one layout; Partial has none, so such values get no spec. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/import.h"

/* Devices a configuration may have (import keeps one int64 per device). */
#define MAX_DEVICES ((int64_t)1 << 20)

typedef struct layout {
  int n;
  int dims[CCG_MAX_RANK];
  int64_t shards[CCG_MAX_RANK];
  int64_t total; /* product of shards */
} layout;

/* The shards of tensor dim d under p (1 when no axis splits it), and
 * whether any axis does. */
static int64_t dim_shards(const ccg_mesh *mesh, const ccg_placement *p, int d,
                          bool *split) {
  int64_t s = 1;
  *split = false;
  for (int i = 0; i < mesh->ndims; i++)
    if (p[i].kind == CCG_PLACEMENT_SHARD && p[i].dim == d) {
      s *= mesh->sizes[i];
      *split = true;
    }
  return s;
}

/* The shard of dim d a device at mesh coordinates c holds: DTensor's
 * order, the splitting axes in mesh order (row-major). */
static int64_t dim_index(const ccg_mesh *mesh, const ccg_placement *p, int d,
                         const int64_t *c) {
  int64_t idx = 0;
  for (int i = 0; i < mesh->ndims; i++)
    if (p[i].kind == CCG_PLACEMENT_SHARD && p[i].dim == d)
      idx = idx * mesh->sizes[i] + c[i];
  return idx;
}

/* The layout of placements p (split dims ascending); false for what a
 * spec cannot say (Partial, or not one placement per mesh axis). */
static bool layout_of(const ccg_mesh *mesh, const ccg_placement *p, int n,
                      layout *l) {
  if (n != mesh->ndims)
    return false;
  for (int i = 0; i < n; i++)
    if (p[i].kind != CCG_PLACEMENT_SHARD &&
        p[i].kind != CCG_PLACEMENT_REPLICATE)
      return false;
  memset(l, 0, sizeof *l);
  l->total = 1;
  for (int d = 0; d < CCG_MAX_RANK; d++) {
    bool split;
    int64_t s = dim_shards(mesh, p, d, &split);
    if (!split)
      continue;
    l->dims[l->n] = d;
    l->shards[l->n++] = s;
    l->total *= s;
  }
  return true;
}

/* The shard (row-major over l's dims) that `rank` holds under p. */
static int64_t shard_of(const ccg_mesh *mesh, const ccg_placement *p,
                        const layout *l, int64_t rank) {
  int64_t c[CCG_MAX_MESH_AXES] = {0};
  ccg_mesh_coords(mesh, rank, c);
  int64_t lin = 0;
  for (int k = 0; k < l->n; k++)
    lin = lin * l->shards[k] + dim_index(mesh, p, l->dims[k], c);
  return lin;
}

/* ---- export ------------------------------------------------------------- */

typedef struct ax_ctx {
  ccg_graph *g;
  ccg_arena *a;
  const ccg_mesh *mesh;
  int64_t world;
  char *config; /* the configuration's name: the mesh, "dp=2,tp=2" */
} ax_ctx;

static ccg_status ax_oom(ax_ctx *x) {
  return ccg__error(&x->g->ctx, CCG_STATUS_OOM,
                    "graph '%s': ONNX sharding annotations",
                    ccg_graph_name(x->g));
}

#define ANEW(p, T, init)                                                       \
  do {                                                                         \
    (p) = ccg__arena_alloc(x->a, sizeof(T), 8);                                \
    if (!(p))                                                                  \
      return ax_oom(x);                                                        \
    init(p);                                                                   \
  } while (0)

static ccg_status sharded_dims_out(ax_ctx *x, ccg_value_id v, const layout *l,
                                   Onnx__ShardingSpecProto *sp) {
  const ccg_shape *s = ccg_value_shape(x->g, v);
  sp->sharded_dim = ccg__arena_calloc(x->a, (size_t)l->n + 1, sizeof(void *));
  if (!sp->sharded_dim)
    return ax_oom(x);
  for (int k = 0; k < l->n; k++) {
    Onnx__ShardedDimProto *sd;
    Onnx__SimpleShardedDimProto *ss;
    ANEW(sd, Onnx__ShardedDimProto, onnx__sharded_dim_proto__init);
    ANEW(ss, Onnx__SimpleShardedDimProto, onnx__simple_sharded_dim_proto__init);
    sd->simple_sharding = ccg__arena_calloc(x->a, 1, sizeof(void *));
    if (!sd->simple_sharding)
      return ax_oom(x);
    sd->has_axis = 1;
    sd->axis = l->dims[k];
    ss->has_num_shards = 1;
    ss->num_shards = l->shards[k];
    /* dim_value is the whole (logical) dim; a symbolic local dim has no
     * name for its whole, so it is left out. */
    ccg_dim d = s->dims[l->dims[k]];
    if (!ccg_dim_is_sym(d) && d.size <= INT64_MAX / l->shards[k]) {
      ss->dim_case = ONNX__SIMPLE_SHARDED_DIM_PROTO__DIM_DIM_VALUE;
      ss->dim_value = d.size * l->shards[k];
    }
    sd->simple_sharding[0] = ss;
    sd->n_simple_sharding = 1;
    sp->sharded_dim[k] = sd;
  }
  sp->n_sharded_dim = (size_t)l->n;
  return CCG_STATUS_OK;
}

/* Devices of each shard: the device itself when no axis replicates the
 * value, else a group key (world + shard) mapped to the devices that hold
 * copies of that shard. */
static ccg_status devices_out(ax_ctx *x, const ccg_placement *p,
                              const layout *l, Onnx__ShardingSpecProto *sp) {
  size_t nt = (size_t)l->total, per = (size_t)(x->world / l->total);
  sp->device = ccg__arena_calloc(x->a, nt, sizeof *sp->device);
  size_t *fill = ccg__arena_calloc(x->a, nt, sizeof *fill);
  if (!sp->device || !fill)
    return ax_oom(x);
  sp->n_device = nt;
  if (per > 1) {
    sp->index_to_device_group_map = ccg__arena_calloc(x->a, nt, sizeof(void *));
    if (!sp->index_to_device_group_map)
      return ax_oom(x);
    for (size_t t = 0; t < nt; t++) {
      Onnx__IntIntListEntryProto *e;
      ANEW(e, Onnx__IntIntListEntryProto, onnx__int_int_list_entry_proto__init);
      e->has_key = 1;
      e->key = x->world + (int64_t)t;
      e->value = ccg__arena_calloc(x->a, per, sizeof *e->value);
      if (!e->value)
        return ax_oom(x);
      e->n_value = per;
      sp->index_to_device_group_map[t] = e;
      sp->device[t] = e->key;
    }
    sp->n_index_to_device_group_map = nt;
  }
  for (int64_t r = 0; r < x->world; r++) {
    size_t t = (size_t)shard_of(x->mesh, p, l, r);
    if (per > 1)
      sp->index_to_device_group_map[t]->value[fill[t]++] = r;
    else
      sp->device[t] = r;
  }
  return CCG_STATUS_OK;
}

/* The spec of v, or *out NULL when v has no placement a spec can say. */
static ccg_status spec_out(ax_ctx *x, ccg_value_id v,
                           Onnx__ShardingSpecProto **out) {
  ccg_placement p[CCG_MAX_MESH_AXES];
  layout l;
  *out = NULL;
  int n = ccg_value_placements(x->g, v, p);
  if (n == 0 || !layout_of(x->mesh, p, n, &l))
    return CCG_STATUS_OK;
  Onnx__ShardingSpecProto *sp;
  ANEW(sp, Onnx__ShardingSpecProto, onnx__sharding_spec_proto__init);
  sp->tensor_name = (char *)ccg_value_name(x->g, v);
  CCG_CHECK(sharded_dims_out(x, v, &l, sp));
  CCG_CHECK(devices_out(x, p, &l, sp));
  *out = sp;
  return CCG_STATUS_OK;
}

static ccg_status node_out(ax_ctx *x, ccg_node_id n, Onnx__NodeProto *np) {
  size_t nin = ccg_node_num_inputs(x->g, n);
  size_t nv = nin + ccg_node_num_outputs(x->g, n);
  Onnx__ShardingSpecProto **specs =
      ccg__arena_calloc(x->a, nv + 1, sizeof *specs);
  ccg_value_id *seen = ccg__arena_calloc(x->a, nv + 1, sizeof *seen);
  if (!specs || !seen)
    return ax_oom(x);
  size_t ns = 0;
  for (size_t j = 0; j < nv; j++) {
    ccg_value_id v = j < nin ? ccg_node_input(x->g, n, j)
                             : ccg_node_output(x->g, n, j - nin);
    seen[j] = v;
    bool dup = v == CCG_NONE;
    for (size_t i = 0; i < j && !dup; i++)
      dup = seen[i] == v;
    if (!dup)
      CCG_CHECK(spec_out(x, v, &specs[ns]));
    ns += !dup && specs[ns];
  }
  if (!ns)
    return CCG_STATUS_OK;
  Onnx__NodeDeviceConfigurationProto *dc;
  ANEW(dc, Onnx__NodeDeviceConfigurationProto,
       onnx__node_device_configuration_proto__init);
  dc->configuration_id = x->config;
  dc->sharding_spec = specs;
  dc->n_sharding_spec = ns;
  np->device_configurations = ccg__arena_calloc(x->a, 1, sizeof(void *));
  if (!np->device_configurations)
    return ax_oom(x);
  np->device_configurations[0] = dc;
  np->n_device_configurations = 1;
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_annot_config(ccg_graph *g, int64_t opset, ccg_arena *a,
                                  Onnx__ModelProto *m, const char **config) {
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  *config = NULL;
  /* Past MAX_DEVICES import would refuse them: none are written. */
  if (!mesh || ccg__onnx_ir_version(opset) < 11 ||
      ccg_mesh_world_size(mesh) > MAX_DEVICES)
    return CCG_STATUS_OK;
  ax_ctx ctx = {g, a, mesh, ccg_mesh_world_size(mesh), NULL};
  ax_ctx *x = &ctx;
  char spec[128];
  ccg_mesh_format(mesh, spec, sizeof spec);
  Onnx__DeviceConfigurationProto *c;
  ANEW(c, Onnx__DeviceConfigurationProto,
       onnx__device_configuration_proto__init);
  x->config = ccg__arena_strdup(a, spec);
  m->configuration = ccg__arena_calloc(a, 1, sizeof(void *));
  c->device = ccg__arena_calloc(a, (size_t)x->world, sizeof *c->device);
  if (!x->config || !m->configuration || !c->device)
    return ax_oom(x);
  c->name = x->config;
  c->has_num_devices = 1;
  c->num_devices = (int32_t)x->world;
  for (int64_t r = 0; r < x->world; r++)
    if (!(c->device[r] = ccg__arena_printf(a, "rank%lld", (long long)r)))
      return ax_oom(x);
  c->n_device = (size_t)x->world;
  m->configuration[0] = c;
  m->n_configuration = 1;
  *config = x->config;
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_annot_node(ccg_graph *g, ccg_arena *a, const char *config,
                                ccg_node_id n, Onnx__NodeProto *np) {
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  ax_ctx ctx = {g, a, mesh, ccg_mesh_world_size(mesh), (char *)config};
  return node_out(&ctx, n, np);
}

/* ---- import ------------------------------------------------------------- */

typedef struct key_ix {
  int64_t key;
  size_t ix;
} key_ix;

static int key_cmp(const void *a, const void *b) {
  int64_t x = ((const key_ix *)a)->key, y = ((const key_ix *)b)->key;
  return x < y ? -1 : x > y;
}

/* Where a spec sits, for messages. */
typedef struct at {
  im *m;
  const Onnx__NodeProto *np;
  size_t c, s; /* device_configurations[c].sharding_spec[s] */
} at;

static ccg_status bad(const at *w, ccg_status st, const char *fmt, ...)
    CCG_PRINTF(3, 4);
static ccg_status bad(const at *w, ccg_status st, const char *fmt, ...) {
  char msg[CCG__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *name = ccg__onnx_node_label(w->np);
  if (w->s == SIZE_MAX)
    return ccg__error(
        NULL, st, "%s: node '%s' (%s): device_configurations[%zu]%s",
        w->m->src.what, name, w->np->op_type ? w->np->op_type : "", w->c, msg);
  return ccg__error(NULL, st,
                    "%s: node '%s' (%s): device_configurations[%zu]."
                    "sharding_spec[%zu]%s",
                    w->m->src.what, name, w->np->op_type ? w->np->op_type : "",
                    w->c, w->s, msg);
}

/* Whether t is an input or output of the node: through `names` (the
 * node's tensors) for nodes with many, else by a scan. */
static bool node_has(const Onnx__NodeProto *np, const ccg_strmap *names,
                     const char *t) {
  if (names)
    return ccg__strmap_get(names, t, NULL);
  for (size_t i = 0; i < np->n_input; i++)
    if (np->input[i] && strcmp(np->input[i], t) == 0)
      return true;
  for (size_t i = 0; i < np->n_output; i++)
    if (np->output[i] && strcmp(np->output[i], t) == 0)
      return true;
  return false;
}

/* sharded_dim into l (file order), checked against the value's shape. */
static ccg_status dims_in(const at *w, const Onnx__ShardingSpecProto *sp,
                          const ccg_shape *s, int64_t ndev, layout *l) {
  memset(l, 0, sizeof *l);
  l->total = 1;
  if (sp->n_sharded_dim > (size_t)s->rank)
    return bad(w, CCG_STATUS_PARSE,
               ": %zu sharded_dim entries for a tensor of rank %d",
               sp->n_sharded_dim, s->rank);
  for (size_t q = 0; q < sp->n_sharded_dim; q++) {
    const Onnx__ShardedDimProto *sd = sp->sharded_dim[q];
    int64_t ax = sd->axis;
    if (!sd->has_axis || ax < -s->rank || ax >= s->rank)
      return bad(w, CCG_STATUS_PARSE,
                 ".sharded_dim[%zu].axis %lld is out of range for a tensor "
                 "of rank %d",
                 q, sd->has_axis ? (long long)ax : -1LL, s->rank);
    int d = (int)(ax < 0 ? ax + s->rank : ax);
    for (int k = 0; k < l->n; k++)
      if (l->dims[k] == d)
        return bad(w, CCG_STATUS_PARSE,
                   ".sharded_dim[%zu].axis: dim %d is split twice", q, d);
    if (sd->n_simple_sharding != 1)
      return bad(
          w, sd->n_simple_sharding ? CCG_STATUS_UNSUPPORTED : CCG_STATUS_PARSE,
          ".sharded_dim[%zu].simple_sharding has %zu entries "
          "(ccgraph reads exactly one per axis: no fused axes)",
          q, sd->n_simple_sharding);
    const Onnx__SimpleShardedDimProto *ss = sd->simple_sharding[0];
    int64_t ns = ss->num_shards;
    if (!ss->has_num_shards || ns < 1 || ns > ndev)
      return bad(w, CCG_STATUS_PARSE,
                 ".sharded_dim[%zu].simple_sharding[0].num_shards %lld is "
                 "not 1..%lld (the configuration's devices)",
                 q, ss->has_num_shards ? (long long)ns : 0LL, (long long)ndev);
    if (ss->dim_case == ONNX__SIMPLE_SHARDED_DIM_PROTO__DIM_DIM_VALUE) {
      int64_t dv = ss->dim_value;
      if (dv < 0 || dv % ns != 0)
        return bad(w, CCG_STATUS_PARSE,
                   ".sharded_dim[%zu].simple_sharding[0]: num_shards %lld "
                   "does not divide dim_value %lld",
                   q, (long long)ns, (long long)dv);
      ccg_dim ld = s->dims[d];
      if (!ccg_dim_is_sym(ld) && ld.size != dv / ns)
        return bad(w, CCG_STATUS_UNSUPPORTED,
                   ".sharded_dim[%zu]: dim_value %lld in %lld shards is "
                   "%lld, the tensor's dim %d is %lld (ccgraph reads "
                   "per-rank models, whose shapes are one shard's)",
                   q, (long long)dv, (long long)ns, (long long)(dv / ns), d,
                   (long long)ld.size);
    }
    l->dims[l->n] = d;
    l->shards[l->n++] = ns;
    l->total *= ns; /* <= ndev * ndev: no overflow */
    if (l->total > ndev)
      return bad(w, CCG_STATUS_PARSE, ": %lld shards or more for %lld devices",
                 (long long)l->total, (long long)ndev);
  }
  return CCG_STATUS_OK;
}

/* owner[device] = shard, -1 for none; `touched` lists the devices set, so
 * that each spec costs what it holds, not what the configuration has. */
typedef struct devbuf {
  int64_t *owner, *touched;
  size_t n;
} devbuf;

/* device and index_to_device_group_map into db, every device at most
 * once. */
static ccg_status devices_in(const at *w, const Onnx__ShardingSpecProto *sp,
                             const layout *l, int64_t ndev, devbuf *db) {
  int64_t *owner = db->owner;
  if (sp->n_device != (size_t)l->total)
    return bad(w, CCG_STATUS_PARSE, ".device has %zu entries for %lld shards",
               sp->n_device, (long long)l->total);
  size_t nk = sp->n_index_to_device_group_map;
  key_ix *keys = NULL;
  if (nk) {
    keys = ccg__arena_calloc(&w->m->a, nk, sizeof *keys);
    if (!keys)
      return bad(w, CCG_STATUS_OOM, ": index_to_device_group_map");
  }
  for (size_t i = 0; i < nk; i++)
    keys[i] = (key_ix){sp->index_to_device_group_map[i]->key, i};
  if (nk)
    qsort(keys, nk, sizeof *keys, key_cmp);
  for (size_t i = 1; i < nk; i++)
    if (keys[i].key == keys[i - 1].key)
      return bad(w, CCG_STATUS_PARSE,
                 ".index_to_device_group_map: key %lld appears twice",
                 (long long)keys[i].key);
  for (size_t t = 0; t < sp->n_device; t++) {
    int64_t v = sp->device[t];
    key_ix probe = {v, 0};
    const key_ix *k =
        nk ? bsearch(&probe, keys, nk, sizeof *keys, key_cmp) : NULL;
    const Onnx__IntIntListEntryProto *e =
        k ? sp->index_to_device_group_map[k->ix] : NULL;
    size_t count = e ? e->n_value : 1;
    if (e && !count)
      return bad(w, CCG_STATUS_PARSE,
                 ".index_to_device_group_map: group %lld is empty",
                 (long long)v);
    for (size_t i = 0; i < count; i++) {
      int64_t dev = e ? e->value[i] : v;
      if (dev < 0 || dev >= ndev)
        return bad(w, CCG_STATUS_PARSE,
                   "%s: device %lld is out of range (the configuration has "
                   "%lld devices)",
                   e ? ".index_to_device_group_map" : ".device", (long long)dev,
                   (long long)ndev);
      if (owner[dev] >= 0)
        return bad(w, CCG_STATUS_PARSE, ".device: device %lld holds two shards",
                   (long long)dev);
      owner[dev] = (int64_t)t;
      db->touched[db->n++] = dev;
    }
  }
  return CCG_STATUS_OK;
}

/* The placements whose layout is l with owner[] over the mesh: each axis
 * read from the step to coordinate 1 on it, then the whole layout
 * compared. False when no placement has it. */
static bool decode(const ccg_mesh *mesh, const layout *l, const int64_t *owner,
                   ccg_placement *p) {
  int64_t world = ccg_mesh_world_size(mesh), stride = world;
  for (int64_t r = 0; r < world; r++)
    if (owner[r] < 0)
      return false;
  int64_t t0[CCG_MAX_RANK], ti[CCG_MAX_RANK];
  for (int i = 0; i < mesh->ndims; i++) {
    p[i] = (ccg_placement){CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
    stride /= mesh->sizes[i];
    if (mesh->sizes[i] == 1)
      continue;
    int64_t a = owner[0], b = owner[stride];
    for (int k = l->n - 1; k >= 0; k--) {
      t0[k] = a % l->shards[k];
      ti[k] = b % l->shards[k];
      a /= l->shards[k];
      b /= l->shards[k];
    }
    int diff = -1;
    for (int k = 0; k < l->n; k++)
      if (t0[k] != ti[k]) {
        if (diff >= 0)
          return false;
        diff = k;
      }
    if (diff >= 0)
      p[i] =
          (ccg_placement){CCG_PLACEMENT_SHARD, l->dims[diff], CCG_REDUCE_SUM};
  }
  /* A dim in one shard is split by an axis of size 1. */
  for (int k = 0; k < l->n; k++) {
    bool split;
    dim_shards(mesh, p, l->dims[k], &split);
    for (int i = 0; !split && i < mesh->ndims; i++)
      if (mesh->sizes[i] == 1 && p[i].kind == CCG_PLACEMENT_REPLICATE) {
        p[i] = (ccg_placement){CCG_PLACEMENT_SHARD, l->dims[k], CCG_REDUCE_SUM};
        split = true;
      }
  }
  layout got;
  if (!layout_of(mesh, p, mesh->ndims, &got) || got.n != l->n)
    return false;
  for (int k = 0; k < l->n; k++) {
    bool split;
    if (dim_shards(mesh, p, l->dims[k], &split) != l->shards[k] || !split)
      return false;
  }
  for (int64_t r = 0; r < world; r++) {
    int64_t c[CCG_MAX_MESH_AXES] = {0}, lin = 0;
    ccg_mesh_coords(mesh, r, c);
    for (int k = 0; k < l->n; k++)
      lin = lin * l->shards[k] + dim_index(mesh, p, l->dims[k], c);
    if (lin != owner[r])
      return false;
  }
  return true;
}

static bool same_placements(const ccg_placement *a, const ccg_placement *b,
                            int n) {
  for (int i = 0; i < n; i++)
    if (a[i].kind != b[i].kind ||
        (a[i].kind == CCG_PLACEMENT_SHARD && a[i].dim != b[i].dim) ||
        (a[i].kind == CCG_PLACEMENT_PARTIAL && a[i].reduce != b[i].reduce))
      return false;
  return true;
}

static ccg_status restore(const at *w, ccg_value_id v, const layout *l,
                          const devbuf *db) {
  ccg_graph *g = w->m->g;
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  ccg_placement p[CCG_MAX_MESH_AXES], old[CCG_MAX_MESH_AXES];
  char spec[128];
  ccg_mesh_format(mesh, spec, sizeof spec);
  if ((int64_t)db->n != ccg_mesh_world_size(mesh) ||
      !decode(mesh, l, db->owner, p))
    return bad(w, CCG_STATUS_UNSUPPORTED,
               ": the layout of '%s' is no Shard/Replicate placement on "
               "mesh %s",
               ccg_value_name(g, v), spec);
  int n = ccg_value_placements(g, v, old);
  if (n)
    return same_placements(p, old, n)
               ? CCG_STATUS_OK
               : bad(w, CCG_STATUS_PARSE,
                     ": '%s' is laid out otherwise by an earlier node",
                     ccg_value_name(g, v));
  if (ccg_value_set_placements(g, v, p, mesh->ndims) != CCG_STATUS_OK) {
    ccg__error_copy(NULL, &g->ctx);
    return ccg__error_prefix(NULL, "%s", w->m->src.what);
  }
  return CCG_STATUS_OK;
}

static ccg_status spec_in(const at *w, const Onnx__ShardingSpecProto *sp,
                          const ccg_strmap *names, int64_t ndev, devbuf *db,
                          bool use) {
  const char *t = sp->tensor_name;
  if (!t || !*t)
    return bad(w, CCG_STATUS_PARSE, " has no tensor_name");
  if (!node_has(w->np, names, t))
    return bad(w, CCG_STATUS_PARSE,
               ".tensor_name '%s' is not an input or output of the node", t);
  ccg_value_id v;
  if (!ccg__strmap_get(&w->m->g->value_names, t, &v))
    return CCG_STATUS_OK; /* a constant read as an attribute (axes, split) */
  layout l;
  CCG_CHECK(dims_in(w, sp, ccg_value_shape(w->m->g, v), ndev, &l));
  ccg_status st = devices_in(w, sp, &l, ndev, db);
  if (st == CCG_STATUS_OK && use)
    st = restore(w, v, &l, db);
  for (size_t i = 0; i < db->n; i++)
    db->owner[db->touched[i]] = -1;
  db->n = 0;
  return st;
}

static const Onnx__DeviceConfigurationProto *
config_named(const im *m, const ccg_strmap *cfgs, const char *id) {
  uint32_t i;
  return id && ccg__strmap_get(cfgs, id, &i) ? m->m->configuration[i] : NULL;
}

/* Checks the configurations and maps their names to their indices (cfgs
 * initialized by the caller, who frees it). */
static ccg_status configs_in(im *m, ccg_strmap *cfgs, int64_t *max_dev) {
  *max_dev = 0;
  if (m->m->n_configuration > UINT32_MAX ||
      ccg__strmap_reserve(cfgs, m->m->n_configuration) != CCG_STATUS_OK)
    return ccg__error(NULL, CCG_STATUS_OOM, "%s: %zu configurations",
                      m->src.what, m->m->n_configuration);
  for (size_t i = 0; i < m->m->n_configuration; i++) {
    const Onnx__DeviceConfigurationProto *c = m->m->configuration[i];
    const char *name = c->name ? c->name : "";
    if (!*name)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: configuration[%zu] has no name", m->src.what, i);
    if (!c->has_num_devices || c->num_devices < 1 ||
        c->num_devices > MAX_DEVICES)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: configuration[%zu] ('%s'): num_devices %d is not "
                        "1..%lld",
                        m->src.what, i, name, (int)c->num_devices,
                        (long long)MAX_DEVICES);
    if (c->n_device && c->n_device != (size_t)c->num_devices)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: configuration[%zu] ('%s'): %zu device names for "
                        "num_devices %d",
                        m->src.what, i, name, c->n_device, (int)c->num_devices);
    if (ccg__strmap_put(cfgs, name, (uint32_t)i) != CCG_STATUS_OK)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: configuration[%zu]: name '%s' is used twice",
                        m->src.what, i, name);
    if (c->num_devices > *max_dev)
      *max_dev = c->num_devices;
  }
  return CCG_STATUS_OK;
}

/* Without ccgraph.mesh: the mesh the configuration's name spells when its
 * size matches (ccgraph writes "dp=2,tp=2"), else one axis "world". */
static ccg_status mesh_in(im *m, const Onnx__DeviceConfigurationProto *c) {
  ccg_mesh mesh;
  if (ccg_mesh_parse(c->name, &mesh) != CCG_STATUS_OK ||
      ccg_mesh_world_size(&mesh) != c->num_devices) {
    memset(&mesh, 0, sizeof mesh);
    mesh.ndims = 1;
    mesh.sizes[0] = c->num_devices;
    strcpy(mesh.names[0], "world");
  }
  if (ccg_graph_set_mesh(m->g, &mesh) != CCG_STATUS_OK) {
    ccg__error_copy(NULL, &m->g->ctx);
    return ccg__error_prefix(NULL, "%s: configuration '%s'", m->src.what,
                             c->name);
  }
  return CCG_STATUS_OK;
}

/* A node's configurations. Nodes with many tensors get a map of their
 * names, so that many specs on one node stay linear. */
static ccg_status node_in(im *m, const Onnx__NodeProto *np,
                          const ccg_strmap *cfgs,
                          const Onnx__DeviceConfigurationProto *use,
                          devbuf *db) {
  if (!np->n_device_configurations)
    return CCG_STATUS_OK;
  ccg_strmap map, *names = NULL;
  ccg__strmap_init(&map, NULL);
  size_t nt = np->n_input + np->n_output;
  if (nt > 16) {
    if (ccg__strmap_reserve(&map, nt) != CCG_STATUS_OK)
      return ccg__error(NULL, CCG_STATUS_OOM, "%s: node '%s'", m->src.what,
                        np->name ? np->name : "");
    for (size_t i = 0; i < nt; i++) {
      const char *t =
          i < np->n_input ? np->input[i] : np->output[i - np->n_input];
      if (t)
        ccg__strmap_put(&map, t, 0); /* repeated names: kept once */
    }
    names = &map;
  }
  ccg_status st = CCG_STATUS_OK;
  for (size_t c = 0; c < np->n_device_configurations && st == CCG_STATUS_OK;
       c++) {
    const Onnx__NodeDeviceConfigurationProto *dc = np->device_configurations[c];
    at w = {m, np, c, SIZE_MAX};
    const Onnx__DeviceConfigurationProto *cfg =
        config_named(m, cfgs, dc->configuration_id);
    if (!cfg)
      st = bad(&w, CCG_STATUS_PARSE,
               ".configuration_id '%s' names no configuration of the model",
               dc->configuration_id ? dc->configuration_id : "");
    else if (dc->has_pipeline_stage && dc->pipeline_stage < 0)
      st = bad(&w, CCG_STATUS_PARSE, ".pipeline_stage is %d",
               (int)dc->pipeline_stage);
    for (size_t s = 0; st == CCG_STATUS_OK && s < dc->n_sharding_spec; s++) {
      w.s = s;
      st = spec_in(&w, dc->sharding_spec[s], names, cfg->num_devices, db,
                   cfg == use);
    }
  }
  ccg__strmap_free(&map);
  return st;
}

ccg_status ccg__onnx_annot_mesh(im *m) {
  int64_t max_dev;
  ccg_strmap cfgs;
  ccg__strmap_init(&cfgs, NULL);
  ccg_status st = configs_in(m, &cfgs, &max_dev);
  ccg__strmap_free(&cfgs);
  CCG_CHECK(st);
  if (ccg_graph_mesh(m->g) || !m->m->n_configuration)
    return CCG_STATUS_OK;
  return mesh_in(m, m->m->configuration[0]);
}

static ccg_status annot_in(im *m, const ccg_strmap *cfgs, int64_t max_dev,
                           bool restore_placements) {
  bool any = false;
  for (size_t i = 0; i < m->gp->n_node && !any; i++)
    any = m->gp->node[i]->n_device_configurations > 0;
  if (!any)
    return CCG_STATUS_OK;
  /* Placements come from the model's first configuration. */
  const Onnx__DeviceConfigurationProto *use =
      restore_placements && m->m->n_configuration ? m->m->configuration[0]
                                                  : NULL;
  if (use && ccg_mesh_world_size(ccg_graph_mesh(m->g)) != use->num_devices)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: configuration '%s' has %d devices, the mesh %lld",
                      m->src.what, use->name, (int)use->num_devices,
                      (long long)ccg_mesh_world_size(ccg_graph_mesh(m->g)));
  devbuf db = {ccg__arena_calloc(&m->a, (size_t)max_dev + 1, 8),
               ccg__arena_calloc(&m->a, (size_t)max_dev + 1, 8), 0};
  if (!db.owner || !db.touched)
    return ccg__error(NULL, CCG_STATUS_OOM, "%s: %lld devices", m->src.what,
                      (long long)max_dev);
  for (int64_t r = 0; r < max_dev; r++)
    db.owner[r] = -1;
  ccg_status st = CCG_STATUS_OK;
  for (size_t i = 0; i < m->gp->n_node && st == CCG_STATUS_OK; i++)
    st = node_in(m, m->gp->node[i], cfgs, use, &db);
  return st;
}

ccg_status ccg__onnx_annot_in(im *m, bool restore_placements) {
  int64_t max_dev;
  ccg_strmap cfgs;
  ccg__strmap_init(&cfgs, NULL);
  ccg_status st = configs_in(m, &cfgs, &max_dev);
  if (st == CCG_STATUS_OK)
    st = annot_in(m, &cfgs, max_dev, restore_placements);
  ccg__strmap_free(&cfgs);
  return st;
}
