/* Graphs: their life, interned symbols, the mesh, values, scopes. Nodes
 * (the one path that adds them, their uses, tags and metadata) are in
 * node.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"

#define KNOWN_MAX CCG_MAX_RANK

ccg_status ccg__graph_oom(ccg_graph *g, const char *what) {
  return ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory while %s", what);
}

/* The name indexes hold ids only; names are read from the records (a
 * record takes its name after the put, so a lookup reads only records that
 * are there). */
static const char *value_key(const void *g, uint32_t id) {
  return ((const ccg_graph *)g)->values[id].name;
}

static const char *node_key(const void *g, uint32_t id) {
  return ((const ccg_graph *)g)->nodes[id].name;
}

ccg_status ccg_graph_new(const ccg_graph_options *opts, ccg_graph **out) {
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  if (!out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_graph_new: out is NULL");
  *out = NULL;
  if (opts) {
    if (opts->size < sizeof o)
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "ccg_graph_options.size is %zu, expected at least %zu "
                        "(use CCG_GRAPH_OPTIONS_INIT)",
                        opts->size, sizeof o);
    o = *opts;
  }
  ccg_allocator a = {0};
  if (o.allocator)
    a = *o.allocator;
  ccg_graph *g = ccg__calloc(&a, 1, sizeof *g);
  if (!g)
    return ccg__error(NULL, CCG_STATUS_OOM, "cannot allocate a graph");
  ccg__ctx_init(&g->ctx);
  g->alloc = a;
  ccg__arena_init(&g->arena, &a, 0);
  ccg__arena_init(&g->scratch, &a, 16 * 1024);
  ccg__strmap_init_ids(&g->value_names, &a, value_key, g);
  ccg__strmap_init_ids(&g->node_names, &a, node_key, g);
  ccg__strmap_init(&g->symbols, &a);
  g->name = ccg__arena_strdup(&g->arena, o.name ? o.name : "graph");
  if (ccg__vec_reserve(&a, (void **)&g->scope, &g->scope_cap, 64, 1))
    g->scope[0] = '\0';
  if (!g->name || !g->scope) {
    ccg_graph_free(g);
    return ccg__error(NULL, CCG_STATUS_OOM, "cannot allocate a graph");
  }
  *out = g;
  return CCG_STATUS_OK;
}

void ccg_graph_free(ccg_graph *g) {
  if (!g)
    return;
  ccg_allocator a = g->alloc;
  ccg__table_free(g, g->values, g->cap_values, g->values_bulk,
                  sizeof *g->values);
  ccg__table_free(g, g->nodes, g->cap_nodes, g->nodes_bulk, sizeof *g->nodes);
  ccg__free(&a, g->inputs, g->cap_inputs * sizeof *g->inputs);
  ccg__free(&a, g->outputs, g->cap_outputs * sizeof *g->outputs);
  ccg__free(&a, g->inits, g->cap_inits * sizeof *g->inits);
  ccg__table_free(g, g->uses, g->cap_uses, g->uses_bulk, sizeof *g->uses);
  ccg__free(&a, g->scope, g->scope_cap);
  ccg__strmap_free(&g->value_names);
  ccg__strmap_free(&g->node_names);
  ccg__strmap_free(&g->symbols);
  ccg__free(&a, (void *)g->shapes, g->cap_shapes * sizeof *g->shapes);
  for (ccg__release *r = g->releases; r; r = r->next)
    r->fn(r->p, r->n);
  ccg__arena_free(&g->arena);
  ccg__arena_free(&g->scratch);
  g->ctx.magic = 0;
  ccg__free(&a, g, sizeof *g);
}

/* Tables from this size on are mapped as huge pages when the graph uses
 * libc: a large graph's value table is several MB,
 * and filling that much new memory 4 KiB page by page made its page faults
 * grow faster than the graph (the allocator hands small tables freed by
 * one graph to the next, not large ones). */
#define TABLE_BULK_MIN ((size_t)2 << 20)

static bool libc_alloc(const ccg_allocator *a) {
  return !a->alloc && !a->realloc && !a->free;
}

