/* Symbolic dims as monomials: coefficient num/den times a product of atoms.
 * Atoms are names ("batch"), rank-dependent split symbols ("tp{3,5}") or any
 * other text (kept whole, parenthesized inside a product). The canonical
 * text is the one representation stored in graphs, so equal sizes compare
 * equal as strings. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"

#define MONO_MAX_ATOMS 8
#define SYM_TEXT_MAX 256

typedef struct atom {
  const char *p;
  size_t len;
  int exp;
  bool raw; /* not an identifier: parenthesize inside products */
} atom;

typedef struct mono {
  int64_t num, den; /* den > 0 */
  int n;
  atom a[MONO_MAX_ATOMS];
} mono;

static int64_t gcd64(int64_t a, int64_t b) {
  if (a < 0)
    a = -a;
  if (b < 0)
    b = -b;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a ? a : 1;
}

static void mono_reduce(mono *m) {
  int64_t g = gcd64(m->num, m->den);
  m->num /= g;
  m->den /= g;
}

static int atom_cmp(const atom *x, const atom *y) {
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->p, y->p, n);
  if (c)
    return c;
  return (x->len > y->len) - (x->len < y->len);
}

/* Adds atom `t` (with its exponent) keeping atoms sorted and merged. */
static bool mono_add_atom(mono *m, atom t) {
  int i = 0;
  while (i < m->n && atom_cmp(&m->a[i], &t) < 0)
    i++;
  if (i < m->n && atom_cmp(&m->a[i], &t) == 0) {
    m->a[i].exp += t.exp;
    if (m->a[i].exp == 0) {
      memmove(&m->a[i], &m->a[i + 1], (size_t)(m->n - i - 1) * sizeof(atom));
      m->n--;
    }
    return true; /* negative exponents are checked by the caller */
  }
  if (t.exp < 0 || m->n == MONO_MAX_ATOMS)
    return false;
  memmove(&m->a[i + 1], &m->a[i], (size_t)(m->n - i) * sizeof(atom));
  m->a[i] = t;
  m->n++;
  return true;
}

static bool is_ident_start(char c) {
  return isalpha((unsigned char)c) || c == '_';
}
static bool is_ident_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '.';
}

static bool parse_int(const char **s, int64_t *v) {
  const char *p = *s;
  if (!isdigit((unsigned char)*p))
    return false;
  int64_t x = 0;
  while (isdigit((unsigned char)*p)) {
    if (__builtin_mul_overflow(x, 10, &x) ||
        __builtin_add_overflow(x, *p - '0', &x))
      return false;
    p++;
  }
  *s = p;
  *v = x;
  return true;
}

/* term := INT | IDENT ['{' INT (',' INT)* '}'] | '(' text ')' */
static bool parse_term(const char **s, mono *m) {
  const char *p = *s;
  int64_t v;
  if (parse_int(&p, &v)) {
    if (__builtin_mul_overflow(m->num, v, &m->num))
      return false;
    *s = p;
    return true;
  }
  atom t = {p, 0, 1, false};
  if (is_ident_start(*p)) {
    while (is_ident_char(*p))
      p++;
    if (*p == '{') {
      p++;
      do {
        if (!parse_int(&p, &v))
          return false;
      } while (*p == ',' && p++);
      if (*p != '}')
        return false;
      p++;
    }
    t.len = (size_t)(p - t.p);
  } else if (*p == '(') {
    const char *q = strchr(p + 1, ')');
    if (!q || q == p + 1 || memchr(p + 1, '(', (size_t)(q - p - 1)))
      return false;
    t.p = p + 1;
    t.len = (size_t)(q - p - 1);
    t.raw = true;
    p = q + 1;
  } else {
    return false;
  }
  *s = p;
  return mono_add_atom(m, t);
}

/* expr := term ('*' term)* ['/' INT]; anything else is one raw atom. */
static void mono_parse(const char *s, mono *m) {
  memset(m, 0, sizeof *m);
  m->num = m->den = 1;
  const char *p = s;
  bool ok = parse_term(&p, m);
  while (ok && *p == '*') {
    p++;
    ok = parse_term(&p, m);
  }
  if (ok && *p == '/') {
    p++;
    int64_t d;
    ok = parse_int(&p, &d) && d > 0;
    if (ok)
      m->den = d;
  }
  if (ok && *p == '\0' && m->num != 0) {
    mono_reduce(m);
    return;
  }
  memset(m, 0, sizeof *m);
  m->num = m->den = 1;
  m->n = 1;
  m->a[0] = (atom){s, strlen(s), 1, false};
  /* A whole string is raw only if it is not a plain identifier. */
  for (size_t i = 0; i < m->a[0].len; i++)
    if (!(i ? is_ident_char(s[i]) : is_ident_start(s[i])))
      m->a[0].raw = true;
}

