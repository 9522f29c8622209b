/* What the plan proposal finds in a model, by structure rather than names:
 * projections are MatMul/Gemm nodes with a 2-D weight; an attention block
 * is the projections whose outputs reach Softmax through the scores MatMul
 * (q, k) and the probabilities' MatMul (v), plus the projection reading
 * its result; an MLP is the projections on either side of an activation.
 * Module names only name what was found. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/module_path.h"
#include "passes/op_kinds.h"
#include "passes/plan_propose.h"

const char *const pp_role_names[] = {
    "attention input projection",
    "attention output projection",
    "MLP input projection",
    "MLP output projection",
    "word embeddings",
    "LM head",
    "LM head into the loss",
    "LayerNorm",
};
_Static_assert(sizeof pp_role_names / sizeof pp_role_names[0] == PP_ROLE_COUNT,
               "one name per role");
const ccg_plan_style pp_role_styles[] = {
    CCG_PLAN_COLWISE, CCG_PLAN_ROWWISE,           CCG_PLAN_COLWISE,
    CCG_PLAN_ROWWISE, CCG_PLAN_VOCAB_PARALLEL,    CCG_PLAN_COLWISE,
    CCG_PLAN_COLWISE, CCG_PLAN_SEQUENCE_PARALLEL,
};
_Static_assert(sizeof pp_role_styles / sizeof pp_role_styles[0] ==
                   PP_ROLE_COUNT,
               "one style per role");

#define PP_TRACE_BUDGET 512 /* nodes one trace may visit */

static ccg_status oom(pp *p) {
  return ccg__error((ccg_ctx *)p->g, CCG_STATUS_OOM, "plan: out of memory");
}

/* ---- graph helpers --------------------------------------------------------
 */

static int64_t attr_int(const ccg_graph *g, ccg_node_id n, const char *name,
                        int64_t dflt) {
  const ccg_attr *a = ccg_node_attr(g, n, name);
  return a && a->type == CCG_ATTR_INT ? a->i : dflt;
}

/* An initializer, or a view of one through Identity and 2-D Transpose
 * nodes (the weights of exports without constant folding), as the shard
 * pass takes them. */
static bool is_weight(const ccg_graph *g, ccg_value_id v) {
  for (int depth = 0; v != CCG_NONE && depth < 8; depth++) {
    if (ccg_value_kind_of(g, v) == CCG_VALUE_INITIALIZER)
      return true;
    ccg_node_id n = ccg_value_producer(g, v);
    if (n == CCG_NONE)
      return false;
    ccg_op op = ccg_node_op(g, n);
    if (op != CCG_OP_IDENTITY &&
        !(op == CCG_OP_TRANSPOSE && ccg_value_shape(g, v)->rank == 2))
      return false;
    v = ccg_node_input(g, n, 0);
  }
  return false;
}

/* A projection: MatMul, or Gemm with transA 0, whose second input is a 2-D
 * weight of known dims; its widths into in/out (either may be NULL). */
static bool projection(const pp *p, ccg_node_id n, int64_t *in, int64_t *out) {
  ccg_op op = ccg_node_op(p->g, n);
  if (op != CCG_OP_MATMUL && op != CCG_OP_GEMM)
    return false;
  ccg_value_id w = ccg_node_input(p->g, n, 1);
  if (!is_weight(p->g, w))
    return false;
  const ccg_shape *s = ccg_value_shape(p->g, w);
  if (s->rank != 2 || ccg_dim_is_sym(s->dims[0]) || ccg_dim_is_sym(s->dims[1]))
    return false;
  bool tb = false;
  if (op == CCG_OP_GEMM) {
    if (attr_int(p->g, n, "transA", 0) != 0)
      return false;
    tb = attr_int(p->g, n, "transB", 0) != 0;
  }
  if (in)
    *in = s->dims[tb ? 1 : 0].size;
  if (out)
    *out = s->dims[tb ? 0 : 1].size;
  return true;
}

