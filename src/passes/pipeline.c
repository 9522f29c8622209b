/* Pipeline split: finds the repeated layer modules from module paths,
 * assigns every node a stage (layers by a contiguous partition, balanced by
 * estimated compute or given; the rest by what it reads and who reads it),
 * and the schedule steps of each microbatch. pipeline_build.c writes the
 * stage graphs. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/module_path.h"
#include "passes/pipeline_internal.h"

/* ---- schedules ----------------------------------------------------------- */

static const char *const schedule_names[] = {"gpipe", "1f1b"};
static_assert(sizeof schedule_names / sizeof *schedule_names ==
                  CCG_PIPELINE_SCHEDULE_COUNT,
              "one name per schedule");

int ccg_pipeline_schedule_parse(const char *s, ccg_pipeline_schedule *out) {
  for (int i = 0; s && i < CCG_PIPELINE_SCHEDULE_COUNT; i++)
    if (strcmp(s, schedule_names[i]) == 0) {
      *out = (ccg_pipeline_schedule)i;
      return 0;
    }
  return -1;
}

const char *ccg_pipeline_schedule_name(ccg_pipeline_schedule s) {
  return (unsigned)s < CCG_PIPELINE_SCHEDULE_COUNT ? schedule_names[s] : "?";
}

/* GPipe: F0..F(M-1) then B0..B(M-1). 1F1B: w = min(p-1-stage, M) warm-up
 * forwards, then F(w+i) B(i) pairs, then the remaining backwards. Both
 * run the backwards in microbatch order, so every stage boundary carries
 * its messages in the same order on both sides. */
int64_t ccg_pipeline_step(ccg_pipeline_schedule s, int64_t p, int64_t stage,
                          int64_t M, int64_t m, bool backward) {
  if (s == CCG_PIPELINE_GPIPE)
    return backward ? M + m : m;
  int64_t w = p - 1 - stage < M ? p - 1 - stage : M;
  if (!backward)
    return m < w ? m : w + 2 * (m - w);
  /* B(i) follows F(w+i) while there are forwards left */
  return m < M - w ? w + 2 * m + 1 : 2 * M - (M - m);
}

double ccg_pipeline_bubble(const double *cost, int64_t p, int64_t M) {
  double sum = 0, max = 0;
  for (int64_t s = 0; s < p; s++) {
    sum += cost[s];
    max = cost[s] > max ? cost[s] : max;
  }
  double T = sum + (double)(M - 1) * max;
  if (p < 1 || M < 1 || T <= 0)
    return 0;
  return 1.0 - (double)M * sum / ((double)p * T);
}

double ccg_node_cost(ccg_graph *g, ccg_node_id n) {
  double flops = 0, bytes = 0;
  for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++) {
    ccg_value_id v = ccg_node_output(g, n, i);
    int64_t numel;
    if (v == CCG_NONE ||
        ccg_shape_numel(ccg_value_shape(g, v), &numel) != CCG_STATUS_OK)
      continue;
    bytes += (double)numel * (double)ccg_dtype_size(ccg_value_dtype(g, v));
    flops += (double)numel;
    ccg_op op = ccg_node_op(g, n);
    if ((op == CCG_OP_MATMUL || op == CCG_OP_GEMM) && i == 0) {
      const ccg_shape *a = ccg_value_shape(g, ccg_node_input(g, n, 0));
      int64_t trans = 0;
      if (op == CCG_OP_GEMM)
        ccg_node_attr_int(g, n, "transA", &trans);
      int k = a->rank == 0 ? 0 : trans ? a->rank - 2 : a->rank - 1;
      if (a->rank > 0 && k >= 0 && !ccg_dim_is_sym(a->dims[k]))
        flops = 2.0 * (double)numel * (double)a->dims[k].size;
    }
  }
  return flops + bytes;
}

