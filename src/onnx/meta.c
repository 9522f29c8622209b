/* Model metadata that carries what ONNX has no field for: placements and
 * mapping tags, as JSON in model-level metadata_props (node-level
 * metadata_props only exist from IR 10, and the default export is IR 8).
 * Arrays in graph order, so equal graphs give equal bytes. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/internal.h"

/* The export writes the JSON text directly, as jansson's compact dump of
 * the same arrays would (object keys in insertion order, strings escaped
 * the same way): building a jansson tree per value cost more than the rest
 * of the export. */
typedef struct jbuf {
  char *p;
  size_t n, cap;
  bool bad; /* out of memory, or a string that is not UTF-8 */
} jbuf;

static void jb_put(jbuf *b, const char *s, size_t n) {
  if (b->bad)
    return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->bad = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

static void jb_lit(jbuf *b, const char *s) { jb_put(b, s, strlen(s)); }

/* Length of the UTF-8 sequence at s (0 if it is not one), as jansson
 * accepts them: no overlong forms, surrogates or code points past
 * U+10FFFF. */
static size_t utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  size_t n;
  uint32_t cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    return 0;
  return n;
}

/* A JSON string: quotes, backslash and control characters escaped. */
static void jb_str(jbuf *b, const char *s) {
  jb_put(b, "\"", 1);
  const unsigned char *p = (const unsigned char *)s;
  while (*p && !b->bad) {
    const unsigned char *run = p;
    while (*p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
      p++;
    jb_put(b, (const char *)run, (size_t)(p - run));
    if (!*p)
      break;
    char esc[8];
    size_t len = 2;
    esc[0] = '\\';
    switch (*p) {
    case '"':
    case '\\':
      esc[1] = (char)*p;
      break;
    case '\b':
      esc[1] = 'b';
      break;
    case '\f':
      esc[1] = 'f';
      break;
    case '\n':
      esc[1] = 'n';
      break;
    case '\r':
      esc[1] = 'r';
      break;
    case '\t':
      esc[1] = 't';
      break;
    default:
      if (*p < 0x20) {
        snprintf(esc, sizeof esc, "\\u%04X", *p);
        len = 6;
      } else {
        len = utf8_len(p);
        if (!len) {
          b->bad = true;
          return;
        }
        jb_put(b, (const char *)p, len);
        p += len;
        continue;
      }
    }
    jb_put(b, esc, len);
    p++;
  }
  jb_put(b, "\"", 1);
}

/* ,"key":"value" — a member of the object open. */
static void jb_member(jbuf *b, const char *key, const char *value) {
  jb_put(b, ",", 1);
  jb_str(b, key);
  jb_put(b, ":", 1);
  jb_str(b, value);
}

/* Opens the array's next object with its first member, key: name (the
 * node or value it describes). */
static void jb_open(jbuf *b, const char *key, const char *name) {
  jb_put(b, b->n ? ",{" : "[{", 2);
  jb_str(b, key);
  jb_put(b, ":", 1);
  jb_str(b, name);
}

/* Closes the array and puts its text into the arena; no object opened
 * leaves *out NULL (the graph has none of this metadata). The buffer is
 * released either way. */
static ccg_status jb_done(ccg_graph *g, ccg_arena *a, jbuf *b, const char *what,
                          const char **out) {
  if (!b->n && !b->bad)
    return CCG_STATUS_OK;
  jb_put(b, "]", 1);
  *out = b->bad ? NULL : ccg__arena_strdup(a, b->p);
  free(b->p);
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

/* [{"value":NAME,"placements":["S(0)","R"]},...] */
ccg_status ccg__onnx_meta_placements(ccg_graph *g, ccg_arena *a,
                                     const char **out) {
  *out = NULL;
  jbuf b = {NULL, 0, 0, false};
  for (ccg_value_id v = 0; v < ccg_graph_num_values(g); v++) {
    ccg_placement p[CCG_MAX_MESH_AXES];
    int n = ccg_value_placements(g, v, p);
    if (n == 0)
      continue;
    jb_open(&b, "value", ccg_value_name(g, v));
    jb_lit(&b, ",\"placements\":[");
    for (int i = 0; i < n; i++) {
      char buf[32];
      placement_text(&p[i], buf, sizeof buf);
      if (i)
        jb_put(&b, ",", 1);
      jb_str(&b, buf);
    }
    jb_lit(&b, "]}");
  }
  return jb_done(g, a, &b, "placement", out);
}

/* [{"node":NAME,"mapping":M,"instance":K,"backward":B[,"params":P]},...] */
ccg_status ccg__onnx_meta_tags(ccg_graph *g, ccg_arena *a, const char **out) {
  *out = NULL;
  jbuf b = {NULL, 0, 0, false};
  for (ccg_node_id n = 0; n < ccg_graph_num_nodes(g); n++) {
    const ccg_tag *t = ccg_node_tag(g, n);
    if (!t)
      continue;
    char num[64];
    jb_open(&b, "node", ccg_node_name(g, n));
    jb_member(&b, "mapping", t->mapping ? t->mapping : "");
    snprintf(num, sizeof num, ",\"instance\":%u,\"backward\":%s", t->instance,
             t->backward ? "true" : "false");
    jb_lit(&b, num);
    if (t->params)
      jb_member(&b, "params", t->params);
    jb_put(&b, "}", 1);
  }
  return jb_done(g, a, &b, "mapping tag", out);
}

/* Node metadata of ccgraph's own ("ccgraph." keys: schedule slots, the
 * pipeline stage) as {"node": name, key: value, ...}. */
ccg_status ccg__onnx_meta_slots(ccg_graph *g, ccg_arena *a, const char **out) {
  *out = NULL;
  jbuf b = {NULL, 0, 0, false};
  for (ccg_node_id n = 0; n < ccg_graph_num_nodes(g); n++) {
    const char *key, *val;
    bool open = false;
    for (size_t i = 0; (key = ccg_node_meta_at(g, n, i, &val)) != NULL; i++) {
      if (strncmp(key, "ccgraph.", 8) != 0)
        continue;
      if (!open) {
        jb_open(&b, "node", ccg_node_name(g, n));
        open = true;
      }
      jb_member(&b, key, val);
    }
    if (open)
      jb_put(&b, "}", 1);
  }
  return jb_done(g, a, &b, "node", out);
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
