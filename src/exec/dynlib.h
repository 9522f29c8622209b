/* Private: a shared library loaded on first use, by dlopen, so that a
 * process that never needs it does not map it or run its constructors
 * (cuBLAS and NCCL: cuda/dynlib.h; OpenBLAS: cpu/blas.h). */
#ifndef CCG_EXEC_DYNLIB_H
#define CCG_EXEC_DYNLIB_H

#include <pthread.h>

#include "core/error.h"

typedef struct ccg__dynlib {
  pthread_once_t once;
  ccg_status st; /* CCG_STATUS_BACKEND where it could not be loaded */
  char why[1024];
} ccg__dynlib;

#define CCG__DYNLIB_INIT                                                       \
  { PTHREAD_ONCE_INIT, CCG_STATUS_OK, "" }

/* The library by soname (the loader's search path), else in `dir`; NULL
 * with the reason in s. Its symbols stay local to it. */
void *ccg__dynlib_open(ccg__dynlib *s, const char *soname, const char *dir);
/* The same with the library's symbols made global (RTLD_GLOBAL): for a
 * library whose own plugins, loaded later, resolve against it (Open
 * MPI's components). */
void *ccg__dynlib_open_global(ccg__dynlib *s, const char *soname,
                              const char *dir);
/* Function `name` of library h (called `lib` in messages); NULL with the
 * reason in s, and NULL once s holds a failure. */
void *ccg__dynlib_sym(ccg__dynlib *s, void *h, const char *lib,
                      const char *name);
/* Runs `load` once per process (thread-safe), then: OK, or s's failure on
 * err as "what: why", every time it is asked for. */
ccg_status ccg__dynlib_load(ccg__dynlib *s, void (*load)(void), ccg_ctx *err,
                            const char *what);

#endif