/* A MatMul of two activations (attention's scores or its weighted sum). */
static bool act_matmul(const pp *p, ccg_node_id n) {
  return ccg_node_op(p->g, n) == CCG_OP_MATMUL &&
         !is_weight(p->g, ccg_node_input(p->g, n, 0)) &&
         !is_weight(p->g, ccg_node_input(p->g, n, 1));
}

static bool hit_projection(const pp *p, ccg_node_id n) {
  return projection(p, n, NULL, NULL);
}

static bool is_activation(ccg_op op) {
  switch (op) {
  case CCG_OP_RELU:
  case CCG_OP_GELU:
  case CCG_OP_TANH:
  case CCG_OP_ERF:
  case CCG_OP_SIGMOID:
  case CCG_OP_SOFTPLUS:
  case CCG_OP_MISH:
  case CCG_OP_ELU:
  case CCG_OP_SELU:
  case CCG_OP_CELU:
  case CCG_OP_LEAKY_RELU:
  case CCG_OP_HARD_SIGMOID:
  case CCG_OP_HARD_SWISH:
  case CCG_OP_THRESHOLDED_RELU:
    return true;
  default:
    return false;
  }
}

/* Which inputs of an op a trace follows: data inputs only (a Reshape's
 * target or a Where's condition never leads to a projection's output), and
 * none of ops that end a trace. MLP traces pass elementwise ops only;
 * attention traces also shape and index ops (head reshapes, rotary
 * embeddings). */
typedef enum trace_kind { TRACE_MLP, TRACE_ATTN } trace_kind;

static bool follows(trace_kind k, ccg_op op, size_t input) {
  ccg_op_family f = ccg_op_family_of(op);
  if (op == CCG_OP_WHERE)
    return input > 0;
  if (f == CCG_OP_FAMILY_ELEMENTWISE)
    return true;
  if (k == TRACE_MLP)
    return false;
  if (op == CCG_OP_CONCAT)
    return true;
  if (op == CCG_OP_SHAPE || op == CCG_OP_SIZE || op == CCG_OP_CONSTANT ||
      op == CCG_OP_CONSTANT_OF_SHAPE)
    return false;
  if (op == CCG_OP_ROTARY_EMBEDDING || f == CCG_OP_FAMILY_SHAPE ||
      f == CCG_OP_FAMILY_INDEX)
    return input == 0;
  return false;
}

static bool push(pp *p, size_t *sp, ccg_value_id v) {
  if (*sp == p->stack_cap)
    return false;
  p->stack[(*sp)++] = v;
  return true;
}

/* Nodes for which hit() holds met going back from v (not through them, nor
 * through other MatMul/Gemm nodes, weights or graph inputs), at most max
 * into found; *act (may be NULL) gets the first activation passed
 * (CCG_OP_COUNT if none). Returns how many were met. */
static size_t trace_back(pp *p, ccg_value_id v, trace_kind k,
                         bool (*hit)(const pp *, ccg_node_id),
                         ccg_node_id *found, size_t max, ccg_op *act) {
  size_t sp = 0, n_found = 0, budget = PP_TRACE_BUDGET;
  p->gen++;
  if (act)
    *act = CCG_OP_COUNT;
  push(p, &sp, v);
  while (sp > 0 && budget > 0) {
    ccg_node_id n = ccg_value_producer(p->g, p->stack[--sp]);
    if (n == CCG_NONE || p->seen[n] == p->gen)
      continue;
    p->seen[n] = p->gen;
    budget--;
    if (hit(p, n)) {
      if (n_found < max)
        found[n_found] = n;
      n_found++;
      continue;
    }
    ccg_op op = ccg_node_op(p->g, n);
    if (op == CCG_OP_MATMUL || op == CCG_OP_GEMM)
      continue;
    if (act && *act == CCG_OP_COUNT && is_activation(op))
      *act = op;
    for (size_t i = 0; i < ccg_node_num_inputs(p->g, n); i++) {
      ccg_value_id in = ccg_node_input(p->g, n, i);
      if (in != CCG_NONE && !is_weight(p->g, in) && follows(k, op, i))
        push(p, &sp, in);
    }
  }
  return n_found;
}

