/* What every communicator shares: the public handle functions. */
#include <stdio.h>
#include <string.h>

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

void ccg__coll_format_group(const ccg__coll *k, char *buf, size_t size) {
  size_t at = (size_t)snprintf(buf, size, "the group of ranks ");
  for (int i = 0; i < k->gsize && at < size; i++)
    at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? "," : "",
                           (long long)k->group[i]);
}

bool ccg__mesh_same_shape(const ccg_mesh *a, const ccg_mesh *b) {
  if (a->ndims != b->ndims)
    return false;
  for (int d = 0; d < a->ndims; d++)
    if (a->sizes[d] != b->sizes[d])
      return false;
  return true;
}

void ccg__mesh_split_of(const ccg_mesh *mesh, int rank, unsigned mask,
                        int64_t *ranks, int64_t *color, int *key) {
  int64_t gsize = ccg_mesh_group_size(mesh, mask);
  ccg_mesh_group_ranks(mesh, rank, mask, ranks);
  *color = ranks[0];
  for (int64_t i = 1; i < gsize; i++)
    *color = ranks[i] < *color ? ranks[i] : *color;
  *key = (int)ccg_mesh_rank_in_group(mesh, rank, mask);
}

void ccg__prepare_view(const ccg_mesh *mesh, int rank, int self,
                       int64_t view[CCG__VIEW_LEN]) {
  memset(view, 0, CCG__VIEW_LEN * sizeof *view);
  view[0] = rank == self ? -1 : rank;
  view[1] = mesh->ndims;
  for (int d = 0; d < mesh->ndims; d++)
    view[2 + d] = mesh->sizes[d];
}

ccg_status ccg__prepare_agree(const int64_t *all, int nranks,
                              const int64_t *mine, int self,
                              const ccg_mesh *mesh, const char *must,
                              ccg_ctx *err) {
  char want[128];
  ccg_mesh_format(mesh, want, sizeof want);
  for (int r = 0; r < nranks; r++) {
    const int64_t *f = all + (size_t)r * CCG__VIEW_LEN;
    if (f[0] != -1)
      return ccg__error(err, CCG_STATUS_INVALID_ARG,
                        "rank %d was created with options.rank %lld (it must "
                        "be %s, ccg_comm_rank)",
                        r, (long long)f[0], must);
    if (memcmp(f + 1, mine + 1, (CCG__VIEW_LEN - 1) * sizeof *f) != 0)
      return ccg__error(err, CCG_STATUS_INVALID_ARG,
                        "rank %d creates an executor for mesh %s while rank "
                        "%d creates one for another mesh shape (executors "
                        "must be created in the same order on every rank)",
                        self, want, r);
  }
  return CCG_STATUS_OK;
}

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
