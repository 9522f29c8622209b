/* The nccl communicator's calls, in the order it makes them, without a
 * GPU: NCCL's functions are replaced in the table they are called through
 * (dynlib.h) by stubs that log each call, and the CUDA runtime's
 * cudaSetDevice, in its own table, by one that succeeds. A held send goes to
 * NCCL inside the group of the next recv (a send on its own blocks its stream
 * until the peer receives), and before any other call, in a group of its own. A
 * build without CUDA has no such communicator: the test is skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef CCG_HAVE_CUDA
#include "exec/comm/nccl_comm.h"

/* The calls made, as letters: ( group start, ) group end, S send, R recv,
 * A all-reduce. */
static char calls[64];

static void logged(char c) {
  size_t n = strlen(calls);
  if (n + 1 < sizeof calls) {
    calls[n] = c;
    calls[n + 1] = '\0';
  }
}

static cudaError_t set_device(int device) {
  (void)device;
  return cudaSuccess;
}

static ncclResult_t group_start(void) {
  logged('(');
  return ncclSuccess;
}

static ncclResult_t group_end(void) {
  logged(')');
  return ncclSuccess;
}

static ncclResult_t send(const void *buf, size_t count, ncclDataType_t t,
                         int peer, ncclComm_t comm, cudaStream_t s) {
  (void)buf, (void)count, (void)t, (void)peer, (void)comm, (void)s;
  logged('S');
  return ncclSuccess;
}

static ncclResult_t recv(void *buf, size_t count, ncclDataType_t t, int peer,
                         ncclComm_t comm, cudaStream_t s) {
  (void)buf, (void)count, (void)t, (void)peer, (void)comm, (void)s;
  logged('R');
  return ncclSuccess;
}

static ncclResult_t all_reduce(const void *in, void *out, size_t count,
                               ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s) {
  (void)in, (void)out, (void)count, (void)t, (void)op, (void)comm, (void)s;
  logged('A');
  return ncclSuccess;
}

static ncclResult_t async_error(ncclComm_t comm, ncclResult_t *state) {
  (void)comm;
  *state = ncclSuccess;
  return ncclSuccess;
}

static const char *error_string(ncclResult_t rc) {
  (void)rc;
  return "stub";
}

static const char *last_error(ncclComm_t comm) {
  (void)comm;
  return "";
}

/* Rank 0 of a world of two whose NCCL is the stubs above. */
static ccg__nccl *stub_comm(void) {
  ccg__cudart_fn.p_cudaSetDevice = set_device;
  ccg__nccl_fn.ncclGroupStart = group_start;
  ccg__nccl_fn.ncclGroupEnd = group_end;
  ccg__nccl_fn.ncclSend = send;
  ccg__nccl_fn.ncclRecv = recv;
  ccg__nccl_fn.ncclAllReduce = all_reduce;
  ccg__nccl_fn.ncclCommGetAsyncError = async_error;
  ccg__nccl_fn.ncclGetErrorString = error_string;
  ccg__nccl_fn.ncclGetLastError = last_error;
  ccg__nccl *N = calloc(1, sizeof *N);
  assert_non_null(N);
  N->base.vt = &ccg__nccl_vt;
  N->base.nranks = 2;
  N->base.rank = 0;
  N->world = (ncclComm_t)(uintptr_t)0x1000; /* never dereferenced */
  N->timeout_s = 10.0;
  assert_int_equal(pthread_mutex_init(&N->lock, NULL), 0);
  calls[0] = '\0';
  return N;
}

static void free_comm(ccg__nccl *N) {
  pthread_mutex_destroy(&N->lock);
  free(N);
}

static const int64_t world[2] = {0, 1};

static ccg__coll coll(const char *op, ccg_ctx *err) {
  ccg__coll k = {op,   "n", 0, world, 2, 0, 3, CCG_DTYPE_F32, CCG_REDUCE_SUM,
                 10.0, err};
  return k;
}

/* Send then recv (each rank sends to the other, then receives): one group
 * holding both, opened before the held send is given. */
static void send_goes_with_next_recv(void **state) {
  (void)state;
  ccg__nccl *N = stub_comm();
  ccg_ctx err;
  ccg__ctx_init(&err);
  ccg__coll k = coll("Send", &err);
  float a[4] = {0}, b[4] = {0};
  assert_int_equal(ccg__nccl_vt.send(&N->base, &k, a, 4, 1, 0), CCG_STATUS_OK);
  assert_string_equal(calls, ""); /* held */
  k.op = "Recv";
  assert_int_equal(ccg__nccl_vt.recv(&N->base, &k, b, 4, 1, 0), CCG_STATUS_OK);
  assert_string_equal(calls, "(SR)");
  free_comm(N);
}

/* A held send before an all-reduce and at the end of a step: in a group of
 * its own, first. */
static void held_send_goes_first(void **state) {
  (void)state;
  ccg__nccl *N = stub_comm();
  ccg_ctx err;
  ccg__ctx_init(&err);
  ccg__coll k = coll("Send", &err);
  float a[4] = {0};
  assert_int_equal(ccg__nccl_vt.send(&N->base, &k, a, 4, 1, 0), CCG_STATUS_OK);
  k.op = "AllReduce";
  assert_int_equal(ccg__nccl_vt.all_reduce(&N->base, &k, a, a, 4),
                   CCG_STATUS_OK);
  assert_string_equal(calls, "(S)A");
  calls[0] = '\0';
  k.op = "Send";
  assert_int_equal(ccg__nccl_vt.send(&N->base, &k, a, 4, 1, 0), CCG_STATUS_OK);
  assert_int_equal(ccg__nccl_release(&N->base, &k), CCG_STATUS_OK);
  assert_string_equal(calls, "(S)");
  free_comm(N);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(send_goes_with_next_recv),
      cmocka_unit_test(held_send_goes_first),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
static void no_nccl(void **state) {
  (void)state;
  print_message("SKIP: built without CUDA, so there is no nccl communicator "
                "to check\n");
  skip();
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(no_nccl)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
