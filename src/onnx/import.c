/* ModelProto -> IR. Standard models (ai.onnx opsets 1..24, each op from the
 * opset its meaning dates from), ONNX Runtime's com.microsoft collectives and
 * our own domain. Inputs that later opsets moved out of attributes (axes,
 * split) must be constants and become attributes again; the constants that only
 * fed them are dropped, which is what makes export -> import -> export give the
 * same bytes. */
/* madvise is outside POSIX (glibc: _DEFAULT_SOURCE). */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/import.h"
#include "onnx/wire.h"

static ccg_status fail(im *m, ccg_status st, const char *fmt, ...)
    CCG_PRINTF(3, 4);
static ccg_status fail(im *m, ccg_status st, const char *fmt, ...) {
  char msg[CCG__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ccg__error(NULL, st, "%s: %s", m->src.what, msg);
}

/* The graph refused something: its message, prefixed with the file. */
static ccg_status from_graph(im *m) {
  ccg__error_copy(NULL, &m->g->ctx);
  return ccg__error_prefix(NULL, "%s", m->src.what);
}

const char *ccg__onnx_node_label(const Onnx__NodeProto *np) {
  return np->name && *np->name ? np->name : "(unnamed)";
}

const char *ccg__onnx_node_domain(const Onnx__NodeProto *np) {
  const char *d = np->domain ? np->domain : "";
  return strcmp(d, "ai.onnx") == 0 ? "" : d;
}

/* ---- opsets, mesh ------------------------------------------------------- */

static ccg_status read_opsets(im *m) {
  m->opset = -1;
  for (size_t i = 0; i < m->m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *os = m->m->opset_import[i];
    const char *d = os->domain ? os->domain : "";
    int64_t v = os->has_version ? os->version : 0;
    if (!*d || strcmp(d, "ai.onnx") == 0)
      m->opset = v;
    else if (strcmp(d, CCG_DOMAIN_CCGRAPH) == 0 && v != 1)
      return fail(m, CCG_STATUS_UNSUPPORTED,
                  "domain 'ccgraph' version %lld is not supported (1)",
                  (long long)v);
  }
  if (m->opset < 0)
    return CCG_STATUS_OK; /* checked when an ai.onnx node shows up */
  if (m->opset < CCG__ONNX_MIN_OPSET || m->opset > CCG__ONNX_MAX_OPSET)
    return fail(m, CCG_STATUS_UNSUPPORTED,
                "ai.onnx opset %lld is not supported (ccgraph reads %d..%d)",
                (long long)m->opset, CCG__ONNX_MIN_OPSET, CCG__ONNX_MAX_OPSET);
  return CCG_STATUS_OK;
}

static const char *meta(const im *m, const char *key) {
  for (size_t i = 0; i < m->m->n_metadata_props; i++) {
    const Onnx__StringStringEntryProto *e = m->m->metadata_props[i];
    if (e->key && strcmp(e->key, key) == 0)
      return e->value ? e->value : "";
  }
  return NULL;
}

int64_t ccg__onnx_attr_int(const Onnx__NodeProto *np, const char *name,
                           int64_t dflt) {
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    if (a->name && strcmp(a->name, name) == 0 && a->has_i)
      return a->i;
  }
  return dflt;
}

/* The mesh: from our metadata, else a 1-D "world" mesh as large as the
 * group of ONNX Runtime's collectives (which span every rank). */
static ccg_status read_mesh(im *m) {
  const char *spec = meta(m, CCG__META_MESH);
  if (spec) {
    ccg_mesh mesh;
    if (ccg_mesh_parse(spec, &mesh) != CCG_STATUS_OK)
      return ccg__error_prefix(NULL, "%s: metadata '%s'", m->src.what,
                               CCG__META_MESH);
    if (ccg_graph_set_mesh(m->g, &mesh) != CCG_STATUS_OK)
      return from_graph(m);
    return CCG_STATUS_OK;
  }
  int64_t world = 0;
  const Onnx__NodeProto *first = NULL;
  for (size_t i = 0; i < m->gp->n_node; i++) {
    const Onnx__NodeProto *np = m->gp->node[i];
    if (strcmp(ccg__onnx_node_domain(np), CCG__ONNX_DOMAIN_MS) != 0)
      continue;
    int64_t gs = ccg__onnx_attr_int(np, "group_size", 0);
    if (!first)
      first = np;
    if (gs <= 0)
      continue;
    if (world && gs != world)
      return fail(m, CCG_STATUS_PARSE,
                  "node '%s' (com.microsoft %s): group_size %lld differs from "
                  "%lld of the other collectives",
                  ccg__onnx_node_label(np), np->op_type ? np->op_type : "",
                  (long long)gs, (long long)world);
    world = gs;
  }
  if (!first)
    return CCG_STATUS_OK;
  if (!world)
    return fail(m, CCG_STATUS_PARSE,
                "node '%s' (com.microsoft %s): the number of ranks is "
                "unknown (no '%s' metadata and no group_size attribute)",
                ccg__onnx_node_label(first),
                first->op_type ? first->op_type : "", CCG__META_MESH);
  ccg_mesh mesh;
  memset(&mesh, 0, sizeof mesh);
  mesh.ndims = 1;
  mesh.sizes[0] = world;
  strcpy(mesh.names[0], "world");
  if (ccg_graph_set_mesh(m->g, &mesh) != CCG_STATUS_OK)
    return from_graph(m);
  return CCG_STATUS_OK;
}

