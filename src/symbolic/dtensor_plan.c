/* Parallel plans: {pattern: style} JSON, as DTensor's parallelize_module
 * takes them. The checks here are schemas/plan.schema.json written in C
 * (tests/schema/check_plans.py holds both to the same sample plans), so
 * every error can name the key at fault instead of a schema path. */
#include <fnmatch.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolic/dtensor_internal.h"

#define PATTERN_MAX 255
#define MAX_SEGMENTS 64

struct ccg_plan {
  ccg_plan_entry *entries;
  size_t n;
  char *strings; /* the patterns, back to back */
};

static const char *const style_names[] = {
    "colwise",   "rowwise", "sequence_parallel", "vocab_parallel",
    "replicate", "ulysses", "expert_parallel",
};
_Static_assert(sizeof style_names / sizeof style_names[0] ==
                   CCG_PLAN_STYLE_COUNT,
               "one name per plan style");

/* Options each style takes, besides "style" (the schema's if/then rules). */
enum {
  OPT_INPUT = 1u << 0,
  OPT_OUTPUT = 1u << 1,
  OPT_LOCAL = 1u << 2,
  OPT_SEQ_DIM = 1u << 3,
};
static const unsigned style_options[] = {
    OPT_INPUT | OPT_OUTPUT | OPT_LOCAL,
    OPT_INPUT | OPT_OUTPUT | OPT_LOCAL,
    OPT_SEQ_DIM | OPT_LOCAL,
    OPT_INPUT | OPT_OUTPUT | OPT_LOCAL,
    0,
    OPT_SEQ_DIM,
    0,
};
_Static_assert(sizeof style_options / sizeof style_options[0] ==
                   CCG_PLAN_STYLE_COUNT,
               "one option set per plan style");

static const struct {
  const char *name;
  unsigned bit;
} option_names[] = {
    {"input_layouts", OPT_INPUT},
    {"output_layouts", OPT_OUTPUT},
    {"use_local_output", OPT_LOCAL},
    {"sequence_dim", OPT_SEQ_DIM},
};
#define N_OPTIONS (sizeof option_names / sizeof option_names[0])

const char *ccg_plan_style_name(ccg_plan_style s) {
  return (unsigned)s < CCG_PLAN_STYLE_COUNT ? style_names[s] : NULL;
}

static ccg_status fail(const char *key, const char *fmt, ...) CCG_PRINTF(2, 3);
static ccg_status fail(const char *key, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return ccg__error(NULL, CCG_STATUS_PARSE, "plan key '%.*s': %s", PATTERN_MAX,
                    key, what);
}

/* ---- matching ----------------------------------------------------------- */

static size_t split_segments(char *s, char **seg) {
  size_t n = 0;
  for (char *p = s; p && n < MAX_SEGMENTS;) {
    seg[n++] = p;
    p = strchr(p, '.');
    if (p)
      *p++ = '\0';
  }
  return n;
}

static bool match_n(const char *pattern, const char *name, size_t name_len) {
  char pb[PATTERN_MAX + 1], nb[1024];
  size_t pl = strlen(pattern);
  if (pl > PATTERN_MAX || name_len >= sizeof nb)
    return false;
  memcpy(pb, pattern, pl + 1);
  memcpy(nb, name, name_len);
  nb[name_len] = '\0';
  char *ps[MAX_SEGMENTS], *ns[MAX_SEGMENTS];
  size_t np = split_segments(pb, ps), nn = split_segments(nb, ns);
  if (np != nn)
    return false;
  for (size_t i = 0; i < np; i++)
    if (fnmatch(ps[i], ns[i], 0) != 0)
      return false;
  return true;
}

bool ccg_plan_match(const char *pattern, const char *name) {
  return pattern && name && match_n(pattern, name, strlen(name));
}

const ccg_plan_entry *ccg_plan_lookup(const ccg_plan *plan, const char *name) {
  if (!plan || !name)
    return NULL;
  const char *dot = strrchr(name, '.');
  for (size_t i = 0; i < plan->n; i++) {
    const char *p = plan->entries[i].pattern;
    if (match_n(p, name, strlen(name)) ||
        (dot && match_n(p, name, (size_t)(dot - name))))
      return &plan->entries[i];
  }
  return NULL;
}

/* ---- validation --------------------------------------------------------- */

/* The schema's propertyNames: non-empty dotted segments, at most 255
 * characters. */
static ccg_status check_pattern(const char *key) {
  size_t n = strlen(key);
  if (n == 0 || n > PATTERN_MAX)
    return fail(key, "a pattern has 1 to 255 characters");
  if (key[0] == '.' || key[n - 1] == '.' || strstr(key, ".."))
    return fail(key, "a pattern is dotted segments, none of them empty");
  size_t dots = 0;
  for (const char *p = key; *p; p++)
    dots += *p == '.';
  if (dots >= MAX_SEGMENTS)
    return fail(key, "a pattern has at most 64 segments");
  return CCG_STATUS_OK;
}

