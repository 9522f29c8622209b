/* Model metadata that carries what ONNX has no field for: placements and
 * mapping tags, as JSON in model-level metadata_props (node-level
 * metadata_props only exist from IR 10, and the default export is IR 8).
 * Arrays in graph order, so equal graphs give equal bytes. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/internal.h"

static ccg_status dump_json(ccg_graph *g, ccg_arena *a, json_t *root,
                            const char *what, const char **out) {
  char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
  json_decref(root);
  if (!text)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "writing %s metadata", what);
  *out = ccg__arena_strdup(a, text);
  free(text);
  return *out
             ? CCG_STATUS_OK
             : ccg__error(&g->ctx, CCG_STATUS_OOM, "writing %s metadata", what);
}

static void placement_text(const ccg_placement *p, char *buf, size_t size) {
  switch (p->kind) {
  case CCG_PLACEMENT_SHARD:
    snprintf(buf, size, "S(%d)", p->dim);
    break;
  case CCG_PLACEMENT_PARTIAL:
    snprintf(buf, size, "P(%s)", ccg_reduce_op_name(p->reduce));
    break;
  default:
    snprintf(buf, size, "R");
    break;
  }
}

ccg_status ccg__onnx_meta_placements(ccg_graph *g, ccg_arena *a,
                                     const char **out) {
  *out = NULL;
  json_t *arr = NULL;
  for (ccg_value_id v = 0; v < ccg_graph_num_values(g); v++) {
    ccg_placement p[CCG_MAX_MESH_AXES];
    int n = ccg_value_placements(g, v, p);
    if (n == 0)
      continue;
    if (!arr && !(arr = json_array()))
      return ccg__error(&g->ctx, CCG_STATUS_OOM, "writing placements");
    json_t *list = json_array();
    for (int i = 0; list && i < n; i++) {
      char buf[32];
      placement_text(&p[i], buf, sizeof buf);
      json_array_append_new(list, json_string(buf));
    }
    json_t *o = json_pack("{s:s, s:o}", "value", ccg_value_name(g, v),
                          "placements", list);
    if (!o || json_array_append_new(arr, o) != 0) {
      json_decref(arr);
      return ccg__error(&g->ctx, CCG_STATUS_OOM, "writing placements");
    }
  }
  return arr ? dump_json(g, a, arr, "placement", out) : CCG_STATUS_OK;
}

ccg_status ccg__onnx_meta_tags(ccg_graph *g, ccg_arena *a, const char **out) {
  *out = NULL;
  json_t *arr = NULL;
  for (ccg_node_id n = 0; n < ccg_graph_num_nodes(g); n++) {
    const ccg_tag *t = ccg_node_tag(g, n);
    if (!t)
      continue;
    if (!arr && !(arr = json_array()))
      return ccg__error(&g->ctx, CCG_STATUS_OOM, "writing mapping tags");
    json_t *o = json_pack("{s:s, s:s, s:I, s:b}", "node", ccg_node_name(g, n),
                          "mapping", t->mapping ? t->mapping : "", "instance",
                          (json_int_t)t->instance, "backward", t->backward);
    if (o && t->params)
      json_object_set_new(o, "params", json_string(t->params));
    if (!o || json_array_append_new(arr, o) != 0) {
      json_decref(arr);
      return ccg__error(&g->ctx, CCG_STATUS_OOM, "writing mapping tags");
    }
  }
  return arr ? dump_json(g, a, arr, "mapping tag", out) : CCG_STATUS_OK;
}

/* Node metadata of ccgraph's own ("ccgraph." keys: schedule slots, the
 * pipeline stage) as {"node": name, key: value, ...}. */
ccg_status ccg__onnx_meta_slots(ccg_graph *g, ccg_arena *a, const char **out) {
  *out = NULL;
  json_t *arr = NULL;
  for (ccg_node_id n = 0; n < ccg_graph_num_nodes(g); n++) {
    json_t *o = NULL;
    const char *key, *val;
    for (size_t i = 0; (key = ccg_node_meta_at(g, n, i, &val)) != NULL; i++) {
      if (strncmp(key, "ccgraph.", 8) != 0)
        continue;
      if (!o && !(o = json_pack("{s:s}", "node", ccg_node_name(g, n))))
        break;
      json_object_set_new(o, key, json_string(val));
    }
    if (!o)
      continue;
    if ((!arr && !(arr = json_array())) || json_array_append_new(arr, o)) {
      json_decref(arr);
      return ccg__error(&g->ctx, CCG_STATUS_OOM, "writing node metadata");
    }
  }
  return arr ? dump_json(g, a, arr, "node metadata", out) : CCG_STATUS_OK;
}

/* ---- import ------------------------------------------------------------- */

static json_t *load_array(const char *json, const char *key, const char *what) {
  json_error_t err;
  json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    ccg__error(NULL, CCG_STATUS_PARSE, "%s: metadata '%s': %s (column %d)",
               what, key, err.text, err.column);
    return NULL;
  }
  if (!json_is_array(root)) {
    json_decref(root);
    ccg__error(NULL, CCG_STATUS_PARSE, "%s: metadata '%s' is not an array",
               what, key);
    return NULL;
  }
  return root;
}