static void mono_of_dim(ccg_dim d, mono *m) {
  if (d.size >= 0 || !d.sym) {
    memset(m, 0, sizeof *m);
    m->num = d.size;
    m->den = 1;
    return;
  }
  mono_parse(d.sym, m);
}

/* Writes the canonical text; false if it does not fit. */
static bool mono_print(const mono *m, char *buf, size_t size) {
  size_t used = 0;
  int total = 0;
  for (int i = 0; i < m->n; i++)
    total += m->a[i].exp;
  bool lone = total == 1 && m->num == 1 && m->den == 1;
#define PUT(...)                                                               \
  do {                                                                         \
    int k_ = snprintf(buf + used, size - used, __VA_ARGS__);                   \
    if (k_ < 0 || (size_t)k_ >= size - used)                                   \
      return false;                                                            \
    used += (size_t)k_;                                                        \
  } while (0)
  bool first = true;
  if (m->num != 1 || m->n == 0) {
    PUT("%lld", (long long)m->num);
    first = false;
  }
  for (int i = 0; i < m->n; i++) {
    for (int e = 0; e < m->a[i].exp; e++) {
      const atom *t = &m->a[i];
      if (t->raw && !lone)
        PUT("%s(%.*s)", first ? "" : "*", (int)t->len, t->p);
      else
        PUT("%s%.*s", first ? "" : "*", (int)t->len, t->p);
      first = false;
    }
  }
  if (m->den != 1)
    PUT("/%lld", (long long)m->den);
#undef PUT
  return true;
}

bool ccg__sym_canonical(const char *sym, char *buf, size_t size) {
  mono m;
  mono_parse(sym, &m);
  return mono_print(&m, buf, size);
}

/* Converts back to a dim interned in g; false if not a whole number. */
static bool mono_to_dim(ccg_graph *g, const mono *m, ccg_dim *d) {
  if (m->n == 0) {
    if (m->den != 1 || m->num < 0)
      return false;
    *d = ccg_dim_num(m->num);
    return true;
  }
  if (m->num <= 0)
    return false;
  char buf[SYM_TEXT_MAX];
  if (!mono_print(m, buf, sizeof buf))
    return false;
  const char *s = ccg__intern(g, buf);
  if (!s)
    return false;
  *d = ccg_dim_sym(s);
  return true;
}

bool ccg__dim_mul(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *d) {
  mono x, y;
  mono_of_dim(a, &x);
  mono_of_dim(b, &y);
  if (__builtin_mul_overflow(x.num, y.num, &x.num) ||
      __builtin_mul_overflow(x.den, y.den, &x.den))
    return false;
  for (int i = 0; i < y.n; i++)
    if (!mono_add_atom(&x, y.a[i]))
      return false;
  if (x.num == 0) {
    *d = ccg_dim_num(0);
    return true;
  }
  mono_reduce(&x);
  return mono_to_dim(g, &x, d);
}

bool ccg__dim_div(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *d) {
  mono x, y;
  mono_of_dim(a, &x);
  mono_of_dim(b, &y);
  if (y.num == 0)
    return false;
  if (x.num == 0) {
    *d = ccg_dim_num(0);
    return true;
  }
  if (__builtin_mul_overflow(x.num, y.den, &x.num) ||
      __builtin_mul_overflow(x.den, y.num, &x.den))
    return false;
  for (int i = 0; i < y.n; i++) {
    atom t = y.a[i];
    t.exp = -t.exp;
    if (!mono_add_atom(&x, t))
      return false;
  }
  for (int i = 0; i < x.n; i++)
    if (x.a[i].exp < 0)
      return false;
  mono_reduce(&x);
  return mono_to_dim(g, &x, d);
}

