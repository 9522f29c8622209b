/* The CPU backend: the arena and scratch blocks of the memory plan from
 * the executor's allocator, the CPU kernels run in schedule order (or with
 * collectives on the communication thread under overlap, overlap.c), and
 * the host communicators (local threads, mpi). */
#include <stdlib.h>
#include <string.h>

#include "exec/comm/comm.h"
#include "exec/internal.h"

/* Aligned blocks from the allocator: the raw pointer is kept just below. */
static void *alloc_aligned(ccg_exec *x, size_t size) {
  size_t total;
  if (__builtin_add_overflow(
          size, (size_t)CCG__ALIGN + sizeof(void *) + sizeof(size_t), &total))
    return NULL;
  char *raw = ccg__alloc(&x->alloc, total);
  if (!raw)
    return NULL;
  uintptr_t p = (uintptr_t)(raw + sizeof(void *) + sizeof(size_t));
  p = (p + CCG__ALIGN - 1) & ~(uintptr_t)(CCG__ALIGN - 1);
  memcpy((char *)p - sizeof(void *), &raw, sizeof raw);
  memcpy((char *)p - sizeof(void *) - sizeof(size_t), &total, sizeof total);
  return (void *)p;
}

static void free_aligned(ccg_exec *x, void *p) {
  if (!p)
    return;
  char *raw;
  size_t total;
  memcpy(&raw, (char *)p - sizeof(void *), sizeof raw);
  memcpy(&total, (char *)p - sizeof(void *) - sizeof(size_t), sizeof total);
  ccg__free(&x->alloc, raw, total);
}

static ccg_status cpu_create(ccg_exec *x) {
  /* the communicator readies what the reducing collectives will need */
  CCG_CHECK(ccg__collective_reserve(x));
  /* collectives pack in a block of their own: under overlap they run on
   * the communication thread while compute nodes use theirs, which the
   * plan placed in the arena (plan.c) */
  size_t comm = 0;
  for (size_t s = 0; s < x->n_steps; s++)
    if (ccg_op_is_collective(x->steps[s].op) && x->steps[s].scratch > comm)
      comm = x->steps[s].scratch;
  x->data_bytes = x->mem.peak_bytes;
  x->comm_scratch_bytes = comm;
  x->data = alloc_aligned(x, x->data_bytes ? x->data_bytes : 1);
  x->comm_scratch = alloc_aligned(x, comm ? comm : 1);
  if (!x->data || !x->comm_scratch)
    return ccg__error(&x->ctx, CCG_STATUS_OOM,
                      "out of memory for an arena of %zu bytes and %zu of "
                      "scratch",
                      x->data_bytes, comm);
  for (size_t i = 0; i < x->n_vals; i++) {
    ccg__xval *v = &x->vals[i];
    if (v->kind == CCG__V_ARENA)
      v->ptr = (char *)x->data + v->offset;
    else if (v->kind == CCG__V_STATIC)
      v->ptr = (void *)(uintptr_t)v->init;
  }
  return ccg__overlap_start(x);
}

static ccg_status cpu_run(ccg_exec *x) {
  if (x->ov) {
    CCG_CHECK(ccg__overlap_run(x));
  } else {
    const ccg__xcheck *c = x->checking ? x->checks : NULL;
    const ccg__xcheck *end = c ? c + x->n_checks : NULL;
    for (size_t s = 0; s < x->n_steps; s++) {
      const ccg__xnode *n = &x->steps[s];
      if (n->run) {
        ccg__step_scratch(x, n);
        CCG_CHECK(n->run(x, n));
      }
      for (; c != end && c->step == s; c++)
        if (!ccg__dyn_check(x, c)) {
          x->stale = true; /* nothing has read the value yet */
          return CCG_STATUS_OK;
        }
    }
  }
  if (x->comm) {
    ccg__coll k = {"Send",       "(end of run)", x->rank,       NULL,   0, 0, 0,
                   CCG_DTYPE_U8, CCG_REDUCE_SUM, x->deadline_s, &x->ctx};
    return x->comm->vt->flush(x->comm, &k);
  }
  return CCG_STATUS_OK;
}

static void cpu_destroy(ccg_exec *x) {
  ccg__overlap_free(x); /* joins the communication thread */
  free_aligned(x, x->data);
  free_aligned(x, x->comm_scratch);
  x->data = x->scratch = x->comm_scratch = NULL;
}

const ccg__backend_vt ccg__cpu_backend = {"cpu",      NULL,    NULL,
                                          cpu_create, cpu_run, cpu_destroy};
