/* The rendezvous of the nccl communicator: specs, the launch read from the
 * environment, and the file and tcp transports with ranks as threads
 * (sharing, world size mismatches, duplicate ranks, timeouts, clean-up). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/comm/rendezvous.h"
#include "net_util.h"
#include "test_util.h"

#define ID_BYTES 128
#define MAX_RANKS 4

/* ---- specs --------------------------------------------------------------- */

static void spec_good(void **state) {
  (void)state;
  ccg__rdv r;
  assert_int_equal(ccg__rdv_parse("mpi", &r, NULL), CCG_STATUS_OK);
  assert_int_equal(r.kind, CCG__RDV_MPI);
  assert_int_equal(ccg__rdv_parse("file:/shared/run1/id", &r, NULL),
                   CCG_STATUS_OK);
  assert_int_equal(r.kind, CCG__RDV_FILE);
  assert_string_equal(r.path, "/shared/run1/id");
  assert_int_equal(ccg__rdv_parse("tcp:node7.cluster:29500", &r, NULL),
                   CCG_STATUS_OK);
  assert_int_equal(r.kind, CCG__RDV_TCP);
  assert_string_equal(r.host, "node7.cluster");
  assert_int_equal(r.port, 29500);
  assert_int_equal(ccg__rdv_parse("tcp:[::1]:65535", &r, NULL), CCG_STATUS_OK);
  assert_string_equal(r.host, "::1");
  assert_int_equal(r.port, 65535);
}

