/* src/core: status strings, error contexts, arena, hash map, logging,
 * allocator hook. */
#define _DEFAULT_SOURCE /* mincore */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ccgraph/core.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/jtext.h"
#include "core/strmap.h"

/* main() sets CCG_LOG=info before anything logs. */
static void test_log_level_from_env(void **state) {
  (void)state;
  assert_int_equal(ccg_log_get_level(), CCG_LOG_INFO);
}

static void test_status_strings(void **state) {
  (void)state;
  assert_string_equal(ccg_status_name(CCG_STATUS_OK), "OK");
  assert_string_equal(ccg_status_name(CCG_STATUS_SHAPE), "SHAPE");
  assert_string_equal(ccg_status_name(CCG_STATUS_TIMEOUT), "TIMEOUT");
  assert_string_equal(ccg_status_name(CCG_STATUS_INTERNAL), "INTERNAL");
  assert_string_equal(ccg_status_str(CCG_STATUS_COMM), "communication error");
  assert_string_equal(ccg_status_name((ccg_status)999), "UNKNOWN");
  assert_string_equal(ccg_status_name((ccg_status)-1), "UNKNOWN");
  /* Every status has a distinct name and description. */
  for (int i = 0; i < CCG_STATUS_COUNT; i++)
    for (int j = i + 1; j < CCG_STATUS_COUNT; j++) {
      assert_string_not_equal(ccg_status_name((ccg_status)i),
                              ccg_status_name((ccg_status)j));
      assert_string_not_equal(ccg_status_str((ccg_status)i),
                              ccg_status_str((ccg_status)j));
    }
  assert_int_equal(CCG_STATUS_COUNT, 12);
  assert_string_equal(ccg_version(), CCG_VERSION_STRING);
}