bool ccg__table_reserve(ccg_graph *g, void **items, size_t *cap, bool *bulk,
                        size_t need, size_t elem) {
  if (need <= *cap)
    return true;
  size_t ncap = *cap ? *cap : 8, bytes;
  while (ncap < need) {
    if (ncap > SIZE_MAX / 2)
      return false;
    ncap *= 2;
  }
  if (!ccg__mul_size(ncap, elem, &bytes) || bytes > SIZE_MAX - TABLE_BULK_MIN)
    return false;
  bool big = bytes >= TABLE_BULK_MIN && libc_alloc(&g->alloc);
  /* whole huge pages: the rest of the last one is room for free */
  if (big)
    bytes = (bytes + TABLE_BULK_MIN - 1) / TABLE_BULK_MIN * TABLE_BULK_MIN;
  if (big && *bulk) {
    void *q = ccg__bulk_grow(*items, *cap * elem, bytes);
    if (q) {
      *items = q;
      *cap = bytes / elem;
      return true;
    }
  }
  void *p = big ? ccg__bulk_alloc(bytes) : NULL;
  bool from_bulk = p != NULL;
  if (!p && !*bulk) /* malloc's realloc, which may extend in place */
    return ccg__vec_reserve(&g->alloc, items, cap, need, elem);
  if (!p && !(p = ccg__alloc(&g->alloc, bytes)))
    return false;
  if (*items)
    memcpy(p, *items, *cap * elem);
  ccg__table_free(g, *items, *cap, *bulk, elem);
  *items = p;
  *cap = bytes / elem;
  *bulk = from_bulk;
  return true;
}

void ccg__table_free(ccg_graph *g, void *items, size_t cap, bool bulk,
                     size_t elem) {
  if (bulk)
    ccg__bulk_free(items, cap * elem);
  else
    ccg__free(&g->alloc, items, cap * elem);
}

const char *ccg_graph_name(const ccg_graph *g) { return g->name; }

/* A symbol's id in g->symbols: 1 for a fresh one, 0 for the others. */
static const char *intern_as(ccg_graph *g, const char *s, uint32_t id) {
  const char *k = ccg__strmap_key(&g->symbols, s);
  if (k)
    return k;
  char *copy = ccg__arena_strdup(&g->arena, s);
  if (!copy || ccg__strmap_put(&g->symbols, copy, id) != CCG_STATUS_OK)
    return NULL;
  return copy;
}

const char *ccg__intern(ccg_graph *g, const char *s) {
  return intern_as(g, s, 0);
}

const char *ccg__intern_fresh(ccg_graph *g, const char *s) {
  return intern_as(g, s, 1);
}

/* Whether every name in the symbol text s is a fresh symbol (numbers and
 * operators aside); false when it names none. */
static bool fresh_names(const ccg_graph *g, const char *s) {
  bool any = false;
  while (*s) {
    if (!isalpha((unsigned char)*s) && *s != '_') {
      s++;
      continue;
    }
    size_t n = 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == '.')
      n++;
    char name[256];
    uint32_t id = 0;
    if (n >= sizeof name)
      return false;
    memcpy(name, s, n);
    name[n] = '\0';
    if (!ccg__strmap_get(&g->symbols, name, &id) || id != 1)
      return false;
    any = true;
    s += n;
  }
  return any;
}

bool ccg__dim_is_fresh(const ccg_graph *g, ccg_dim d) {
  uint32_t id = 0;
  if (!ccg_dim_is_sym(d))
    return false;
  if (ccg__strmap_get(&g->symbols, d.sym, &id))
    return id == 1 || fresh_names(g, d.sym);
  return fresh_names(g, d.sym);
}