static void spec_bad(void **state) {
  (void)state;
  static const struct {
    const char *spec, *says;
  } bad[] = {
      {"", "empty"},
      {"file:", "path is empty"},
      {"file:/tmp/dir/", "directory"},
      {"tcp:host", "no port"},
      {"tcp::80", "host is empty"},
      {"tcp:host:0", "1 to 65535"},
      {"tcp:host:65536", "1 to 65535"},
      {"tcp:host:29x00", "1 to 65535"},
      {"tcp:fe80::1:80", "brackets"},
      {"tcp:[::1]80", "[ADDRESS]:PORT"},
      {"udp:host:80", "unknown kind"},
      {"MPI", "unknown kind"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ccg__rdv r;
    assert_int_equal(ccg__rdv_parse(bad[i].spec, &r, NULL),
                     CCG_STATUS_INVALID_ARG);
    const char *msg = ccg_last_error(NULL);
    if (!strstr(msg, bad[i].says) ||
        (*bad[i].spec && !strstr(msg, bad[i].spec)))
      fail_msg("spec '%s': message '%s' lacks '%s'", bad[i].spec, msg,
               bad[i].says);
  }
  ccg__rdv r;
  assert_int_equal(ccg__rdv_parse(NULL, &r, NULL), CCG_STATUS_INVALID_ARG);
}

/* ---- the environment ----------------------------------------------------- */

static void env_good(void **state) {
  (void)state;
  ccg__launch l;
  ccg_test_clear_launch_env();
  /* nothing set: a process on its own */
  assert_int_equal(ccg__launch_resolve(-1, -1, -1, NULL, &l, NULL),
                   CCG_STATUS_OK);
  assert_int_equal(l.rank, 0);
  assert_int_equal(l.world, 1);
  assert_int_equal(l.local_rank, 0);
  assert_int_equal(l.rdv.kind, CCG__RDV_NONE);
  /* torchrun-style */
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("CCG_RENDEZVOUS", "file:/shared/id", 1);
  assert_int_equal(ccg__launch_resolve(-1, -1, -1, NULL, &l, NULL),
                   CCG_STATUS_OK);
  assert_int_equal(l.rank, 3);
  assert_int_equal(l.world, 8);
  assert_int_equal(l.local_rank, 1);
  assert_int_equal(l.rdv.kind, CCG__RDV_FILE);
  assert_string_equal(l.rdv.path, "/shared/id");
  assert_string_equal(l.rank_from, "RANK");
  /* options win over the environment */
  assert_int_equal(ccg__launch_resolve(5, -1, 2, "tcp:h:1234", &l, NULL),
                   CCG_STATUS_OK);
  assert_int_equal(l.rank, 5);
  assert_int_equal(l.local_rank, 2);
  assert_int_equal(l.rdv.kind, CCG__RDV_TCP);
  assert_string_equal(l.rank_from, "options.rank");
  /* MASTER_ADDR and MASTER_PORT when CCG_RENDEZVOUS is unset */
  unsetenv("CCG_RENDEZVOUS");
  setenv("MASTER_ADDR", "10.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  assert_int_equal(ccg__launch_resolve(-1, -1, -1, NULL, &l, NULL),
                   CCG_STATUS_OK);
  assert_int_equal(l.rdv.kind, CCG__RDV_TCP);
  assert_string_equal(l.rdv.host, "10.0.0.1");
  assert_int_equal(l.rdv.port, 29500);
  setenv("MASTER_ADDR", "fd00::7", 1);
  assert_int_equal(ccg__launch_resolve(-1, -1, -1, NULL, &l, NULL),
                   CCG_STATUS_OK);
  assert_string_equal(l.rdv.host, "fd00::7");
  /* under mpirun: mpi, rank and world left to MPI */
  ccg_test_clear_launch_env();
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  assert_int_equal(ccg__launch_resolve(-1, -1, -1, NULL, &l, NULL),
                   CCG_STATUS_OK);
  assert_int_equal(l.rdv.kind, CCG__RDV_MPI);
  assert_int_equal(l.rank, -1);
  assert_int_equal(l.world, -1);
  assert_int_equal(l.local_rank, 2);
  ccg_test_clear_launch_env();
  setenv("PMIX_RANK", "0", 1);
  assert_int_equal(ccg__launch_resolve(-1, -1, -1, NULL, &l, NULL),
                   CCG_STATUS_OK);
  assert_int_equal(l.rdv.kind, CCG__RDV_MPI);
  ccg_test_clear_launch_env();
}

/* resolve fails with INVALID_ARG and a message holding every `says`. */
static void expect_bad(int rank, int world, int local, const char *spec,
                       const char *says1, const char *says2) {
  ccg__launch l;
  assert_int_equal(ccg__launch_resolve(rank, world, local, spec, &l, NULL),
                   CCG_STATUS_INVALID_ARG);
  const char *msg = ccg_last_error(NULL);
  print_message("refused: %s\n", msg);
  assert_non_null(strstr(msg, says1));
  if (says2)
    assert_non_null(strstr(msg, says2));
}

static void env_bad(void **state) {
  (void)state;
  ccg_test_clear_launch_env();
  setenv("RANK", "two", 1);
  setenv("WORLD_SIZE", "4", 1);
  expect_bad(-1, -1, -1, "mpi", "RANK='two'", NULL);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "0", 1);
  expect_bad(-1, -1, -1, "mpi", "WORLD_SIZE='0'", NULL);
  setenv("WORLD_SIZE", "4x", 1);
  expect_bad(-1, -1, -1, "mpi", "WORLD_SIZE='4x'", NULL);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "-1", 1);
  expect_bad(-1, -1, -1, "mpi", "LOCAL_RANK='-1'", NULL);
  unsetenv("LOCAL_RANK");
  setenv("RANK", "4", 1);
  expect_bad(-1, -1, -1, "file:/x", "rank 4 (RANK)",
             "world size of 4 (WORLD_SIZE)");
  expect_bad(4, 4, -1, "file:/x", "rank 4 (options.rank)",
             "(options.world_size)");
  expect_bad(-2, 4, -1, "file:/x", "options.rank is -2", NULL);
  expect_bad(0, 0, -1, "file:/x", "options.world_size is 0", NULL);
  expect_bad(0, 2, -7, "file:/x", "options.local_rank is -7", NULL);
  expect_bad(0, 2, -1, "tcp:host", "options.rendezvous", "tcp:host");
  ccg_test_clear_launch_env();
  setenv("CCG_RENDEZVOUS", "nfs:/x", 1);
  expect_bad(0, 2, -1, NULL, "CCG_RENDEZVOUS", "nfs:/x");
  ccg_test_clear_launch_env();
  expect_bad(0, 2, -1, NULL, "needs a rendezvous", NULL);
  expect_bad(-1, 2, -1, "file:/x", "rank is not known", NULL);
  expect_bad(1, -1, -1, "file:/x", "world size is not known", NULL);
  setenv("MASTER_ADDR", "h", 1);
  expect_bad(0, 2, -1, NULL, "MASTER_PORT is not", NULL);
  setenv("MASTER_PORT", "99999", 1);
  expect_bad(0, 2, -1, NULL, "MASTER_ADDR/MASTER_PORT", "65535");
  ccg_test_clear_launch_env();
}

/* ---- sharing, ranks as threads ------------------------------------------- */

typedef struct job {
  const ccg__rdv *rdv;
  int rank, world;
  double timeout_s;
  unsigned char blob[ID_BYTES];
  ccg_status st;
  ccg_ctx err;
} job;