bool ccg_pipeline_info_of(const ccg_graph *g, ccg_pipeline_info *out) {
  for (ccg_node_id n = 0; n < ccg_graph_num_nodes(g); n++) {
    const char *t = ccg_node_meta(g, n, CCG_META_PIPELINE);
    long long s, p, m;
    char sch[16];
    if (t &&
        sscanf(t, "stage=%lld,stages=%lld,microbatches=%lld,schedule=%15s", &s,
               &p, &m, sch) == 4 &&
        s >= 0 && s < p && m >= 1 &&
        ccg_pipeline_schedule_parse(sch, &out->schedule) == 0) {
      out->stage = s;
      out->n_stages = p;
      out->microbatches = m;
      return true;
    }
  }
  return false;
}

/* ---- layers ---------------------------------------------------------------
 */

static const char *const layer_lists[] = {"h", "layers", "layer", "block",
                                          "blocks"};

/* The layer of a module path ("transformer.h.3.attn" -> "transformer.h.3")
 * into buf; false when it is in none. */
static bool layer_key(const char *module, char *buf, size_t size) {
  const char *p = module;
  while (*p) {
    const char *end = strchr(p, '.');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    for (size_t k = 0; end && k < sizeof layer_lists / sizeof *layer_lists;
         k++) {
      if (strlen(layer_lists[k]) != len || strncmp(p, layer_lists[k], len))
        continue;
      const char *d = end + 1;
      size_t nd = strspn(d, "0123456789");
      if (nd == 0 || (d[nd] != '.' && d[nd] != '\0'))
        continue;
      size_t n = (size_t)(d + nd - module);
      if (n >= size)
        return false;
      memcpy(buf, module, n);
      buf[n] = '\0';
      return true;
    }
    if (!end)
      break;
    p = end + 1;
  }
  return false;
}

static ccg_status find_layers(pp_plan *pl) {
  ccg_graph *g = pl->g;
  pl->layers = calloc(pl->nn + 1, sizeof *pl->layers);
  pl->layer_of = malloc((pl->nn + 1) * sizeof *pl->layer_of);
  if (!pl->layers || !pl->layer_of)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  for (size_t k = 0; k < pl->nn; k++) {
    ccg_node_id n = pl->order[k];
    char mod[PP_NAME_MAX], key[PP_NAME_MAX];
    pl->layer_of[n] = -1;
    ccg__node_module(g, n, mod, sizeof mod);
    if (!layer_key(mod, key, sizeof key))
      continue;
    size_t i = 0;
    while (i < pl->n_layers && strcmp(pl->layers[i], key) != 0)
      i++;
    if (i == pl->n_layers)
      snprintf(pl->layers[pl->n_layers++], PP_NAME_MAX, "%s", key);
    pl->layer_of[n] = (int)i;
  }
  if (pl->n_layers == 0)
    return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED,
                      "pipeline: graph '%s' has no repeated layer modules "
                      "(h.N, layers.N, layer.N, block.N in node names or "
                      "module metadata); give the stages with --stages",
                      ccg_graph_name(g));
  if ((int64_t)pl->n_layers < pl->p)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "pipeline: %lld stages on axis '%s' but the model has "
                      "%zu layers (%s .. %s); a stage needs at least one",
                      (long long)pl->p, pl->axis, pl->n_layers, pl->layers[0],
                      pl->layers[pl->n_layers - 1]);
  return CCG_STATUS_OK;
}
/* Why a batch may be smaller than the model's: microbatches split each
 * rank's chunk of an input sharded over a mesh axis (the data axis). */
static const char *split_note(ccg_graph *g, ccg_value_id v) {
  ccg_placement p[CCG_MAX_MESH_AXES];
  int n = ccg_value_placements(g, v, p);
  for (int a = 0; a < n; a++)
    if (p[a].kind == CCG_PLACEMENT_SHARD && p[a].dim == 0)
      return ": each rank's chunk of the batch, split over a mesh axis "
             "first; microbatches divide that chunk";
  return "";
}

