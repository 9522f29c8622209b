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
