/* The communicator handles' public functions, and the mpi constructor as
 * this build has it: without MPI it refuses, saying how to get it. (The mpi
 * communicator itself is tested under mpirun: tests/mpi.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

static void test_local_handle(void **state) {
  (void)state;
  ccg_comm *c = NULL;
  assert_ok(NULL, ccg_comm_local_new(3, &c));
  assert_string_equal(ccg_comm_name(c), "local");
  assert_int_equal(ccg_comm_size(c), 3);
  assert_int_equal(ccg_comm_rank(c), -1); /* every rank is in this process */
  ccg_comm_free(c);
  assert_string_equal(ccg_comm_name(NULL), "none");
  assert_int_equal(ccg_comm_size(NULL), 0);
  assert_int_equal(ccg_comm_rank(NULL), -1);
}

static void test_mpi_as_built(void **state) {
  (void)state;
#ifdef CCG_HAVE_MPI
  assert_true(ccg_comm_mpi_available());
  assert_fails(NULL, CCG_STATUS_INVALID_ARG, ccg_comm_mpi_new(NULL),
               "ccg_comm_mpi_new: out is NULL");
#else
  assert_false(ccg_comm_mpi_available());
  ccg_comm *c = (ccg_comm *)&c;
  assert_fails(NULL, CCG_STATUS_UNSUPPORTED, ccg_comm_mpi_new(&c),
               "configured without MPI", "CCG_WITH_MPI=ON");
  assert_null(c);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_local_handle),
      cmocka_unit_test(test_mpi_as_built),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
