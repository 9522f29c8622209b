/* Model metadata that carries what ONNX has no field for: placements and
 * mapping tags, as JSON in model-level metadata_props (node-level
 * metadata_props only exist from IR 10, and the default export is IR 8).
 * Arrays in graph order, so equal graphs give equal bytes. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/jtext.h"
#include "onnx/internal.h"

/* The export writes the JSON text directly, as jansson's compact dump of
 * the same arrays would (object keys in insertion order, strings escaped
 * the same way): building a jansson tree per value cost more than the rest
 * of the export. */
typedef ccg__jtext jbuf;

/* ,"key":"value" — a member of the object open. */
static void jb_member(jbuf *b, const char *key, const char *value) {
  ccg__jtext_put(b, ",", 1);
  ccg__jtext_str(b, key);
  ccg__jtext_put(b, ":", 1);
  ccg__jtext_str(b, value);
}

/* Opens the array's next object with its first member, key: name (the
 * node or value it describes). */
static void jb_open(jbuf *b, const char *key, const char *name) {
  ccg__jtext_put(b, b->n ? ",{" : "[{", 2);
  ccg__jtext_str(b, key);
  ccg__jtext_put(b, ":", 1);
  ccg__jtext_str(b, name);
}

/* Closes the array, if any object was opened (none: the graph has none of
 * this metadata, b->n stays 0). */
static ccg_status jb_done(ccg_graph *g, jbuf *b, const char *what) {
  if (b->n)
    ccg__jtext_put(b, "]", 1);
  return b->bad
             ? ccg__error(&g->ctx, CCG_STATUS_OOM, "writing %s metadata", what)
             : CCG_STATUS_OK;
}

/* "S(0)", "P(sum)" or "R", as a JSON string. */
static void placement_text(jbuf *b, const ccg_placement *p) {
  switch (p->kind) {
  case CCG_PLACEMENT_SHARD:
    ccg__jtext_put(b, "\"S(", 3);
    ccg__jtext_int(b, p->dim);
    ccg__jtext_put(b, ")\"", 2);
    break;
  case CCG_PLACEMENT_PARTIAL: {
    char buf[32];
    snprintf(buf, sizeof buf, "P(%s)", ccg_reduce_op_name(p->reduce));
    ccg__jtext_str(b, buf);
    break;
  }
  default:
    ccg__jtext_put(b, "\"R\"", 3);
    break;
  }
}

/* The length of s when ccg__jtext_str writes it unchanged (printable
 * ASCII without '"' or '\\'), else SIZE_MAX. */
static size_t plain_len(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  for (; *p; p++)
    if (*p < 0x20 || *p == '"' || *p == '\\' || *p >= 0x80)
      return SIZE_MAX;
  return (size_t)(p - (const unsigned char *)s);
}

enum { PLAIN_NAME_MAX = 160 };

/* Value v's object as jb_open and placement_text write it, made on the
 * stack and appended at once; false (nothing written) for a name that
 * needs escaping or is long, or a Partial placement. A sharded graph has
 * an object per value: this is most of the text. */
static bool placement_line(jbuf *b, const char *name, const ccg_placement *p,
                           int n) {
  char line[11 + PLAIN_NAME_MAX + 16 + 8 * CCG_MAX_MESH_AXES + 2];
  size_t k = plain_len(name);
  if (k > PLAIN_NAME_MAX)
    return false;
  char *q = line;
  memcpy(q, b->n ? ",{\"value\":\"" : "[{\"value\":\"", 11);
  q += 11;
  memcpy(q, name, k);
  q += k;
  memcpy(q, "\",\"placements\":[", 16);
  q += 16;
  for (int i = 0; i < n; i++) {
    if (i)
      *q++ = ',';
    if (p[i].kind == CCG_PLACEMENT_SHARD && p[i].dim >= 0 && p[i].dim < 100) {
      memcpy(q, "\"S(", 3);
      q += 3;
      if (p[i].dim >= 10)
        *q++ = (char)('0' + p[i].dim / 10);
      *q++ = (char)('0' + p[i].dim % 10);
      memcpy(q, ")\"", 2);
      q += 2;
    } else if (p[i].kind == CCG_PLACEMENT_REPLICATE) {
      memcpy(q, "\"R\"", 3);
      q += 3;
    } else {
      return false;
    }
  }
  memcpy(q, "]}", 2);
  q += 2;
  ccg__jtext_put(b, line, (size_t)(q - line));
  return true;
}