ccg_status ccg__shape_import(ccg_graph *g, const ccg_shape *in,
                             ccg_shape *out) {
  if (in->rank < 0 || in->rank > CCG_MAX_RANK)
    return ccg__error(&g->ctx, CCG_STATUS_SHAPE, "rank %d is outside 0..%d",
                      in->rank, CCG_MAX_RANK);
  ccg_shape s;
  memset(&s, 0, sizeof s);
  s.rank = in->rank;
  for (int i = 0; i < in->rank; i++) {
    ccg_dim d = in->dims[i];
    if (d.size >= 0) {
      s.dims[i] = ccg_dim_num(d.size);
      continue;
    }
    if (d.size != CCG_DIM_SYMBOLIC || !d.sym || !*d.sym)
      return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                        "dim %d is %lld: a dim is a size >= 0 or a named "
                        "symbol",
                        i, (long long)d.size);
    /* Interned symbols are canonical already: the common case is a shape
     * that came out of this graph. */
    const char *known = ccg__strmap_key(&g->symbols, d.sym);
    if (known) {
      s.dims[i] = ccg_dim_sym(known);
      continue;
    }
    char canon[256];
    if (!ccg__sym_canonical(d.sym, canon, sizeof canon))
      return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                        "dim %d: symbol '%.64s...' is too long", i, d.sym);
    /* "4" or "2*3" are numbers, not symbols. */
    char *end;
    long long v = strtoll(canon, &end, 10);
    if (*end == '\0' && canon[0] != '-') {
      s.dims[i] = ccg_dim_num(v);
      continue;
    }
    const char *sym = ccg__intern(g, canon);
    if (!sym)
      return ccg__graph_oom(g, "interning a symbol");
    s.dims[i] = ccg_dim_sym(sym);
  }
  *out = s;
  return CCG_STATUS_OK;
}

/* ---- interned shapes ---------------------------------------------------- */

/* Dims past the rank are not hashed or compared: a shape rule may leave
 * anything there. Symbols are interned, so their pointers stand for their
 * texts. */
static uint32_t shape_hash(const ccg_shape *s) {
  uint64_t h = (uint64_t)(unsigned)s->rank * 0x9e3779b97f4a7c15u;
  for (int i = 0; i < s->rank; i++) {
    uint64_t d =
        (uint64_t)s->dims[i].size ^ (uint64_t)(uintptr_t)s->dims[i].sym;
    h = (h ^ d) * 0xff51afd7ed558ccdu;
    h ^= h >> 29;
  }
  return (uint32_t)(h ^ (h >> 32));
}

static bool shape_same(const ccg_shape *a, const ccg_shape *b) {
  if (a->rank != b->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i].size != b->dims[i].size || a->dims[i].sym != b->dims[i].sym)
      return false;
  return true;
}

/* Doubles the slots; false (table unchanged) on OOM. */
static bool shapes_grow(ccg_graph *g) {
  size_t cap = g->cap_shapes ? 2 * g->cap_shapes : 256;
  const ccg_shape **slots = ccg__calloc(&g->alloc, cap, sizeof *slots);
  if (!slots)
    return false;
  for (size_t i = 0; i < g->cap_shapes; i++) {
    const ccg_shape *s = g->shapes[i];
    if (!s)
      continue;
    size_t k = shape_hash(s) & (cap - 1);
    while (slots[k])
      k = (k + 1) & (cap - 1);
    slots[k] = s;
  }
  ccg__free(&g->alloc, (void *)g->shapes, g->cap_shapes * sizeof *g->shapes);
  g->shapes = slots;
  g->cap_shapes = cap;
  return true;
}

const ccg_shape *ccg__shape_intern(ccg_graph *g, const ccg_shape *s) {
  /* at most half full: probes stay short */
  if (2 * (g->n_shapes + 1) > g->cap_shapes && !shapes_grow(g))
    return NULL;
  size_t mask = g->cap_shapes - 1, k = shape_hash(s) & mask;
  for (; g->shapes[k]; k = (k + 1) & mask)
    if (shape_same(g->shapes[k], s))
      return g->shapes[k];
  /* a whole ccg_shape: callers of ccg_value_shape copy all of it */
  ccg_shape *c = ccg__arena_alloc(&g->arena, sizeof *c, 8);
  if (!c)
    return NULL;
  memset(c, 0, sizeof *c);
  c->rank = s->rank;
  memcpy(c->dims, s->dims, (size_t)s->rank * sizeof *s->dims);
  g->shapes[k] = c;
  g->n_shapes++;
  return c;
}

/* ---- mesh --------------------------------------------------------------- */