/* ---- values: constants, batch, needed ----------------------------------- */

static ccg_status mark_values(pp_plan *pl) {
  ccg_graph *g = pl->g;
  size_t nv = pl->nv;
  pl->is_const = calloc(nv + 1, sizeof *pl->is_const);
  pl->batch = calloc(nv + 1, sizeof *pl->batch);
  pl->needed = calloc(nv + 1, sizeof *pl->needed);
  pl->data = calloc(nv + 1, sizeof *pl->data);
  if (!pl->is_const || !pl->batch || !pl->needed || !pl->data)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  /* the batch: dim 0 of the first input that has one */
  const char *batch_input = NULL;
  for (size_t i = 0; i < ccg_graph_num_inputs(g); i++) {
    ccg_value_id v = ccg_graph_input(g, i);
    const ccg_shape *s = ccg_value_shape(g, v);
    if (s->rank < 1)
      continue;
    if (!batch_input) {
      batch_input = ccg_value_name(g, v);
      if (ccg_dim_is_sym(s->dims[0])) {
        if (pl->M > 1)
          return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                            "pipeline: --microbatches %lld needs the batch "
                            "(dim 0 of input '%s') as a number; it is '%s'",
                            (long long)pl->M, batch_input, s->dims[0].sym);
        continue;
      }
      pl->batch_size = s->dims[0].size;
      if (pl->batch_size % pl->M != 0)
        return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                          "pipeline: %lld microbatches do not divide the "
                          "batch of %lld (dim 0 of input '%s'%s)",
                          (long long)pl->M, (long long)pl->batch_size,
                          batch_input, split_note(g, v));
    }
    if (!ccg_dim_is_sym(s->dims[0]) && s->dims[0].size == pl->batch_size)
      pl->batch[v] = pl->data[v] = true;
  }
  for (size_t k = 0; k < pl->nn; k++) {
    ccg_node_id n = pl->order[k];
    bool cst = true, b = false, d = false;
    for (size_t i = 0; i < ccg_node_num_inputs(g, n); i++) {
      ccg_value_id v = ccg_node_input(g, n, i);
      if (v == CCG_NONE)
        continue;
      cst &= pl->is_const[v];
      b |= pl->batch[v];
      d |= pl->data[v];
    }
    ccg_op op = ccg_node_op(g, n);
    d &= op != CCG_OP_SHAPE && op != CCG_OP_SIZE;
    for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++) {
      ccg_value_id v = ccg_node_output(g, n, i);
      if (v != CCG_NONE) {
        pl->is_const[v] = cst;
        pl->batch[v] = b;
        pl->data[v] = d;
      }
    }
  }
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++)
    pl->needed[ccg_graph_output(g, i)] = true;
  for (size_t k = pl->nn; k-- > 0;) {
    ccg_node_id n = pl->order[k];
    bool need = false;
    for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++) {
      ccg_value_id v = ccg_node_output(g, n, i);
      need |= v != CCG_NONE && pl->needed[v];
    }
    for (size_t i = 0; need && i < ccg_node_num_inputs(g, n); i++) {
      ccg_value_id v = ccg_node_input(g, n, i);
      if (v != CCG_NONE)
        pl->needed[v] = true;
    }
  }
  return CCG_STATUS_OK;
}

/* ---- partition ------------------------------------------------------------
 */

/* The first layer whose path is `name` or ends in ".name"; -1 if none. */
static int layer_named(const pp_plan *pl, const char *name, size_t len) {
  for (size_t i = 0; i < pl->n_layers; i++) {
    const char *l = pl->layers[i];
    size_t n = strlen(l);
    if (n >= len && strncmp(l + n - len, name, len) == 0 &&
        (n == len || l[n - len - 1] == '.'))
      return (int)i;
  }
  return -1;
}