/* ---- constants feeding axes/split -------------------------------------- */

int ccg__onnx_attr_slot(const im *m, const Onnx__NodeProto *np) {
  if (*ccg__onnx_node_domain(np) || !np->op_type || np->n_input < 2)
    return -1;
  const char *op = np->op_type;
  /* every op below starts with one of these: most nodes stop here */
  if (op[0] != 'R' && op[0] != 'S' && op[0] != 'U')
    return -1;
  if (strcmp(op, "ReduceSum") == 0)
    return m->opset >= 13 ? 1 : -1;
  static const char *const from18[] = {
      "ReduceMean",      "ReduceMax",    "ReduceMin",
      "ReduceProd",      "ReduceL1",     "ReduceL2",
      "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
  for (size_t i = 0; i < sizeof from18 / sizeof from18[0]; i++)
    if (strcmp(op, from18[i]) == 0)
      return m->opset >= 18 ? 1 : -1;
  /* SplitToSequence's split and SequenceAt's position: read by seq.c */
  if (strcmp(op, "Split") == 0 || strcmp(op, "Squeeze") == 0 ||
      strcmp(op, "Unsqueeze") == 0 || strcmp(op, "SplitToSequence") == 0 ||
      strcmp(op, "SequenceAt") == 0)
    return 1;
  return -1;
}

static bool is_constant_node(const Onnx__NodeProto *np) {
  return np->n_output == 1 && np->op_type && np->op_type[0] == 'C' &&
         strcmp(np->op_type, "Constant") == 0 && !*ccg__onnx_node_domain(np);
}

/* An axes/split input of one node, for find_dropped. */
typedef struct slot_in {
  const char *name;
  uint32_t hash;
} slot_in;

/* m->consts: the constants (initializer i, or Constant node j as
 * n_initializer + j; the first of a name) that feed an axes/split input or
 * share a graph input's name, which are all that import looks up among
 * them. Indexing every constant was most of finding the dropped ones: a
 * model's constants are many, and the names looked up few. */
static ccg_status index_consts(im *m, const slot_in *si, size_t n_si,
                               const uint32_t *cnodes, size_t n_cnodes) {
  const Onnx__GraphProto *gp = m->gp;
  ccg_strmap want;
  ccg__strmap_init(&want, NULL);
  ccg_status st = CCG_STATUS_OK;
  for (size_t i = 0; i < n_si && st == CCG_STATUS_OK; i++)
    if (!ccg__strmap_get_h(&want, si[i].name, si[i].hash, NULL))
      st = ccg__strmap_put_h(&want, si[i].name, si[i].hash, 0);
  for (size_t i = 0; i < gp->n_input && st == CCG_STATUS_OK; i++) {
    const char *nm = gp->input[i]->name;
    if (nm && *nm && !ccg__strmap_get(&want, nm, NULL))
      st = ccg__strmap_put(&want, nm, 0);
  }
  size_t n = gp->n_initializer + n_cnodes;
  for (size_t k = 0; k < n && want.count && st == CCG_STATUS_OK; k++) {
    uint32_t c = k < gp->n_initializer ? (uint32_t)k
                                       : (uint32_t)gp->n_initializer +
                                             cnodes[k - gp->n_initializer];
    const char *nm = c < gp->n_initializer
                         ? gp->initializer[c]->name
                         : gp->node[c - gp->n_initializer]->output[0];
    if (!nm || !*nm)
      continue;
    uint32_t h = ccg__strhash(nm);
    if (ccg__strmap_get_h(&want, nm, h, NULL) &&
        !ccg__strmap_get_h(&m->consts, nm, h, NULL))
      st = ccg__strmap_put_h(&m->consts, nm, h, c);
  }
  ccg__strmap_free(&want);
  return st;
}

/* Counts, per initializer and Constant output, all uses and the uses as an
 * axes/split input; a constant used only that way is not kept. Only the
 * constants that feed such an input at least once can be dropped, so all
 * uses are counted for those alone, in a map small enough to stay in the
 * cache: looking every input of the model up among all constants was a
 * tenth of an import. */
static ccg_status find_dropped(im *m) {
  const Onnx__GraphProto *gp = m->gp;
  size_t nc = gp->n_initializer + gp->n_node, n_in = 0;
  for (size_t i = 0; i < gp->n_node; i++)
    n_in += gp->node[i]->n_input;
  m->uses = ccg__arena_calloc(&m->a, nc + 1, sizeof *m->uses);
  m->slot_uses = ccg__arena_calloc(&m->a, nc + 1, sizeof *m->slot_uses);
  m->in_hash = ccg__arena_alloc(&m->a, (n_in + 1) * sizeof *m->in_hash, 4);
  /* written only as far as there are such inputs and Constants */
  slot_in *si = ccg__arena_alloc(&m->a, (gp->n_node + 1) * sizeof *si, 8);
  uint32_t *cnodes =
      ccg__arena_alloc(&m->a, (gp->n_node + 1) * sizeof *cnodes, 4);
  if (!m->uses || !m->slot_uses || !m->in_hash || !si || !cnodes)
    return fail(m, CCG_STATUS_OOM, "indexing constants");
  size_t n_si = 0, n_cnodes = 0;
  uint32_t *h = m->in_hash;
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    for (size_t k = 0; k < np->n_input; k++)
      h[k] = np->input[k] ? ccg__strhash(np->input[k]) : 0;
    int slot = ccg__onnx_attr_slot(m, np);
    if (slot >= 0 && (size_t)slot < np->n_input && np->input[slot])
      si[n_si++] = (slot_in){np->input[slot], h[slot]};
    if (is_constant_node(np) && np->output[0] && *np->output[0])
      cnodes[n_cnodes++] = (uint32_t)i;
    h += np->n_input;
    /* for reserve: counts up to what real ops have (a hint, not a limit:
     * the tables still grow past it), so that a model listing millions of
     * names on one node is refused by the graph before its tables are
     * sized for it */
    m->n_values += np->n_output < 16 ? np->n_output : 16;
    m->n_uses += np->n_input < 16 ? np->n_input : 16;
  }
  ccg_status st = index_consts(m, si, n_si, cnodes, n_cnodes);
  /* the candidates: constants in an axes/split input */
  ccg_strmap cand;
  ccg__strmap_init(&cand, NULL);
  for (size_t i = 0; i < n_si && st == CCG_STATUS_OK; i++) {
    uint32_t c;
    if (!ccg__strmap_get_h(&m->consts, si[i].name, si[i].hash, &c))
      continue;
    m->slot_uses[c]++;
    if (!ccg__strmap_get_h(&cand, si[i].name, si[i].hash, NULL))
      st = ccg__strmap_put_h(&cand, si[i].name, si[i].hash, c);
  }
  /* Nearly every input is no candidate: a bit per hash value (a filter
   * with a few candidates to a bit) answers most of them without a probe. */
  size_t nbits = 4096;
  while (nbits < 8 * cand.count)
    nbits *= 2;
  uint64_t *bits = cand.count && st == CCG_STATUS_OK
                       ? ccg__arena_calloc(&m->a, nbits / 64, sizeof *bits)
                       : NULL;
  if (cand.count && st == CCG_STATUS_OK && !bits)
    st = CCG_STATUS_OOM;
  for (size_t i = 0; bits && i < cand.cap; i++)
    if (cand.slots[i].key) {
      uint32_t b = cand.slots[i].hash & (uint32_t)(nbits - 1);
      bits[b / 64] |= (uint64_t)1 << (b % 64);
    }
  h = m->in_hash;
  for (size_t i = 0; bits && i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    for (size_t k = 0; k < np->n_input; k++, h++) {
      uint32_t c, b = *h & (uint32_t)(nbits - 1);
      if ((bits[b / 64] >> (b % 64) & 1) && np->input[k] &&
          ccg__strmap_get_h(&cand, np->input[k], *h, &c))
        m->uses[c]++;
    }
  }
  for (size_t i = 0; i < gp->n_output && cand.count; i++) {
    uint32_t c;
    if (gp->output[i]->name && ccg__strmap_get(&cand, gp->output[i]->name, &c))
      m->uses[c]++;
  }
  ccg__strmap_free(&cand);
  if (st != CCG_STATUS_OK)
    return fail(m, CCG_STATUS_OOM, "indexing constants");
  return CCG_STATUS_OK;
}