static void test_error_context(void **state) {
  (void)state;
  ccg_ctx *a = ccg_ctx_new();
  ccg_ctx *b = ccg_ctx_new();
  assert_non_null(a);
  assert_string_equal(ccg_last_error(a), "");
  assert_int_equal(ccg_last_status(a), CCG_STATUS_OK);
  assert_int_equal(ccg__error(a, CCG_STATUS_SHAPE, "dim %d is %s", 3, "odd"),
                   CCG_STATUS_SHAPE);
  assert_string_equal(ccg_last_error(a), "dim 3 is odd");
  assert_int_equal(ccg_last_status(a), CCG_STATUS_SHAPE);
  /* Contexts are independent. */
  assert_string_equal(ccg_last_error(b), "");
  assert_int_equal(ccg__error_prefix(a, "file '%s'", "m.onnx"),
                   CCG_STATUS_SHAPE);
  assert_string_equal(ccg_last_error(a), "file 'm.onnx': dim 3 is odd");
  assert_int_equal(ccg__error_copy(b, a), CCG_STATUS_SHAPE);
  assert_string_equal(ccg_last_error(b), "file 'm.onnx': dim 3 is odd");
  ccg_clear_error(a);
  assert_string_equal(ccg_last_error(a), "");
  assert_int_equal(ccg_last_status(a), CCG_STATUS_OK);
  /* A long message is truncated, never overflows. */
  char big[5000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ccg__error(a, CCG_STATUS_IO, "%s", big);
  assert_int_equal(strlen(ccg_last_error(a)), CCG__ERRMSG_MAX - 1);
  /* Without a handle the thread's context is used. */
  ccg__error(NULL, CCG_STATUS_OOM, "no handle");
  assert_string_equal(ccg_last_error(NULL), "no handle");
  assert_int_equal(ccg_last_status(NULL), CCG_STATUS_OOM);
  ccg_clear_error(NULL);
  assert_string_equal(ccg_last_error(NULL), "");
  /* Something that is not a handle is recognized as such. */
  uint32_t junk[8] = {0};
  assert_string_equal(ccg_last_error(junk), "not a ccgraph handle");
  ccg_ctx_free(a);
  ccg_ctx_free(b);
}

static void test_check_macros_helper_fail(int *cleaned, ccg_status *out) {
  ccg_status st = CCG_STATUS_OK;
  CCG_CHECK_GOTO(CCG_STATUS_PARSE, st, done);
  st = CCG_STATUS_INTERNAL; /* not reached */
done:
  *cleaned = 1;
  *out = st;
}

static ccg_status check_passes(ccg_status inner) {
  CCG_CHECK(inner);
  return CCG_STATUS_INTERNAL;
}

static void test_check_macros(void **state) {
  (void)state;
  int cleaned = 0;
  ccg_status st;
  test_check_macros_helper_fail(&cleaned, &st);
  assert_int_equal(cleaned, 1);
  assert_int_equal(st, CCG_STATUS_PARSE);
  assert_int_equal(check_passes(CCG_STATUS_IO), CCG_STATUS_IO);
  assert_int_equal(check_passes(CCG_STATUS_OK), CCG_STATUS_INTERNAL);
}

/* Counting allocator: proves every allocation goes through the hook and
 * comes back. */
typedef struct counting {
  size_t live_bytes, calls;
  size_t fail_after; /* 0 = never fail */
} counting;

static void *count_alloc(void *user, size_t size) {
  counting *c = user;
  c->calls++;
  if (c->fail_after && c->calls >= c->fail_after)
    return NULL;
  c->live_bytes += size;
  return malloc(size);
}
static void count_free(void *user, void *p, size_t size) {
  counting *c = user;
  c->live_bytes -= size;
  free(p);
}

static void test_arena(void **state) {
  (void)state;
  counting cnt = {0};
  ccg_allocator a = {count_alloc, NULL, count_free, &cnt};
  ccg_arena ar;
  ccg__arena_init(&ar, &a, 256);
  void *prev = NULL;
  for (int i = 0; i < 1000; i++) {
    size_t align = (size_t)1 << (i % 7);
    unsigned char *p = ccg__arena_alloc(&ar, (size_t)(i % 50) + 1, align);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % align, 0);
    memset(p, 0xab, (size_t)(i % 50) + 1);
    assert_ptr_not_equal(p, prev);
    prev = p;
  }
  /* A request larger than a chunk gets its own chunk. */
  char *big = ccg__arena_alloc(&ar, 10000, 64);
  assert_non_null(big);
  memset(big, 1, 10000);
  /* Bad alignments and overflowing sizes are refused, not wrapped. */
  assert_null(ccg__arena_alloc(&ar, 8, 3));
  assert_null(ccg__arena_alloc(&ar, 8, 128));
  assert_null(ccg__arena_alloc(&ar, SIZE_MAX - 8, 8));
  assert_null(ccg__arena_calloc(&ar, SIZE_MAX / 2, 4));
  char *s = ccg__arena_strdup(&ar, "hello");
  assert_string_equal(s, "hello");
  char *f = ccg__arena_printf(&ar, "%s-%d", "node", 42);
  assert_string_equal(f, "node-42");
  int *z = ccg__arena_calloc(&ar, 10, sizeof(int));
  for (int i = 0; i < 10; i++)
    assert_int_equal(z[i], 0);
  assert_true(ar.used >= 10000);
  assert_true(cnt.live_bytes > 0);
  ccg__arena_free(&ar);
  assert_int_equal(cnt.live_bytes, 0);

  /* Allocation failure gives NULL, no crash. */
  counting fail = {0, 0, 1};
  ccg_allocator fa = {count_alloc, NULL, count_free, &fail};
  ccg__arena_init(&ar, &fa, 0);
  assert_null(ccg__arena_alloc(&ar, 16, 8));
  ccg__arena_free(&ar);
}

/* A growing arena takes chunks as large as what it holds (up to 4 MiB), so
 * tens of MB take a few dozen chunks; with libc the large ones are huge-page
 * blocks (ccg__bulk_alloc), with a caller's allocator every byte still goes
 * through it and comes back. */