/* --stages 'h.0-h.5|h.6-h.11': contiguous ranges covering every layer. */
static ccg_status given_stages(pp_plan *pl) {
  ccg_graph *g = pl->g;
  const char *spec = pl->o->stages;
  int64_t s = 0;
  int next = 0;
  for (const char *p = spec;; s++) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (s >= pl->p)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "pipeline: --stages '%s' has more than the %lld "
                        "stages of axis '%s'",
                        spec, (long long)pl->p, pl->axis);
    const char *dash = memchr(p, '-', len);
    size_t l1 = dash ? (size_t)(dash - p) : len;
    int a = layer_named(pl, p, l1);
    int b = dash ? layer_named(pl, dash + 1, len - l1 - 1) : a;
    if (a < 0 || b < 0) {
      const char *bad = a < 0 ? p : dash + 1;
      size_t bl = a < 0 ? l1 : len - l1 - 1;
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "pipeline: --stages names '%.*s', which is no layer "
                        "of the model (layers: %s .. %s)",
                        (int)bl, bad, pl->layers[0],
                        pl->layers[pl->n_layers - 1]);
    }
    if (a != next || b < a)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "pipeline: --stages: stage %lld ('%.*s') must start "
                        "at layer %s and end at or after it (stages are "
                        "contiguous, in order)",
                        (long long)s, (int)len, p,
                        pl->layers[next < (int)pl->n_layers ? next : 0]);
    for (int i = a; i <= b; i++)
      pl->layer_stage[i] = (int)s;
    next = b + 1;
    if (!bar)
      break;
    p = bar + 1;
  }
  if (s + 1 != pl->p || next != (int)pl->n_layers)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "pipeline: --stages '%s' gives %lld stages covering "
                      "layers up to %s; axis '%s' has %lld stages and the "
                      "model %zu layers (last %s)",
                      spec, (long long)(s + 1), pl->layers[next - 1], pl->axis,
                      (long long)pl->p, pl->n_layers,
                      pl->layers[pl->n_layers - 1]);
  return CCG_STATUS_OK;
}

/* Contiguous groups minimizing the largest stage cost: stage 0 also runs
 * what comes before the layers (pre), the last stage what comes after
 * (post). */
static ccg_status balance(pp_plan *pl, const double *lc, double pre,
                          double post) {
  size_t L = pl->n_layers;
  int64_t P = pl->p;
  double *best = malloc((size_t)(P + 1) * (L + 1) * sizeof *best);
  int *cut = malloc((size_t)(P + 1) * (L + 1) * sizeof *cut);
  double *pref = malloc((L + 1) * sizeof *pref);
  if (!best || !cut || !pref) {
    free(best), free(cut), free(pref);
    return ccg__error(&pl->g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  }
  pref[0] = 0;
  for (size_t i = 0; i < L; i++)
    pref[i + 1] = pref[i] + lc[i];
#define AT(k, i) ((size_t)(k) * (L + 1) + (i))
  for (int64_t k = 0; k <= P; k++)
    for (size_t i = 0; i <= L; i++)
      best[AT(k, i)] = -1;
  best[AT(0, 0)] = 0;
  for (int64_t k = 1; k <= P; k++)
    for (size_t i = (size_t)k; i <= L; i++)
      for (size_t j = (size_t)k - 1; j < i; j++) {
        if (best[AT(k - 1, j)] < 0)
          continue;
        double c = pref[i] - pref[j];
        c += k == 1 ? pre : 0;
        c += k == P ? post : 0;
        double m = best[AT(k - 1, j)] > c ? best[AT(k - 1, j)] : c;
        if (best[AT(k, i)] < 0 || m < best[AT(k, i)]) {
          best[AT(k, i)] = m;
          cut[AT(k, i)] = (int)j;
        }
      }
  size_t i = L;
  for (int64_t k = P; k >= 1; k--) {
    size_t j = (size_t)cut[AT(k, i)];
    for (size_t l = j; l < i; l++)
      pl->layer_stage[l] = (int)(k - 1);
    i = j;
  }
#undef AT
  free(best), free(cut), free(pref);
  return CCG_STATUS_OK;
}

/* Estimated costs: per layer, and of the rest before and after them. */
static ccg_status partition(pp_plan *pl) {
  ccg_graph *g = pl->g;
  pl->layer_stage = calloc(pl->n_layers + 1, sizeof *pl->layer_stage);
  if (!pl->layer_stage)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  if (pl->o->stages)
    return given_stages(pl);
  double *lc = calloc(pl->n_layers + 1, sizeof *lc);
  bool *after = calloc(pl->nv + 1, sizeof *after); /* depends on a layer */
  if (!lc || !after) {
    free(lc), free(after);
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  }
  double pre = 0, post = 0;
  for (size_t k = 0; k < pl->nn; k++) {
    ccg_node_id n = pl->order[k];
    bool dep = pl->layer_of[n] >= 0;
    for (size_t i = 0; i < ccg_node_num_inputs(g, n); i++) {
      ccg_value_id v = ccg_node_input(g, n, i);
      dep |= v != CCG_NONE && after[v];
    }
    for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++)
      if (ccg_node_output(g, n, i) != CCG_NONE)
        after[ccg_node_output(g, n, i)] = dep;
    double c = ccg_node_cost(g, n);
    if (pl->layer_of[n] >= 0)
      lc[pl->layer_of[n]] += c;
    else if (dep)
      post += c;
    else
      pre += c;
  }
  ccg_status st = balance(pl, lc, pre, post);
  free(lc), free(after);
  return st;
}