bool ccg__onnx_dropped(const im *m, uint32_t c) {
  return m->slot_uses[c] > 0 && m->slot_uses[c] == m->uses[c];
}

/* The contents of a computed axes/split input that known-contents
 * propagation has as numbers (Concat of constants, Cast of a constant,
 * a Shape's entries that are numbers). */
static ccg_status known_ints(im *m, const char *input, const char *role,
                             const int64_t **vals, size_t *n) {
  uint32_t v;
  ccg_dim d[CCG_MAX_RANK];
  int k = ccg__strmap_get(&m->g->value_names, input, &v)
              ? ccg_value_known(m->g, v, d)
              : -1;
  for (int i = 0; i < k; i++)
    if (ccg_dim_is_sym(d[i]))
      k = -1;
  if (k < 0)
    return fail(m, CCG_STATUS_UNSUPPORTED,
                "%s is computed at run time; ccgraph needs its contents "
                "known when the model is read (a constant, or computed from "
                "constants and shapes)",
                role);
  int64_t *out = ccg__arena_calloc(&m->a, (size_t)k + 1, sizeof *out);
  if (!out)
    return fail(m, CCG_STATUS_OOM, "%s", role);
  for (int i = 0; i < k; i++)
    out[i] = d[i].size;
  *vals = out;
  *n = (size_t)k;
  return CCG_STATUS_OK;
}

