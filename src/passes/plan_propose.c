/* ccg_plan_propose: from what plan_find.c found to a plan. Findings are
 * keyed by module path; a key's layer indices (all-digit segments) become
 * '*' when every module the pattern then matches is one of the same kind,
 * so that the plan reads as DTensor plans are written and still claims
 * exactly what was found. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/module_path.h"
#include "passes/plan_propose.h"

struct ccg_plan_report {
  ccg_plan_note *notes;
  size_t n, cap;
  char *json;
  char *summary;
};

/* One entry of the plan: a pattern and the findings it stands for. */
typedef struct entry {
  char pattern[PP_KEY_MAX];
  size_t first;   /* its first finding */
  size_t modules; /* distinct keys it covers */
} entry;

/* Entries of one style signature may share a pattern: colwise with
 * Replicate output (the head) is not plain colwise. */
static int signature(pp_role r) {
  return r == PP_HEAD ? CCG_PLAN_STYLE_COUNT : (int)pp_role_styles[r];
}

static void generalize(const char *key, char *out) {
  size_t o = 0;
  for (const char *s = key; *s && o + 2 < PP_KEY_MAX;) {
    const char *end = strchr(s, '.');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    bool digits = len > 0;
    for (size_t i = 0; i < len; i++)
      digits = digits && s[i] >= '0' && s[i] <= '9';
    if (digits) {
      out[o++] = '*';
    } else {
      size_t take = len < PP_KEY_MAX - 2 - o ? len : PP_KEY_MAX - 2 - o;
      memcpy(out + o, s, take);
      o += take;
    }
    if (!end)
      break;
    out[o++] = '.';
    s = end + 1;
  }
  out[o] = '\0';
}

static int by_node(const void *a, const void *b) {
  ccg_node_id x = ((const pp_finding *)a)->node;
  ccg_node_id y = ((const pp_finding *)b)->node;
  return x < y ? -1 : x > y;
}

/* ---- conflicts and patterns ------------------------------------------------
 */

/* Two findings under one key that need different styles: neither can be
 * planned by that key. */
static void drop_conflicts(pp *p) {
  for (size_t i = 0; i < p->nf; i++)
    for (size_t j = 0; j < i; j++) {
      pp_finding *a = &p->f[j], *b = &p->f[i];
      if (a->left_out || b->left_out || strcmp(a->key, b->key) != 0 ||
          signature(a->role) == signature(b->role))
        continue;
      for (int k = 0; k < 2; k++) {
        pp_finding *x = k ? b : a, *y = k ? a : b;
        size_t len = strlen(x->why);
        snprintf(x->why + len, sizeof x->why - len,
                 "; module '%s' also holds the %s '%s': one entry cannot "
                 "give both styles",
                 x->key, pp_role_names[y->role], ccg_node_name(p->g, y->node));
        x->left_out = true;
      }
    }
}

static bool in_group(const pp *p, const char *pattern, int sig,
                     const char *name) {
  for (size_t i = 0; i < p->nf; i++) {
    char g[PP_KEY_MAX];
    const pp_finding *f = &p->f[i];
    if (f->left_out || signature(f->role) != sig || strcmp(f->key, name))
      continue;
    generalize(f->key, g);
    if (strcmp(g, pattern) == 0)
      return true;
  }
  return false;
}

/* True if every module (and parameter module) of the graph that `pattern`
 * matches is the key of a finding of signature sig behind that pattern. */