/* ---- stages of the other nodes ------------------------------------------ */

/* Layer nodes take their layer's stage; a node reading computed values the
 * latest of their stages; one reading only inputs and weights (embeddings,
 * label handling) the earliest stage that uses it. Nodes computed from
 * constants alone are copied into every stage that uses them. */
static ccg_status assign(pp_plan *pl) {
  ccg_graph *g = pl->g;
  size_t nv = pl->nv, nn = pl->nn;
  pl->node_stage = malloc((nn + 1) * sizeof *pl->node_stage);
  pl->avail = malloc((nv + 1) * sizeof *pl->avail);
  pl->last_use = malloc((nv + 1) * sizeof *pl->last_use);
  if (!pl->node_stage || !pl->avail || !pl->last_use)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  for (size_t v = 0; v < nv; v++)
    pl->avail[v] = pl->last_use[v] = -1;
  for (size_t k = 0; k < nn; k++) {
    ccg_node_id n = pl->order[k];
    ccg_value_id o0 = ccg_node_output(g, n, 0);
    bool needed = false;
    for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++) {
      ccg_value_id v = ccg_node_output(g, n, i);
      needed |= v != CCG_NONE && pl->needed[v];
    }
    int s = -1;
    if (!needed)
      s = -2;
    else if (o0 != CCG_NONE && pl->is_const[o0])
      s = -1;
    else if (pl->layer_of[n] >= 0)
      s = pl->layer_stage[pl->layer_of[n]];
    else
      for (size_t i = 0; i < ccg_node_num_inputs(g, n); i++) {
        ccg_value_id v = ccg_node_input(g, n, i);
        if (v != CCG_NONE && ccg_value_producer(g, v) != CCG_NONE &&
            pl->avail[v] > s)
          s = pl->avail[v];
      }
    pl->node_stage[n] = s == -1 && !(o0 != CCG_NONE && pl->is_const[o0])
                            ? -3 /* decided by its users below */
                            : s;
    for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++)
      if (ccg_node_output(g, n, i) != CCG_NONE)
        pl->avail[ccg_node_output(g, n, i)] = s;
  }
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++)
    pl->last_use[ccg_graph_output(g, i)] = (int)(pl->p - 1);
  /* users first: the earliest stage of a node's users (outputs: last) */
  int *first_use = malloc((nv + 1) * sizeof *first_use);
  if (!first_use)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  for (size_t v = 0; v < nv; v++)
    first_use[v] = pl->last_use[v] >= 0 ? (int)pl->p - 1 : (int)pl->p;
  for (size_t k = nn; k-- > 0;) {
    ccg_node_id n = pl->order[k];
    if (pl->node_stage[n] == -3) {
      int s = (int)pl->p - 1;
      for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++) {
        ccg_value_id v = ccg_node_output(g, n, i);
        if (v != CCG_NONE && first_use[v] < s)
          s = first_use[v];
      }
      pl->node_stage[n] = s;
      for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++)
        if (ccg_node_output(g, n, i) != CCG_NONE)
          pl->avail[ccg_node_output(g, n, i)] = s;
    }
    int s = pl->node_stage[n];
    for (size_t i = 0; s >= 0 && i < ccg_node_num_inputs(g, n); i++) {
      ccg_value_id v = ccg_node_input(g, n, i);
      if (v != CCG_NONE && s < first_use[v])
        first_use[v] = s;
    }
  }
  /* initializers live on the first stage that uses them */
  for (size_t i = 0; i < ccg_graph_num_initializers(g); i++) {
    ccg_value_id v = ccg_graph_initializer(g, i);
    pl->avail[v] = first_use[v] < (int)pl->p ? first_use[v] : -1;
  }
  free(first_use);
  /* the last stage each value is used on; a use before the value exists
   * means the layers' order contradicts the data flow */
  for (size_t k = 0; k < nn; k++) {
    ccg_node_id n = pl->order[k];
    int s = pl->node_stage[n];
    for (size_t i = 0; s >= 0 && i < ccg_node_num_inputs(g, n); i++) {
      ccg_value_id v = ccg_node_input(g, n, i);
      if (v == CCG_NONE)
        continue;
      if (pl->avail[v] > s)
        return ccg__error(
            &g->ctx, CCG_STATUS_UNSUPPORTED,
            "pipeline: node '%s' (stage %d) reads '%s', computed on the "
            "later stage %d: the layers are not used in order",
            ccg_node_name(g, n), s, ccg_value_name(g, v), pl->avail[v]);
      if (s > pl->last_use[v])
        pl->last_use[v] = s;
    }
  }
  return CCG_STATUS_OK;
}