/* The int64 contents of a constant input (axes, split), or of a computed
 * one whose contents are known. */
ccg_status ccg__onnx_const_ints(im *m, const Onnx__NodeProto *np,
                                const char *input, const int64_t **vals,
                                size_t *n) {
  uint32_t c;
  char role[256];
  if (!ccg__strmap_get(&m->consts, input, &c)) {
    snprintf(role, sizeof role, "node '%s' (%s) input '%s'",
             ccg__onnx_node_label(np), np->op_type, input);
    return known_ints(m, input, role, vals, n);
  }
  const Onnx__TensorProto *tp = NULL;
  if (c < m->gp->n_initializer) {
    tp = m->gp->initializer[c];
  } else {
    const Onnx__NodeProto *cn = m->gp->node[c - m->gp->n_initializer];
    for (size_t i = 0; i < cn->n_attribute; i++) {
      const Onnx__AttributeProto *a = cn->attribute[i];
      if (a->name && strcmp(a->name, "value_ints") == 0) {
        *vals = a->ints;
        *n = a->n_ints;
        return CCG_STATUS_OK;
      }
      if (a->name && strcmp(a->name, "value") == 0)
        tp = a->t;
    }
  }
  /* the role names the input in messages; value_ints above needs none */
  snprintf(role, sizeof role, "node '%s' (%s) input '%s'",
           ccg__onnx_node_label(np), np->op_type, input);
  ccg_tensor t;
  if (!tp)
    return fail(m, CCG_STATUS_UNSUPPORTED, "%s is not an integer tensor", role);
  CCG_CHECK(ccg__onnx_tensor_in(&m->src, &m->a, tp, role, false, NULL, &t));
  if (t.rank > 1 || (t.dtype != CCG_DTYPE_I64 && t.dtype != CCG_DTYPE_I32))
    return fail(m, CCG_STATUS_PARSE, "%s must be a 1-D int64 tensor", role);
  size_t count = t.rank ? (size_t)t.dims[0] : 1;
  int64_t *v = ccg__arena_calloc(&m->a, count + 1, sizeof *v);
  if (!v)
    return fail(m, CCG_STATUS_OOM, "%s", role);
  for (size_t i = 0; i < count; i++) {
    if (t.dtype == CCG_DTYPE_I64) {
      memcpy(&v[i], (const uint8_t *)t.data + 8 * i, 8);
    } else {
      int32_t x;
      memcpy(&x, (const uint8_t *)t.data + 4 * i, 4);
      v[i] = x;
    }
  }
  *vals = v;
  *n = count;
  return CCG_STATUS_OK;
}

/* ---- values ------------------------------------------------------------- */

static ccg_status graph_input(im *m, const Onnx__ValueInfoProto *vi) {
  const char *name = vi->name ? vi->name : "";
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
    return fail(m, CCG_STATUS_PARSE, "graph input '%s' has no type", name);
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    return fail(m, CCG_STATUS_UNSUPPORTED,
                "graph input '%s' is not a tensor (sequences, maps, optionals "
                "and sparse tensors are not supported)",
                name);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  ccg_dtype dt;
  int64_t code = tt->has_elem_type ? tt->elem_type : 0;
  if (!ccg__onnx_dtype_from_code(code, &dt))
    return fail(m, CCG_STATUS_UNSUPPORTED,
                "graph input '%s' has element type %s (%lld), which ccgraph "
                "does not support",
                name, ccg__onnx_dtype_code_name(code), (long long)code);
  if (!tt->shape)
    return fail(m, CCG_STATUS_UNSUPPORTED,
                "graph input '%s' has no shape (its rank must be known)", name);
  if (tt->shape->n_dim > CCG_MAX_RANK)
    return fail(m, CCG_STATUS_UNSUPPORTED,
                "graph input '%s' has rank %zu (at most %d)", name,
                tt->shape->n_dim, CCG_MAX_RANK);
  ccg_shape s;
  memset(&s, 0, sizeof s);
  s.rank = (int)tt->shape->n_dim;
  for (int i = 0; i < s.rank; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (d->dim_value < 0)
        return fail(m, CCG_STATUS_PARSE, "graph input '%s': dim %d is %lld",
                    name, i, (long long)d->dim_value);
      s.dims[i] = ccg_dim_num(d->dim_value);
    } else if (d->value_case ==
                   ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
               d->dim_param && *d->dim_param) {
      s.dims[i] = ccg_dim_sym(d->dim_param);
    } else {
      /* An unnamed dim gets a name of its own. */
      char *sym = ccg__arena_name(&m->a, name, "_dim", (uint64_t)i);
      if (!sym)
        return fail(m, CCG_STATUS_OOM, "graph input '%s'", name);
      s.dims[i] = ccg_dim_sym(sym);
    }
  }
  if (ccg_graph_add_input(m->g, name, dt, &s, NULL) != CCG_STATUS_OK)
    return from_graph(m);
  return CCG_STATUS_OK;
}