/* The nearest node forward of v (through unary elementwise, shape and index
 * ops) for which want() holds and that reads what v became as input
 * `slot`; CCG_NONE if none. */
static ccg_node_id trace_fwd(pp *p, ccg_value_id v,
                             bool (*want)(const pp *, ccg_node_id),
                             size_t slot) {
  size_t head = 0, tail = 0, budget = PP_TRACE_BUDGET;
  p->gen++;
  p->stack[tail++] = v; /* used as a queue: nearest first */
  while (head < tail && budget > 0) {
    ccg_value_id x = p->stack[head++];
    size_t it = 0;
    ccg_node_id n;
    while (ccg_value_next_use(p->g, x, &it, &n, NULL)) {
      if (p->seen[n] == p->gen)
        continue;
      p->seen[n] = p->gen;
      budget--;
      ccg_op op = ccg_node_op(p->g, n);
      if (ccg_node_num_inputs(p->g, n) > slot &&
          ccg_node_input(p->g, n, slot) == x && want(p, n))
        return n;
      ccg_op_family f = ccg_op_family_of(op);
      if (!ccg__op_keeps_placement(op) && f != CCG_OP_FAMILY_SHAPE &&
          f != CCG_OP_FAMILY_INDEX)
        continue;
      if (op == CCG_OP_SHAPE)
        continue;
      for (size_t o = 0; o < ccg_node_num_outputs(p->g, n); o++)
        if (tail < p->stack_cap)
          p->stack[tail++] = ccg_node_output(p->g, n, o);
    }
  }
  return CCG_NONE;
}

/* ---- findings -------------------------------------------------------------
 */

/* A plan key must be a pattern that matches itself alone: dotted
 * segments, none empty, no wildcard characters (schemas/plan.schema.json
 * caps keys at 255 characters). */
static bool usable_key(const char *key) {
  size_t len = strlen(key);
  return len > 0 && len < 256 && key[0] != '.' && key[len - 1] != '.' &&
         !strstr(key, "..") && !strpbrk(key, "*?[]\\");
}

void pp_node_key(const pp *p, ccg_node_id n, ccg_value_id param, char *key) {
  ccg__node_module(p->g, n, key, PP_KEY_MAX);
  if (usable_key(key))
    return;
  key[0] = '\0';
  if (param == CCG_NONE)
    return;
  const char *name = ccg_value_name(p->g, param);
  const char *dot = name ? strrchr(name, '.') : NULL;
  if (!dot || dot == name || strchr(name, ':') ||
      (size_t)(dot - name) >= PP_KEY_MAX)
    return;
  memcpy(key, name, (size_t)(dot - name));
  key[dot - name] = '\0';
  if (!usable_key(key))
    key[0] = '\0';
}

static ccg_status add(pp *p, ccg_node_id n, ccg_value_id param, pp_role role,
                      const char *left_out, const char *fmt, ...)
    CCG_PRINTF(6, 7);
/* Records node n in `role`; left_out (or NULL) says why it stays out of
 * the plan, fmt what matched. */
static ccg_status add(pp *p, ccg_node_id n, ccg_value_id param, pp_role role,
                      const char *left_out, const char *fmt, ...) {
  if (p->nf == p->capf) {
    size_t cap = p->capf ? 2 * p->capf : 16;
    pp_finding *f = realloc(p->f, cap * sizeof *f);
    if (!f)
      return oom(p);
    p->f = f;
    p->capf = cap;
  }
  pp_finding *f = &p->f[p->nf++];
  memset(f, 0, sizeof *f);
  f->role = role;
  f->node = n;
  pp_node_key(p, n, param, f->key);
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(f->why, sizeof f->why, fmt, ap);
  va_end(ap);
  if (len < 0)
    len = 0;
  if (left_out && (size_t)len < sizeof f->why)
    snprintf(f->why + len, sizeof f->why - (size_t)len, "; %s", left_out);
  f->left_out = left_out != NULL || !*f->key;
  snprintf(f->reason, sizeof f->reason, "%s",
           left_out  ? left_out
           : *f->key ? ""
                     : "no module path or parameter name to name it by");
  if (!*f->key && (size_t)len < sizeof f->why)
    snprintf(f->why + strlen(f->why), sizeof f->why - strlen(f->why), "; %s",
             f->reason);
  p->claimed[n] = true;
  return CCG_STATUS_OK;
}

