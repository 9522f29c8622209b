/* MPI loaded on first use (mpi_dl.h). */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#define CCG__MPI_DIRECT
#include <dlfcn.h>

#include "exec/comm/mpi_dl.h"
#include "exec/dynlib.h"

ccg__mpi_api ccg__mpi_fn;

static ccg__dynlib mpi_state = CCG__DYNLIB_INIT;

static void load_mpi(void) {
  const char *so = CCG_MPI_SONAME;
  if (!ccg__dynlib_open_global(&mpi_state, so, CCG_MPI_LIBDIR))
    return;
    /* Looked up in the process's global scope, not the library's own: a
     * program that links MPI and reads a handle itself (MPI_COMM_WORLD) has
     * a copy of that global, which the library then uses instead of its own
     * (a copy relocation); the library's definition would be a stale one. */
#define CCG__LOAD(f)                                                           \
  *(void **)&ccg__mpi_fn.p_##f =                                               \
      ccg__dynlib_sym(&mpi_state, RTLD_DEFAULT, so, #f);
  CCG__MPI_FNS(CCG__LOAD)
  CCG__MPI_HANDLES(CCG__LOAD)
#undef CCG__LOAD
}

ccg_status ccg__mpi_load(ccg_ctx *err) {
  return ccg__dynlib_load(&mpi_state, load_mpi, err, "MPI");
}