static void test_arena_growth(void **state) {
  (void)state;
  enum { PIECE = 16 << 10, PIECES = 640 }; /* 10 MiB */
  ccg_arena ar;
  ccg__arena_init(&ar, NULL, 0);
  unsigned char *first = NULL, *last = NULL;
  for (int i = 0; i < PIECES; i++) {
    unsigned char *p = ccg__arena_alloc(&ar, PIECE, 64);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, i & 0xff, PIECE);
    if (!first)
      first = p;
    last = p;
  }
  assert_int_equal(first[PIECE - 1], 0);
  assert_int_equal(last[0], (PIECES - 1) & 0xff);
  assert_int_equal(ar.used, (size_t)PIECE * PIECES);
  /* doubling: never more than twice what is held, plus the first chunk */
  assert_true(ar.reserved <= 2 * ar.used + (64 << 10));
  /* a request past the largest chunk gets one of its own */
  unsigned char *big = ccg__arena_alloc(&ar, (size_t)9 << 20, 64);
  assert_non_null(big);
  big[0] = 1;
  big[((size_t)9 << 20) - 1] = 2;
  ccg__arena_reset(&ar);
  assert_int_equal(ar.used, 0);
  assert_non_null(ccg__arena_alloc(&ar, 100, 8));
  ccg__arena_free(&ar);

  counting cnt = {0};
  ccg_allocator a = {count_alloc, NULL, count_free, &cnt};
  ccg__arena_init(&ar, &a, 0);
  for (int i = 0; i < PIECES; i++)
    assert_non_null(ccg__arena_alloc(&ar, PIECE, 64));
  assert_true(cnt.live_bytes >= (size_t)PIECE * PIECES);
  assert_true(cnt.calls < 40);
  ccg__arena_free(&ar);
  assert_int_equal(cnt.live_bytes, 0);
}

static void test_bulk(void **state) {
  (void)state;
  assert_null(ccg__bulk_alloc(0));
  assert_null(ccg__bulk_alloc(SIZE_MAX - 4096));
  ccg__bulk_trim(); /* nothing kept: what follows gets new pages */
  size_t n = ((size_t)3 << 20) + 123;
  unsigned char *p = ccg__bulk_alloc(n);
  assert_non_null(p);
  assert_int_equal((uintptr_t)p % ((size_t)2 << 20), 0);
  assert_int_equal(p[0], 0); /* fresh pages are zero */
  memset(p, 7, n);
  assert_int_equal(p[n - 1], 7);
  /* growing keeps the contents, and the new part is fresh */
  size_t m = ((size_t)7 << 20) + 5;
  unsigned char *q = ccg__bulk_grow(p, n, m);
  assert_non_null(q);
  assert_int_equal((uintptr_t)q % ((size_t)2 << 20), 0);
  assert_int_equal(q[0], 7);
  assert_int_equal(q[n - 1], 7);
  assert_int_equal(q[n], 0);
  assert_int_equal(q[m - 1], 0);
  memset(q + n, 9, m - n);
  assert_int_equal(q[m - 1], 9);
  assert_null(ccg__bulk_grow(q, m, n)); /* not a shrink */
  assert_int_equal(q[m - 1], 9);
  ccg__bulk_free(q, m);
  p = ccg__bulk_grow(NULL, 0, n);
  assert_non_null(p);
  assert_int_equal(p[n - 1], 0);
  ccg__bulk_free(p, n);
  ccg__bulk_free(NULL, 0);
  ccg__bulk_trim();
}

/* Whether the page at p is mapped (mincore fails with ENOMEM where not). */
static bool page_mapped(const void *p) {
  unsigned char v;
  uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
  return mincore((void *)page, 4096, &v) == 0;
}

/* Trimming an arena gives back the pages of its newest huge-page chunk past
 * what it holds (whether they were touched or not), keeps what it holds,
 * and later allocations still work; a chunk of the caller's allocator is
 * left alone. */