static bool pattern_exact(pp *p, const char *pattern, int sig) {
  char path[PP_KEY_MAX];
  for (size_t n = 0; n < p->nn; n++) {
    ccg__node_module(p->g, (ccg_node_id)n, path, sizeof path);
    while (*path) {
      if (ccg_plan_match(pattern, path) && !in_group(p, pattern, sig, path))
        return false;
      char *dot = strrchr(path, '.');
      if (!dot)
        break;
      *dot = '\0';
    }
    for (size_t i = 0; i < ccg_node_num_inputs(p->g, (ccg_node_id)n); i++) {
      ccg_value_id v = ccg_node_input(p->g, (ccg_node_id)n, i);
      if (v == CCG_NONE || ccg_value_kind_of(p->g, v) != CCG_VALUE_INITIALIZER)
        continue;
      const char *name = ccg_value_name(p->g, v);
      if (ccg_plan_match(pattern, name) && !in_group(p, pattern, sig, name))
        return false;
      const char *dot = strrchr(name, '.');
      if (!dot || (size_t)(dot - name) >= sizeof path)
        continue;
      memcpy(path, name, (size_t)(dot - name));
      path[dot - name] = '\0';
      if (ccg_plan_match(pattern, path) && !in_group(p, pattern, sig, path))
        return false;
    }
  }
  return true;
}

/* The plan's entries in the order of their first findings. */
static ccg_status make_entries(pp *p, entry **out, size_t *n_out) {
  entry *e = calloc(p->nf + 1, sizeof *e);
  bool *done = calloc(p->nf + 1, sizeof *done);
  size_t n = 0;
  if (!e || !done) {
    free(e);
    free(done);
    return ccg__error((ccg_ctx *)p->g, CCG_STATUS_OOM, "plan: out of memory");
  }
  for (size_t i = 0; i < p->nf; i++) {
    if (done[i] || p->f[i].left_out)
      continue;
    char g[PP_KEY_MAX];
    int sig = signature(p->f[i].role);
    generalize(p->f[i].key, g);
    bool general = pattern_exact(p, g, sig);
    entry *en = &e[n++];
    snprintf(en->pattern, sizeof en->pattern, "%s", general ? g : p->f[i].key);
    en->first = i;
    for (size_t j = i; j < p->nf; j++) {
      char gj[PP_KEY_MAX];
      const pp_finding *f = &p->f[j];
      if (done[j] || f->left_out || signature(f->role) != sig)
        continue;
      generalize(f->key, gj);
      if (general ? strcmp(gj, g) != 0 : strcmp(f->key, p->f[i].key) != 0)
        continue;
      bool seen_key = false;
      for (size_t k = i; k < j; k++)
        seen_key = seen_key || (done[k] && !strcmp(p->f[k].key, f->key) &&
                                signature(p->f[k].role) == sig);
      en->modules += !seen_key;
      done[j] = true;
    }
  }
  free(done);
  *out = e;
  *n_out = n;
  return CCG_STATUS_OK;
}

/* ---- the report --------------------------------------------------------- */

static bool note(ccg_plan_report *r, const char *pattern, pp_role role,
                 bool proposed, const char *why) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 16;
    ccg_plan_note *n = realloc(r->notes, cap * sizeof *n);
    if (!n)
      return false;
    r->notes = n;
    r->cap = cap;
  }
  ccg_plan_note *n = &r->notes[r->n];
  n->pattern = strdup(pattern);
  n->role = pp_role_names[role];
  n->why = strdup(why);
  n->style = pp_role_styles[role];
  n->proposed = proposed;
  if (!n->pattern || !n->why) {
    free((char *)n->pattern);
    free((char *)n->why);
    return false;
  }
  r->n++;
  return true;
}

static json_t *style_json(pp_role role) {
  const char *name = ccg_plan_style_name(pp_role_styles[role]);
  if (role == PP_HEAD)
    return json_pack("{s:s,s:s}", "style", name, "output_layouts", "Replicate");
  return json_string(name);
}