ccg_status ccg_graph_set_mesh(ccg_graph *g, const ccg_mesh *mesh) {
  if (!mesh || mesh->ndims < 1 || mesh->ndims > CCG_MAX_MESH_AXES)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "a mesh needs 1 to %d axes", CCG_MAX_MESH_AXES);
  ccg_mesh m;
  memset(&m, 0, sizeof m);
  m.ndims = mesh->ndims;
  int64_t world = 1;
  for (int i = 0; i < mesh->ndims; i++) {
    size_t len = strnlen(mesh->names[i], CCG_MESH_NAME_MAX);
    if (len == 0 || len == CCG_MESH_NAME_MAX)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "mesh axis %d has an empty or unterminated name", i);
    memcpy(m.names[i], mesh->names[i], len);
    if (ccg_mesh_axis(&m, m.names[i]) != i)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "mesh axis '%s' appears twice", m.names[i]);
    if (mesh->sizes[i] < 1 || mesh->sizes[i] > INT32_MAX / world)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "mesh axis '%s' has size %lld (must be >= 1, and the "
                        "mesh at most %d ranks)",
                        m.names[i], (long long)mesh->sizes[i], INT32_MAX);
    m.sizes[i] = mesh->sizes[i];
    world *= m.sizes[i];
  }
  if (g->has_mesh && memcmp(&m, &g->mesh, sizeof m) != 0) {
    for (size_t n = 0; n < g->n_nodes; n++) {
      if (ccg_op_is_collective(g->nodes[n].op)) {
        char a[128], b[128];
        ccg_mesh_format(&g->mesh, a, sizeof a);
        ccg_mesh_format(&m, b, sizeof b);
        return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                          "graph '%s' already has collectives on mesh [%s]; "
                          "cannot change it to [%s]",
                          g->name, a, b);
      }
    }
  }
  g->mesh = m;
  g->has_mesh = true;
  return CCG_STATUS_OK;
}

const ccg_mesh *ccg_graph_mesh(const ccg_graph *g) {
  return g->has_mesh ? &g->mesh : NULL;
}

/* ---- values ------------------------------------------------------------- */

/* *hash: the name's, for the insert that follows the check. */
static ccg_status check_new_name(ccg_graph *g, const char *name,
                                 const char *what, uint32_t *hash) {
  if (!name || !*name)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG, "%s has no name", what);
  *hash = ccg__strhash(name);
  if (ccg__strmap_get_h(&g->value_names, name, *hash, NULL))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s '%s': a value of that name already exists (values "
                      "are assigned once)",
                      what, name);
  return CCG_STATUS_OK;
}

/* Appends a value; the name must be arena-owned and already checked. */
ccg_status ccg__push_value(ccg_graph *g, const char *name, uint32_t hash,
                           ccg_dtype dt, const ccg_shape *shape,
                           ccg_value_kind kind, ccg_value_id *out) {
  if (g->n_values >= CCG_NONE - 1)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "too many values");
  if (!ccg__table_reserve(g, (void **)&g->values, &g->cap_values,
                          &g->values_bulk, g->n_values + 1, sizeof *g->values))
    return ccg__graph_oom(g, "adding a value");
  ccg_value_id id = (ccg_value_id)g->n_values;
  if (ccg__strmap_put_h(&g->value_names, name, hash, id) != CCG_STATUS_OK)
    return ccg__graph_oom(g, "indexing a value name");
  ccg__value *v = &g->values[g->n_values++];
  memset(v, 0, sizeof *v);
  v->name = name;
  v->dtype = dt;
  v->shape = shape;
  v->kind = kind;
  v->producer = CCG_NONE;
  v->first_use = v->last_use = CCG_NONE;
  *out = id;
  return CCG_STATUS_OK;
}

static ccg_status push_id(ccg_graph *g, ccg_value_id **vec, size_t *n,
                          size_t *cap, ccg_value_id id) {
  if (!ccg__vec_reserve(&g->alloc, (void **)vec, cap, *n + 1, sizeof **vec))
    return ccg__graph_oom(g, "adding a graph input or output");
  (*vec)[(*n)++] = id;
  return CCG_STATUS_OK;
}