static void test_arena_trim(void **state) {
  (void)state;
  size_t mib = (size_t)1 << 20;
  ccg__bulk_trim();
  ccg_arena ar;
  ccg__arena_init(&ar, NULL, 0);
  /* a 4 MiB bulk chunk at the head, every page of it touched */
  unsigned char *p = ccg__arena_alloc(&ar, 4 * mib - 4096, 64);
  assert_non_null(p);
  memset(p, 1, 4 * mib - 4096);
  ccg__arena_reset(&ar);
  unsigned char *q = ccg__arena_alloc(&ar, 2 * mib + 5000, 64);
  assert_ptr_equal(q, p);
  memset(q, 2, 2 * mib + 5000);
  size_t reserved = ar.reserved;
  assert_true(page_mapped(q + 3 * mib));
  ccg__arena_trim(&ar);
  assert_false(page_mapped(q + 3 * mib));
  assert_true(page_mapped(q + 2 * mib + 4999));
  assert_int_equal(q[2 * mib + 4999], 2);
  assert_true(ar.reserved < reserved - mib);
  assert_true(ar.reserved >= ar.used);
  ccg__arena_trim(&ar); /* nothing more to give */
  unsigned char *r = ccg__arena_alloc(&ar, mib, 64);
  assert_non_null(r);
  memset(r, 3, mib);
  assert_int_equal(q[0], 2);
  ccg__arena_free(&ar);
  ccg__bulk_trim();

  counting cnt = {0};
  ccg_allocator a = {count_alloc, NULL, count_free, &cnt};
  ccg__arena_init(&ar, &a, 0);
  assert_non_null(ccg__arena_alloc(&ar, 3 * mib, 64));
  reserved = ar.reserved;
  ccg__arena_trim(&ar);
  assert_int_equal(ar.reserved, reserved);
  ccg__arena_free(&ar);
  assert_int_equal(cnt.live_bytes, 0);
}

/* Freed blocks are kept and handed out again (contents undefined, zeroed
 * by ccg__bulk_zalloc), the smallest that fits first, or moved together
 * into a larger block, never more than CCG__BULK_KEEP bytes in all;
 * trimming gives them back. */
static void test_bulk_kept(void **state) {
  (void)state;
  ccg__bulk_trim();
  assert_int_equal(ccg__bulk_kept(), 0);
  size_t mib = (size_t)1 << 20, n = 4 * mib;
  unsigned char *a = ccg__bulk_alloc(n), *b = ccg__bulk_alloc(3 * n);
  assert_non_null(a);
  assert_non_null(b);
  memset(a, 5, n);
  ccg__bulk_free(b, 3 * n);
  ccg__bulk_free(a, n);
  assert_int_equal(ccg__bulk_kept(), 4 * n);
  unsigned char *c = ccg__bulk_alloc(n - 100); /* the 4 MiB block, as it was */
  assert_ptr_equal(c, a);
  assert_int_equal(c[n - 1], 5);
  assert_int_equal(ccg__bulk_kept(), 3 * n);
  ccg__bulk_free(c, n - 100);
  unsigned char *z = ccg__bulk_zalloc(n);
  assert_ptr_equal(z, a);
  for (size_t i = 0; i < n; i += 4096)
    assert_int_equal(z[i], 0);
  assert_int_equal(z[n - 1], 0);
  /* a request under half of every kept block gets new pages */
  unsigned char *small = ccg__bulk_alloc(mib);
  assert_non_null(small);
  assert_true(small != b);
  ccg__bulk_free(small, mib);
  ccg__bulk_free(z, n);
  /* the bound: the oldest blocks go first */
  size_t big = CCG__BULK_KEEP / 4;
  unsigned char *d[5];
  for (int i = 0; i < 5; i++)
    assert_non_null(d[i] = ccg__bulk_alloc(big));
  for (int i = 0; i < 5; i++)
    ccg__bulk_free(d[i], big);
  assert_true(ccg__bulk_kept() <= CCG__BULK_KEEP);
  assert_int_equal(ccg__bulk_kept(), 4 * big);
  /* larger than every kept block: made of them (moved, not copied), the
   * rest new pages; and larger than the bound: never kept */
  d[0] = ccg__bulk_alloc(big);
  memset(d[0], 3, big);
  ccg__bulk_free(d[0], big);
  unsigned char *e = ccg__bulk_alloc(CCG__BULK_KEEP + mib);
  assert_non_null(e);
  assert_int_equal(ccg__bulk_kept(), 0);
  assert_int_equal(e[0], 3); /* the largest kept block comes first */
  assert_int_equal(e[big - 1], 3);
  assert_int_equal(e[CCG__BULK_KEEP + mib - 1], 0); /* a new page */
  ccg__bulk_free(e, CCG__BULK_KEEP + mib);
  assert_int_equal(ccg__bulk_kept(), 0);
  /* zeroed where it was made of kept blocks */
  for (int i = 0; i < 2; i++) {
    d[i] = ccg__bulk_alloc(n);
    memset(d[i], 1 + i, n);
  }
  ccg__bulk_free(d[0], n);
  ccg__bulk_free(d[1], n);
  z = ccg__bulk_zalloc(3 * n);
  assert_non_null(z);
  assert_int_equal(ccg__bulk_kept(), 0);
  for (size_t i = 0; i < 3 * n; i += 4096)
    assert_int_equal(z[i], 0);
  /* growing: the old pages move, kept blocks fill what they can */
  memset(z, 7, 3 * n);
  d[0] = ccg__bulk_alloc(2 * n);
  memset(d[0], 8, 2 * n);
  ccg__bulk_free(d[0], 2 * n);
  unsigned char *g = ccg__bulk_grow(z, 3 * n, 6 * n);
  assert_non_null(g);
  assert_int_equal(g[0], 7);
  assert_int_equal(g[3 * n - 1], 7);
  assert_int_equal(g[3 * n], 8);
  assert_int_equal(g[5 * n - 1], 8);
  assert_int_equal(g[6 * n - 1], 0);
  assert_int_equal(ccg__bulk_kept(), 0);
  ccg__bulk_free(g, 6 * n);
  ccg__bulk_trim();
  assert_int_equal(ccg__bulk_kept(), 0);
}