static const char *nm(const pp *p, ccg_node_id n) {
  return ccg_node_name(p->g, n);
}
static const char *op_nm(const pp *p, ccg_node_id n) {
  return ccg_op_name(ccg_node_op(p->g, n));
}

/* "not divisible" text for dim `what` of size v, or NULL if W divides it. */
static const char *indivisible(const pp *p, const char *what, int64_t v,
                               char *buf, size_t size) {
  if (v <= 0 || v % p->W == 0)
    return NULL;
  snprintf(buf, size, "%s %lld is not divisible by %s=%lld", what, (long long)v,
           p->axis, (long long)p->W);
  return buf;
}

/* How many equal parts a fused projection's output is split into on its
 * last dim (1 if it is not). */
static int64_t split_parts(pp *p, ccg_node_id proj) {
  ccg_value_id v = ccg_node_output(p->g, proj, 0);
  for (int step = 0; step < 4; step++) {
    size_t it = 0;
    ccg_node_id c;
    if (ccg_value_num_uses(p->g, v) != 1 ||
        !ccg_value_next_use(p->g, v, &it, &c, NULL))
      return 1;
    ccg_op op = ccg_node_op(p->g, c);
    if (op == CCG_OP_SPLIT) {
      int rank = ccg_value_shape(p->g, v)->rank;
      int64_t axis = attr_int(p->g, c, "axis", 0);
      return axis == -1 || axis == rank - 1
                 ? (int64_t)ccg_node_num_outputs(p->g, c)
                 : 1;
    }
    if (ccg_node_num_outputs(p->g, c) != 1 ||
        (op != CCG_OP_ADD && !ccg__op_keeps_placement(op)))
      return 1;
    v = ccg_node_output(p->g, c, 0);
  }
  return 1;
}

/* The projection of q, k or v: exactly one met going back. */
static ccg_node_id qkv_projection(pp *p, ccg_value_id v) {
  ccg_node_id found[2];
  size_t k = trace_back(p, v, TRACE_ATTN, hit_projection, found, 2, NULL);
  return k == 1 ? found[0] : CCG_NONE;
}

static bool want_projection_0(const pp *p, ccg_node_id n) {
  return projection(p, n, NULL, NULL) && !p->claimed[n];
}

/* Why an attention block cannot be sharded on the axis, or NULL. */
static const char *attention_fit(pp *p, const ccg_node_id *proj, int64_t heads,
                                 ccg_node_id out, char *buf, size_t size) {
  int64_t q_width = 0, width, parts, in;
  const char *bad;
  projection(p, proj[0], NULL, &q_width);
  parts = proj[0] == proj[1] ? split_parts(p, proj[0]) : 1;
  if (parts > 1)
    q_width /= parts;
  if ((bad = indivisible(p, "head count", heads, buf, size)))
    return bad;
  if (heads > 0 && q_width >= heads && q_width % heads == 0 &&
      proj[1] != proj[0]) {
    projection(p, proj[1], NULL, &width);
    int64_t kv_heads = width / (q_width / heads);
    /* fewer key/value heads than ranks: each on W / kv ranks (the shard
     * pass's grouped-query attention) */
    if (kv_heads > 0 && kv_heads < p->W && p->W % kv_heads == 0) {
      p->kv_heads = kv_heads;
    } else if ((bad = indivisible(p, "key/value head count", kv_heads, buf,
                                  size))) {
      snprintf(buf, size,
               "key/value head count %lld neither divides nor is divisible "
               "by %s=%lld",
               (long long)kv_heads, p->axis, (long long)p->W);
      return buf;
    }
  }
  for (int i = 0; i < 3; i++) {
    projection(p, proj[i], NULL, &width);
    parts = proj[0] == proj[1] ? split_parts(p, proj[i]) : 1;
    if ((bad = indivisible(p, "projection width", width / parts, buf, size)))
      return bad;
  }
  projection(p, out, &in, NULL);
  return indivisible(p, "output projection input", in, buf, size);
}

