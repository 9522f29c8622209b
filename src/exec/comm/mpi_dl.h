/* Private: MPI, loaded on first use (exec/dynlib.h), so that a process
 * that makes no mpi or nccl communicator does not map Open MPI and its
 * libraries (1.1 MiB resident) or run their constructors. Included
 * instead of <mpi.h> by the files that call MPI: after it, the MPI
 * functions they use, and Open MPI's predefined handles (MPI_COMM_WORLD,
 * MPI_BYTE, ...: addresses of the library's globals), are reached through
 * a table that ccg__mpi_load fills by dlsym. A call of a function missing
 * here references the library directly, and every program that links
 * ccgraph without MPI then fails to link: add it to the lists. */
#ifndef CCG_EXEC_COMM_MPI_DL_H
#define CCG_EXEC_COMM_MPI_DL_H

#include <mpi.h>

#include "core/error.h"

#define CCG__MPI_FNS(X)                                                        \
  X(MPI_Cancel)                                                                \
  X(MPI_Comm_dup)                                                              \
  X(MPI_Comm_free)                                                             \
  X(MPI_Comm_get_attr)                                                         \
  X(MPI_Comm_rank)                                                             \
  X(MPI_Comm_set_errhandler)                                                   \
  X(MPI_Comm_size)                                                             \
  X(MPI_Comm_split)                                                            \
  X(MPI_Error_string)                                                          \
  X(MPI_Finalize)                                                              \
  X(MPI_Finalized)                                                             \
  X(MPI_Get_count)                                                             \
  X(MPI_Iallgather)                                                            \
  X(MPI_Iallgatherv)                                                           \
  X(MPI_Iallreduce)                                                            \
  X(MPI_Ialltoallv)                                                            \
  X(MPI_Ibcast)                                                                \
  X(MPI_Igather)                                                               \
  X(MPI_Improbe)                                                               \
  X(MPI_Imrecv)                                                                \
  X(MPI_Init_thread)                                                           \
  X(MPI_Initialized)                                                           \
  X(MPI_Irecv)                                                                 \
  X(MPI_Isend)                                                                 \
  X(MPI_Issend)                                                                \
  X(MPI_Mrecv)                                                                 \
  X(MPI_Query_thread)                                                          \
  X(MPI_Request_free)                                                          \
  X(MPI_Test)                                                                  \
  X(MPI_Testall)

#ifdef OPEN_MPI
#define CCG__MPI_HANDLES(X)                                                    \
  X(ompi_mpi_2int)                                                             \
  X(ompi_mpi_byte)                                                             \
  X(ompi_mpi_char)                                                             \
  X(ompi_mpi_comm_null)                                                        \
  X(ompi_mpi_comm_world)                                                       \
  X(ompi_mpi_datatype_null)                                                    \
  X(ompi_mpi_errors_return)                                                    \
  X(ompi_mpi_int64_t)                                                          \
  X(ompi_mpi_op_minloc)                                                        \
  X(ompi_mpi_uint16_t)                                                         \
  X(ompi_mpi_uint32_t)                                                         \
  X(ompi_mpi_uint64_t)                                                         \
  X(ompi_request_null)
#else
/* MPICH and its kin: the handles are integer constants */
#define CCG__MPI_HANDLES(X)
#endif

#define CCG__MPI_FIELD(f) __typeof__(&f) p_##f;
typedef struct ccg__mpi_api {
  CCG__MPI_FNS(CCG__MPI_FIELD)
  CCG__MPI_HANDLES(CCG__MPI_FIELD)
} ccg__mpi_api;
#undef CCG__MPI_FIELD

/* Filled by ccg__mpi_load. */
extern ccg__mpi_api ccg__mpi_fn;

/* Loads the MPI library once per process (thread-safe, with its symbols
 * global: Open MPI's components resolve against it); CCG_STATUS_BACKEND
 * naming the library, or the function missing from it, every time it is
 * asked for. Before any other MPI call. */
ccg_status ccg__mpi_load(ccg_ctx *err);

/* Every use below goes through the table. CCG__MPI_DIRECT keeps the
 * library's own names: for mpi_dl.c, which fills the table, and for
 * programs that link MPI and call it before any communicator loads it
 * (the MPI tests). */