/* A reservation goes to its final size in one step and keeps what the map
 * holds; one past what a size_t can count is refused, map unchanged. */
static void test_strmap_reserve(void **state) {
  (void)state;
  ccg_strmap m;
  ccg__strmap_init(&m, NULL);
  static const char *const keys[] = {"a", "bb", "ccc", "dddd", "eeeee"};
  for (uint32_t i = 0; i < 5; i++)
    assert_int_equal(ccg__strmap_put(&m, keys[i], i), CCG_STATUS_OK);
  assert_int_equal(m.cap, 16);
  assert_int_equal(ccg__strmap_reserve(&m, 10000), CCG_STATUS_OK);
  /* the smallest power of two holding 10000 at a load of 0.7 */
  assert_int_equal(m.cap, 16384);
  assert_int_equal(m.count, 5);
  for (uint32_t i = 0; i < 5; i++) {
    uint32_t id = 99;
    assert_true(ccg__strmap_get(&m, keys[i], &id));
    assert_int_equal(id, i);
  }
  assert_int_equal(ccg__strmap_reserve(&m, 100), CCG_STATUS_OK);
  assert_int_equal(m.cap, 16384);
  assert_int_equal(ccg__strmap_reserve(&m, SIZE_MAX), CCG_STATUS_OOM);
  assert_int_equal(m.cap, 16384);
  assert_int_equal(m.count, 5);
  /* a large table is a huge-page block, zeroed, with the same keys */
  assert_false(m.bulk);
  assert_int_equal(ccg__strmap_reserve(&m, 200000), CCG_STATUS_OK);
  assert_int_equal(m.cap, 524288);
  assert_true(m.bulk);
  for (uint32_t i = 0; i < 5; i++) {
    uint32_t id = 99;
    assert_true(ccg__strmap_get(&m, keys[i], &id));
    assert_int_equal(id, i);
  }
  assert_false(ccg__strmap_get(&m, "ffffff", NULL));
  assert_int_equal(ccg__strmap_put(&m, "ffffff", 5), CCG_STATUS_OK);
  assert_true(ccg__strmap_remove(&m, "a"));
  assert_false(ccg__strmap_get(&m, "a", NULL));
  assert_int_equal(m.count, 5);
  ccg__strmap_free(&m);
  assert_false(m.bulk);
}