/* Attention around Softmax s: scores = q @ k (a MatMul of activations
 * before it), the probabilities times v after it, then the output
 * projection. */
static ccg_status find_attention(pp *p, ccg_node_id s) {
  ccg_node_id m1, m2;
  if (trace_back(p, ccg_node_input(p->g, s, 0), TRACE_ATTN, act_matmul, &m1, 1,
                 NULL) != 1)
    return CCG_STATUS_OK;
  m2 = trace_fwd(p, ccg_node_output(p->g, s, 0), act_matmul, 0);
  if (m2 == CCG_NONE)
    return CCG_STATUS_OK;
  ccg_node_id proj[3] = {
      qkv_projection(p, ccg_node_input(p->g, m1, 0)),
      qkv_projection(p, ccg_node_input(p->g, m1, 1)),
      qkv_projection(p, ccg_node_input(p->g, m2, 1)),
  };
  if (proj[0] == CCG_NONE || proj[1] == CCG_NONE || proj[2] == CCG_NONE)
    return CCG_STATUS_OK;
  for (int i = 0; i < 3; i++)
    if (p->claimed[proj[i]])
      return CCG_STATUS_OK;
  ccg_node_id out =
      trace_fwd(p, ccg_node_output(p->g, m2, 0), want_projection_0, 0);
  const ccg_shape *sc = ccg_value_shape(p->g, ccg_node_output(p->g, m1, 0));
  int64_t heads = sc->rank >= 3 && !ccg_dim_is_sym(sc->dims[sc->rank - 3])
                      ? sc->dims[sc->rank - 3].size
                      : 0;
  char buf[256], hd[96] = "";
  p->kv_heads = 0;
  const char *bad = out == CCG_NONE
                        ? "no output projection reads its result"
                        : attention_fit(p, proj, heads, out, buf, sizeof buf);
  if (heads > 0 && p->kv_heads > 0)
    snprintf(hd, sizeof hd,
             "; %lld heads, %lld key/value heads on %lld ranks each",
             (long long)heads, (long long)p->kv_heads,
             (long long)(p->W / p->kv_heads));
  else if (heads > 0)
    snprintf(hd, sizeof hd, "; %lld heads", (long long)heads);
  static const char *const which[] = {"q", "k", "v"};
  bool fused = proj[0] == proj[1] && proj[1] == proj[2];
  for (int i = 0; i < 3; i++) {
    if (i > 0 && (proj[i] == proj[0] || proj[i] == proj[i - 1]))
      continue;
    int64_t in, o;
    projection(p, proj[i], &in, &o);
    CCG_CHECK(
        add(p, proj[i], ccg_node_input(p->g, proj[i], 1), PP_ATTN_IN, bad,
            "%s '%s' [%lldx%lld] gives %s of Softmax '%s' (through %s '%s')%s",
            op_nm(p, proj[i]), nm(p, proj[i]), (long long)in, (long long)o,
            fused ? "q, k and v" : which[i], nm(p, s),
            op_nm(p, i == 2 ? m2 : m1), nm(p, i == 2 ? m2 : m1), hd));
  }
  if (out != CCG_NONE) {
    int64_t in, o;
    projection(p, out, &in, &o);
    CCG_CHECK(
        add(p, out, ccg_node_input(p->g, out, 1), PP_ATTN_OUT, bad,
            "%s '%s' [%lldx%lld] reads MatMul '%s' (Softmax '%s' times v)%s",
            op_nm(p, out), nm(p, out), (long long)in, (long long)o, nm(p, m2),
            nm(p, s), hd));
  }
  if (!bad) {
    p->n_attn++;
    if (heads > 0)
      p->heads = heads;
  }
  return CCG_STATUS_OK;
}