/* ---- entry ------------------------------------------------------------- */

static void plan_free(pp_plan *pl) {
  free(pl->order), free(pl->node_stage), free(pl->layer_of);
  free(pl->is_const), free(pl->batch), free(pl->needed), free(pl->data);
  free(pl->avail), free(pl->last_use), free(pl->layers);
  free(pl->layer_stage), free(pl->sent_shape), free(pl->sent_dtype);
  free(pl->sent_known);
}

void ccg_pipeline_stages_free(ccg_graph **stages, size_t n) {
  for (size_t i = 0; stages && i < n; i++)
    ccg_graph_free(stages[i]);
  free(stages);
}

static ccg_status check_options(ccg_graph *g, const ccg_pipeline_options *o,
                                pp_plan *pl) {
  if (!o || o->size < sizeof *o)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "pipeline: options are NULL or their size is wrong "
                      "(use CCG_PIPELINE_OPTIONS_INIT)");
  const ccg_mesh *m = ccg_graph_mesh(g);
  pl->axis = o->axis ? o->axis : "pp";
  int ax = m ? ccg_mesh_axis(m, pl->axis) : -1;
  if (ax < 0)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "pipeline: graph '%s' has no mesh axis '%s'",
                      ccg_graph_name(g), pl->axis);
  pl->mesh = *m;
  pl->p = m->sizes[ax];
  if (pl->p > CCG_PIPELINE_MAX_STAGES)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "pipeline: %lld stages; at most %d", (long long)pl->p,
                      CCG_PIPELINE_MAX_STAGES);
  pl->M = o->microbatches;
  if (pl->M < 1 || pl->M > 4096)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "pipeline: %lld microbatches; give 1 to 4096",
                      (long long)pl->M);
  if ((unsigned)o->schedule >= CCG_PIPELINE_SCHEDULE_COUNT)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "pipeline: schedule %d is none of gpipe, 1f1b",
                      (int)o->schedule);
  return CCG_STATUS_OK;
}

