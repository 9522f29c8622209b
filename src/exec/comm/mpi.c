/* The `mpi` communicator: each process is one rank of MPI_COMM_WORLD. This
 * file holds its life (MPI initialization, duplicated communicators, the
 * per-mesh-axis sub-communicators), its waits (non-blocking requests polled
 * against the deadline) and its failure notices; mpi_coll.c holds the
 * primitives. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/comm/mpi_comm.h"

#define TAG_NOTICE 1
#define TAG_CLOSE 3 /* a rank's last message on ctl (see close_ctl) */
#define SPINS 256   /* polls before each further poll yields the CPU */

/* MPI is process-wide: whether this library initialized it (and so
 * finalizes it at exit) is process-wide too. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool we_initialized;

double ccg__mpi_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

bool ccg_comm_mpi_available(void) { return true; }

/* ---- failure notices ----------------------------------------------------- */

static void record_failure(ccg__mpi *M, int rank, const char *text) {
  pthread_mutex_lock(&M->state_lock);
  if (!atomic_load(&M->failed)) {
    M->failed_rank = rank;
    snprintf(M->failed_msg, sizeof M->failed_msg, "%s", text);
    atomic_store(&M->failed, 1);
  }
  pthread_mutex_unlock(&M->state_lock);
}

/* A rank that failed on its own sends one notice to every other rank; a
 * rank that failed because it received one stays quiet (the others got the
 * same notice). The sends stay posted until destroy. */
void ccg__mpi_tell(ccg__mpi *M, int rank, const char *text) {
  record_failure(M, rank, text);
  pthread_mutex_lock(&M->state_lock);
  bool send = !M->told && M->failed_rank == M->base.rank;
  M->told = true;
  if (send)
    snprintf(M->notice, sizeof M->notice, "%s", text);
  pthread_mutex_unlock(&M->state_lock);
  if (!send)
    return;
  int len = (int)strlen(M->notice) + 1;
  for (int r = 0; r < M->base.nranks; r++) {
    if (r == M->base.rank)
      continue;
    ccg__mpi_lock(M);
    if (MPI_Isend(M->notice, len, MPI_CHAR, r, TAG_NOTICE, M->ctl,
                  &M->notice_reqs[r]) != MPI_SUCCESS)
      M->notice_reqs[r] = MPI_REQUEST_NULL; /* that rank times out instead */
    ccg__mpi_unlock(M);
  }
}

void ccg__mpi_abort(ccg_comm *c, int rank, const char *msg) {
  ccg__mpi_tell((ccg__mpi *)c, rank, msg);
}

/* Takes in a notice if one is waiting; true once the communicator failed. */
static bool poll_failed(ccg__mpi *M) {
  if (atomic_load(&M->failed))
    return true;
  int flag = 0;
  MPI_Message msg;
  MPI_Status s;
  char buf[CCG__MPI_NOTICE_MAX];
  ccg__mpi_lock(M);
  int rc = MPI_Improbe(MPI_ANY_SOURCE, TAG_NOTICE, M->ctl, &flag, &msg, &s);
  if (rc == MPI_SUCCESS && flag &&
      MPI_Mrecv(buf, (int)sizeof buf, MPI_CHAR, &msg, MPI_STATUS_IGNORE) !=
          MPI_SUCCESS)
    snprintf(buf, sizeof buf, "(its notice could not be read)");
  ccg__mpi_unlock(M);
  if (rc == MPI_SUCCESS && flag) {
    buf[sizeof buf - 1] = '\0';
    record_failure(M, s.MPI_SOURCE, buf);
  }
  return atomic_load(&M->failed);
}

static ccg_status failed_error(ccg__mpi *M, const ccg__coll *k) {
  pthread_mutex_lock(&M->state_lock);
  ccg_status st = ccg__error(
      k->err, CCG_STATUS_COMM, "%s at node '%s' on rank %d: rank %d failed: %s",
      k->op, k->node, k->rank, M->failed_rank, M->failed_msg);
  pthread_mutex_unlock(&M->state_lock);
  return st;
}

ccg_status ccg__mpi_check(ccg__mpi *M, const ccg__coll *k) {
  return poll_failed(M) ? failed_error(M, k) : CCG_STATUS_OK;
}

