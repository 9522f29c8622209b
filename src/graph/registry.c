/* The op registry: one row per op from CCG_OP_LIST, joined with the
 * behaviour each family file defines (ccg__opdef_<ID>). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "graph/internal.h"

static const ccg__op_info op_table[] = {
#define X(id, nm, dom, imin, imax, omin, omax)                                 \
  {nm, dom, imin, imax, omin, omax, &ccg__opdef_##id},
    CCG_OP_LIST(X)
#undef X
};
_Static_assert(sizeof(op_table) / sizeof(op_table[0]) == CCG_OP_COUNT,
               "op_table must cover ccg_op");

/* Each op's family: the family lists joined in CCG_OP_LIST's order. */
/* clang-format off */
#define ROW_ELEMENTWISE(id, ...) CCG_OP_FAMILY_ELEMENTWISE,
#define ROW_LOGIC(id, ...) CCG_OP_FAMILY_LOGIC,
#define ROW_MATMUL(id, ...) CCG_OP_FAMILY_MATMUL,
#define ROW_NORM(id, ...) CCG_OP_FAMILY_NORM,
#define ROW_REDUCE(id, ...) CCG_OP_FAMILY_REDUCE,
#define ROW_LOSS(id, ...) CCG_OP_FAMILY_LOSS,
#define ROW_SHAPE(id, ...) CCG_OP_FAMILY_SHAPE,
#define ROW_DATA(id, ...) CCG_OP_FAMILY_DATA,
#define ROW_INDEX(id, ...) CCG_OP_FAMILY_INDEX,
#define ROW_SELECT(id, ...) CCG_OP_FAMILY_SELECT,
#define ROW_VISION(id, ...) CCG_OP_FAMILY_VISION,
#define ROW_COLLECTIVE(id, ...) CCG_OP_FAMILY_COLLECTIVE,
#define FAMILY(id, name) CCG_OP_LIST_##id(ROW_##id)
static const uint8_t op_family[] = {CCG_OP_FAMILY_LIST(FAMILY)};
#undef FAMILY
/* clang-format on */
_Static_assert(sizeof(op_family) == CCG_OP_COUNT,
               "op_family must cover ccg_op");

static const char *const family_names[] = {
#define NAME(id, name) name,
    CCG_OP_FAMILY_LIST(NAME)
#undef NAME
};
_Static_assert(sizeof(family_names) / sizeof(family_names[0]) ==
                   CCG_OP_FAMILY_COUNT,
               "family_names must cover ccg_op_family");

/* Look-up by "domain\x1fname": filled once, read-only afterwards. */
static ccg_strmap op_index;
static char op_keys[CCG_OP_COUNT][64];
static pthread_once_t op_index_once = PTHREAD_ONCE_INIT;
static bool op_index_ok;

static void build_index(void) {
  ccg__strmap_init(&op_index, NULL);
  op_index_ok = true;
  for (int i = 0; i < CCG_OP_COUNT; i++) {
    snprintf(op_keys[i], sizeof op_keys[i], "%s\x1f%s", op_table[i].domain,
             op_table[i].name);
    if (ccg__strmap_put(&op_index, op_keys[i], (uint32_t)i) != CCG_STATUS_OK)
      op_index_ok = false;
  }
}

const ccg__attr_spec *ccg__attr_spec_of(ccg_op op, const char *name) {
  const ccg__op_def *d = op_table[op].def;
  for (size_t i = 0; i < d->n_attrs; i++)
    if (strcmp(d->attrs[i].name, name) == 0)
      return &d->attrs[i];
  return NULL;
}

const ccg__op_info *ccg__op_info_of(ccg_op op) {
  return (unsigned)op < CCG_OP_COUNT ? &op_table[op] : NULL;
}