static void summarize(const pp *p, ccg_plan_report *r) {
  char buf[512];
  size_t used = 0;
#define PP_ADD(...)                                                            \
  do {                                                                         \
    if (used < sizeof buf)                                                     \
      used += (size_t)snprintf(buf + used, sizeof buf - used, __VA_ARGS__);    \
  } while (0)
  if (p->n_attn) {
    PP_ADD("%d attention block%s", p->n_attn, p->n_attn > 1 ? "s" : "");
    if (p->heads)
      PP_ADD(" (%lld heads)", (long long)p->heads);
  }
  if (p->n_mlp)
    PP_ADD("%s%d MLP%s (ffn %lld)", used ? ", " : "", p->n_mlp,
           p->n_mlp > 1 ? "s" : "", (long long)p->ffn);
  if (p->vocab)
    PP_ADD("%sword embeddings (vocabulary %lld)", used ? ", " : "",
           (long long)p->vocab);
  if (p->head)
    PP_ADD("%sLM head", used ? ", " : "");
  if (p->n_norm)
    PP_ADD("%s%d LayerNorm%s", used ? ", " : "", p->n_norm,
           p->n_norm > 1 ? "s" : "");
  if (!used)
    PP_ADD("nothing to shard");
#undef PP_ADD
  r->summary = strdup(buf);
}

static ccg_status build(pp *p, ccg_plan_report *r, size_t *n_entries) {
  entry *e = NULL;
  size_t n = 0;
  CCG_CHECK(make_entries(p, &e, &n));
  json_t *plan = json_object();
  bool ok = plan != NULL;
  for (size_t i = 0; ok && i < n; i++) {
    const pp_finding *f = &p->f[e[i].first];
    char why[PP_WHY_MAX + 64];
    if (e[i].modules > 1)
      snprintf(why, sizeof why, "%s; %zu modules agree", f->why, e[i].modules);
    else
      snprintf(why, sizeof why, "%s", f->why);
    ok = json_object_set_new(plan, e[i].pattern, style_json(f->role)) == 0 &&
         note(r, e[i].pattern, f->role, true, why);
  }
  for (size_t i = 0; ok && i < p->nf; i++)
    if (p->f[i].left_out)
      ok = note(r,
                *p->f[i].key ? p->f[i].key : ccg_node_name(p->g, p->f[i].node),
                p->f[i].role, false, p->f[i].why);
  free(e);
  r->json = ok ? json_dumps(plan, JSON_INDENT(2)) : NULL;
  json_decref(plan);
  summarize(p, r);
  if (!r->json || !r->summary)
    return ccg__error((ccg_ctx *)p->g, CCG_STATUS_OOM, "plan: out of memory");
  *n_entries = n;
  return CCG_STATUS_OK;
}

/* Nothing proposed: why, on g. */
static ccg_status empty(pp *p, const char *mesh) {
  if (p->nf == 0)
    return ccg__error(
        (ccg_ctx *)p->g, CCG_STATUS_UNSUPPORTED,
        "plan: not transformer-shaped: no attention (projections feeding "
        "Softmax through MatMul), no MLP (projections around an activation) "
        "and no embedding lookup of token ids; the plan is empty");
  /* each distinct reason once, with the first part it keeps out */
  char text[768];
  size_t used = 0;
  for (size_t i = 0; i < p->nf && used < sizeof text; i++) {
    const pp_finding *f = &p->f[i];
    bool dup = false;
    for (size_t j = 0; j < i && !dup; j++)
      dup = strcmp(p->f[j].reason, f->reason) == 0;
    if (!dup)
      used +=
          (size_t)snprintf(text + used, sizeof text - used, "%s%s (%s '%s')",
                           used ? "; " : "", f->reason, pp_role_names[f->role],
                           *f->key ? f->key : ccg_node_name(p->g, f->node));
  }
  return ccg__error((ccg_ctx *)p->g, CCG_STATUS_SHAPE,
                    "plan: nothing can be sharded on %s, the plan is empty: "
                    "%s",
                    mesh, text);
}

/* Under sequence parallelism the shard pass cuts every LayerNorm and the
 * rowwise and embedding outputs on the sequence: a LayerNorm whose
 * sequence the axis does not divide rules the whole plan out (leaving it
 * out of the plan would not keep it off sequence shards). */