static ccg_status check_dtype(ccg_graph *g, ccg_dtype dt, const char *what,
                              const char *name) {
  if ((unsigned)dt >= CCG_DTYPE_COUNT || dt == CCG_DTYPE_UNDEFINED)
    return ccg__error(&g->ctx, CCG_STATUS_DTYPE,
                      "%s '%s' has no valid dtype (%d)", what, name, (int)dt);
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_add_input(ccg_graph *g, const char *name, ccg_dtype dtype,
                               const ccg_shape *shape, ccg_value_id *out) {
  uint32_t hash;
  CCG_CHECK(check_new_name(g, name, "graph input", &hash));
  CCG_CHECK(check_dtype(g, dtype, "graph input", name));
  if (!shape)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "graph input '%s' has no shape", name);
  ccg_shape s;
  if (ccg__shape_import(g, shape, &s) != CCG_STATUS_OK)
    return ccg__error_prefix(&g->ctx, "graph input '%s'", name);
  const ccg_shape *is = ccg__shape_intern(g, &s);
  const char *nm = ccg__arena_strdup(&g->arena, name);
  if (!is || !nm ||
      !ccg__vec_reserve(&g->alloc, (void **)&g->inputs, &g->cap_inputs,
                        g->n_inputs + 1, sizeof *g->inputs))
    return ccg__graph_oom(g, "adding a graph input");
  ccg_value_id id;
  CCG_CHECK(ccg__push_value(g, nm, hash, dtype, is, CCG_VALUE_INPUT, &id));
  g->inputs[g->n_inputs++] = id;
  if (out)
    *out = id;
  return CCG_STATUS_OK;
}

/* A contents record with nothing in it (nothing known); NULL when out of
 * memory. */
static ccg__contents *new_contents(ccg_graph *g) {
  ccg__contents *c = ccg__arena_calloc(&g->arena, 1, sizeof *c);
  if (c)
    c->n_known = -1;
  return c;
}

ccg__contents *ccg__contents_of(ccg_graph *g, ccg__value *v) {
  if (!v->c)
    v->c = new_contents(g);
  return v->c;
}

/* Small integer vectors and scalars get known contents (for shape math). */
static void set_known_from_data(ccg_graph *g, ccg__value *v) {
  const ccg_tensor *t = ccg__vdata(v);
  if (!t || (t->dtype != CCG_DTYPE_I64 && t->dtype != CCG_DTYPE_I32) ||
      t->rank > 1)
    return;
  int64_t n = t->rank == 0 ? 1 : t->dims[0];
  if (n > KNOWN_MAX)
    return;
  ccg_dim *k = ccg__arena_calloc(&g->arena, KNOWN_MAX, sizeof *k);
  if (!k)
    return; /* contents stay unknown: shapes that need them become symbols */
  for (int64_t i = 0; i < n; i++)
    k[i] =
        ccg_dim_num(t->dtype == CCG_DTYPE_I64 ? ((const int64_t *)t->data)[i]
                                              : ((const int32_t *)t->data)[i]);
  v->c->known = k; /* v->c holds the data */
  v->c->n_known = (int)n;
}

/* Copies a tensor (and its data) into the graph's arena. */
ccg_tensor *ccg__copy_tensor(ccg_graph *g, const ccg_tensor *t, ccg_status *st,
                             const char *what, const char *name) {
  size_t nbytes;
  if (ccg_tensor_nbytes(t, &nbytes) != CCG_STATUS_OK) {
    ccg__error_copy(&g->ctx, NULL);
    *st = ccg__error_prefix(&g->ctx, "%s '%s'", what, name);
    return NULL;
  }
  if (nbytes && !t->data) {
    *st = ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                     "%s '%s' has %zu bytes of shape but no data", what, name,
                     nbytes);
    return NULL;
  }
  ccg_tensor *c = ccg__arena_alloc(&g->arena, sizeof *c, 16);
  void *data = c ? ccg__arena_memdup(&g->arena, t->data, nbytes, 64) : NULL;
  if (!c || !data) {
    *st = ccg__graph_oom(g, "copying tensor data");
    return NULL;
  }
  *c = *t;
  c->data = data;
  return c;
}