ccg_status ccg_op_find(const char *domain, const char *name, ccg_op *out) {
  if (!domain || strcmp(domain, "ai.onnx") == 0)
    domain = "";
  if (!name)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "no op name given");
  pthread_once(&op_index_once, build_index);
  if (!op_index_ok)
    return ccg__error(NULL, CCG_STATUS_OOM, "cannot build the op index");
  /* The key is "<domain>\x1f<name>", built without printf: import looks up
   * every node's op. */
  char key[160];
  size_t nd = strlen(domain), nn = strlen(name);
  bool fits = nd + nn + 2 <= sizeof key;
  if (fits) {
    memcpy(key, domain, nd);
    key[nd] = '\x1f';
    memcpy(key + nd + 1, name, nn + 1);
  }
  uint32_t id;
  if (!fits || !ccg__strmap_get(&op_index, key, &id))
    return ccg__error(NULL, CCG_STATUS_UNSUPPORTED,
                      "op '%s' of domain '%s' is not in the registry", name,
                      *domain ? domain : "ai.onnx");
  *out = (ccg_op)id;
  return CCG_STATUS_OK;
}

const char *ccg_op_name(ccg_op op) {
  return (unsigned)op < CCG_OP_COUNT ? op_table[op].name : "invalid";
}

const char *ccg_op_domain(ccg_op op) {
  return (unsigned)op < CCG_OP_COUNT ? op_table[op].domain : "";
}

bool ccg_op_is_collective(ccg_op op) {
  return (unsigned)op < CCG_OP_COUNT &&
         (op_table[op].def->flags & CCG__OP_COLLECTIVE);
}

void ccg_op_arity(ccg_op op, int *min_in, int *max_in, int *min_out,
                  int *max_out) {
  const ccg__op_info *o = ccg__op_info_of(op);
  if (min_in)
    *min_in = o ? o->min_in : 0;
  if (max_in)
    *max_in = o ? o->max_in : 0;
  if (min_out)
    *min_out = o ? o->min_out : 0;
  if (max_out)
    *max_out = o ? o->max_out : 0;
}

size_t ccg_op_num_attrs(ccg_op op) {
  const ccg__op_info *o = ccg__op_info_of(op);
  return o ? o->def->n_attrs : 0;
}

const char *ccg_op_attr_info(ccg_op op, size_t i, ccg_attr_type *type,
                             bool *required) {
  const ccg__op_info *o = ccg__op_info_of(op);
  if (!o || i >= o->def->n_attrs)
    return NULL;
  const ccg__attr_spec *a = &o->def->attrs[i];
  if (type)
    *type = a->type;
  if (required)
    *required = a->required;
  return a->name;
}

ccg_op_family ccg_op_family_of(ccg_op op) {
  return (unsigned)op < CCG_OP_COUNT ? (ccg_op_family)op_family[op]
                                     : CCG_OP_FAMILY_COUNT;
}

const char *ccg_op_family_name(ccg_op_family f) {
  return (unsigned)f < CCG_OP_FAMILY_COUNT ? family_names[f] : "invalid";
}

ccg_op_shard ccg_op_shard_rule(ccg_op op) {
  const ccg__op_info *o = ccg__op_info_of(op);
  return o ? o->def->shard : CCG_OP_SHARD_REPLICATE;
}

int ccg_op_onnx_since(ccg_op op) {
  const ccg__op_info *o = ccg__op_info_of(op);
  if (!o || *o->domain)
    return 0;
  return o->def->onnx_since ? o->def->onnx_since : CCG__ONNX_SINCE_DEFAULT;
}

unsigned ccg_op_dtypes(ccg_op op) {
  const ccg__op_info *o = ccg__op_info_of(op);
  return o ? o->def->dtypes : 0;
}

bool ccg_op_has_grad(ccg_op op) {
  const ccg__op_info *o = ccg__op_info_of(op);
  return o && o->def->grad;
}

static const char *const shard_names[] = {"replicate", "keep", "broadcast",
                                          "own"};
_Static_assert(sizeof(shard_names) / sizeof(shard_names[0]) ==
                   CCG_OP_SHARD_COUNT,
               "shard_names must cover ccg_op_shard");

const char *ccg_op_shard_name(ccg_op_shard s) {
  return (unsigned)s < CCG_OP_SHARD_COUNT ? shard_names[s] : "invalid";
}