/* [{"value":NAME,"placements":["S(0)","R"]},...] */
ccg_status ccg__onnx_meta_placements(ccg_graph *g, ccg__jtext *out) {
  jbuf *b = out;
  size_t nv = ccg_graph_num_values(g);
  for (ccg_value_id v = 0; v < nv; v++) {
    /* the names of a large graph are not in the cache: each is asked for
     * a few values ahead, while the values before it are written */
    if (v + 8 < nv)
      __builtin_prefetch(g->values[v + 8].name);
    ccg_placement p[CCG_MAX_MESH_AXES];
    int n = ccg_value_placements(g, v, p);
    if (n == 0 || placement_line(b, ccg_value_name(g, v), p, n))
      continue;
    jb_open(b, "value", ccg_value_name(g, v));
    ccg__jtext_lit(b, ",\"placements\":[");
    for (int i = 0; i < n; i++) {
      if (i)
        ccg__jtext_put(b, ",", 1);
      placement_text(b, &p[i]);
    }
    ccg__jtext_lit(b, "]}");
  }
  return jb_done(g, b, "placement");
}

/* [{"node":NAME,"mapping":M,"instance":K,"backward":B[,"params":P]},...] */
ccg_status ccg__onnx_meta_tags(ccg_graph *g, ccg__jtext *out) {
  jbuf *b = out;
  for (ccg_node_id n = 0; n < ccg_graph_num_nodes(g); n++) {
    const ccg_tag *t = ccg_node_tag(g, n);
    if (!t)
      continue;
    jb_open(b, "node", ccg_node_name(g, n));
    jb_member(b, "mapping", t->mapping ? t->mapping : "");
    ccg__jtext_lit(b, ",\"instance\":");
    ccg__jtext_int(b, t->instance);
    ccg__jtext_lit(b,
                   t->backward ? ",\"backward\":true" : ",\"backward\":false");
    if (t->params)
      jb_member(b, "params", t->params);
    ccg__jtext_put(b, "}", 1);
  }
  return jb_done(g, b, "mapping tag");
}

/* Node metadata of ccgraph's own ("ccgraph." keys: schedule slots, the
 * pipeline stage) as {"node": name, key: value, ...}. */