static ccg_status parse_style_name(const char *key, json_t *v,
                                   ccg_plan_style *out) {
  if (!json_is_string(v))
    return fail(key, "a style is a name or an object with a 'style' name");
  for (int s = 0; s < CCG_PLAN_STYLE_COUNT; s++)
    if (strcmp(json_string_value(v), style_names[s]) == 0) {
      *out = (ccg_plan_style)s;
      return CCG_STATUS_OK;
    }
  return fail(key,
              "unknown style '%s' (colwise, rowwise, sequence_parallel, "
              "vocab_parallel, replicate, ulysses)",
              json_string_value(v));
}

/* The schema's layout pattern: Replicate | Shard(-?[0-7]) | Partial(op)?. */
bool ccg__layout_parse(const char *s, ccg_placement *p) {
  memset(p, 0, sizeof *p);
  if (strcmp(s, "Replicate") == 0)
    return true;
  if (strncmp(s, "Shard(", 6) == 0) {
    const char *d = s + 6;
    bool neg = *d == '-';
    d += neg;
    if (d[0] < '0' || d[0] > '7' || strcmp(d + 1, ")") != 0)
      return false;
    p->kind = CCG_PLACEMENT_SHARD;
    p->dim = neg ? -(d[0] - '0') : d[0] - '0';
    return true;
  }
  if (strncmp(s, "Partial", 7) != 0)
    return false;
  p->kind = CCG_PLACEMENT_PARTIAL;
  p->reduce = CCG_REDUCE_SUM;
  if (s[7] == '\0')
    return true;
  char op[8];
  size_t n = strlen(s);
  if (s[7] != '(' || s[n - 1] != ')' || n - 9 >= sizeof op || n < 10)
    return false;
  memcpy(op, s + 8, n - 9);
  op[n - 9] = '\0';
  return ccg_reduce_op_parse(op, &p->reduce) == CCG_STATUS_OK &&
         p->reduce != CCG_REDUCE_OP_COUNT;
}

static ccg_status layout_error(const char *key, const char *opt,
                               const char *text) {
  char what[160];
  snprintf(what, sizeof what, "%s '%.60s'", opt, text);
  return fail(key,
              "%s is not a layout (Replicate, Shard(d) with d in -8..7, "
              "Partial or Partial(sum|avg|max|min|prod))",
              what);
}

static ccg_status parse_layouts(const char *key, const char *opt, json_t *v,
                                ccg_plan_layouts *out) {
  memset(out, 0, sizeof *out);
  if (json_is_string(v)) {
    out->n = 1;
    out->present[0] = true;
    if (!ccg__layout_parse(json_string_value(v), &out->p[0]))
      return layout_error(key, opt, json_string_value(v));
    return CCG_STATUS_OK;
  }
  size_t n = json_array_size(v);
  if (!json_is_array(v) || n == 0 || n > CCG_PLAN_MAX_LAYOUTS)
    return fail(key,
                "%s is a layout or a list of 1 to 8 layouts (null for a "
                "non-tensor argument)",
                opt);
  out->n = (int)n;
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(v, i);
    if (json_is_null(e))
      continue;
    if (!json_is_string(e))
      return fail(key, "%s: every entry is a layout string or null", opt);
    out->present[i] = true;
    if (!ccg__layout_parse(json_string_value(e), &out->p[i]))
      return layout_error(key, opt, json_string_value(e));
  }
  return CCG_STATUS_OK;
}

/* JSON integers, or reals with an integral value (the schema's "integer"). */
static ccg_status parse_dim(const char *key, json_t *v, int64_t *out) {
  double d = json_is_integer(v) ? (double)json_integer_value(v)
             : json_is_real(v)  ? json_real_value(v)
                                : NAN;
  if (d != floor(d) || d < -8 || d > 7)
    return fail(key, "sequence_dim is an integer in -8..7");
  *out = (int64_t)d;
  return CCG_STATUS_OK;
}

