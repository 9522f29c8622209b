/* The nccl communicator where no GPU can be used: bad options are refused
 * (INVALID_ARG naming the field) before CUDA is asked anything, and a
 * world of one fails at the GPU with CCG_STATUS_BACKEND and the CUDA error
 * text (a build without CUDA: UNSUPPORTED). Where a GPU is present, the
 * same world of one is created and all-reduces device memory instead. */
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

#include "ccgraph/ccgraph.h"
#include "net_util.h"
#include "cuda_probe.h"
#include "test_util.h"
#ifdef CCG_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "exec/comm/nccl.h"
#endif

/* ccg_comm_nccl_new refuses with st and a message holding `says`. */
static void refused(const ccg_nccl_options *o, ccg_status st,
                    const char *says) {
  ccg_comm *c = (ccg_comm *)&c; /* must be reset to NULL */
  assert_int_equal(ccg_comm_nccl_new(o, &c), st);
  assert_null(c);
  const char *msg = ccg_last_error(NULL);
  print_message("refused: %s\n", msg);
  assert_non_null(strstr(msg, says));
}

static void bad_options(void **state) {
  (void)state;
  ccg_test_clear_launch_env();
  ccg_nccl_options o = CCG_NCCL_OPTIONS_INIT;
  if (!ccg_comm_nccl_available()) {
    refused(&o, CCG_STATUS_UNSUPPORTED, "without CUDA");
    return;
  }
  o.rank = 2;
  o.world_size = 2;
  o.rendezvous = "file:/nonexistent/id";
  refused(&o, CCG_STATUS_INVALID_ARG, "options.rank");
  o.rank = 0;
  o.rendezvous = "nfs:/shared/id";
  refused(&o, CCG_STATUS_INVALID_ARG,
          "options.rendezvous: rendezvous "
          "'nfs:/shared/id'");
  o.rendezvous = "tcp:host:0";
  refused(&o, CCG_STATUS_INVALID_ARG, "1 to 65535");
  o.rendezvous = NULL;
  refused(&o, CCG_STATUS_INVALID_ARG, "needs a rendezvous");
  o.rendezvous = "file:/nonexistent/id";
  o.timeout_s = 0;
  refused(&o, CCG_STATUS_INVALID_ARG, "options.timeout_s");
  o = (ccg_nccl_options)CCG_NCCL_OPTIONS_INIT;
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "one", 1);
  refused(&o, CCG_STATUS_INVALID_ARG, "WORLD_SIZE='one'");
  setenv("WORLD_SIZE", "1", 1);
  refused(&o, CCG_STATUS_INVALID_ARG, "rank 1 (RANK)");
  ccg_test_clear_launch_env();
  assert_int_equal(ccg_comm_nccl_new(NULL, NULL), CCG_STATUS_INVALID_ARG);
}

static void expect_empty(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int left = 0;
  for (struct dirent *e; (e = readdir(d));)
    left += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  assert_int_equal(left, 0);
  assert_int_equal(rmdir(dir), 0);
}

#ifdef CCG_HAVE_CUDA
/* A real world of one: all-reduce (sum) of device memory. */
static void run_on_gpu(ccg_comm *c) {
  assert_true(ccg__comm_is_nccl(c));
  assert_int_equal(ccg_comm_size(c), 1);
  assert_int_equal(ccg_comm_rank(c), 0);
  assert_string_equal(ccg_comm_name(c), "nccl");
  assert_int_equal(cudaSetDevice(ccg__nccl_device(c)), cudaSuccess);
  const float host[4] = {1.5f, -2.0f, 3.25f, 0.0f};
  float back[4] = {0};
  float *in = NULL, *out = NULL;
  cudaStream_t s;
  cudaEvent_t ev;
  assert_int_equal(cudaMalloc((void **)&in, sizeof host), cudaSuccess);
  assert_int_equal(cudaMalloc((void **)&out, sizeof host), cudaSuccess);
  assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
  assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
  assert_int_equal(cudaMemcpy(in, host, sizeof host, cudaMemcpyHostToDevice),
                   cudaSuccess);
  ccg__nccl_set_stream(c, s);
  int64_t group[1] = {0};
  ccg__coll k = {"AllReduce",   "ar",           0,    group, 1, 0, 1,
                 CCG_DTYPE_F32, CCG_REDUCE_SUM, 30.0, NULL};
  assert_int_equal(c->vt->all_reduce(c, &k, in, out, 4), CCG_STATUS_OK);
  assert_int_equal(cudaEventRecord(ev, s), cudaSuccess);
  assert_int_equal(ccg__nccl_wait(c, ev, &k), CCG_STATUS_OK);
  assert_int_equal(cudaMemcpy(back, out, sizeof back, cudaMemcpyDeviceToHost),
                   cudaSuccess);
  for (int i = 0; i < 4; i++)
    assert_true(back[i] == host[i]); /* one rank: the sum is its input */
  /* a dtype NCCL cannot reduce is refused naming the node */
  k.dtype = CCG_DTYPE_BOOL;
  assert_int_equal(c->vt->all_reduce(c, &k, in, out, 4),
                   CCG_STATUS_UNSUPPORTED);
  assert_non_null(strstr(ccg_last_error(NULL), "node 'ar'"));
  assert_int_equal(c->vt->flush(c, &k), CCG_STATUS_OK);
  cudaEventDestroy(ev);
  cudaStreamDestroy(s);
  cudaFree(in);
  cudaFree(out);
}
#endif