static ccg_status add_initializer(ccg_graph *g, const char *name,
                                  const ccg_tensor *data, bool copy,
                                  ccg_value_id *out) {
  uint32_t hash;
  CCG_CHECK(check_new_name(g, name, "initializer", &hash));
  if (!data)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "initializer '%s' has no tensor", name);
  CCG_CHECK(check_dtype(g, data->dtype, "initializer", name));
  ccg_status st = CCG_STATUS_OK;
  ccg_tensor *t;
  if (copy) {
    t = ccg__copy_tensor(g, data, &st, "initializer", name);
    if (!t)
      return st;
  } else {
    size_t nbytes;
    if (ccg_tensor_nbytes(data, &nbytes) != CCG_STATUS_OK)
      return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                        "initializer '%s' has an invalid shape", name);
    if (nbytes && !data->data)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "initializer '%s' has %zu bytes of shape but no data",
                        name, nbytes);
    if (!(t = ccg__arena_alloc(&g->arena, sizeof *t, 16)))
      return ccg__graph_oom(g, "adding an initializer");
    *t = *data;
  }
  ccg_shape s = ccg_shape_make(t->rank, t->dims);
  const ccg_shape *is = ccg__shape_intern(g, &s);
  const char *nm = ccg__arena_strdup(&g->arena, name);
  ccg__contents *c = new_contents(g);
  if (!is || !nm || !c ||
      !ccg__vec_reserve(&g->alloc, (void **)&g->inits, &g->cap_inits,
                        g->n_inits + 1, sizeof *g->inits))
    return ccg__graph_oom(g, "adding an initializer");
  ccg_value_id id;
  CCG_CHECK(
      ccg__push_value(g, nm, hash, t->dtype, is, CCG_VALUE_INITIALIZER, &id));
  c->data = t;
  g->values[id].c = c;
  set_known_from_data(g, &g->values[id]);
  g->inits[g->n_inits++] = id;
  if (out)
    *out = id;
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_add_initializer(ccg_graph *g, const char *name,
                                     const ccg_tensor *data,
                                     ccg_value_id *out) {
  return add_initializer(g, name, data, true, out);
}

ccg_status ccg__graph_add_initializer_borrowed(ccg_graph *g, const char *name,
                                               const ccg_tensor *t,
                                               ccg_value_id *out) {
  return add_initializer(g, name, t, false, out);
}

ccg_status ccg__graph_own(ccg_graph *g, void (*fn)(void *p, size_t n), void *p,
                          size_t n) {
  ccg__release *r = ccg__arena_alloc(&g->arena, sizeof *r, 8);
  if (!r) {
    fn(p, n);
    return ccg__graph_oom(g, "taking ownership of external memory");
  }
  *r = (ccg__release){fn, p, n, g->releases};
  g->releases = r;
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_add_output(ccg_graph *g, ccg_value_id v) {
  if (!ccg__value_ok(g, v))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "graph output: value id %u does not exist", v);
  if (g->values[v].is_output)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "value '%s' is already a graph output",
                      g->values[v].name);
  CCG_CHECK(push_id(g, &g->outputs, &g->n_outputs, &g->cap_outputs, v));
  g->values[v].is_output = true;
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_push_scope(ccg_graph *g, const char *name) {
  if (!name || !*name || strchr(name, '/'))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "scope name '%s' must be non-empty and contain no '/'",
                      name ? name : "(null)");
  /* one buffer, grown as scopes nest (a pass pushes the scopes of every
   * node it copies: a string per push and per pop was arena that nothing
   * read again) */
  size_t n = strlen(name);
  if (!ccg__vec_reserve(&g->alloc, (void **)&g->scope, &g->scope_cap,
                        g->scope_len + n + 2, 1))
    return ccg__graph_oom(g, "pushing a scope");
  g->scope[g->scope_len] = '/';
  memcpy(g->scope + g->scope_len + 1, name, n + 1);
  g->scope_len += n + 1;
  return CCG_STATUS_OK;
}

void ccg_graph_pop_scope(ccg_graph *g) {
  char *slash = strrchr(g->scope, '/');
  if (!slash)
    return;
  *slash = '\0';
  g->scope_len = (size_t)(slash - g->scope);
}