static ccg_status parse_placement(const char *s, ccg_placement *p) {
  memset(p, 0, sizeof *p);
  if (strcmp(s, "R") == 0) {
    p->kind = CCG_PLACEMENT_REPLICATE;
    return CCG_STATUS_OK;
  }
  size_t n = strlen(s);
  if (n < 4 || s[1] != '(' || s[n - 1] != ')')
    return CCG_STATUS_PARSE;
  char inner[32];
  if (n - 3 >= sizeof inner)
    return CCG_STATUS_PARSE;
  memcpy(inner, s + 2, n - 3);
  inner[n - 3] = '\0';
  if (s[0] == 'S') {
    char *end;
    long d = strtol(inner, &end, 10);
    if (*end || d < 0 || d >= CCG_MAX_RANK)
      return CCG_STATUS_PARSE;
    p->kind = CCG_PLACEMENT_SHARD;
    p->dim = (int)d;
    return CCG_STATUS_OK;
  }
  if (s[0] == 'P' && ccg_reduce_op_parse(inner, &p->reduce) == CCG_STATUS_OK) {
    p->kind = CCG_PLACEMENT_PARTIAL;
    return CCG_STATUS_OK;
  }
  return CCG_STATUS_PARSE;
}

ccg_status ccg__onnx_restore_placements(ccg_graph *g, const char *json,
                                        const char *what) {
  json_t *arr = load_array(json, CCG__META_PLACEMENTS, what);
  if (!arr)
    return ccg_last_status(NULL);
  ccg_status st = CCG_STATUS_OK;
  size_t i;
  json_t *o;
  json_array_foreach(arr, i, o) {
    const char *name = json_string_value(json_object_get(o, "value"));
    json_t *list = json_object_get(o, "placements");
    ccg_value_id v;
    if (!name || !json_is_array(list) ||
        json_array_size(list) > CCG_MAX_MESH_AXES) {
      st = ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s': entry %zu is malformed", what,
                      CCG__META_PLACEMENTS, i);
      break;
    }
    if (!ccg__strmap_get(&g->value_names, name, &v)) {
      st = ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s' names value '%s', which the graph "
                      "does not have",
                      what, CCG__META_PLACEMENTS, name);
      break;
    }
    ccg_placement p[CCG_MAX_MESH_AXES];
    size_t k;
    json_t *e;
    json_array_foreach(list, k, e) {
      const char *s = json_string_value(e);
      if (!s || parse_placement(s, &p[k]) != CCG_STATUS_OK) {
        st = ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: metadata '%s': value '%s' has placement '%s'",
                        what, CCG__META_PLACEMENTS, name, s ? s : "?");
        goto out;
      }
    }
    if (ccg_value_set_placements(g, v, p, (int)json_array_size(list)) !=
        CCG_STATUS_OK) {
      ccg__error_copy(NULL, &g->ctx);
      st = ccg__error_prefix(NULL, "%s: metadata '%s'", what,
                             CCG__META_PLACEMENTS);
      break;
    }
  }
out:
  json_decref(arr);
  return st;
}

ccg_status ccg__onnx_restore_tags(ccg_graph *g, const char *json,
                                  const char *what) {
  json_t *arr = load_array(json, CCG__META_TAGS, what);
  if (!arr)
    return ccg_last_status(NULL);
  ccg_status st = CCG_STATUS_OK;
  size_t i;
  json_t *o;
  json_array_foreach(arr, i, o) {
    const char *node = json_string_value(json_object_get(o, "node"));
    const char *mapping = json_string_value(json_object_get(o, "mapping"));
    json_t *inst = json_object_get(o, "instance");
    json_t *bw = json_object_get(o, "backward");
    json_t *params = json_object_get(o, "params");
    ccg_node_id n;
    if (!node || !mapping || !json_is_integer(inst) || !json_is_boolean(bw) ||
        (params && !json_is_string(params)) || json_integer_value(inst) < 0 ||
        json_integer_value(inst) > (json_int_t)UINT32_MAX) {
      st = ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s': entry %zu is malformed", what,
                      CCG__META_TAGS, i);
      break;
    }
    if (!ccg__strmap_get(&g->node_names, node, &n)) {
      st = ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s' names node '%s', which the graph "
                      "does not have",
                      what, CCG__META_TAGS, node);
      break;
    }
    ccg_tag t = {mapping, (uint32_t)json_integer_value(inst),
                 params ? json_string_value(params) : NULL, json_is_true(bw)};
    if (ccg_node_set_tag(g, n, &t) != CCG_STATUS_OK) {
      ccg__error_copy(NULL, &g->ctx);
      st = ccg__error_prefix(NULL, "%s: metadata '%s'", what, CCG__META_TAGS);
      break;
    }
  }
  json_decref(arr);
  return st;
}

ccg_status ccg__onnx_restore_slots(ccg_graph *g, const char *json,
                                   const char *what) {
  json_t *arr = load_array(json, CCG__META_SLOTS, what);
  if (!arr)
    return ccg_last_status(NULL);
  ccg_status st = CCG_STATUS_OK;
  size_t i;
  json_t *o;
  json_array_foreach(arr, i, o) {
    const char *node = json_string_value(json_object_get(o, "node"));
    ccg_node_id n;
    if (!node || !ccg__strmap_get(&g->node_names, node, &n)) {
      st = ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s': entry %zu names no node of the "
                      "graph",
                      what, CCG__META_SLOTS, i);
      break;
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
      if (strcmp(key, "node") == 0)
        continue;
      if (strncmp(key, "ccgraph.", 8) != 0 || !json_is_string(v)) {
        st = ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: metadata '%s': entry %zu: '%s' is not a "
                        "ccgraph.* key with a string value",
                        what, CCG__META_SLOTS, i, key);
        break;
      }
      if (ccg_node_set_meta(g, n, key, json_string_value(v))) {
        st = ccg__error(NULL, CCG_STATUS_OOM, "%s: restoring metadata", what);
        break;
      }
    }
    if (st != CCG_STATUS_OK)
      break;
  }
  json_decref(arr);
  return st;
}