/* An MLP ending in projection n: going back from its input through
 * elementwise ops passes an activation and meets one to three projections
 * that read the same value and widen it to n's input width. */
static ccg_status find_mlp(pp *p, ccg_node_id n) {
  int64_t ffn, h_out;
  if (p->claimed[n] || !projection(p, n, &ffn, &h_out))
    return CCG_STATUS_OK;
  ccg_node_id first[4];
  ccg_op act;
  size_t k = trace_back(p, ccg_node_input(p->g, n, 0), TRACE_MLP,
                        hit_projection, first, 4, &act);
  if (k < 1 || k > 3 || act == CCG_OP_COUNT)
    return CCG_STATUS_OK;
  ccg_value_id x = ccg_node_input(p->g, first[0], 0);
  for (size_t i = 0; i < k; i++) {
    int64_t w;
    projection(p, first[i], NULL, &w);
    if (p->claimed[first[i]] || first[i] == n || w != ffn ||
        ccg_node_input(p->g, first[i], 0) != x)
      return CCG_STATUS_OK;
  }
  char buf[256];
  const char *bad = indivisible(p, "ffn width", ffn, buf, sizeof buf);
  for (size_t i = 0; i < k; i++) {
    int64_t in;
    projection(p, first[i], &in, NULL);
    CCG_CHECK(add(p, first[i], ccg_node_input(p->g, first[i], 1), PP_MLP_IN,
                  bad, "%s '%s' [%lldx%lld] feeds %s, then %s '%s'",
                  op_nm(p, first[i]), nm(p, first[i]), (long long)in,
                  (long long)ffn, ccg_op_name(act), op_nm(p, n), nm(p, n)));
  }
  CCG_CHECK(add(p, n, ccg_node_input(p->g, n, 1), PP_MLP_OUT, bad,
                "%s '%s' [%lldx%lld] reads %s of %s '%s'", op_nm(p, n),
                nm(p, n), (long long)ffn, (long long)h_out, ccg_op_name(act),
                op_nm(p, first[0]), nm(p, first[0])));
  if (!bad) {
    p->n_mlp++;
    p->ffn = ffn;
  }
  return CCG_STATUS_OK;
}

/* An embedding lookup: Gather on axis 0 of a 2-D weight. */
static bool embedding(const pp *p, ccg_node_id n, int64_t *rows) {
  if (ccg_node_op(p->g, n) != CCG_OP_GATHER ||
      !is_weight(p->g, ccg_node_input(p->g, n, 0)) ||
      is_weight(p->g, ccg_node_input(p->g, n, 1)) ||
      attr_int(p->g, n, "axis", 0) != 0)
    return false;
  const ccg_shape *s = ccg_value_shape(p->g, ccg_node_input(p->g, n, 0));
  if (s->rank != 2 || ccg_dim_is_sym(s->dims[0]))
    return false;
  *rows = s->dims[0].size;
  return true;
}

/* True if v comes from an integer graph input (token ids) through shape
 * and elementwise ops only. */
static bool from_ids(pp *p, ccg_value_id v) {
  for (int step = 0; step < 16; step++) {
    if (ccg_value_kind_of(p->g, v) == CCG_VALUE_INPUT)
      return ccg_dtype_is_int(ccg_value_dtype(p->g, v));
    ccg_node_id n = ccg_value_producer(p->g, v);
    if (n == CCG_NONE || ccg_node_num_inputs(p->g, n) < 1 ||
        !follows(TRACE_ATTN, ccg_node_op(p->g, n), 0))
      return false;
    v = ccg_node_input(p->g, n, 0);
  }
  return false;
}