ccg_status ccg__mpi_error(ccg__mpi *M, const ccg__coll *k, int rc,
                          const char *call) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
    snprintf(text, sizeof text, "MPI error %d", rc);
  ccg_status st =
      ccg__error(k->err, CCG_STATUS_COMM, "%s at node '%s' on rank %d: %s: %s",
                 k->op, k->node, k->rank, call, text);
  ccg__mpi_tell(M, k->rank, ccg_last_error(k->err));
  return st;
}

/* ---- waits --------------------------------------------------------------- */

ccg_status ccg__mpi_wait(ccg__mpi *M, const ccg__coll *k, int n,
                         MPI_Request *reqs, int64_t peer, double start) {
  for (unsigned it = 0;; it++) {
    int flag = 0;
    ccg__mpi_lock(M);
    int rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
    ccg__mpi_unlock(M);
    if (rc != MPI_SUCCESS)
      return ccg__mpi_error(M, k, rc, "MPI_Testall");
    /* done, unless a peer gave up meanwhile: data that was on its way may
     * complete a call whose group has already failed */
    if (flag)
      return poll_failed(M) ? failed_error(M, k) : CCG_STATUS_OK;
    if ((it & 15) == 15 && poll_failed(M)) {
      M->stranded = true;
      return failed_error(M, k);
    }
    if (it < SPINS)
      continue;
    sched_yield();
    if (ccg__mpi_now() - start > k->deadline_s)
      return ccg__mpi_timeout(M, k, peer);
  }
}

ccg_status ccg__mpi_timeout(ccg__mpi *M, const ccg__coll *k, int64_t peer) {
  M->stranded = true;
  char who[256];
  if (peer >= 0 || !k->group)
    snprintf(who, sizeof who, "rank %lld", (long long)peer);
  else
    ccg__coll_format_group(k, who, sizeof who);
  ccg_status st = ccg__error(
      k->err, CCG_STATUS_TIMEOUT,
      "%s at node '%s' on rank %d: %s did not complete it within the "
      "deadline of %g s",
      k->op, k->node, k->rank, who, k->deadline_s);
  ccg__mpi_tell(M, k->rank, ccg_last_error(k->err));
  return st;
}

ccg_status ccg__mpi_scratch(ccg__mpi *M, const ccg__coll *k, size_t bytes,
                            char **out) {
  if (bytes > M->scratch_bytes) {
    /* a failed wait may have left a request writing into the old block:
     * keep it then (MPI cannot cancel a collective) */
    void *p = M->stranded ? malloc(bytes) : realloc(M->scratch, bytes);
    if (!p)
      return ccg__error(k->err, CCG_STATUS_OOM,
                        "%s at node '%s' on rank %d: out of memory for %zu "
                        "bytes of receive space",
                        k->op, k->node, k->rank, bytes);
    M->scratch = p;
    M->scratch_bytes = bytes;
  }
  *out = M->scratch;
  return CCG_STATUS_OK;
}

/* ---- sub-communicators --------------------------------------------------- */

ccg_status ccg__mpi_sub_of(ccg__mpi *M, const ccg__coll *k, MPI_Comm *out) {
  size_t bytes = (size_t)k->gsize * sizeof(int64_t);
  size_t h = M->hit[k->key % CCG__MPI_KEYS];
  for (size_t i = 0; i <= M->n_subs; i++) {
    size_t j = i == 0 ? h : i - 1;
    const ccg__mpi_sub *s = j < M->n_subs ? &M->subs[j] : NULL;
    if (s && s->gsize == k->gsize && memcmp(s->ranks, k->group, bytes) == 0) {
      M->hit[k->key % CCG__MPI_KEYS] = j;
      *out = s->comm;
      return CCG_STATUS_OK;
    }
  }
  char who[256];
  ccg__coll_format_group(k, who, sizeof who);
  return ccg__error(k->err, CCG_STATUS_INVALID_ARG,
                    "%s at node '%s' on rank %d: the mpi communicator has no "
                    "sub-communicator for %s (was the executor created with "
                    "this communicator?)",
                    k->op, k->node, k->rank, who);
}

/* One MPI_Comm_split per mesh-axis mask, in mask order on every rank: the
 * color is the smallest rank of the group, the key the index in it. */