static void set_defaults(ccg_plan_entry *e) {
  ccg_placement r = {CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
  ccg_placement s = {CCG_PLACEMENT_SHARD, -1, CCG_REDUCE_SUM};
  e->use_local_output = e->style != CCG_PLAN_SEQUENCE_PARALLEL;
  e->sequence_dim = 1;
  bool col = e->style == CCG_PLAN_COLWISE, row = e->style == CCG_PLAN_ROWWISE;
  if (col || row || e->style == CCG_PLAN_VOCAB_PARALLEL) {
    e->input_layouts.n = e->output_layouts.n = 1;
    e->input_layouts.present[0] = e->output_layouts.present[0] = true;
    e->input_layouts.p[0] = row ? s : r;
    e->output_layouts.p[0] = col ? s : r;
  }
}

static ccg_status parse_option(const char *key, const char *opt, json_t *v,
                               unsigned bit, ccg_plan_entry *e) {
  switch (bit) {
  case OPT_INPUT:
    return parse_layouts(key, opt, v, &e->input_layouts);
  case OPT_OUTPUT:
    return parse_layouts(key, opt, v, &e->output_layouts);
  case OPT_LOCAL:
    if (!json_is_boolean(v))
      return fail(key, "use_local_output is true or false");
    e->use_local_output = json_is_true(v);
    return CCG_STATUS_OK;
  default:
    return parse_dim(key, v, &e->sequence_dim);
  }
}

static ccg_status parse_entry(const char *key, json_t *v, ccg_plan_entry *e) {
  CCG_CHECK(check_pattern(key));
  if (!json_is_object(v)) {
    CCG_CHECK(parse_style_name(key, v, &e->style));
    set_defaults(e);
    return CCG_STATUS_OK;
  }
  json_t *name = json_object_get(v, "style");
  if (!name)
    return fail(key, "the style object has no 'style'");
  CCG_CHECK(parse_style_name(key, name, &e->style));
  set_defaults(e);
  const char *opt;
  json_t *ov;
  json_object_foreach(v, opt, ov) {
    if (strcmp(opt, "style") == 0)
      continue;
    unsigned bit = 0;
    for (size_t i = 0; i < N_OPTIONS; i++)
      if (strcmp(opt, option_names[i].name) == 0)
        bit = option_names[i].bit;
    if (!bit)
      return fail(key,
                  "unknown option '%.60s' (input_layouts, output_layouts, "
                  "use_local_output, sequence_dim)",
                  opt);
    if (!(style_options[e->style] & bit))
      return fail(key, "option '%.60s' is not one of style '%s'", opt,
                  style_names[e->style]);
    CCG_CHECK(parse_option(key, opt, ov, bit, e));
  }
  return CCG_STATUS_OK;
}

/* ---- loading ------------------------------------------------------------ */

static ccg_status build_plan(json_t *root, ccg_plan **out) {
  if (!json_is_object(root))
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "plan: the top level is an object {pattern: style}");
  size_t n = json_object_size(root), bytes = 0;
  if (n == 0)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "plan: no entries; a plan maps at least one pattern to "
                      "a style");
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) bytes += strlen(key) + 1;
  ccg_plan *p = calloc(1, sizeof *p);
  if (p) {
    p->entries = calloc(n, sizeof *p->entries);
    p->strings = malloc(bytes);
  }
  if (!p || !p->entries || !p->strings) {
    ccg_plan_free(p);
    return ccg__error(NULL, CCG_STATUS_OOM, "plan: out of memory");
  }
  char *s = p->strings;
  json_object_foreach(root, key, v) {
    ccg_plan_entry *e = &p->entries[p->n++];
    size_t len = strlen(key) + 1;
    memcpy(s, key, len);
    e->pattern = s;
    s += len;
    ccg_status st = parse_entry(key, v, e);
    if (st != CCG_STATUS_OK) {
      ccg_plan_free(p);
      return st;
    }
  }
  *out = p;
  return CCG_STATUS_OK;
}

ccg_status ccg_plan_parse(const char *json_text, ccg_plan **out) {
  if (!json_text || !out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_plan_parse: the text and out must not be NULL");
  json_error_t err;
  json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &err);
  if (!root)
    return ccg__error(NULL, CCG_STATUS_PARSE, "plan: line %d column %d: %s",
                      err.line, err.column, err.text);
  ccg_status st = build_plan(root, out);
  json_decref(root);
  return st;
}

ccg_status ccg_plan_load(const char *path, ccg_plan **out) {
  if (!path || !out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_plan_load: the path and out must not be NULL");
  json_error_t err;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    bool io = json_error_code(&err) == json_error_cannot_open_file;
    return ccg__error(NULL, io ? CCG_STATUS_IO : CCG_STATUS_PARSE,
                      "plan file '%s': line %d column %d: %s", path, err.line,
                      err.column, err.text);
  }
  ccg_status st = build_plan(root, out);
  json_decref(root);
  if (st != CCG_STATUS_OK)
    ccg__error_prefix(NULL, "plan file '%s'", path);
  return st;
}

void ccg_plan_free(ccg_plan *plan) {
  if (!plan)
    return;
  free(plan->entries);
  free(plan->strings);
  free(plan);
}

size_t ccg_plan_num_entries(const ccg_plan *plan) { return plan ? plan->n : 0; }

const ccg_plan_entry *ccg_plan_entry_at(const ccg_plan *plan, size_t i) {
  return plan && i < plan->n ? &plan->entries[i] : NULL;
}
