/* Graph dumps: text (one line per node, for people), JSON (stable bytes, for
 * golden tests and tools) and Graphviz DOT (collectives drawn distinctly).
 * Every format is written into a memory stream first, so a failed dump never
 * leaves half a graph in the caller's FILE. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/half.h"
#include "graph/internal.h"

/* Tensors up to this many elements are dumped value by value (JSON); the
 * text dump shows the values of tensors up to TEXT_DATA_MAX elements. */
#define JSON_DATA_MAX 16
#define TEXT_DATA_MAX 8
#define SHAPE_BUF 4096 /* 8 dims of symbols < 256 bytes each fit */

/* ---- shared helpers ----------------------------------------------------- */

static ccg_status oom(ccg_graph *g) {
  return ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory dumping graph '%s'",
                    g->name);
}

/* True if s is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF):
 * what jansson and Graphviz accept. */
static bool utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned c = *p++;
    int n = c < 0x80                ? 0
            : c >= 0xc2 && c < 0xe0 ? 1
            : c >= 0xe0 && c < 0xf0 ? 2
            : c >= 0xf0 && c < 0xf5 ? 3
                                    : -1;
    if (n < 0)
      return false;
    /* The second byte's range excludes overlongs, surrogates and
     * code points past U+10FFFF. */
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    for (int i = 0; i < n; i++, p++)
      if (*p < (i ? 0x80 : lo) || *p > (i ? 0xbf : hi))
        return false;
  }
  return true;
}

/* Shortest "%g" text that reads back as the same value: the same number
 * always prints the same way, and 0.1f prints as 0.1. */
static const char *fmt_real(double d, bool f64, char *buf, size_t size) {
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, size, "%.*g", p, d);
    if (f64 ? strtod(buf, NULL) == d : strtof(buf, NULL) == (float)d)
      break;
  }
  return buf;
}

typedef enum elem_kind { ELEM_INT, ELEM_REAL, ELEM_BOOL } elem_kind;

/* Element i of t, as an integer, a real or a bool. */
static elem_kind elem_read(const ccg_tensor *t, size_t i, int64_t *iv,
                           double *dv) {
  const unsigned char *p = (const unsigned char *)t->data;
  size_t sz = ccg_dtype_size(t->dtype);
  union {
    float f;
    double d;
    int64_t i64;
    int32_t i32;
    int8_t i8;
    uint8_t u8;
    uint16_t u16;
  } u;
  memcpy(&u, p + i * sz, sz); /* memcpy: data need not be aligned */
  ccg_dtype dt = t->dtype;
  if (ccg_dtype_is_float(dt)) {
    *dv = dt == CCG_DTYPE_F32   ? u.f
          : dt == CCG_DTYPE_F64 ? u.d
          : dt == CCG_DTYPE_F16 ? ccg__f16_to_f32(u.u16)
                                : ccg__bf16_to_f32(u.u16);
    return ELEM_REAL;
  }
  *iv = dt == CCG_DTYPE_I64   ? u.i64
        : dt == CCG_DTYPE_I32 ? u.i32
        : dt == CCG_DTYPE_I8  ? u.i8
                              : u.u8;
  if (dt != CCG_DTYPE_BOOL)
    return ELEM_INT;
  *iv = *iv != 0;
  return ELEM_BOOL;
}

/* Element count and byte size; false for tensors without readable data. */
static bool tensor_size(const ccg_tensor *t, size_t *numel, size_t *nbytes) {
  if (ccg_tensor_nbytes(t, nbytes) != CCG_STATUS_OK)
    return false;
  *numel = *nbytes / ccg_dtype_size(t->dtype);
  return t->data || *nbytes == 0;
}

static uint64_t fnv1a64(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325u;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3u;
  }
  return h;
}

/* "S(1)", "R" or "P(sum)". */
static const char *placement_str(const ccg_placement *p, char *buf,
                                 size_t size) {
  if (p->kind == CCG_PLACEMENT_SHARD)
    snprintf(buf, size, "S(%d)", p->dim);
  else if (p->kind == CCG_PLACEMENT_PARTIAL)
    snprintf(buf, size, "P(%s)", ccg_reduce_op_name(p->reduce));
  else
    snprintf(buf, size, "R");
  return buf;
}