bool ccg__dim_add(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *d) {
  if (!ccg_dim_is_sym(a) && !ccg_dim_is_sym(b)) {
    int64_t s;
    if (__builtin_add_overflow(a.size, b.size, &s))
      return false;
    *d = ccg_dim_num(s);
    return true;
  }
  mono x, y;
  mono_of_dim(a, &x);
  mono_of_dim(b, &y);
  if (x.n != y.n || x.n == 0)
    return false;
  for (int i = 0; i < x.n; i++)
    if (atom_cmp(&x.a[i], &y.a[i]) != 0 || x.a[i].exp != y.a[i].exp)
      return false;
  /* num/den + num'/den' */
  int64_t l, r, den;
  if (__builtin_mul_overflow(x.num, y.den, &l) ||
      __builtin_mul_overflow(y.num, x.den, &r) ||
      __builtin_add_overflow(l, r, &x.num) ||
      __builtin_mul_overflow(x.den, y.den, &den))
    return false;
  x.den = den;
  mono_reduce(&x);
  return mono_to_dim(g, &x, d);
}

bool ccg__dim_fresh(ccg_graph *g, const char *base, ccg_dim *d) {
  char buf[SYM_TEXT_MAX];
  snprintf(buf, sizeof buf, "%s", base);
  /* Only identifier characters, so the symbol stays one atom. */
  for (char *p = buf; *p; p++)
    if (!is_ident_char(*p))
      *p = '_';
  if (!is_ident_start(buf[0]))
    buf[0] = '_';
  const char *s = ccg__intern_fresh(g, buf);
  if (!s)
    return false;
  *d = ccg_dim_sym(s);
  return true;
}

bool ccg__ranked_entry(const ccg_mesh *m, int64_t rank, const char *text,
                       size_t len, int64_t *v) {
  const char *brace = m ? memchr(text, '{', len) : NULL;
  if (!brace)
    return false;
  unsigned mask = 0;
  for (const char *p = text; p < brace;) {
    const char *q = memchr(p, '.', (size_t)(brace - p));
    if (!q)
      q = brace;
    char name[CCG_MESH_NAME_MAX + 1];
    size_t nl = (size_t)(q - p);
    if (nl > CCG_MESH_NAME_MAX)
      return false;
    memcpy(name, p, nl);
    name[nl] = '\0';
    int ax = ccg_mesh_axis(m, name);
    if (ax < 0)
      return false;
    mask |= 1u << ax;
    p = q + 1;
  }
  int64_t idx = ccg_mesh_rank_in_group(m, rank, mask);
  const char *s = brace + 1;
  for (int64_t i = 0; idx >= 0; i++) {
    int64_t e;
    if (!parse_int(&s, &e))
      return false;
    if (i == idx) {
      *v = e;
      return true;
    }
    if (*s++ != ',')
      return false;
  }
  return false;
}

/* The value b gives the identifier atom t. */
static bool bound_atom(const ccg__dim_binds *b, const atom *t, int64_t *v) {
  for (size_t i = 0; b && !t->raw && i < b->n; i++)
    if (strlen(b->names[i]) == t->len &&
        memcmp(b->names[i], t->p, t->len) == 0) {
      *v = b->values[i];
      return true;
    }
  return false;
}

bool ccg__dim_at_rank(const ccg_mesh *m, int64_t rank, const ccg__dim_binds *b,
                      ccg_dim d, int64_t *num, char *buf, size_t size) {
  if (!ccg_dim_is_sym(d)) {
    *num = d.size;
    return true;
  }
  mono x, r;
  mono_parse(d.sym, &x);
  memset(&r, 0, sizeof r);
  r.num = x.num;
  r.den = x.den;
  for (int i = 0; i < x.n; i++) {
    const atom *t = &x.a[i];
    int64_t v;
    if ((!t->raw && ccg__ranked_entry(m, rank, t->p, t->len, &v)) ||
        bound_atom(b, t, &v)) {
      for (int e = 0; e < t->exp; e++)
        if (__builtin_mul_overflow(r.num, v, &r.num))
          goto keep;
    } else if (!mono_add_atom(&r, *t)) {
      goto keep;
    }
  }
  if (r.num == 0) {
    *num = 0;
    return true;
  }
  mono_reduce(&r);
  if (r.n == 0 && r.den == 1) {
    *num = r.num;
    return true;
  }
  if (mono_print(&r, buf, size))
    return false;
keep:
  snprintf(buf, size, "%s", d.sym);
  return false;
}

const char *ccg__dim_str(ccg_dim d, char *buf, size_t size) {
  if (ccg_dim_is_sym(d))
    snprintf(buf, size, "%s", d.sym);
  else
    snprintf(buf, size, "%lld", (long long)d.size);
  return buf;
}