#ifndef CCG__MPI_DIRECT
#define MPI_Cancel (*ccg__mpi_fn.p_MPI_Cancel)
#define MPI_Comm_dup (*ccg__mpi_fn.p_MPI_Comm_dup)
#define MPI_Comm_free (*ccg__mpi_fn.p_MPI_Comm_free)
#define MPI_Comm_get_attr (*ccg__mpi_fn.p_MPI_Comm_get_attr)
#define MPI_Comm_rank (*ccg__mpi_fn.p_MPI_Comm_rank)
#define MPI_Comm_set_errhandler (*ccg__mpi_fn.p_MPI_Comm_set_errhandler)
#define MPI_Comm_size (*ccg__mpi_fn.p_MPI_Comm_size)
#define MPI_Comm_split (*ccg__mpi_fn.p_MPI_Comm_split)
#define MPI_Error_string (*ccg__mpi_fn.p_MPI_Error_string)
#define MPI_Finalize (*ccg__mpi_fn.p_MPI_Finalize)
#define MPI_Finalized (*ccg__mpi_fn.p_MPI_Finalized)
#define MPI_Get_count (*ccg__mpi_fn.p_MPI_Get_count)
#define MPI_Iallgather (*ccg__mpi_fn.p_MPI_Iallgather)
#define MPI_Iallgatherv (*ccg__mpi_fn.p_MPI_Iallgatherv)
#define MPI_Iallreduce (*ccg__mpi_fn.p_MPI_Iallreduce)
#define MPI_Ialltoallv (*ccg__mpi_fn.p_MPI_Ialltoallv)
#define MPI_Ibcast (*ccg__mpi_fn.p_MPI_Ibcast)
#define MPI_Igather (*ccg__mpi_fn.p_MPI_Igather)
#define MPI_Improbe (*ccg__mpi_fn.p_MPI_Improbe)
#define MPI_Imrecv (*ccg__mpi_fn.p_MPI_Imrecv)
#define MPI_Init_thread (*ccg__mpi_fn.p_MPI_Init_thread)
#define MPI_Initialized (*ccg__mpi_fn.p_MPI_Initialized)
#define MPI_Irecv (*ccg__mpi_fn.p_MPI_Irecv)
#define MPI_Isend (*ccg__mpi_fn.p_MPI_Isend)
#define MPI_Issend (*ccg__mpi_fn.p_MPI_Issend)
#define MPI_Mrecv (*ccg__mpi_fn.p_MPI_Mrecv)
#define MPI_Query_thread (*ccg__mpi_fn.p_MPI_Query_thread)
#define MPI_Request_free (*ccg__mpi_fn.p_MPI_Request_free)
#define MPI_Test (*ccg__mpi_fn.p_MPI_Test)
#define MPI_Testall (*ccg__mpi_fn.p_MPI_Testall)
#ifdef OPEN_MPI
#define ompi_mpi_2int (*ccg__mpi_fn.p_ompi_mpi_2int)
#define ompi_mpi_byte (*ccg__mpi_fn.p_ompi_mpi_byte)
#define ompi_mpi_char (*ccg__mpi_fn.p_ompi_mpi_char)
#define ompi_mpi_comm_null (*ccg__mpi_fn.p_ompi_mpi_comm_null)
#define ompi_mpi_comm_world (*ccg__mpi_fn.p_ompi_mpi_comm_world)
#define ompi_mpi_datatype_null (*ccg__mpi_fn.p_ompi_mpi_datatype_null)
#define ompi_mpi_errors_return (*ccg__mpi_fn.p_ompi_mpi_errors_return)
#define ompi_mpi_int64_t (*ccg__mpi_fn.p_ompi_mpi_int64_t)
#define ompi_mpi_op_minloc (*ccg__mpi_fn.p_ompi_mpi_op_minloc)
#define ompi_mpi_uint16_t (*ccg__mpi_fn.p_ompi_mpi_uint16_t)
#define ompi_mpi_uint32_t (*ccg__mpi_fn.p_ompi_mpi_uint32_t)
#define ompi_mpi_uint64_t (*ccg__mpi_fn.p_ompi_mpi_uint64_t)
#define ompi_request_null (*ccg__mpi_fn.p_ompi_request_null)
#endif
#endif

#endif