/* "f32[batch,64]" plus " <S(0),R>" when the value has placements. */
static const char *value_type(const ccg_graph *g, ccg_value_id v, char *buf,
                              size_t size) {
  const ccg__value *x = &g->values[v];
  int k = snprintf(buf, size, "%s", ccg_dtype_name(x->dtype));
  size_t used = (size_t)k;
  if (used < size)
    ccg_shape_format(x->shape, buf + used, size - used);
  for (int i = 0; i < x->n_placements; i++) {
    char p[32];
    used = strlen(buf);
    snprintf(buf + used, size - used, "%s%s%s", i ? "," : " <",
             placement_str(&x->placements[i], p, sizeof p),
             i + 1 == x->n_placements ? ">" : "");
  }
  return buf;
}

/* ---- text --------------------------------------------------------------- */

/* Names and strings made of these print bare; anything else is quoted, so
 * every line still parses back into one node. */
static bool text_simple(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || strchr("_./:+-", *s)))
      return false;
  return true;
}

/* Quotes and backslashes get a backslash and a newline becomes backslash-n,
 * which Graphviz reads the same way (a lone backslash before 'N' or the
 * closing quote would be an escape there). Other control bytes and bytes
 * of invalid UTF-8 become \xNN in text and '?' in DOT (dot warns on them). */
static void put_escaped(FILE *f, const char *s, bool dot) {
  bool utf8 = utf8_valid(s);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    bool odd = *p < 0x20 || *p == 0x7f || (*p >= 0x80 && !utf8);
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (odd && dot)
      fputc('?', f);
    else if (odd)
      fprintf(f, "\\x%02x", *p);
    else
      fputc(*p, f);
  }
}

static void text_str(FILE *f, const char *s) {
  if (text_simple(s)) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  put_escaped(f, s, false);
  fputc('"', f);
}

static void text_name(FILE *f, const char *s) {
  fputc('%', f);
  text_str(f, s);
}

static void text_elem(FILE *f, const ccg_tensor *t, size_t i) {
  int64_t iv = 0;
  double dv = 0;
  char buf[40];
  elem_kind k = elem_read(t, i, &iv, &dv);
  if (k == ELEM_REAL)
    fputs(fmt_real(dv, t->dtype == CCG_DTYPE_F64, buf, sizeof buf), f);
  else if (k == ELEM_BOOL)
    fputs(iv ? "true" : "false", f);
  else
    fprintf(f, "%lld", (long long)iv);
}

/* "=[1,2]" for small tensors; nothing for large ones. */
static void text_data(FILE *f, const ccg_tensor *t) {
  size_t numel, nbytes;
  if (!tensor_size(t, &numel, &nbytes) || numel > TEXT_DATA_MAX)
    return;
  fputs(" = [", f);
  for (size_t i = 0; i < numel; i++) {
    if (i)
      fputc(',', f);
    text_elem(f, t, i);
  }
  fputc(']', f);
}

/* "tensor(i64[2] = [4,16])" */
static void text_tensor(FILE *f, const ccg_tensor *t) {
  ccg_shape s = ccg_shape_make(t->rank, t->dims);
  char sb[SHAPE_BUF];
  ccg_shape_format(&s, sb, sizeof sb);
  fprintf(f, "tensor(%s%s", ccg_dtype_name(t->dtype), sb);
  text_data(f, t);
  fputc(')', f);
}

static void text_list(FILE *f, const ccg_attr *a) {
  char buf[40];
  fputc('[', f);
  for (size_t i = 0; i < a->n; i++) {
    if (i)
      fputc(',', f);
    if (a->type == CCG_ATTR_INTS)
      fprintf(f, "%lld", (long long)a->ints[i]);
    else if (a->type == CCG_ATTR_FLOATS)
      fputs(fmt_real(a->floats[i], false, buf, sizeof buf), f);
    else
      text_str(f, a->strings[i]);
  }
  fputc(']', f);
}

static void text_attr_value(FILE *f, const ccg_attr *a) {
  char buf[40];
  if (a->type == CCG_ATTR_INT)
    fprintf(f, "%lld", (long long)a->i);
  else if (a->type == CCG_ATTR_FLOAT)
    fputs(fmt_real(a->f, false, buf, sizeof buf), f);
  else if (a->type == CCG_ATTR_STRING)
    text_str(f, a->s);
  else if (a->type == CCG_ATTR_TENSOR)
    text_tensor(f, a->t);
  else
    text_list(f, a);
}