static ccg_status split_masks(ccg__mpi *M, const ccg_mesh *mesh,
                              const ccg__coll *k) {
  int self = M->base.rank;
  for (unsigned mask = 1; mask < (1u << mesh->ndims); mask++) {
    int64_t gsize = ccg_mesh_group_size(mesh, mask);
    if (gsize < 2)
      continue; /* one rank: never calls the communicator */
    if (!ccg__vec_reserve(NULL, (void **)&M->subs, &M->cap_subs, M->n_subs + 1,
                          sizeof *M->subs))
      return ccg__error(k->err, CCG_STATUS_OOM, "out of memory");
    ccg__mpi_sub *s = &M->subs[M->n_subs];
    s->ranks = calloc((size_t)gsize, sizeof(int64_t));
    if (!s->ranks)
      return ccg__error(k->err, CCG_STATUS_OOM, "out of memory");
    s->gsize = (int)gsize;
    int64_t color;
    int gidx, got = -1;
    ccg__mesh_split_of(mesh, self, mask, s->ranks, &color, &gidx);
    ccg__mpi_lock(M);
    int rc = MPI_Comm_split(M->coll, (int)color, gidx, &s->comm);
    if (rc == MPI_SUCCESS)
      rc = MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS)
      rc = MPI_Comm_rank(s->comm, &got);
    ccg__mpi_unlock(M);
    if (rc != MPI_SUCCESS) {
      free(s->ranks);
      return ccg__mpi_error(M, k, rc, "MPI_Comm_split");
    }
    M->n_subs++;
    if (got != gidx)
      return ccg__error(k->err, CCG_STATUS_INTERNAL,
                        "rank %d: sub-communicator rank %d, expected %d", self,
                        got, gidx);
  }
  return CCG_STATUS_OK;
}

/* Every rank shows the others its rank check and mesh shape before any
 * split: all agree to split, or all fail, so no rank is left inside
 * MPI_Comm_split. A rank that never comes makes the others time out. */
ccg_status ccg__mpi_prepare(ccg_comm *c, const ccg_mesh *mesh, int rank,
                            double deadline_s, ccg_ctx *err) {
  ccg__mpi *M = (ccg__mpi *)c;
  ccg__coll k = {"CommSplit",  "(sub-communicators)", c->rank,    NULL, 0, 0, 0,
                 CCG_DTYPE_U8, CCG_REDUCE_SUM,        deadline_s, err};
  CCG_CHECK(ccg__mpi_check(M, &k));
  bool known = !mesh;
  for (size_t i = 0; mesh && i < M->n_meshes && !known; i++)
    known = ccg__mesh_same_shape(&M->meshes[i], mesh);
  if (rank != c->rank && known)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "options.rank is %d but this process is rank %d of "
                      "the mpi communicator (ccg_comm_rank)",
                      rank, c->rank);
  if (known)
    return CCG_STATUS_OK;
  enum { NFP = CCG__VIEW_LEN };
  int64_t fp[NFP];
  ccg__prepare_view(mesh, rank, c->rank, fp);
  int64_t *all = calloc((size_t)c->nranks * NFP, sizeof(int64_t));
  if (!all)
    return ccg__error(err, CCG_STATUS_OOM, "out of memory");
  MPI_Request req;
  ccg__mpi_lock(M);
  int rc = MPI_Iallgather(fp, NFP, MPI_INT64_T, all, NFP, MPI_INT64_T, M->coll,
                          &req);
  ccg__mpi_unlock(M);
  ccg_status st = rc == MPI_SUCCESS
                      ? ccg__mpi_wait(M, &k, 1, &req, -1, ccg__mpi_now())
                      : ccg__mpi_error(M, &k, rc, "MPI_Iallgather");
  if (st == CCG_STATUS_OK)
    st = ccg__prepare_agree(all, c->nranks, fp, c->rank, mesh, "its MPI rank",
                            err);
  free(all);
  CCG_CHECK(st);
  if (!ccg__vec_reserve(NULL, (void **)&M->meshes, &M->cap_meshes,
                        M->n_meshes + 1, sizeof *M->meshes))
    return ccg__error(err, CCG_STATUS_OOM, "out of memory");
  M->meshes[M->n_meshes++] = *mesh;
  return split_masks(M, mesh, &k);
}

/* ---- create and destroy -------------------------------------------------- */