static void *run_job(void *arg) {
  job *j = arg;
  j->st = ccg__rdv_share(j->rdv, j->rank, j->world, j->blob, sizeof j->blob,
                         j->timeout_s, &j->err);
  return NULL;
}

/* Runs n ranks (rank[i] of world[i]) on threads; rank 0's blob is a
 * pattern, the others' zeros. */
static void run_ranks(const ccg__rdv *rdv, int n, const int *rank,
                      const int *world, double timeout_s, job *jobs) {
  pthread_t th[MAX_RANKS];
  for (int i = 0; i < n; i++) {
    jobs[i] = (job){rdv, rank[i], world[i], timeout_s, {0}, CCG_STATUS_OK, {0}};
    ccg__ctx_init(&jobs[i].err);
    for (int b = 0; rank[i] == 0 && b < ID_BYTES; b++)
      jobs[i].blob[b] = (unsigned char)(b * 7 + 3);
    assert_int_equal(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
  }
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
}

static void expect_shared(const job *jobs, int n) {
  for (int i = 0; i < n; i++) {
    if (jobs[i].st != CCG_STATUS_OK)
      fail_msg("rank %d: %s", jobs[i].rank, jobs[i].err.msg);
    for (int b = 0; b < ID_BYTES; b++)
      assert_int_equal(jobs[i].blob[b], (unsigned char)(b * 7 + 3));
  }
}

static void expect_failed(const job *j, ccg_status st, const char *says1,
                          const char *says2) {
  print_message("rank %d: %s\n", j->rank, j->err.msg);
  assert_int_equal(j->st, st);
  assert_non_null(strstr(j->err.msg, says1));
  if (says2)
    assert_non_null(strstr(j->err.msg, says2));
}

/* A fresh directory for one file rendezvous. */
static void file_rdv(ccg__rdv *r, char *dir) {
  strcpy(dir, "/tmp/ccg_rdv_XXXXXX");
  assert_non_null(mkdtemp(dir));
  char spec[128];
  snprintf(spec, sizeof spec, "file:%s/id", dir);
  assert_int_equal(ccg__rdv_parse(spec, r, NULL), CCG_STATUS_OK);
}

/* The directory holds nothing any more (then it goes). */
static void expect_clean(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  int left = 0;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      print_message("left behind: %s/%s\n", dir, e->d_name);
      left++;
    }
  closedir(d);
  assert_int_equal(left, 0);
  assert_int_equal(rmdir(dir), 0);
}

static void tcp_rdv(ccg__rdv *r) {
  char spec[64];
  snprintf(spec, sizeof spec, "tcp:127.0.0.1:%d", ccg_test_free_port());
  assert_int_equal(ccg__rdv_parse(spec, r, NULL), CCG_STATUS_OK);
}

static void share_file(void **state) {
  (void)state;
  for (int n = 1; n <= 4; n *= 2) {
    ccg__rdv r;
    char dir[64];
    file_rdv(&r, dir);
    job jobs[MAX_RANKS];
    int ranks[] = {3, 1, 0, 2}, worlds[] = {n, n, n, n};
    /* rank 0 last to start when n == 4, first when n == 2 (ranks 1, 0) */
    const int *rk = n == 4 ? ranks : n == 2 ? ranks + 1 : ranks + 2;
    run_ranks(&r, n, rk, worlds, 10.0, jobs);
    expect_shared(jobs, n);
    expect_clean(dir);
  }
}

static void share_tcp(void **state) {
  (void)state;
  /* the others start before rank 0 and must retry their connects */
  static const int two[] = {1, 0}, four[] = {2, 1, 3, 0};
  for (int n = 2; n <= 4; n *= 2) {
    ccg__rdv r;
    tcp_rdv(&r);
    job jobs[MAX_RANKS];
    int worlds[] = {n, n, n, n};
    run_ranks(&r, n, n == 2 ? two : four, worlds, 10.0, jobs);
    expect_shared(jobs, n);
  }
}

static void world_mismatch(void **state) {
  (void)state;
  ccg__rdv r;
  char dir[64];
  job jobs[2];
  int ranks[] = {0, 1}, worlds[] = {2, 3};
  file_rdv(&r, dir);
  run_ranks(&r, 2, ranks, worlds, 10.0, jobs);
  expect_failed(&jobs[0], CCG_STATUS_INVALID_ARG,
                "rank 1 was launched with a world size of 3", "rank 0 with 2");
  expect_failed(&jobs[1], CCG_STATUS_INVALID_ARG,
                "rank 1 was launched with a world size of 3", "rank 0 with 2");
  expect_clean(dir);
  tcp_rdv(&r);
  run_ranks(&r, 2, ranks, worlds, 10.0, jobs);
  expect_failed(&jobs[0], CCG_STATUS_INVALID_ARG,
                "rank 1 was launched with a world size of 3", "rank 0 with 2");
  expect_failed(&jobs[1], CCG_STATUS_INVALID_ARG, "refused rank 1",
                "world size of 3");
}