static void text_decl(FILE *f, const ccg_graph *g, ccg_value_id v) {
  char buf[SHAPE_BUF];
  text_name(f, g->values[v].name);
  fprintf(f, " : %s", value_type(g, v, buf, sizeof buf));
}

static void text_node(FILE *f, const ccg_graph *g, ccg_node_id id) {
  const ccg__node *x = &g->nodes[id];
  for (uint32_t i = 0; i < x->n_outputs; i++) {
    fputs(i ? ", " : "", f);
    text_decl(f, g, x->outputs[i]);
  }
  fprintf(f, "%s%s(", x->n_outputs ? " = " : "", ccg_op_name(x->op));
  for (uint32_t i = 0; i < x->n_inputs; i++) {
    fputs(i ? ", " : "", f);
    if (x->inputs[i] == CCG_NONE)
      fputc('_', f); /* an omitted optional input */
    else
      text_name(f, g->values[x->inputs[i]].name);
  }
  fputc(')', f);
  for (uint32_t i = 0; i < x->n_attrs; i++) {
    fprintf(f, "%s%s=", i ? ", " : " {", x->attrs[i].name);
    text_attr_value(f, &x->attrs[i]);
  }
  fputs(x->n_attrs ? "}  # " : "  # ", f);
  text_str(f, x->name);
  if (x->tag) {
    fputs(" [", f);
    text_str(f, x->tag->mapping);
    fprintf(f, "#%u%s]", (unsigned)x->tag->instance,
            x->tag->backward ? " bwd" : "");
  }
  fputc('\n', f);
}

static void text_dump(FILE *f, const ccg_graph *g, const ccg_node_id *order) {
  fputs("graph ", f);
  text_str(f, g->name);
  if (g->has_mesh) {
    char m[256];
    ccg_mesh_format(&g->mesh, m, sizeof m);
    fprintf(f, " mesh [%s]\n", m);
  } else {
    fputs(" mesh none\n", f);
  }
  for (size_t i = 0; i < g->n_inputs; i++) {
    fputs("input ", f);
    text_decl(f, g, g->inputs[i]);
    fputc('\n', f);
  }
  for (size_t i = 0; i < g->n_inits; i++) {
    fputs("init ", f);
    text_decl(f, g, g->inits[i]);
    text_data(f, ccg__vdata(&g->values[g->inits[i]]));
    fputc('\n', f);
  }
  for (size_t i = 0; i < g->n_nodes; i++)
    text_node(f, g, order[i]);
  fputs("outputs", f);
  for (size_t i = 0; i < g->n_outputs; i++) {
    fputs(i ? ", " : " ", f);
    text_name(f, g->values[g->outputs[i]].name);
  }
  fputc('\n', f);
}

/* ---- JSON --------------------------------------------------------------- */

/* Reals print with 9 significant digits: exact for f32/f16/bf16 once
 * jreal() has picked the shortest decimal; f64 values are rounded. */
#define JSON_FLAGS                                                             \
  (JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(9))

/* Set/append that fail on a NULL value or container (an earlier OOM);
 * jansson releases v whenever it cannot take it. */
static bool jset(json_t *o, const char *k, json_t *v) {
  return json_object_set_new(o, k, v) == 0;
}
static bool jpush(json_t *a, json_t *v) {
  return json_array_append_new(a, v) == 0;
}

/* A JSON string; bytes that are not UTF-8 become '?' (JSON must be). */
static json_t *jstr(const char *s) {
  if (utf8_valid(s))
    return json_string(s);
  size_t n = strlen(s);
  char *c = malloc(n + 1);
  if (!c)
    return NULL;
  for (size_t i = 0; i <= n; i++)
    c[i] = (unsigned char)s[i] >= 0x80 ? '?' : s[i];
  json_t *j = json_string(c);
  free(c);
  return j;
}

/* JSON has no NaN or Infinity: they become the strings Python writes. */
static json_t *jreal(double d, bool f64) {
  if (isnan(d))
    return json_string("NaN");
  if (isinf(d))
    return json_string(d > 0 ? "Infinity" : "-Infinity");
  char buf[40];
  return json_real(strtod(fmt_real(d, f64, buf, sizeof buf), NULL));
}