/* Keys of test_strmap_ids' map, by id: its records. */
enum { IDS_N = 3000 };
static const char *ids_names[IDS_N];

static const char *ids_key(const void *ctx, uint32_t id) {
  assert_ptr_equal(ctx, ids_names);
  return ids_names[id];
}

/* A map keyed by its ids reads keys from the records: a record may take
 * its key after the put, equal hashes are told apart by the keys, and
 * growth, removal and renumbering keep every entry. */
static void test_strmap_ids(void **state) {
  (void)state;
  ccg_strmap m;
  ccg__strmap_init_ids(&m, NULL, ids_key, ids_names);
  static char keys[IDS_N][16];
  uint32_t id = 0;
  assert_false(ccg__strmap_get(&m, "n0", &id));
  for (uint32_t i = 0; i < IDS_N; i++) {
    snprintf(keys[i], sizeof keys[i], "n%u", i);
    ids_names[i] = NULL;
    assert_int_equal(ccg__strmap_put(&m, keys[i], i), CCG_STATUS_OK);
    ids_names[i] = keys[i];
  }
  assert_int_equal(m.count, IDS_N);
  for (uint32_t i = 0; i < IDS_N; i++) {
    char probe[16];
    snprintf(probe, sizeof probe, "n%u", i);
    assert_true(ccg__strmap_get(&m, probe, &id));
    assert_int_equal(id, i);
    assert_ptr_equal(ccg__strmap_key(&m, probe), keys[i]);
  }
  assert_int_equal(ccg__strmap_put(&m, "n7", 7), CCG_STATUS_INVALID_ARG);
  assert_false(ccg__strmap_get(&m, "n3000", NULL));
  /* two keys given one hash: the second found by its key, after the first */
  ccg__strmap_free(&m);
  assert_int_equal(ccg__strmap_put_h(&m, keys[0], 5, 0), CCG_STATUS_OK);
  assert_int_equal(ccg__strmap_put_h(&m, keys[1], 5, 1), CCG_STATUS_OK);
  assert_true(ccg__strmap_get_h(&m, "n1", 5, &id));
  assert_int_equal(id, 1);
  assert_true(ccg__strmap_get_h(&m, "n0", 5, &id));
  assert_int_equal(id, 0);
  assert_false(ccg__strmap_get_h(&m, "n2", 5, NULL));
  ccg__strmap_free(&m);
  /* grown to a huge-page table, then every third removed */
  for (uint32_t i = 0; i < IDS_N; i++)
    assert_int_equal(ccg__strmap_put(&m, keys[i], i), CCG_STATUS_OK);
  assert_int_equal(ccg__strmap_reserve(&m, 300000), CCG_STATUS_OK);
  assert_true(m.ids_bulk);
  for (uint32_t i = 0; i < IDS_N; i += 3)
    assert_true(ccg__strmap_remove(&m, keys[i]));
  assert_false(ccg__strmap_remove(&m, "n0"));
  for (uint32_t i = 0; i < IDS_N; i++)
    assert_int_equal(ccg__strmap_get(&m, keys[i], &id), i % 3 != 0);
  /* renumbered in reverse, the records moved with them */
  static uint32_t to[IDS_N];
  for (uint32_t i = 0; i < IDS_N; i++) {
    to[i] = IDS_N - 1 - i;
    ids_names[to[i]] = keys[i];
  }
  ccg__strmap_remap(&m, to);
  for (uint32_t i = 0; i < IDS_N; i++) {
    bool present = ccg__strmap_get(&m, keys[i], &id);
    assert_int_equal(present, i % 3 != 0);
    if (present)
      assert_int_equal(id, to[i]);
  }
  ccg__strmap_free(&m);
}