/* The whole pages of a mapped model file inside [p, p + n): read, no
 * longer needed. A private read-only mapping reads them again from the
 * file if touched, so this only lowers the import's peak memory. */
static void drop_pages(const uint8_t *p, size_t n) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
  uintptr_t hi = ((uintptr_t)p + n) & ~(page - 1);
  if (hi > lo)
    (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static ccg_status initializers(im *m) {
  for (size_t i = 0; i < m->gp->n_initializer; i++) {
    if (ccg__onnx_dropped(m, (uint32_t)i))
      continue;
    const Onnx__TensorProto *tp = m->gp->initializer[i];
    const char *name = tp->name ? tp->name : "";
    /* "initializer '<name>'" without printf: printf was much of an
     * initializer's work besides copying its data */
    char role[256];
    static const char pre[] = "initializer '";
    size_t n = strnlen(name, sizeof role - sizeof pre - 1);
    memcpy(role, pre, sizeof pre - 1);
    memcpy(role + sizeof pre - 1, name, n);
    memcpy(role + sizeof pre - 1 + n, "'", 2);
    ccg_tensor t;
    bool mapped;
    CCG_CHECK(ccg__onnx_tensor_in(&m->src, &m->a, tp, role, true, &mapped, &t));
    bool outside = m->raw_in_source || (m->outside && m->outside[i]);
    bool lend = mapped || (!outside && m->lend_raw && tp->has_raw_data &&
                           t.data && (uintptr_t)t.data % 64 == 0);
    ccg_status st =
        lend ? ccg__graph_add_initializer_borrowed(m->g, name, &t, NULL)
             : ccg_graph_add_initializer(m->g, name, &t, NULL);
    if (st != CCG_STATUS_OK)
      return from_graph(m);
    if (outside && m->drop_pages)
      drop_pages(tp->raw_data.data, tp->raw_data.len);
  }
  return CCG_STATUS_OK;
}

static ccg_status graph_outputs(im *m) {
  for (size_t i = 0; i < m->gp->n_output; i++) {
    const char *name = m->gp->output[i]->name ? m->gp->output[i]->name : "";
    uint32_t v;
    if (!ccg__strmap_get(&m->g->value_names, name, &v))
      return fail(m, CCG_STATUS_PARSE,
                  "graph output '%s' is not produced by any node", name);
    if (ccg_graph_add_output(m->g, v) != CCG_STATUS_OK)
      return from_graph(m);
  }
  return CCG_STATUS_OK;
}

/* Our own metadata must be of a format and convention this reader knows:
 * a graph read under another backward convention would differentiate
 * differently. */
static ccg_status check_format(im *m) {
  const char *fmt = meta(m, CCG__META_FORMAT);
  if (fmt && strcmp(fmt, CCG__META_FORMAT_VERSION) != 0)
    return fail(m, CCG_STATUS_UNSUPPORTED,
                "metadata '%s' is '%s'; this ccgraph reads version %s",
                CCG__META_FORMAT, fmt, CCG__META_FORMAT_VERSION);
  const char *bw = meta(m, CCG__META_BACKWARD);
  if (bw && strcmp(bw, CCG__BACKWARD_CONVENTION) != 0)
    return fail(m, CCG_STATUS_UNSUPPORTED,
                "metadata '%s' is '%s'; ccgraph's backward convention is "
                "'%s'",
                CCG__META_BACKWARD, bw, CCG__BACKWARD_CONVENTION);
  return CCG_STATUS_OK;
}

/* The graph metadata that export writes back (CCG__META_GRAPH_PREFIX). */
static ccg_status read_graph_meta(im *m) {
  size_t n = strlen(CCG__META_GRAPH_PREFIX);
  for (size_t i = 0; i < m->m->n_metadata_props; i++) {
    const Onnx__StringStringEntryProto *e = m->m->metadata_props[i];
    if (!e->key || strncmp(e->key, CCG__META_GRAPH_PREFIX, n) != 0)
      continue;
    if (ccg_graph_set_meta(m->g, e->key, e->value ? e->value : "") !=
        CCG_STATUS_OK)
      return from_graph(m);
  }
  return CCG_STATUS_OK;
}

/* The graph's tables at the size the model gives (find_dropped counts the
 * nodes' values and uses), grown once. */
static ccg_status reserve(im *m) {
  const Onnx__GraphProto *gp = m->gp;
  if (ccg__graph_reserve(m->g, gp->n_node,
                         gp->n_input + gp->n_initializer + m->n_values,
                         m->n_uses) != CCG_STATUS_OK)
    return from_graph(m);
  return CCG_STATUS_OK;
}

static ccg_status build(im *m) {
  CCG_CHECK(check_format(m));
  CCG_CHECK(read_graph_meta(m));
  CCG_CHECK(read_opsets(m));
  CCG_CHECK(read_mesh(m));
  CCG_CHECK(ccg__onnx_annot_mesh(m));
  CCG_CHECK(find_dropped(m));
  CCG_CHECK(reserve(m));
  for (size_t i = 0; i < m->gp->n_input; i++) {
    const char *nm = m->gp->input[i]->name;
    if (nm && ccg__strmap_get(&m->consts, nm, NULL))
      continue; /* an initializer listed as input too (IR < 4 style) */
    CCG_CHECK(graph_input(m, m->gp->input[i]));
  }
  CCG_CHECK(initializers(m));
  const uint32_t *hash = m->in_hash;
  for (size_t i = 0; i < m->gp->n_node; i++) {
    const Onnx__NodeProto *np = m->gp->node[i];
    m->node_hash = hash;
    hash += np->n_input;
    if (is_constant_node(np) &&
        ccg__onnx_dropped(m, (uint32_t)(m->gp->n_initializer + i)))
      continue;
    if (ccg__onnx_seq_at_of_split(m, np))
      continue; /* read with its SplitToSequence */
    if (!*ccg__onnx_node_domain(np) && np->op_type &&
        strcmp(np->op_type, "SplitToSequence") == 0)
      CCG_CHECK(ccg__onnx_split_seq_in(m, np));
    else
      CCG_CHECK(ccg__onnx_node_in(m, np));
  }
  CCG_CHECK(graph_outputs(m));
  /* ccgraph's own placements win over ONNX's annotations. */
  const char *pl = meta(m, CCG__META_PLACEMENTS);
  CCG_CHECK(ccg__onnx_annot_in(m, pl == NULL));
  if (pl)
    CCG_CHECK(ccg__onnx_restore_placements(m->g, pl, m->src.what));
  const char *tags = meta(m, CCG__META_TAGS);
  if (tags)
    CCG_CHECK(ccg__onnx_restore_tags(m->g, tags, m->src.what));
  const char *slots = meta(m, CCG__META_SLOTS);
  if (slots)
    CCG_CHECK(ccg__onnx_restore_slots(m->g, slots, m->src.what));
  return CCG_STATUS_OK;
}

/* ---- entry points ------------------------------------------------------- */

ccg_status ccg__onnx_import_opts(const ccg_onnx_import_options *in,
                                 ccg_onnx_import_options *o) {
  *o = (ccg_onnx_import_options)CCG_ONNX_IMPORT_OPTIONS_INIT;
  if (in) {
    size_t n = in->size < sizeof *o ? in->size : sizeof *o;
    if (n < sizeof(size_t))
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "ONNX import options: size field is %zu", in->size);
    memcpy(o, in, n);
    o->size = sizeof *o;
  }
  if (o->max_depth < 1)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ONNX import options: max_depth %d must be >= 1",
                      o->max_depth);
  return CCG_STATUS_OK;
}