ccg_status ccg__onnx_meta_slots(ccg_graph *g, ccg__jtext *out) {
  jbuf *b = out;
  for (ccg_node_id n = 0; n < ccg_graph_num_nodes(g); n++) {
    const char *key, *val;
    bool open = false;
    for (size_t i = 0; (key = ccg_node_meta_at(g, n, i, &val)) != NULL; i++) {
      if (strncmp(key, "ccgraph.", 8) != 0)
        continue;
      if (!open) {
        jb_open(b, "node", ccg_node_name(g, n));
        open = true;
      }
      jb_member(b, key, val);
    }
    if (open)
      ccg__jtext_put(b, "}", 1);
  }
  return jb_done(g, b, "node");
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

/* Runs `entry` on every element of the JSON array stored under metadata
 * key `key`, stopping at the first failure (whose message names `what`). */
typedef ccg_status (*restore_fn)(ccg_graph *g, json_t *o, size_t i,
                                 const char *what);

static ccg_status restore_each(ccg_graph *g, const char *json, const char *key,
                               const char *what, restore_fn entry) {
  json_t *arr = load_array(json, key, what);
  if (!arr)
    return ccg_last_status(NULL);
  ccg_status st = CCG_STATUS_OK;
  size_t i;
  json_t *o;
  json_array_foreach(arr, i, o) {
    st = entry(g, o, i, what);
    if (st != CCG_STATUS_OK)
      break;
  }
  json_decref(arr);
  return st;
}

static ccg_status restore_placement(ccg_graph *g, json_t *o, size_t i,
                                    const char *what) {
  const char *name = json_string_value(json_object_get(o, "value"));
  json_t *list = json_object_get(o, "placements");
  ccg_value_id v;
  if (!name || !json_is_array(list) ||
      json_array_size(list) > CCG_MAX_MESH_AXES)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s': entry %zu is malformed", what,
                      CCG__META_PLACEMENTS, i);
  if (!ccg__strmap_get(&g->value_names, name, &v))
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s' names value '%s', which the graph "
                      "does not have",
                      what, CCG__META_PLACEMENTS, name);
  ccg_placement p[CCG_MAX_MESH_AXES];
  size_t k;
  json_t *e;
  json_array_foreach(list, k, e) {
    const char *s = json_string_value(e);
    if (!s || parse_placement(s, &p[k]) != CCG_STATUS_OK)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: metadata '%s': value '%s' has placement '%s'",
                        what, CCG__META_PLACEMENTS, name, s ? s : "?");
  }
  if (ccg_value_set_placements(g, v, p, (int)json_array_size(list)) !=
      CCG_STATUS_OK) {
    ccg__error_copy(NULL, &g->ctx);
    return ccg__error_prefix(NULL, "%s: metadata '%s'", what,
                             CCG__META_PLACEMENTS);
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_restore_placements(ccg_graph *g, const char *json,
                                        const char *what) {
  return restore_each(g, json, CCG__META_PLACEMENTS, what, restore_placement);
}

static ccg_status restore_tag(ccg_graph *g, json_t *o, size_t i,
                              const char *what) {
  const char *node = json_string_value(json_object_get(o, "node"));
  const char *mapping = json_string_value(json_object_get(o, "mapping"));
  json_t *inst = json_object_get(o, "instance");
  json_t *bw = json_object_get(o, "backward");
  json_t *params = json_object_get(o, "params");
  ccg_node_id n;
  if (!node || !mapping || !json_is_integer(inst) || !json_is_boolean(bw) ||
      (params && !json_is_string(params)) || json_integer_value(inst) < 0 ||
      json_integer_value(inst) > (json_int_t)UINT32_MAX)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s': entry %zu is malformed", what,
                      CCG__META_TAGS, i);
  if (!ccg__strmap_get(&g->node_names, node, &n))
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s' names node '%s', which the graph "
                      "does not have",
                      what, CCG__META_TAGS, node);
  ccg_tag t = {mapping, (uint32_t)json_integer_value(inst),
               params ? json_string_value(params) : NULL, json_is_true(bw)};
  if (ccg_node_set_tag(g, n, &t) != CCG_STATUS_OK) {
    ccg__error_copy(NULL, &g->ctx);
    return ccg__error_prefix(NULL, "%s: metadata '%s'", what, CCG__META_TAGS);
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_restore_tags(ccg_graph *g, const char *json,
                                  const char *what) {
  return restore_each(g, json, CCG__META_TAGS, what, restore_tag);
}

static ccg_status restore_slot(ccg_graph *g, json_t *o, size_t i,
                               const char *what) {
  const char *node = json_string_value(json_object_get(o, "node"));
  ccg_node_id n;
  if (!node || !ccg__strmap_get(&g->node_names, node, &n))
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: metadata '%s': entry %zu names no node of the "
                      "graph",
                      what, CCG__META_SLOTS, i);
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (strcmp(key, "node") == 0)
      continue;
    if (strncmp(key, "ccgraph.", 8) != 0 || !json_is_string(v))
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: metadata '%s': entry %zu: '%s' is not a "
                        "ccgraph.* key with a string value",
                        what, CCG__META_SLOTS, i, key);
    if (ccg_node_set_meta(g, n, key, json_string_value(v)))
      return ccg__error(NULL, CCG_STATUS_OOM, "%s: restoring metadata", what);
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_restore_slots(ccg_graph *g, const char *json,
                                   const char *what) {
  return restore_each(g, json, CCG__META_SLOTS, what, restore_slot);
}