static void finalize_at_exit(void) {
  int done = 0;
  MPI_Finalized(&done);
  if (!done)
    MPI_Finalize();
}

ccg_status ccg__mpi_init(int *provided) {
  /* the library is mapped now, by the first communicator that needs it */
  CCG_CHECK(ccg__mpi_load(NULL));
  pthread_mutex_lock(&init_lock);
  int inited = 0, done = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&done);
  ccg_status st = CCG_STATUS_OK;
  if (done) {
    st = ccg__error(NULL, CCG_STATUS_COMM,
                    "mpi communicator: MPI has already been finalized");
  } else if (!inited) {
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided) !=
        MPI_SUCCESS)
      st = ccg__error(NULL, CCG_STATUS_COMM,
                      "mpi communicator: MPI_Init_thread failed");
    else if (!we_initialized) {
      we_initialized = true;
      atexit(finalize_at_exit);
    }
  } else {
    MPI_Query_thread(provided);
  }
  pthread_mutex_unlock(&init_lock);
  return st;
}

static int dup_world(MPI_Comm *out) {
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, out);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
  return rc;
}

ccg_status ccg_comm_mpi_new(ccg_comm **out) {
  if (!out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_comm_mpi_new: out is NULL");
  *out = NULL;
  int provided = MPI_THREAD_SINGLE;
  CCG_CHECK(ccg__mpi_init(&provided));
  ccg__mpi *M = calloc(1, sizeof *M);
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (M) {
    M->notice_reqs = calloc((size_t)size, sizeof *M->notice_reqs);
    M->counts = calloc((size_t)size * 4, sizeof *M->counts);
    M->ins = calloc((size_t)size, sizeof *M->ins);
  }
  if (!M || !M->notice_reqs || !M->counts || !M->ins) {
    if (M) {
      free(M->notice_reqs);
      free(M->counts);
      free(M->ins);
    }
    free(M);
    return ccg__error(NULL, CCG_STATUS_OOM,
                      "mpi communicator: out of memory for %d ranks", size);
  }
  ccg__ctx_init(&M->base.ctx);
  M->base.vt = &ccg__mpi_vt;
  M->base.nranks = size;
  M->base.rank = rank;
  M->serialize = provided < MPI_THREAD_MULTIPLE;
  pthread_mutex_init(&M->mpi_lock, NULL);
  pthread_mutex_init(&M->state_lock, NULL);
  for (int r = 0; r < size; r++)
    M->notice_reqs[r] = MPI_REQUEST_NULL;
  M->coll = M->p2p = M->ctl = MPI_COMM_NULL;
  int rc = dup_world(&M->coll);
  if (rc == MPI_SUCCESS)
    rc = dup_world(&M->p2p);
  if (rc == MPI_SUCCESS)
    rc = dup_world(&M->ctl);
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  M->tag_ub = flag && ub ? *ub : 32767;
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    ccg__mpi_destroy(&M->base);
    return ccg__error(NULL, CCG_STATUS_COMM,
                      "mpi communicator: MPI_Comm_dup on rank %d: %s", rank,
                      text);
  }
  *out = &M->base;
  return CCG_STATUS_OK;
}

/* Every rank's last message on ctl is a CLOSE to each peer, sent after
 * its notices; each rank takes in everything from a peer (any tag, so in
 * the order it was sent) until that peer's CLOSE. Then no notice of this
 * communicator is still on its way when ctl is freed, and none can reach a
 * later communicator that MPI gives the same context. True when every peer
 * closed within a second of the last; false leaves ctl to MPI (not freed:
 * a late notice then has nowhere to land). */