/* The word embeddings: the largest table looked up by token ids; other
 * lookups (positions, token types) stay replicated. */
static ccg_status find_embeddings(pp *p) {
  ccg_node_id best = CCG_NONE;
  int64_t best_rows = 0, rows;
  for (size_t n = 0; n < p->nn; n++)
    if (embedding(p, (ccg_node_id)n, &rows) &&
        from_ids(p, ccg_node_input(p->g, (ccg_node_id)n, 1)) &&
        rows > best_rows) {
      best = (ccg_node_id)n;
      best_rows = rows;
    }
  if (best == CCG_NONE)
    return CCG_STATUS_OK;
  ccg_value_id w = ccg_node_input(p->g, best, 0);
  const ccg_shape *s = ccg_value_shape(p->g, w);
  char buf[256];
  const char *bad = indivisible(p, "vocabulary", best_rows, buf, sizeof buf);
  CCG_CHECK(add(p, best, w, PP_EMBED, bad,
                "Gather '%s' looks up token ids '%s' in '%s' [%lldx%lld]",
                nm(p, best),
                ccg_value_name(p->g, ccg_node_input(p->g, best, 1)),
                ccg_value_name(p->g, w), (long long)best_rows,
                (long long)s->dims[1].size));
  p->embed_w = w;
  if (bad) {
    snprintf(p->embed_reason, sizeof p->embed_reason, "%s", bad);
    p->embed_bad = p->embed_reason;
  } else {
    p->vocab = best_rows;
  }
  return CCG_STATUS_OK;
}

/* Whether logits v reach, through Cast, Identity and Reshapes keeping the
 * vocabulary last, input 0 of a SoftmaxCrossEntropyLoss on [N, V] without
 * class weights: the shard pass then computes it on vocabulary shards. */
static bool feeds_loss(const pp *p, ccg_value_id v, int64_t vocab, int depth) {
  size_t cursor = 0;
  ccg_node_id c;
  while (depth < 6 && ccg_value_next_use(p->g, v, &cursor, &c, NULL)) {
    ccg_op op = ccg_node_op(p->g, c);
    if (ccg_node_input(p->g, c, 0) != v)
      continue;
    ccg_value_id o = ccg_node_output(p->g, c, 0);
    const ccg_shape *s = ccg_value_shape(p->g, o);
    ccg_dim last = s->rank ? s->dims[s->rank - 1] : (ccg_dim){0};
    if (op == CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS) {
      const ccg_shape *xs = ccg_value_shape(p->g, v);
      if (xs->rank == 2 && (ccg_node_num_inputs(p->g, c) < 3 ||
                            ccg_node_input(p->g, c, 2) == CCG_NONE))
        return true;
    } else if ((op == CCG_OP_CAST || op == CCG_OP_IDENTITY ||
                op == CCG_OP_RESHAPE) &&
               !ccg_dim_is_sym(last) && last.size == vocab &&
               feeds_loss(p, o, vocab, depth + 1)) {
      return true;
    }
  }
  return false;
}

/* The LM head: a projection back to the vocabulary (the embeddings' rows),
 * on its own weight or on the embeddings' (tied: Gemm with transB, or a
 * MatMul reading a Transpose of them, a view the shard pass splits as it
 * splits the weight). */