static json_t *json_shape(const ccg_shape *s) {
  json_t *a = json_array();
  for (int i = 0; i < s->rank; i++) {
    ccg_dim d = s->dims[i];
    if (!jpush(a, ccg_dim_is_sym(d) ? jstr(d.sym) : json_integer(d.size))) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

static json_t *json_value(const ccg_graph *g, ccg_value_id v) {
  const ccg__value *x = &g->values[v];
  json_t *o = json_object();
  bool ok = jset(o, "name", jstr(x->name)) &&
            jset(o, "dtype", json_string(ccg_dtype_name(x->dtype))) &&
            jset(o, "shape", json_shape(x->shape));
  if (ok && x->n_placements) {
    json_t *p = json_array();
    ok = jset(o, "placements", p);
    for (int i = 0; ok && i < x->n_placements; i++) {
      char buf[32];
      ok = jpush(
          p, json_string(placement_str(&x->placements[i], buf, sizeof buf)));
    }
  }
  if (!ok)
    json_decref(o);
  return ok ? o : NULL;
}

static json_t *json_elem(const ccg_tensor *t, size_t i) {
  int64_t iv = 0;
  double dv = 0;
  elem_kind k = elem_read(t, i, &iv, &dv);
  if (k == ELEM_REAL)
    return jreal(dv, t->dtype == CCG_DTYPE_F64);
  return k == ELEM_BOOL ? json_boolean(iv) : json_integer(iv);
}

/* Small tensors: the values. Large ones: size and hash, so a golden file
 * stays small yet any change to a weight shows. */
static json_t *json_data(const ccg_tensor *t) {
  size_t numel, nbytes;
  if (!tensor_size(t, &numel, &nbytes))
    return json_null();
  if (numel > JSON_DATA_MAX) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx",
             (unsigned long long)fnv1a64(t->data, nbytes));
    json_t *o = json_object();
    if (jset(o, "bytes", json_integer((json_int_t)nbytes)) &&
        jset(o, "fnv1a", json_string(hex)))
      return o;
    json_decref(o);
    return NULL;
  }
  json_t *a = json_array();
  for (size_t i = 0; i < numel; i++) {
    if (!jpush(a, json_elem(t, i))) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

static json_t *json_tensor(const ccg_tensor *t) {
  ccg_shape s = ccg_shape_make(t->rank, t->dims);
  json_t *o = json_object();
  if (jset(o, "dtype", json_string(ccg_dtype_name(t->dtype))) &&
      jset(o, "dims", json_shape(&s)) && jset(o, "data", json_data(t)))
    return o;
  json_decref(o);
  return NULL;
}

static json_t *json_attr_item(const ccg_attr *a, size_t i) {
  if (a->type == CCG_ATTR_INTS)
    return json_integer(a->ints[i]);
  if (a->type == CCG_ATTR_FLOATS)
    return jreal(a->floats[i], false);
  return jstr(a->strings[i]);
}

static json_t *json_attr(const ccg_attr *a) {
  if (a->type == CCG_ATTR_INT)
    return json_integer(a->i);
  if (a->type == CCG_ATTR_FLOAT)
    return jreal(a->f, false);
  if (a->type == CCG_ATTR_STRING)
    return jstr(a->s);
  if (a->type == CCG_ATTR_TENSOR)
    return json_tensor(a->t);
  json_t *l = json_array();
  for (size_t i = 0; i < a->n; i++) {
    if (!jpush(l, json_attr_item(a, i))) {
      json_decref(l);
      return NULL;
    }
  }
  return l;
}

/* params is the mapping's JSON text: kept as JSON when it parses, so that
 * key order and spacing do not matter; as a string otherwise. */
static json_t *json_tag(const ccg_tag *t) {
  json_t *params = json_null();
  if (t->params) {
    json_t *p = json_loads(t->params, JSON_DECODE_ANY, NULL);
    params = p ? p : jstr(t->params);
  }
  json_t *o = json_object();
  if (jset(o, "params", params) && jset(o, "mapping", jstr(t->mapping)) &&
      jset(o, "instance", json_integer(t->instance)) &&
      jset(o, "backward", json_boolean(t->backward)))
    return o;
  json_decref(o);
  return NULL;
}

static json_t *json_node_io(const ccg_graph *g, const ccg__node *x,
                            bool outputs) {
  json_t *a = json_array();
  uint32_t n = outputs ? x->n_outputs : x->n_inputs;
  for (uint32_t i = 0; i < n; i++) {
    ccg_value_id v = outputs ? x->outputs[i] : x->inputs[i];
    json_t *j = outputs         ? json_value(g, v)
                : v == CCG_NONE ? json_null()
                                : jstr(g->values[v].name);
    if (!jpush(a, j)) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

static json_t *json_node(const ccg_graph *g, ccg_node_id id) {
  const ccg__node *x = &g->nodes[id];
  json_t *o = json_object(), *attrs = json_object();
  bool ok = jset(o, "attrs", attrs) && jset(o, "name", jstr(x->name)) &&
            jset(o, "op", json_string(ccg_op_name(x->op))) &&
            jset(o, "domain", json_string(ccg_op_domain(x->op))) &&
            jset(o, "inputs", json_node_io(g, x, false)) &&
            jset(o, "outputs", json_node_io(g, x, true));
  for (uint32_t i = 0; ok && i < x->n_attrs; i++)
    ok = jset(attrs, x->attrs[i].name, json_attr(&x->attrs[i]));
  if (ok && x->tag)
    ok = jset(o, "tag", json_tag(x->tag));
  if (!ok)
    json_decref(o);
  return ok ? o : NULL;
}

static json_t *json_mesh(const ccg_graph *g) {
  if (!g->has_mesh)
    return json_null();
  json_t *o = json_object(), *axes = json_array();
  bool ok = jset(o, "axes", axes);
  for (int i = 0; ok && i < g->mesh.ndims; i++) {
    json_t *a = json_object();
    ok = jpush(axes, a) && jset(a, "name", jstr(g->mesh.names[i])) &&
         jset(a, "size", json_integer(g->mesh.sizes[i]));
  }
  if (!ok)
    json_decref(o);
  return ok ? o : NULL;
}

/* An array of value objects (or of names) for a list of value ids. */
static json_t *json_values(const ccg_graph *g, const ccg_value_id *ids,
                           size_t n, bool names_only, bool with_data) {
  json_t *a = json_array();
  bool ok = a != NULL;
  for (size_t i = 0; ok && i < n; i++) {
    const ccg__value *x = &g->values[ids[i]];
    json_t *v = names_only ? jstr(x->name) : json_value(g, ids[i]);
    ok = jpush(a, v);
    if (ok && with_data)
      ok = jset(v, "data",
                ccg__vdata(x) ? json_data(ccg__vdata(x)) : json_null());
  }
  if (!ok)
    json_decref(a);
  return ok ? a : NULL;
}

static json_t *json_graph(const ccg_graph *g, const ccg_node_id *order) {
  json_t *o = json_object(), *nodes = json_array();
  bool ok =
      jset(o, "nodes", nodes) &&
      jset(o, "format", json_string("ccgraph.graph")) &&
      jset(o, "version", json_integer(1)) && jset(o, "name", jstr(g->name)) &&
      jset(o, "mesh", json_mesh(g)) &&
      jset(o, "inputs", json_values(g, g->inputs, g->n_inputs, false, false)) &&
      jset(o, "initializers",
           json_values(g, g->inits, g->n_inits, false, true)) &&
      jset(o, "outputs", json_values(g, g->outputs, g->n_outputs, true, false));
  for (size_t i = 0; ok && i < g->n_nodes; i++)
    ok = jpush(nodes, json_node(g, order[i]));
  if (!ok)
    json_decref(o);
  return ok ? o : NULL;
}

static ccg_status json_dump(FILE *f, ccg_graph *g, const ccg_node_id *order) {
  json_t *root = json_graph(g, order);
  int rc = root ? json_dumpf(root, f, JSON_FLAGS) : -1;
  json_decref(root);
  fputc('\n', f);
  return rc == 0 ? CCG_STATUS_OK : oom(g);
}

/* ---- DOT ---------------------------------------------------------------- */

#define DOT_INPUT "shape=ellipse"
#define DOT_INIT "shape=box, style=\"rounded,filled\", fillcolor=\"#e0e0e0\""
#define DOT_COMPUTE "shape=box"
#define DOT_COLLECTIVE                                                         \
  "shape=hexagon, style=filled, fillcolor=\"#f4a261\", penwidth=2"
#define DOT_OUTPUT "shape=doubleoctagon"

static void dot_esc(FILE *f, const char *s) { put_escaped(f, s, true); }

/* "axis=1 reduce_op=sum" on a line of its own, from the attributes that
 * tell collectives apart. */
static void dot_key_attrs(FILE *f, const ccg__node *x) {
  static const char *const keys[] = {"axis",      "split_axis", "concat_axis",
                                     "reduce_op", "root",       "peer_offset",
                                     "peer",      "shift",      "group_size"};
  bool first = true;
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
    const ccg_attr *a = NULL;
    for (uint32_t i = 0; i < x->n_attrs && !a; i++)
      if (strcmp(x->attrs[i].name, keys[k]) == 0)
        a = &x->attrs[i];
    if (!a || (a->type != CCG_ATTR_INT && a->type != CCG_ATTR_STRING))
      continue;
    fprintf(f, "%s%s=", first ? "\\n" : " ", a->name);
    if (a->type == CCG_ATTR_INT)
      fprintf(f, "%lld", (long long)a->i);
    else
      dot_esc(f, a->s);
    first = false;
  }
}

/* "over tp,dp" from mesh_axes (a string or strings) or mesh_axis. */
static void dot_mesh_axes(FILE *f, const ccg__node *x) {
  for (uint32_t i = 0; i < x->n_attrs; i++) {
    const ccg_attr *a = &x->attrs[i];
    if (strcmp(a->name, "mesh_axes") != 0 && strcmp(a->name, "mesh_axis"))
      continue;
    fputs("\\nover ", f);
    if (a->type == CCG_ATTR_STRING)
      dot_esc(f, a->s);
    for (size_t k = 0; a->type == CCG_ATTR_STRINGS && k < a->n; k++) {
      fputs(k ? "," : "", f);
      dot_esc(f, a->strings[k]);
    }
  }
}

static void dot_node(FILE *f, const ccg_graph *g, ccg_node_id id) {
  const ccg__node *x = &g->nodes[id];
  bool coll = ccg_op_is_collective(x->op);
  fprintf(f, "  \"n%u\" [%s, label=\"%s\\n", (unsigned)id,
          coll ? DOT_COLLECTIVE : DOT_COMPUTE, ccg_op_name(x->op));
  dot_esc(f, x->name);
  if (coll) {
    dot_mesh_axes(f, x);
    dot_key_attrs(f, x);
  }
  if (x->tag) {
    fputs("\\n[", f);
    dot_esc(f, x->tag->mapping);
    fprintf(f, "#%u%s]", (unsigned)x->tag->instance,
            x->tag->backward ? " bwd" : "");
  }
  fputs("\"];\n", f);
}

static void dot_value_node(FILE *f, const ccg_graph *g, ccg_value_id v,
                           const char *style) {
  char buf[SHAPE_BUF];
  fprintf(f, "  \"v%u\" [%s, label=\"", (unsigned)v, style);
  dot_esc(f, g->values[v].name);
  fputs("\\n", f);
  dot_esc(f, value_type(g, v, buf, sizeof buf));
  fputs("\"];\n", f);
}

/* An edge from whatever defines v: its node, or its graph input/weight. */
static void dot_edge(FILE *f, const ccg_graph *g, ccg_value_id v,
                     const char *to) {
  char buf[SHAPE_BUF];
  ccg_node_id p = g->values[v].producer;
  fprintf(f, "  \"%c%u\" -> \"%s\" [label=\"", p == CCG_NONE ? 'v' : 'n',
          p == CCG_NONE ? (unsigned)v : (unsigned)p, to);
  dot_esc(f, value_type(g, v, buf, sizeof buf));
  fputs("\"];\n", f);
}

static void dot_dump(FILE *f, const ccg_graph *g, const ccg_node_id *order) {
  fputs("digraph \"", f);
  dot_esc(f, g->name);
  fputs("\" {\n  rankdir=TB;\n  labelloc=t;\n  label=\"", f);
  dot_esc(f, g->name);
  if (g->has_mesh) {
    char m[256];
    ccg_mesh_format(&g->mesh, m, sizeof m);
    fprintf(f, " (mesh %s)", m);
  }
  fputs("\";\n  fontname=\"Helvetica\";\n"
        "  node [fontname=\"Helvetica\", fontsize=10];\n"
        "  edge [fontname=\"Helvetica\", fontsize=9];\n",
        f);
  for (size_t i = 0; i < g->n_inputs; i++)
    dot_value_node(f, g, g->inputs[i], DOT_INPUT);
  for (size_t i = 0; i < g->n_inits; i++)
    dot_value_node(f, g, g->inits[i], DOT_INIT);
  for (size_t i = 0; i < g->n_nodes; i++)
    dot_node(f, g, order[i]);
  for (size_t i = 0; i < g->n_outputs; i++) {
    fprintf(f, "  \"o%zu\" [%s, label=\"", i, DOT_OUTPUT);
    dot_esc(f, g->values[g->outputs[i]].name);
    fputs("\"];\n", f);
  }
  char to[32];
  for (size_t i = 0; i < g->n_nodes; i++) {
    const ccg__node *x = &g->nodes[order[i]];
    snprintf(to, sizeof to, "n%u", (unsigned)order[i]);
    for (uint32_t k = 0; k < x->n_inputs; k++)
      if (x->inputs[k] != CCG_NONE)
        dot_edge(f, g, x->inputs[k], to);
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    snprintf(to, sizeof to, "o%zu", i);
    dot_edge(f, g, g->outputs[i], to);
  }
  fputs("}\n", f);
}

/* ---- entry points ------------------------------------------------------- */

static ccg_status dump_to(FILE *f, ccg_graph *g, ccg_dump_format fmt,
                          const ccg_node_id *order) {
  if (fmt == CCG_DUMP_JSON)
    return json_dump(f, g, order);
  if (fmt == CCG_DUMP_DOT)
    dot_dump(f, g, order);
  else
    text_dump(f, g, order);
  return CCG_STATUS_OK;
}

/* Writes the dump into a fresh malloc'd buffer; NULL on failure. */
static ccg_status dump_buf(ccg_graph *g, ccg_dump_format fmt,
                           const ccg_node_id *order, char **buf) {
  size_t len = 0;
  FILE *f = open_memstream(buf, &len);
  if (!f)
    return oom(g);
  ccg_status st = dump_to(f, g, fmt, order);
  /* A memory stream fails only for lack of memory. */
  bool bad = ferror(f) != 0;
  if ((fclose(f) != 0 || bad) && st == CCG_STATUS_OK)
    st = oom(g);
  if (st != CCG_STATUS_OK) {
    free(*buf);
    *buf = NULL;
  }
  return st;
}

/* Orders the nodes (a cycle is an error) and dumps them. */
static ccg_status dump_mem(ccg_graph *g, ccg_dump_format fmt, char **buf) {
  size_t n = g->n_nodes ? g->n_nodes : 1;
  *buf = NULL;
  ccg_node_id *order = ccg__alloc(&g->alloc, n * sizeof *order);
  if (!order)
    return oom(g);
  ccg_status st = ccg_graph_topo_order(g, order);
  if (st == CCG_STATUS_OK)
    st = dump_buf(g, fmt, order, buf);
  else
    ccg__error_prefix(&g->ctx, "cannot dump");
  ccg__free(&g->alloc, order, n * sizeof *order);
  return st;
}

static ccg_status check_args(ccg_graph *g, ccg_dump_format fmt, const void *out,
                             const char *fn) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "%s: graph is NULL", fn);
  if (!out)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG, "%s: out is NULL", fn);
  if ((unsigned)fmt >= CCG_DUMP_FORMAT_COUNT)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: dump format %d is not text, json or dot", fn,
                      (int)fmt);
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_dump(ccg_graph *g, ccg_dump_format fmt, FILE *out) {
  CCG_CHECK(check_args(g, fmt, out, "ccg_graph_dump"));
  char *buf;
  CCG_CHECK(dump_mem(g, fmt, &buf));
  size_t len = strlen(buf);
  bool ok = fwrite(buf, 1, len, out) == len && fflush(out) == 0;
  int err = errno;
  free(buf);
  if (!ok)
    return ccg__error(&g->ctx, CCG_STATUS_IO,
                      "cannot write the dump of graph '%s': %s", g->name,
                      strerror(err));
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_dump_string(ccg_graph *g, ccg_dump_format fmt,
                                 char **out) {
  CCG_CHECK(check_args(g, fmt, out, "ccg_graph_dump_string"));
  return dump_mem(g, fmt, out);
}