/* Unpacks the wire format through an allocator capped at max_bytes: our
 * decoder (*in_source: bytes fields point into `data`), or where it
 * declines, the depth pre-scan (protobuf-c recurses without a limit; its
 * error names the fault) and protobuf-c. Before protobuf-c the graph's
 * large inline weights are taken out and left where they are (stripped->raw
 * says where). The model must be freed through the same cap. */
static ccg_status unpack(const char *what, const uint8_t *data, size_t size,
                         const ccg_onnx_import_options *o, ccg__onnx_cap *cap,
                         ccg__onnx_stripped *stripped, bool *in_source,
                         Onnx__ModelProto **out) {
  *in_source = false;
  if (size > o->max_bytes)
    return ccg__error(NULL, CCG_STATUS_OOM,
                      "%s: the model is %zu bytes, over the import's byte "
                      "cap of %zu",
                      what, size, o->max_bytes);
  ccg__onnx_capped_allocator_init(cap, o->max_bytes);
  *out = ccg__onnx_decode(data, size, o->max_depth, cap);
  if (*out) {
    *in_source = true; /* and the pre-scan would pass */
    return CCG_STATUS_OK;
  }
  if (ccg__onnx_wire_check(data, size, o->max_depth) != CCG_STATUS_OK)
    return ccg__error_prefix(NULL, "%s", what);
  CCG_CHECK(ccg__onnx_strip_raw(data, size, stripped));
  if (stripped->data) {
    data = stripped->data;
    size = stripped->size;
  }
  ccg__onnx_capped_allocator_init(cap, o->max_bytes);
  *out = onnx__model_proto__unpack(ccg__onnx_capped_allocator(cap), size, data);
  /* protobuf-c keeps nothing of the bytes it decoded */
  free(stripped->data);
  stripped->data = NULL;
  bool exceeded = ccg__onnx_cap_exceeded(cap);
  if (!*out)
    ccg__onnx_cap_release(cap); /* what protobuf-c left behind */
  if (!*out && exceeded)
    return ccg__error(NULL, CCG_STATUS_OOM,
                      "%s: decoding the model needs more than the import's "
                      "byte cap of %zu",
                      what, o->max_bytes);
  if (!*out)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: not an ONNX model (the protobuf wire format does "
                      "not decode as a ModelProto)",
                      what);
  return CCG_STATUS_OK;
}

