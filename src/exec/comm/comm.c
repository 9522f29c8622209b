/* What every communicator shares: the public handle functions. */
#include "exec/comm/comm.h"

void ccg_comm_free(ccg_comm *comm) {
  if (comm)
    comm->vt->destroy(comm);
}

const char *ccg_comm_name(const ccg_comm *comm) {
  return comm ? comm->vt->name : "none";
}

int ccg_comm_size(const ccg_comm *comm) { return comm ? comm->nranks : 0; }

int ccg_comm_rank(const ccg_comm *comm) { return comm ? comm->rank : -1; }

#ifndef CCG_HAVE_MPI
/* Built without MPI: the constructor says so (mpi.c has the real one). */
ccg_status ccg_comm_mpi_new(ccg_comm **out) {
  if (out)
    *out = NULL;
  return ccg__error(NULL, CCG_STATUS_UNSUPPORTED,
                    "the mpi communicator is not in this build: ccgraph was "
                    "configured without MPI (install libopenmpi-dev and "
                    "configure with -DCCG_WITH_MPI=ON)");
}

bool ccg_comm_mpi_available(void) { return false; }
#endif

#ifndef CCG_HAVE_CUDA
/* Built without CUDA: the constructor says so (nccl.c has the real one). */
ccg_status ccg_comm_nccl_new(const ccg_nccl_options *opts, ccg_comm **out) {
  (void)opts;
  if (out)
    *out = NULL;
  return ccg__error(NULL, CCG_STATUS_UNSUPPORTED,
                    "the nccl communicator is not in this build: ccgraph was "
                    "configured without CUDA (install the CUDA toolkit with "
                    "cuBLAS and NCCL and configure with -DCCG_WITH_CUDA=ON)");
}

bool ccg_comm_nccl_available(void) { return false; }
#endif