static void world_of_one(void **state) {
  (void)state;
  ccg_test_clear_launch_env();
  char dir[] = "/tmp/ccg_nccl_XXXXXX", spec[64];
  assert_non_null(mkdtemp(dir));
  snprintf(spec, sizeof spec, "file:%s/id", dir);
  ccg_nccl_options o = CCG_NCCL_OPTIONS_INIT;
  o.rank = 0;
  o.world_size = 1;
  o.rendezvous = spec;
  o.timeout_s = 30;
  ccg_comm *c = NULL;
  ccg_status st = ccg_comm_nccl_new(&o, &c);
#ifdef CCG_HAVE_CUDA
  assert_true(ccg_comm_nccl_available());
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    const char *msg = ccg_last_error(NULL);
    print_message("no usable GPU (%s): the device run is skipped; refusal: "
                  "%s\n",
                  e != cudaSuccess ? cudaGetErrorString(e) : "no device", msg);
    assert_int_equal(st, CCG_STATUS_BACKEND);
    assert_null(c);
    assert_non_null(strstr(msg, e != cudaSuccess ? cudaGetErrorString(e)
                                                 : "no CUDA device"));
  } else {
    if (st != CCG_STATUS_OK)
      fail_msg("ccg_comm_nccl_new on a GPU: %s", ccg_last_error(NULL));
    run_on_gpu(c);
    ccg_comm_free(c);
  }
#else
  assert_false(ccg_comm_nccl_available());
  assert_int_equal(st, CCG_STATUS_UNSUPPORTED);
  assert_null(c);
#endif
  expect_empty(dir); /* a world of one writes no rendezvous file */
}

typedef struct proc {
  ccg_nccl_options o;
  ccg_status st;
  char msg[1024];
} proc;

static void *run_proc(void *arg) {
  proc *p = arg;
  ccg_comm *c = NULL;
  p->st = ccg_comm_nccl_new(&p->o, &c);
  snprintf(p->msg, sizeof p->msg, "%s", ccg_last_error(NULL));
  ccg_comm_free(c);
  return NULL;
}

/* Two ranks (threads) through the file and the tcp rendezvous: without a
 * GPU each fails on its own GPU, after the rendezvous, and nothing waits
 * out the timeout or stays behind. */
static void two_ranks(void **state) {
  (void)state;
  if (ccg_test_gpu_usable()) {
    print_message("skipped: a GPU is present, and two ranks of one process "
                  "cannot share it\n");
    return;
  }
  ccg_test_clear_launch_env();
  char dir[] = "/tmp/ccg_nccl_XXXXXX", specs[2][64];
  assert_non_null(mkdtemp(dir));
  snprintf(specs[0], sizeof specs[0], "file:%s/id", dir);
  snprintf(specs[1], sizeof specs[1], "tcp:127.0.0.1:%d", ccg_test_free_port());
  for (int s = 0; s < 2; s++) {
    proc p[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
      p[r].o = (ccg_nccl_options)CCG_NCCL_OPTIONS_INIT;
      p[r].o.rank = r;
      p[r].o.world_size = 2;
      p[r].o.rendezvous = specs[s];
      p[r].o.timeout_s = 20;
      assert_int_equal(pthread_create(&th[r], NULL, run_proc, &p[r]), 0);
    }
    for (int r = 0; r < 2; r++)
      pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
      print_message("%s, rank %d: %s\n", specs[s], r, p[r].msg);
      if (!ccg_comm_nccl_available()) {
        assert_int_equal(p[r].st, CCG_STATUS_UNSUPPORTED);
        continue;
      }
      char who[32];
      snprintf(who, sizeof who, "rank %d:", r);
      assert_int_equal(p[r].st, CCG_STATUS_BACKEND);
      assert_non_null(strstr(p[r].msg, who));
      assert_non_null(strstr(p[r].msg, "cudaGetDeviceCount"));
    }
  }
  expect_empty(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(bad_options),
                                     cmocka_unit_test(world_of_one),
                                     cmocka_unit_test(two_ranks)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