static bool close_ctl(ccg__mpi *M) {
  int n = M->base.nranks, me = M->base.rank;
  MPI_Request *reqs = calloc((size_t)n, sizeof *reqs);
  bool *closed = calloc((size_t)n, sizeof *closed);
  if (!reqs || !closed) {
    free(reqs);
    free(closed);
    return false;
  }
  int left = n - 1;
  for (int r = 0; r < n; r++) {
    reqs[r] = MPI_REQUEST_NULL;
    if (r != me && MPI_Isend(NULL, 0, MPI_CHAR, r, TAG_CLOSE, M->ctl,
                             &reqs[r]) != MPI_SUCCESS)
      reqs[r] = MPI_REQUEST_NULL;
  }
  double t_last = ccg__mpi_now();
  while (left > 0 && ccg__mpi_now() - t_last < 1.0) {
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    char buf[CCG__MPI_NOTICE_MAX];
    if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, M->ctl, &flag, &msg, &st) !=
        MPI_SUCCESS)
      break;
    if (!flag) {
      sched_yield();
      continue;
    }
    MPI_Mrecv(buf, (int)sizeof buf, MPI_CHAR, &msg, MPI_STATUS_IGNORE);
    if (st.MPI_TAG == TAG_CLOSE && st.MPI_SOURCE >= 0 && st.MPI_SOURCE < n &&
        !closed[st.MPI_SOURCE]) {
      closed[st.MPI_SOURCE] = true;
      left--;
      t_last = ccg__mpi_now();
    }
  }
  int fin = 0;
  double t0 = ccg__mpi_now();
  while (!fin && ccg__mpi_now() - t0 < 1.0) {
    MPI_Testall(n, reqs, &fin, MPI_STATUSES_IGNORE);
    if (!fin)
      sched_yield();
  }
  for (int r = 0; r < n; r++)
    if (reqs[r] != MPI_REQUEST_NULL)
      MPI_Request_free(&reqs[r]);
  free(reqs);
  free(closed);
  return left == 0;
}

/* Takes in every notice still queued for this rank. */
static void drain_notices(ccg__mpi *M) {
  for (;;) {
    int flag = 0;
    MPI_Message msg;
    char buf[CCG__MPI_NOTICE_MAX];
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG_NOTICE, M->ctl, &flag, &msg,
                    MPI_STATUS_IGNORE) != MPI_SUCCESS ||
        !flag)
      return;
    MPI_Mrecv(buf, (int)sizeof buf, MPI_CHAR, &msg, MPI_STATUS_IGNORE);
  }
}

/* Ends what this rank still has posted where MPI lets it: unreceived
 * sends are cancelled, notices left to finish, waiting notices taken in. After
 * a wait gave up on a collective, the communicators and the receive space it
 * may still write into are left to MPI (it has no way to cancel them). */
void ccg__mpi_destroy(ccg_comm *c) {
  ccg__mpi *M = (ccg__mpi *)c;
  int done = 0;
  MPI_Finalized(&done);
  if (!done) {
    /* notices must get out: give them a moment, then let MPI finish them
     * on its own (never cancelled: a peer may be about to look) */
    double t0 = ccg__mpi_now();
    int fin = 0;
    while (!fin && ccg__mpi_now() - t0 < 1.0) {
      MPI_Testall(c->nranks, M->notice_reqs, &fin, MPI_STATUSES_IGNORE);
      if (!fin)
        sched_yield();
    }
    for (int i = 0; i < c->nranks; i++)
      if (M->notice_reqs[i] != MPI_REQUEST_NULL)
        MPI_Request_free(&M->notice_reqs[i]);
    for (int i = 0; i < M->n_sends; i++) {
      int done_send = 0;
      if (M->sends[i] == MPI_REQUEST_NULL)
        continue;
      MPI_Test(&M->sends[i], &done_send, MPI_STATUS_IGNORE);
      if (!done_send) {
        MPI_Cancel(&M->sends[i]);
        MPI_Request_free(&M->sends[i]);
      }
    }
    bool ctl_closed = true;
    if (M->ctl != MPI_COMM_NULL) {
      ctl_closed = close_ctl(M);
      drain_notices(M);
    }
    if (!M->stranded) {
      for (size_t i = 0; i < M->n_subs; i++)
        MPI_Comm_free(&M->subs[i].comm);
      MPI_Comm *dups[3] = {&M->coll, &M->p2p, &M->ctl};
      for (int i = 0; i < (ctl_closed ? 3 : 2); i++)
        if (*dups[i] != MPI_COMM_NULL)
          MPI_Comm_free(dups[i]);
    }
  }
  for (size_t i = 0; i < M->n_subs; i++)
    free(M->subs[i].ranks);
  free(M->subs);
  free(M->meshes);
  if (!M->stranded)
    free(M->scratch);
  free(M->notice_reqs);
  free(M->counts);
  free(M->ins);
  pthread_mutex_destroy(&M->mpi_lock);
  pthread_mutex_destroy(&M->state_lock);
  free(M);
}