static void test_strmap(void **state) {
  (void)state;
  ccg_strmap m;
  ccg__strmap_init(&m, NULL);
  uint32_t id = 0;
  assert_false(ccg__strmap_get(&m, "x", &id));
  assert_null(ccg__strmap_key(&m, "x"));
  enum { N = 5000 };
  static char keys[N][16];
  for (uint32_t i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "v%u", i);
    assert_int_equal(ccg__strmap_put(&m, keys[i], i), CCG_STATUS_OK);
  }
  assert_int_equal(m.count, N);
  assert_true(m.count * 10 <= m.cap * 7);
  for (uint32_t i = 0; i < N; i++) {
    char probe[16];
    snprintf(probe, sizeof probe, "v%u", i);
    assert_true(ccg__strmap_get(&m, probe, &id));
    assert_int_equal(id, i);
    assert_ptr_equal(ccg__strmap_key(&m, probe), keys[i]);
  }
  /* Duplicates are refused and leave the map unchanged. */
  assert_int_equal(ccg__strmap_put(&m, "v7", 99), CCG_STATUS_INVALID_ARG);
  assert_true(ccg__strmap_get(&m, "v7", &id));
  assert_int_equal(id, 7);
  /* Removal keeps every other key reachable (backward-shift deletion). */
  for (uint32_t i = 0; i < N; i += 3)
    assert_true(ccg__strmap_remove(&m, keys[i]));
  assert_false(ccg__strmap_remove(&m, "v0"));
  for (uint32_t i = 0; i < N; i++) {
    bool present = ccg__strmap_get(&m, keys[i], &id);
    assert_int_equal(present, i % 3 != 0);
    if (present)
      assert_int_equal(id, i);
  }
  assert_int_equal(ccg__strmap_put(&m, keys[0], 12345), CCG_STATUS_OK);
  assert_true(ccg__strmap_get(&m, "v0", &id));
  assert_int_equal(id, 12345);
  /* With the hash given: the same map as without it. */
  uint32_t h = ccg__strhash("v3");
  assert_false(ccg__strmap_get_h(&m, "v3", h, &id));
  assert_int_equal(ccg__strmap_put_h(&m, keys[3], h, 333), CCG_STATUS_OK);
  assert_true(ccg__strmap_get(&m, "v3", &id));
  assert_int_equal(id, 333);
  assert_int_equal(ccg__strmap_put_h(&m, "v3", h, 1), CCG_STATUS_INVALID_ARG);
  assert_true(ccg__strmap_get_h(&m, "v4", ccg__strhash("v4"), &id));
  assert_int_equal(id, 4);
  ccg__strmap_free(&m);
  /* The hash reads the whole key: equal keys at other addresses hash
   * alike, and a one-byte change at any position or any length (word tails
   * included) changes it. */
  char a[40], b[40];
  memset(a, 'x', sizeof a);
  for (size_t len = 0; len < sizeof a; len++) {
    a[len] = '\0';
    memcpy(b, a, len + 1);
    assert_int_equal(ccg__strhash(a), ccg__strhash(b));
    for (size_t i = 0; i < len; i++) {
      b[i] = 'y';
      assert_int_not_equal(ccg__strhash(a), ccg__strhash(b));
      b[i] = 'x';
    }
    if (len)
      assert_int_not_equal(ccg__strhash(a), ccg__strhash(a + 1));
    a[len] = 'x';
  }
}

/* JSON text as jansson's compact dump writes it: escapes, UTF-8 kept,
 * integers at both ends of int64, and text that is not UTF-8 refused. */