static void duplicate_rank(void **state) {
  (void)state;
  ccg__rdv r;
  char dir[64];
  job jobs[3];
  int ranks[] = {1, 1, 0}, worlds[] = {3, 3, 3};
  file_rdv(&r, dir);
  run_ranks(&r, 3, ranks, worlds, 10.0, jobs);
  expect_failed(&jobs[2], CCG_STATUS_INVALID_ARG, "duplicate rank 1", NULL);
  /* one of the two rank 1s got the id, the other was refused */
  int refused = (jobs[0].st != CCG_STATUS_OK) + (jobs[1].st != CCG_STATUS_OK);
  assert_int_equal(refused, 1);
  expect_failed(jobs[0].st != CCG_STATUS_OK ? &jobs[0] : &jobs[1],
                CCG_STATUS_INVALID_ARG, "rank 1 is claimed by two", NULL);
  expect_clean(dir);
  tcp_rdv(&r);
  run_ranks(&r, 3, ranks, worlds, 10.0, jobs);
  expect_failed(&jobs[2], CCG_STATUS_INVALID_ARG, "duplicate rank 1", NULL);
  expect_failed(&jobs[0], CCG_STATUS_INVALID_ARG, "duplicate rank 1", NULL);
  expect_failed(&jobs[1], CCG_STATUS_INVALID_ARG, "duplicate rank 1", NULL);
}

static void timeouts(void **state) {
  (void)state;
  ccg__rdv r;
  char dir[64];
  job jobs[1];
  int one[] = {1}, zero[] = {0}, worlds[] = {2};
  /* rank 0 never comes */
  file_rdv(&r, dir);
  double t0 = ccg__rdv_now();
  run_ranks(&r, 1, one, worlds, 0.3, jobs);
  expect_failed(&jobs[0], CCG_STATUS_TIMEOUT, "rank 1 timed out", dir);
  expect_clean(dir); /* nor does a rank that gave up leave anything */
  tcp_rdv(&r);
  run_ranks(&r, 1, one, worlds, 0.3, jobs);
  expect_failed(&jobs[0], CCG_STATUS_TIMEOUT, "rank 1 timed out connecting",
                "127.0.0.1");
  /* the others never come: rank 0 gives up and removes its file */
  run_ranks(&r, 1, zero, worlds, 0.3, jobs);
  expect_failed(&jobs[0], CCG_STATUS_TIMEOUT, "1 of 1 ranks", NULL);
  file_rdv(&r, dir);
  run_ranks(&r, 1, zero, worlds, 0.3, jobs);
  expect_failed(&jobs[0], CCG_STATUS_TIMEOUT, "rank 1 first", NULL);
  expect_clean(dir);
  assert_true(ccg__rdv_now() - t0 < 5.0);
}

static void stale_file_refused(void **state) {
  (void)state;
  ccg__rdv r;
  char dir[64];
  file_rdv(&r, dir);
  FILE *f = fopen(r.path, "w");
  assert_non_null(f);
  fclose(f);
  job jobs[1];
  int zero[] = {0}, worlds[] = {2};
  run_ranks(&r, 1, zero, worlds, 0.3, jobs);
  expect_failed(&jobs[0], CCG_STATUS_IO, "exists before the launch", r.path);
  assert_int_equal(unlink(r.path), 0);
  expect_clean(dir);
  ccg__rdv mpi;
  unsigned char b[4] = {0};
  assert_int_equal(ccg__rdv_parse("mpi", &mpi, NULL), CCG_STATUS_OK);
  assert_int_equal(ccg__rdv_share(&mpi, 0, 2, b, sizeof b, 1.0, NULL),
                   CCG_STATUS_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(spec_good),      cmocka_unit_test(spec_bad),
      cmocka_unit_test(env_good),       cmocka_unit_test(env_bad),
      cmocka_unit_test(share_file),     cmocka_unit_test(share_tcp),
      cmocka_unit_test(world_mismatch), cmocka_unit_test(duplicate_rank),
      cmocka_unit_test(timeouts),       cmocka_unit_test(stale_file_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