size_t ccg_graph_num_values(const ccg_graph *g) { return g->n_values; }
size_t ccg_graph_num_nodes(const ccg_graph *g) { return g->n_nodes; }
size_t ccg_graph_num_inputs(const ccg_graph *g) { return g->n_inputs; }
size_t ccg_graph_num_outputs(const ccg_graph *g) { return g->n_outputs; }
size_t ccg_graph_num_initializers(const ccg_graph *g) { return g->n_inits; }
ccg_value_id ccg_graph_input(const ccg_graph *g, size_t i) {
  return i < g->n_inputs ? g->inputs[i] : CCG_NONE;
}
ccg_value_id ccg_graph_output(const ccg_graph *g, size_t i) {
  return i < g->n_outputs ? g->outputs[i] : CCG_NONE;
}
ccg_value_id ccg_graph_initializer(const ccg_graph *g, size_t i) {
  return i < g->n_inits ? g->inits[i] : CCG_NONE;
}

ccg_status ccg_graph_find_value(ccg_graph *g, const char *name,
                                ccg_value_id *out) {
  uint32_t id;
  if (!name || !ccg__strmap_get(&g->value_names, name, &id))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "graph '%s' has no value named '%s'", g->name,
                      name ? name : "(null)");
  *out = id;
  return CCG_STATUS_OK;
}

ccg_status ccg_value_set_name(ccg_graph *g, ccg_value_id v, const char *name) {
  if (!ccg__value_ok(g, v) || !name || !*name)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "renaming value %u: no such value, or an empty name", v);
  uint32_t other;
  if (ccg__strmap_get(&g->value_names, name, &other))
    return other == v ? CCG_STATUS_OK
                      : ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                                   "renaming '%s' to '%s': a value of that "
                                   "name already exists",
                                   g->values[v].name, name);
  const char *copy = ccg__arena_strdup(&g->arena, name);
  if (!copy || ccg__strmap_reserve(&g->value_names, g->value_names.count + 1) !=
                   CCG_STATUS_OK)
    return ccg__graph_oom(g, "renaming a value");
  /* the index reads a value's name from its record: the old entry goes
   * while the record still has the old name, the new one comes after it
   * has the new name (the put cannot fail: room was made) */
  ccg__strmap_remove(&g->value_names, g->values[v].name);
  g->values[v].name = copy;
  (void)ccg__strmap_put(&g->value_names, copy, v);
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_find_node(ccg_graph *g, const char *name,
                               ccg_node_id *out) {
  uint32_t id;
  if (!name || !ccg__strmap_get(&g->node_names, name, &id))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "graph '%s' has no node named '%s'", g->name,
                      name ? name : "(null)");
  *out = id;
  return CCG_STATUS_OK;
}

const char *ccg_value_name(const ccg_graph *g, ccg_value_id v) {
  return ccg__value_ok(g, v) ? g->values[v].name : NULL;
}
ccg_dtype ccg_value_dtype(const ccg_graph *g, ccg_value_id v) {
  return ccg__value_ok(g, v) ? g->values[v].dtype : CCG_DTYPE_UNDEFINED;
}
const ccg_shape *ccg_value_shape(const ccg_graph *g, ccg_value_id v) {
  return ccg__value_ok(g, v) ? g->values[v].shape : NULL;
}
ccg_value_kind ccg_value_kind_of(const ccg_graph *g, ccg_value_id v) {
  return ccg__value_ok(g, v) ? g->values[v].kind : CCG_VALUE_KIND_COUNT;
}
ccg_node_id ccg_value_producer(const ccg_graph *g, ccg_value_id v) {
  return ccg__value_ok(g, v) ? g->values[v].producer : CCG_NONE;
}
const ccg_tensor *ccg_value_data(const ccg_graph *g, ccg_value_id v) {
  return ccg__value_ok(g, v) ? ccg__vdata(&g->values[v]) : NULL;
}

int ccg_value_known(const ccg_graph *g, ccg_value_id v, ccg_dim *elems) {
  if (!ccg__value_ok(g, v) || ccg__vn_known(&g->values[v]) < 0)
    return -1;
  const ccg__contents *c = g->values[v].c;
  if (elems)
    memcpy(elems, c->known, (size_t)c->n_known * sizeof *elems);
  return c->n_known;
}