static void test_jtext(void **state) {
  (void)state;
  ccg__jtext b = {NULL, 0, 0, false};
  ccg__jtext_lit(&b, "{\"k\":");
  ccg__jtext_str(&b, "a\"b\\c/\n\t\x01\xc3\xa9");
  ccg__jtext_put(&b, ",", 1);
  ccg__jtext_int(&b, INT64_MIN);
  ccg__jtext_put(&b, ",", 1);
  ccg__jtext_int(&b, INT64_MAX);
  ccg__jtext_put(&b, ",", 1);
  ccg__jtext_int(&b, 0);
  ccg__jtext_put(&b, ",", 1);
  ccg__jtext_int(&b, -7);
  ccg__jtext_lit(&b, "}");
  assert_false(b.bad);
  assert_string_equal(b.p, "{\"k\":\"a\\\"b\\\\c/\\n\\t\\u0001\xc3\xa9\","
                           "-9223372036854775808,9223372036854775807,0,-7}");
  assert_int_equal(b.n, strlen(b.p));
  /* past the first 4 KiB the buffer grows */
  for (int i = 0; i < 1000; i++)
    ccg__jtext_int(&b, 123456789);
  assert_int_equal(b.n, strlen(b.p));
  ccg__jtext_str(&b, "\xc3("); /* a broken sequence */
  assert_true(b.bad);
  size_t n = b.n;
  ccg__jtext_lit(&b, "more");
  assert_int_equal(b.n, n);
  free(b.p);
}

static void test_vec_and_overflow(void **state) {
  (void)state;
  size_t out;
  assert_true(ccg__mul_size(1000, 1000, &out));
  assert_int_equal(out, 1000000);
  assert_false(ccg__mul_size(SIZE_MAX / 2 + 1, 2, &out));
  int64_t o64;
  assert_false(ccg__mul_i64(INT64_MAX / 3 + 1, 3, &o64));
  int *items = NULL;
  size_t cap = 0;
  assert_true(
      ccg__vec_reserve(NULL, (void **)&items, &cap, 100, sizeof *items));
  assert_true(cap >= 100);
  items[99] = 1;
  assert_false(ccg__vec_reserve(NULL, (void **)&items, &cap, SIZE_MAX / 2,
                                sizeof *items));
  assert_true(cap >= 100 && items[99] == 1);
  ccg__free(NULL, items, cap * sizeof *items);
}

static void test_log_levels(void **state) {
  (void)state;
  ccg_log_level lv = CCG_LOG_OFF;
  assert_int_equal(ccg_log_parse_level("debug", &lv), CCG_STATUS_OK);
  assert_int_equal(lv, CCG_LOG_DEBUG);
  assert_int_equal(ccg_log_parse_level("WARN", &lv), CCG_STATUS_OK);
  assert_int_equal(lv, CCG_LOG_WARN);
  assert_int_equal(ccg_log_parse_level("error", &lv), CCG_STATUS_OK);
  assert_int_equal(lv, CCG_LOG_ERROR);
  assert_int_equal(ccg_log_parse_level("off", &lv), CCG_STATUS_OK);
  assert_int_equal(lv, CCG_LOG_OFF);
  assert_int_equal(ccg_log_parse_level("loud", &lv), CCG_STATUS_PARSE);
  assert_int_equal(lv, CCG_LOG_OFF);
  assert_int_equal(ccg_log_parse_level(NULL, &lv), CCG_STATUS_PARSE);
  ccg_log_set_level(CCG_LOG_ERROR);
  assert_int_equal(ccg_log_get_level(), CCG_LOG_ERROR);
  ccg_log_set_level((ccg_log_level)77); /* ignored */
  assert_int_equal(ccg_log_get_level(), CCG_LOG_ERROR);
  ccg_log_printf(CCG_LOG_INFO, "not shown at level error");
}

int main(void) {
  setenv("CCG_LOG", "info", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_log_level_from_env),
      cmocka_unit_test(test_status_strings),
      cmocka_unit_test(test_error_context),
      cmocka_unit_test(test_check_macros),
      cmocka_unit_test(test_arena),
      cmocka_unit_test(test_arena_growth),
      cmocka_unit_test(test_bulk),
      cmocka_unit_test(test_arena_trim),
      cmocka_unit_test(test_bulk_kept),
      cmocka_unit_test(test_strmap),
      cmocka_unit_test(test_strmap_ids),
      cmocka_unit_test(test_strmap_reserve),
      cmocka_unit_test(test_jtext),
      cmocka_unit_test(test_vec_and_overflow),
      cmocka_unit_test(test_log_levels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