static ccg_status sp_blocked(pp *p, const char *mesh) {
  for (size_t i = 0; p->sp && i < p->nf; i++) {
    const pp_finding *f = &p->f[i];
    if (f->role == PP_NORM && f->left_out)
      return ccg__error((ccg_ctx *)p->g, CCG_STATUS_SHAPE,
                        "plan: no sequence-parallel plan on %s: %s "
                        "(LayerNorm '%s'), and shard --sequence-parallel "
                        "runs every LayerNorm and rowwise output on "
                        "sequence shards; propose without "
                        "--sequence-parallel",
                        mesh, f->reason,
                        *f->key ? f->key : ccg_node_name(p->g, f->node));
  }
  return CCG_STATUS_OK;
}

ccg_status ccg_plan_propose(ccg_graph *g, const ccg_mesh *mesh,
                            const ccg_plan_propose_options *opts,
                            ccg_plan **plan, ccg_plan_report **report) {
  if (!g || !mesh || !plan || !report)
    return ccg__error(g ? (ccg_ctx *)g : NULL, CCG_STATUS_INVALID_ARG,
                      "plan: graph, mesh, plan and report are required");
  *plan = NULL;
  *report = NULL;
  ccg_plan_propose_options o = CCG_PLAN_PROPOSE_OPTIONS_INIT;
  if (opts)
    memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
  const char *axis_name = o.mesh_axis ? o.mesh_axis : "tp";
  char mesh_text[128];
  ccg_mesh_format(mesh, mesh_text, sizeof mesh_text);
  int axis = ccg_mesh_axis(mesh, axis_name);
  if (axis < 0)
    return ccg__error((ccg_ctx *)g, CCG_STATUS_INVALID_ARG,
                      "plan: mesh axis '%s' is not in the mesh %s", axis_name,
                      mesh_text);
  pp p = {0};
  p.g = g;
  p.W = mesh->sizes[axis];
  p.sp = o.sequence_parallel;
  p.embed_w = CCG_NONE;
  snprintf(p.axis, sizeof p.axis, "%s", axis_name);
  ccg_plan_report *r = calloc(1, sizeof *r);
  ccg_status st =
      r ? CCG_STATUS_OK
        : ccg__error((ccg_ctx *)g, CCG_STATUS_OOM, "plan: out of memory");
  size_t n_entries = 0;
  CCG_CHECK_GOTO(st, st, out);
  CCG_CHECK_GOTO(pp_prepare(&p), st, out);
  CCG_CHECK_GOTO(pp_find(&p), st, out);
  /* the plan reads in model order: embeddings, each layer, the head */
  if (p.nf > 1) /* p.f is NULL when nothing was found */
    qsort(p.f, p.nf, sizeof *p.f, by_node);
  drop_conflicts(&p);
  CCG_CHECK_GOTO(build(&p, r, &n_entries), st, out);
  if (n_entries == 0) {
    st = empty(&p, mesh_text);
  } else if ((st = sp_blocked(&p, mesh_text)) != CCG_STATUS_OK) {
    /* the notes say what was found; nothing is proposed */
  } else if (ccg_plan_parse(r->json, plan) != CCG_STATUS_OK) {
    st = ccg__error((ccg_ctx *)g, CCG_STATUS_INTERNAL,
                    "plan: the proposed plan does not parse: %s",
                    ccg_last_error(NULL));
  }
out:
  pp_release(&p);
  if (r && (st == CCG_STATUS_OK || r->json)) {
    *report = r;
  } else {
    ccg_plan_report_free(r);
  }
  return st;
}

size_t ccg_plan_report_num_notes(const ccg_plan_report *r) {
  return r ? r->n : 0;
}

const ccg_plan_note *ccg_plan_report_note(const ccg_plan_report *r, size_t i) {
  return r && i < r->n ? &r->notes[i] : NULL;
}

const char *ccg_plan_report_json(const ccg_plan_report *r) {
  return r && r->json ? r->json : "{}";
}

const char *ccg_plan_report_summary(const ccg_plan_report *r) {
  return r && r->summary ? r->summary : "";
}

void ccg_plan_report_free(ccg_plan_report *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->n; i++) {
    free((char *)r->notes[i].pattern);
    free((char *)r->notes[i].why);
  }
  free(r->notes);
  free(r->json);
  free(r->summary);
  free(r);
}