static void release_decoded(void *p, size_t n) {
  (void)n;
  ccg__onnx_cap_release(p);
  free(p);
}

/* Inline weights (raw_data) are decoded once by protobuf-c; where they are
 * most of the decoded model, the graph takes the decoded model and its
 * initializers use that data instead of a second copy. *owned: the graph
 * has it (then only the graph frees it, also when the import fails). */
static ccg_status lend_decoded(im *m, ccg__onnx_cap *cap, bool *owned) {
  size_t raw = 0;
  for (size_t i = 0; i < m->gp->n_initializer; i++)
    if (m->gp->initializer[i]->has_raw_data)
      raw += m->gp->initializer[i]->raw_data.len;
  *owned = false;
  if (raw < cap->used / 2)
    return CCG_STATUS_OK;
  ccg__onnx_cap *keep = malloc(sizeof *keep);
  if (!keep)
    return CCG_STATUS_OK; /* copied instead */
  *keep = *cap;
  *owned = true;
  if (ccg__graph_own(m->g, release_decoded, keep, 0) != CCG_STATUS_OK) {
    ccg_graph_free(m->g); /* the model is gone with keep */
    m->g = NULL;
    return ccg__error(NULL, CCG_STATUS_OOM, "%s: out of memory", m->src.what);
  }
  m->lend_raw = true;
  return CCG_STATUS_OK;
}

/* Points the initializers whose raw_data was left in the source at it, and
 * marks them in *outside (NULL when there are none). */
static ccg_status restore_raw(const ccg__onnx_stripped *s, Onnx__GraphProto *gp,
                              bool **outside) {
  *outside = NULL;
  if (!s->n_raw)
    return CCG_STATUS_OK;
  *outside = calloc(gp->n_initializer + 1, sizeof **outside);
  if (!*outside)
    return ccg__error(NULL, CCG_STATUS_OOM, "indexing inline weights");
  for (size_t i = 0; i < s->n_raw; i++) {
    const ccg__onnx_raw *r = &s->raw[i];
    if (r->init >= gp->n_initializer || gp->initializer[r->init]->has_raw_data)
      return ccg__error(NULL, CCG_STATUS_INTERNAL,
                        "inline weight %zu of %zu initializers", r->init,
                        gp->n_initializer);
    Onnx__TensorProto *tp = gp->initializer[r->init];
    tp->has_raw_data = 1;
    tp->raw_data.data = (uint8_t *)r->data;
    tp->raw_data.len = r->len;
    (*outside)[r->init] = true;
  }
  return CCG_STATUS_OK;
}

static ccg_status import_model(const char *what, const void *data, size_t size,
                               const char *base_dir,
                               const ccg_onnx_import_options *opts,
                               bool mapped_file, ccg_graph **out) {
  if (!out || (!data && size))
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ONNX import: no data or no output pointer");
  *out = NULL;
  ccg_onnx_import_options o;
  CCG_CHECK(ccg__onnx_import_opts(opts, &o));
  Onnx__ModelProto *mp = NULL;
  ccg__onnx_cap cap;
  ccg__onnx_stripped stripped = {0};
  bool in_source = false; /* raw_data points into `data` */
  ccg_status st =
      unpack(what, data, size, &o, &cap, &stripped, &in_source, &mp);
  if (st != CCG_STATUS_OK) {
    ccg__onnx_stripped_free(&stripped);
    return st;
  }
  bool owned = false; /* the graph owns the decoded model (lend_decoded) */
  bool *outside = NULL;
  im m;
  memset(&m, 0, sizeof m);
  m.o = &o;
  m.src = (ccg__onnx_src){what, base_dir, o.max_bytes - size, NULL, NULL};
  m.m = mp;
  m.gp = mp->graph;
  m.drop_pages = mapped_file;
  if (!m.gp) {
    st = ccg__error(NULL, CCG_STATUS_PARSE, "%s: not an ONNX model: no graph",
                    what);
    goto out;
  }
  ccg_graph_options go = CCG_GRAPH_OPTIONS_INIT;
  go.name =
      o.name ? o.name : (m.gp->name && *m.gp->name ? m.gp->name : "graph");
  CCG_CHECK_GOTO(ccg_graph_new(&go, &m.g), st, out);
  if (o.map_external_data)
    m.src.owner = m.g;
  m.raw_in_source = in_source;
  if (!in_source) {
    /* before the weights left in the source count as decoded raw data */
    CCG_CHECK_GOTO(lend_decoded(&m, &cap, &owned), st, out);
    st = restore_raw(&stripped, mp->graph, &outside);
    if (st != CCG_STATUS_OK) {
      ccg_graph_free(m.g);
      goto out;
    }
  }
  m.outside = outside;
  ccg__arena_init(&m.a, NULL, 0);
  ccg__arena_init(&m.node_a, NULL, 0);
  ccg__strmap_init(&m.consts, NULL);
  st = build(&m);
  ccg__strmap_free(&m.consts);
  ccg__arena_free(&m.a);
  ccg__arena_free(&m.node_a);
  if (st == CCG_STATUS_OK) {
    /* the graph's weights are in: the unused end of its last huge-page
     * chunk need not stay resident while the graph lives */
    ccg__arena_trim(&m.g->arena);
    *out = m.g;
  } else {
    ccg_graph_free(m.g);
  }
out:
  free(outside);
  ccg__onnx_stripped_free(&stripped);
  if (!owned)
    ccg__onnx_cap_release(&cap); /* frees mp */
  return st;
}