static ccg_status find_head(pp *p) {
  if (p->embed_w == CCG_NONE)
    return CCG_STATUS_OK;
  const ccg_shape *es = ccg_value_shape(p->g, p->embed_w);
  int64_t hidden = ccg_dim_is_sym(es->dims[1]) ? -1 : es->dims[1].size;
  for (size_t i = p->nn; i-- > 0;) {
    ccg_node_id n = (ccg_node_id)i;
    int64_t in, out;
    ccg_value_id w = ccg_node_input(p->g, n, 1);
    if (p->claimed[n] || !projection(p, n, &in, &out) ||
        out != es->dims[0].size || in != hidden)
      continue;
    p->head = p->embed_bad == NULL;
    bool loss = feeds_loss(p, ccg_node_output(p->g, n, 0), out, 0);
    ccg_node_id t = ccg_value_producer(p->g, w);
    bool transposed = t != CCG_NONE &&
                      ccg_node_op(p->g, t) == CCG_OP_TRANSPOSE &&
                      ccg_node_input(p->g, t, 0) == p->embed_w;
    return add(p, n, w, loss ? PP_HEAD_LOSS : PP_HEAD, p->embed_bad,
               "%s '%s' [%lldx%lld] maps the hidden state back to the "
               "vocabulary%s; %s",
               op_nm(p, n), nm(p, n), (long long)in, (long long)out,
               w == p->embed_w ? " (tied to the embeddings)"
               : transposed ? " (tied to the embeddings, through a Transpose)"
                            : "",
               loss ? "logits kept sharded (output Shard(-1)) for the "
                      "vocab-parallel cross entropy"
                    : "logits gathered (output Replicate)");
  }
  return CCG_STATUS_OK;
}

/* LayerNorms over the last dim, on sequence shards (dim 1). */
static ccg_status find_norms(pp *p) {
  for (size_t i = 0; i < p->nn; i++) {
    ccg_node_id n = (ccg_node_id)i;
    if (ccg_node_op(p->g, n) != CCG_OP_LAYER_NORM)
      continue;
    const ccg_shape *s = ccg_value_shape(p->g, ccg_node_input(p->g, n, 0));
    int64_t axis = attr_int(p->g, n, "axis", -1);
    if (s->rank < 3 || (axis != -1 && axis != s->rank - 1))
      continue;
    char buf[256], seq[64];
    const char *bad = NULL;
    if (ccg_dim_is_sym(s->dims[1])) {
      snprintf(seq, sizeof seq, "'%s' (must divide by %lld)", s->dims[1].sym,
               (long long)p->W);
    } else {
      snprintf(seq, sizeof seq, "%lld", (long long)s->dims[1].size);
      bad = indivisible(p, "sequence", s->dims[1].size, buf, sizeof buf);
    }
    CCG_CHECK(add(p, n, ccg_node_input(p->g, n, 1), PP_NORM, bad,
                  "LayerNormalization '%s' over the last dim; sequence %s",
                  nm(p, n), seq));
    if (!bad)
      p->n_norm++;
  }
  return CCG_STATUS_OK;
}

ccg_status pp_find(pp *p) {
  CCG_CHECK(find_embeddings(p));
  for (size_t n = 0; n < p->nn; n++)
    if (ccg_node_op(p->g, (ccg_node_id)n) == CCG_OP_SOFTMAX)
      CCG_CHECK(find_attention(p, (ccg_node_id)n));
  for (size_t n = 0; n < p->nn; n++)
    CCG_CHECK(find_mlp(p, (ccg_node_id)n));
  CCG_CHECK(find_head(p));
  if (p->sp)
    CCG_CHECK(find_norms(p));
  return CCG_STATUS_OK;
}

ccg_status pp_prepare(pp *p) {
  size_t total = 0;
  p->nn = ccg_graph_num_nodes(p->g);
  p->nv = ccg_graph_num_values(p->g);
  p->seen = calloc(p->nn + 1, sizeof *p->seen);
  p->claimed = calloc(p->nn + 1, sizeof *p->claimed);
  if (!p->seen || !p->claimed)
    return oom(p);
  for (size_t n = 0; n < p->nn; n++)
    total += ccg_node_num_inputs(p->g, (ccg_node_id)n);
  /* every node is visited once per trace: its inputs (back) or outputs
   * (forward) are pushed at most once */
  p->stack_cap = total + p->nv + 1;
  p->stack = calloc(p->stack_cap, sizeof *p->stack);
  if (!p->stack)
    return oom(p);
  return CCG_STATUS_OK;
}

void pp_release(pp *p) {
  free(p->seen);
  free(p->claimed);
  free(p->stack);
  free(p->f);
}