static void fill_report(pp_plan *pl, ccg_pipeline_report *r) {
  memset(r, 0, sizeof *r);
  r->n_stages = pl->p;
  r->n_layers = pl->n_layers;
  r->n_p2p = pl->n_sends;
  for (int64_t s = 0; s < pl->p; s++) {
    int a = -1, b = -1;
    for (size_t i = 0; i < pl->n_layers; i++)
      if (pl->layer_stage[i] == s) {
        a = a < 0 ? (int)i : a;
        b = (int)i;
      }
    snprintf(r->text[2 * s], sizeof r->text[0], "%s",
             a < 0 ? "" : pl->layers[a]);
    snprintf(r->text[2 * s + 1], sizeof r->text[0], "%s",
             b < 0 ? "" : pl->layers[b]);
    r->first_layer[s] = r->text[2 * s];
    r->last_layer[s] = r->text[2 * s + 1];
  }
  for (size_t k = 0; k < pl->nn; k++) {
    ccg_node_id n = pl->order[k];
    if (pl->node_stage[n] >= 0)
      r->stage_cost[pl->node_stage[n]] += ccg_node_cost(pl->g, n);
  }
}

ccg_status ccg_pipeline_split(ccg_graph *g, const ccg_pipeline_options *o,
                              ccg_graph ***stages, size_t *n,
                              ccg_pipeline_report *report) {
  if (!g || !stages || !n)
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "pipeline: NULL argument");
  *stages = NULL;
  *n = 0;
  pp_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.g = g;
  pl.o = o;
  CCG_CHECK(check_options(g, o, &pl));
  pl.nv = ccg_graph_num_values(g);
  pl.nn = ccg_graph_num_nodes(g);
  for (ccg_node_id k = 0; k < pl.nn; k++) {
    const ccg_tag *t = ccg_node_tag(g, k);
    if (t && t->instance > pl.max_instance)
      pl.max_instance = t->instance;
  }
  ccg_graph **out = NULL;
  ccg_status st = CCG_STATUS_OK;
  pl.order = malloc((pl.nn + 1) * sizeof *pl.order);
  pl.sent_shape = calloc((size_t)pl.M * pl.nv + 1, sizeof *pl.sent_shape);
  pl.sent_dtype = calloc((size_t)pl.M * pl.nv + 1, sizeof *pl.sent_dtype);
  pl.sent_known = calloc((size_t)pl.M * pl.nv + 1, sizeof *pl.sent_known);
  out = calloc((size_t)pl.p, sizeof *out);
  if (!pl.order || !pl.sent_shape || !pl.sent_dtype || !pl.sent_known || !out) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
    goto done;
  }
  CCG_CHECK_GOTO(ccg_graph_topo_order(g, pl.order), st, done);
  CCG_CHECK_GOTO(find_layers(&pl), st, done);
  CCG_CHECK_GOTO(mark_values(&pl), st, done);
  CCG_CHECK_GOTO(partition(&pl), st, done);
  CCG_CHECK_GOTO(assign(&pl), st, done);
  for (int64_t s = 0; s < pl.p; s++)
    CCG_CHECK_GOTO(ccg__pp_build_stage(&pl, s, &out[s]), st, done);
  if (report)
    fill_report(&pl, report);
  *stages = out;
  *n = (size_t)pl.p;
  out = NULL;
done:
  ccg_pipeline_stages_free(out, out ? (size_t)pl.p : 0);
  plan_free(&pl);
  return st;
}