ccg_status ccg_onnx_import_buffer(const void *data, size_t size,
                                  const char *base_dir,
                                  const ccg_onnx_import_options *opts,
                                  ccg_graph **out) {
  return import_model("<buffer>", data, size, base_dir, opts, false, out);
}

ccg_status ccg__onnx_file_read(const char *path, size_t max_bytes,
                               ccg__onnx_file *fb) {
  *fb = (ccg__onnx_file){NULL, 0, false};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ccg__error(NULL, CCG_STATUS_IO, "%s: %s", path, strerror(errno));
  ccg_status st = CCG_STATUS_OK;
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    st = ccg__error(NULL, CCG_STATUS_IO, "%s: %s", path, strerror(errno));
    goto out;
  }
  if (S_ISDIR(sb.st_mode)) {
    st = ccg__error(NULL, CCG_STATUS_IO, "%s: is a folder, not a model file",
                    path);
    goto out;
  }
  if (S_ISREG(sb.st_mode)) {
    if ((uint64_t)sb.st_size > max_bytes) {
      st = ccg__error(NULL, CCG_STATUS_OOM,
                      "%s: %lld bytes, over the import's byte cap of %zu", path,
                      (long long)sb.st_size, max_bytes);
      goto out;
    }
    fb->size = (size_t)sb.st_size;
    if (fb->size) {
      void *p = mmap(NULL, fb->size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        fb->data = p;
        fb->mapped = true;
        goto out;
      }
    }
  }
  /* Not mappable (a pipe, an empty or special file): read to the end. */
  size_t cap = 0;
  fb->size = 0;
  for (;;) {
    if (fb->size == cap) {
      size_t ncap = cap ? 2 * cap : 1 << 16;
      if (max_bytes < SIZE_MAX && ncap > max_bytes + 1)
        ncap = max_bytes + 1; /* one byte past the cap tells it is over */
      uint8_t *nd = ncap > cap ? realloc(fb->data, ncap) : NULL;
      if (!nd) {
        st =
            fb->size > max_bytes
                ? ccg__error(NULL, CCG_STATUS_OOM,
                             "%s: over the import's byte cap of %zu", path,
                             max_bytes)
                : ccg__error(NULL, CCG_STATUS_OOM, "%s: %zu bytes", path, ncap);
        goto out;
      }
      fb->data = nd;
      cap = ncap;
    }
    ssize_t r = read(fd, fb->data + fb->size, cap - fb->size);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      st = ccg__error(NULL, CCG_STATUS_IO, "%s: %s", path, strerror(errno));
      goto out;
    }
    if (r == 0)
      break;
    fb->size += (size_t)r;
  }
  if (fb->size > max_bytes)
    st = ccg__error(NULL, CCG_STATUS_OOM,
                    "%s: over the import's byte cap of %zu", path, max_bytes);
out:
  close(fd);
  return st;
}

void ccg__onnx_file_free(ccg__onnx_file *fb) {
  if (fb->mapped)
    munmap(fb->data, fb->size);
  else
    free(fb->data);
}

ccg_status ccg_onnx_import_file(const char *path,
                                const ccg_onnx_import_options *opts,
                                ccg_graph **out) {
  if (!path || !out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ONNX import: no file name or output pointer");
  *out = NULL;
  ccg_onnx_import_options o;
  CCG_CHECK(ccg__onnx_import_opts(opts, &o));
  ccg__onnx_file f;
  ccg_status st = ccg__onnx_file_read(path, o.max_bytes, &f);
  /* External data is resolved against the model's own folder. */
  char *dir = NULL;
  const char *base = NULL;
  if (st == CCG_STATUS_OK)
    st = ccg__onnx_dir_of(path, &dir, &base);
  if (st == CCG_STATUS_OK)
    st = import_model(path, f.data, f.size, base, &o, f.mapped, out);
  free(dir);
  ccg__onnx_file_free(&f);
  return st;
}
