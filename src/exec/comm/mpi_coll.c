/* The `mpi` communicator's primitives. Each posts non-blocking MPI calls on
 * the group's sub-communicator and waits with the deadline (mpi.c). MPI
 * only moves bytes: every reduction is ccg__reduce_ordered over the group's
 * contributions in group order, as `local` does, so both give the same
 * bits. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "exec/comm/mpi_comm.h"

#define SMALL_BYTES 16384 /* all-reduce: whole on every rank up to this */
#define TAG_SHIFT 2

static size_t esize(const ccg__coll *k) { return ccg_dtype_size(k->dtype); }

/* Elements move as opaque words of their size: no conversion. */
static MPI_Datatype etype(size_t es) {
  switch (es) {
  case 2:
    return MPI_UINT16_T;
  case 4:
    return MPI_UINT32_T;
  case 8:
    return MPI_UINT64_T;
  default:
    return MPI_BYTE;
  }
}

/* MPI counts are ints. */
static ccg_status to_int(const ccg__coll *k, size_t v, int *out) {
  if (v > (size_t)INT32_MAX)
    return ccg__error(k->err, CCG_STATUS_UNSUPPORTED,
                      "%s at node '%s' on rank %d: %zu elements exceed MPI's "
                      "int counts",
                      k->op, k->node, k->rank, v);
  *out = (int)v;
  return CCG_STATUS_OK;
}

/* Fills ints[0..n) with counts and ints[n..2n) with their prefix sums. */
static ccg_status counts_displs(const ccg__coll *k, const size_t *counts, int n,
                                int *ints) {
  size_t at = 0;
  for (int r = 0; r < n; r++) {
    CCG_CHECK(to_int(k, counts[r], &ints[r]));
    CCG_CHECK(to_int(k, at, &ints[n + r]));
    at += counts[r];
  }
  return CCG_STATUS_OK;
}

/* Refuses once failed, finds the sub-communicator, checks the dtype. */
static ccg_status begin(ccg__mpi *M, const ccg__coll *k, MPI_Comm *comm) {
  CCG_CHECK(ccg__mpi_check(M, k));
  size_t es = esize(k);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return ccg__error(k->err, CCG_STATUS_UNSUPPORTED,
                      "%s at node '%s' on rank %d: dtype %s has no MPI word",
                      k->op, k->node, k->rank, ccg_dtype_name(k->dtype));
  return comm ? ccg__mpi_sub_of(M, k, comm) : CCG_STATUS_OK;
}

/* Checks rc of a posting call, then waits for the request. */
static ccg_status posted(ccg__mpi *M, const ccg__coll *k, int rc,
                         const char *call, MPI_Request *req, double start) {
  if (rc != MPI_SUCCESS)
    return ccg__mpi_error(M, k, rc, call);
  return ccg__mpi_wait(M, k, 1, req, -1, start);
}

/* Every rank's in, side by side in scratch: rank r's at r * each bytes. */
static void point_ins(ccg__mpi *M, const char *buf, int n, size_t each) {
  for (int r = 0; r < n; r++)
    M->ins[r] = buf + (size_t)r * each;
}

/* Share r of count elements split in n: [lo, hi), as local.c splits. */
static void share(size_t count, int n, int r, size_t *lo, size_t *hi) {
  size_t per = (count + (size_t)n - 1) / (size_t)n;
  *lo = per * (size_t)r < count ? per * (size_t)r : count;
  *hi = *lo + per < count ? *lo + per : count;
}

static ccg_status mpi_all_reduce(ccg_comm *c, const ccg__coll *k,
                                 const void *in, void *out, size_t count) {
  ccg__mpi *M = (ccg__mpi *)c;
  MPI_Comm comm;
  CCG_CHECK(begin(M, k, &comm));
  size_t es = esize(k);
  int n = k->gsize, ic = 0;
  MPI_Datatype t = etype(es);
  MPI_Request req;
  char *buf;
  double start = ccg__mpi_now();
  if (count * es <= SMALL_BYTES) {
    /* small: everyone gets every input and reduces all of it */
    CCG_CHECK(to_int(k, count, &ic));
    CCG_CHECK(ccg__mpi_scratch(M, k, (size_t)n * count * es, &buf));
    ccg__mpi_lock(M);
    int rc = MPI_Iallgather(in, ic, t, buf, ic, t, comm, &req);
    ccg__mpi_unlock(M);
    CCG_CHECK(posted(M, k, rc, "MPI_Iallgather", &req, start));
    point_ins(M, buf, n, count * es);
    ccg__reduce_ordered(k->dtype, k->rop, M->ins, n, 0, count, out);
    return CCG_STATUS_OK;
  }
  /* each rank gathers its share from every rank, reduces it in group
   * order, and the shares are gathered back */
  size_t lo, hi, a, b;
  share(count, n, k->gidx, &lo, &hi);
  size_t mine = hi - lo;
  CCG_CHECK(ccg__mpi_scratch(M, k, (size_t)n * mine * es + 1, &buf));
  int *sc = M->counts, *sd = sc + n, *rcn = sd + n, *rd = rcn + n;
  for (int r = 0; r < n; r++) {
    share(count, n, r, &a, &b);
    CCG_CHECK(to_int(k, b - a, &sc[r]));
    CCG_CHECK(to_int(k, a, &sd[r]));
    CCG_CHECK(to_int(k, mine, &rcn[r]));
    CCG_CHECK(to_int(k, (size_t)r * mine, &rd[r]));
  }
  ccg__mpi_lock(M);
  int rc = MPI_Ialltoallv(in, sc, sd, t, buf, rcn, rd, t, comm, &req);
  ccg__mpi_unlock(M);
  CCG_CHECK(posted(M, k, rc, "MPI_Ialltoallv", &req, start));
  point_ins(M, buf, n, mine * es);
  ccg__reduce_ordered(k->dtype, k->rop, M->ins, n, 0, mine,
                      (char *)out + lo * es);
  ccg__mpi_lock(M);
  rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, sc, sd, t, comm,
                       &req);
  ccg__mpi_unlock(M);
  return posted(M, k, rc, "MPI_Iallgatherv", &req, start);
}

static ccg_status mpi_all_gatherv(ccg_comm *c, const ccg__coll *k,
                                  const void *in, void *out,
                                  const size_t *counts) {
  ccg__mpi *M = (ccg__mpi *)c;
  MPI_Comm comm;
  CCG_CHECK(begin(M, k, &comm));
  int n = k->gsize, *cd = M->counts;
  CCG_CHECK(counts_displs(k, counts, n, cd));
  MPI_Datatype t = etype(esize(k));
  MPI_Request req;
  double start = ccg__mpi_now();
  ccg__mpi_lock(M);
  int rc = MPI_Iallgatherv(in, cd[k->gidx], t, out, cd, cd + n, t, comm, &req);
  ccg__mpi_unlock(M);
  return posted(M, k, rc, "MPI_Iallgatherv", &req, start);
}

static ccg_status mpi_reduce_scatterv(ccg_comm *c, const ccg__coll *k,
                                      const void *in, void *out,
                                      const size_t *counts) {
  ccg__mpi *M = (ccg__mpi *)c;
  MPI_Comm comm;
  CCG_CHECK(begin(M, k, &comm));
  int n = k->gsize, *sc = M->counts, *rcn = sc + 2 * n, *rd = rcn + n;
  size_t es = esize(k), mine = counts[k->gidx];
  CCG_CHECK(counts_displs(k, counts, n, sc));
  for (int r = 0; r < n; r++) {
    CCG_CHECK(to_int(k, mine, &rcn[r]));
    CCG_CHECK(to_int(k, (size_t)r * mine, &rd[r]));
  }
  char *buf;
  CCG_CHECK(ccg__mpi_scratch(M, k, (size_t)n * mine * es + 1, &buf));
  MPI_Datatype t = etype(es);
  MPI_Request req;
  double start = ccg__mpi_now();
  ccg__mpi_lock(M);
  int rc = MPI_Ialltoallv(in, sc, sc + n, t, buf, rcn, rd, t, comm, &req);
  ccg__mpi_unlock(M);
  CCG_CHECK(posted(M, k, rc, "MPI_Ialltoallv", &req, start));
  point_ins(M, buf, n, mine * es);
  ccg__reduce_ordered(k->dtype, k->rop, M->ins, n, 0, mine, out);
  return CCG_STATUS_OK;
}

static ccg_status mpi_all_to_allv(ccg_comm *c, const ccg__coll *k,
                                  const void *in, const size_t *send_counts,
                                  void *out, const size_t *recv_counts) {
  ccg__mpi *M = (ccg__mpi *)c;
  MPI_Comm comm;
  CCG_CHECK(begin(M, k, &comm));
  int n = k->gsize, *s = M->counts, *r = s + 2 * n;
  CCG_CHECK(counts_displs(k, send_counts, n, s));
  CCG_CHECK(counts_displs(k, recv_counts, n, r));
  MPI_Datatype t = etype(esize(k));
  MPI_Request req;
  double start = ccg__mpi_now();
  ccg__mpi_lock(M);
  int rc = MPI_Ialltoallv(in, s, s + n, t, out, r, r + n, t, comm, &req);
  ccg__mpi_unlock(M);
  return posted(M, k, rc, "MPI_Ialltoallv", &req, start);
}

static ccg_status mpi_broadcast(ccg_comm *c, const ccg__coll *k, const void *in,
                                void *out, size_t count, int root) {
  ccg__mpi *M = (ccg__mpi *)c;
  MPI_Comm comm;
  CCG_CHECK(begin(M, k, &comm));
  int ic = 0;
  CCG_CHECK(to_int(k, count, &ic));
  if (k->gidx == root && out != in && count)
    memcpy(out, in, count * esize(k));
  MPI_Request req;
  double start = ccg__mpi_now();
  ccg__mpi_lock(M);
  int rc = MPI_Ibcast(out, ic, etype(esize(k)), root, comm, &req);
  ccg__mpi_unlock(M);
  return posted(M, k, rc, "MPI_Ibcast", &req, start);
}

static ccg_status mpi_reduce(ccg_comm *c, const ccg__coll *k, const void *in,
                             void *out, size_t count, int root) {
  ccg__mpi *M = (ccg__mpi *)c;
  MPI_Comm comm;
  CCG_CHECK(begin(M, k, &comm));
  size_t es = esize(k);
  int n = k->gsize, ic = 0;
  CCG_CHECK(to_int(k, count, &ic));
  char *buf = NULL;
  if (k->gidx == root)
    CCG_CHECK(ccg__mpi_scratch(M, k, (size_t)n * count * es + 1, &buf));
  else if (out != in && count)
    memcpy(out, in, count * es);
  MPI_Datatype t = etype(es);
  MPI_Request req;
  double start = ccg__mpi_now();
  ccg__mpi_lock(M);
  int rc = MPI_Igather(in, ic, t, buf, ic, t, root, comm, &req);
  ccg__mpi_unlock(M);
  CCG_CHECK(posted(M, k, rc, "MPI_Igather", &req, start));
  if (k->gidx == root) {
    point_ins(M, buf, n, count * es);
    ccg__reduce_ordered(k->dtype, k->rop, M->ins, n, 0, count, out);
  }
  return CCG_STATUS_OK;
}

static ccg_status mpi_shift(ccg_comm *c, const ccg__coll *k, const void *in,
                            int dst, void *out, int src, size_t count) {
  ccg__mpi *M = (ccg__mpi *)c;
  MPI_Comm comm;
  CCG_CHECK(begin(M, k, &comm));
  int ic = 0;
  CCG_CHECK(to_int(k, count, &ic));
  MPI_Datatype t = etype(esize(k));
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  double start = ccg__mpi_now();
  int rc = MPI_SUCCESS;
  ccg__mpi_lock(M);
  if (src >= 0)
    rc = MPI_Irecv(out, ic, t, src, TAG_SHIFT, comm, &req[0]);
  if (dst >= 0 && rc == MPI_SUCCESS)
    rc = MPI_Isend(in, ic, t, dst, TAG_SHIFT, comm, &req[1]);
  ccg__mpi_unlock(M);
  if (rc != MPI_SUCCESS)
    return ccg__mpi_error(M, k, rc, "MPI_Isend/MPI_Irecv");
  return ccg__mpi_wait(M, k, 2, req, src >= 0 ? k->group[src] : -1, start);
}

/* ---- point to point ----------------------------------------------------- */

static ccg_status check_tag(ccg__mpi *M, const ccg__coll *k, int64_t tag) {
  if (tag >= 0 && tag <= M->tag_ub)
    return CCG_STATUS_OK;
  return ccg__error(k->err, CCG_STATUS_UNSUPPORTED,
                    "%s at node '%s' on rank %d: tag %lld is outside MPI's "
                    "range 0..%d",
                    k->op, k->node, k->rank, (long long)tag, M->tag_ub);
}

/* Synchronous sends: done only once the receiver has matched them, so the
 * run's flush means "received", as on `local`. */
static ccg_status mpi_send(ccg_comm *c, const ccg__coll *k, const void *in,
                           size_t count, int peer, int64_t tag) {
  ccg__mpi *M = (ccg__mpi *)c;
  CCG_CHECK(begin(M, k, NULL));
  CCG_CHECK(check_tag(M, k, tag));
  int ic = 0;
  CCG_CHECK(to_int(k, count, &ic));
  if (M->n_sends == CCG__MPI_SENDS) {
    /* full: the oldest must be received first */
    CCG_CHECK(
        ccg__mpi_wait(M, k, 1, &M->sends[0], M->send_peer[0], ccg__mpi_now()));
    memmove(M->sends, M->sends + 1, (CCG__MPI_SENDS - 1) * sizeof *M->sends);
    memmove(M->send_peer, M->send_peer + 1,
            (CCG__MPI_SENDS - 1) * sizeof *M->send_peer);
    M->n_sends--;
  }
  ccg__mpi_lock(M);
  int rc = MPI_Issend(in, ic, etype(esize(k)), peer, (int)tag, M->p2p,
                      &M->sends[M->n_sends]);
  ccg__mpi_unlock(M);
  if (rc != MPI_SUCCESS)
    return ccg__mpi_error(M, k, rc, "MPI_Issend");
  M->send_peer[M->n_sends++] = peer;
  return CCG_STATUS_OK;
}

/* Takes the next message from peer whatever its tag (messages between two
 * ranks keep their order) and checks tag and size, as `local` does. */
static ccg_status mpi_recv(ccg_comm *c, const ccg__coll *k, void *out,
                           size_t count, int peer, int64_t tag) {
  ccg__mpi *M = (ccg__mpi *)c;
  CCG_CHECK(begin(M, k, NULL));
  int ic = 0;
  CCG_CHECK(to_int(k, count, &ic));
  double start = ccg__mpi_now();
  MPI_Message msg;
  MPI_Status s;
  for (unsigned it = 0;; it++) {
    int flag = 0;
    ccg__mpi_lock(M);
    int rc = MPI_Improbe(peer, MPI_ANY_TAG, M->p2p, &flag, &msg, &s);
    ccg__mpi_unlock(M);
    if (rc != MPI_SUCCESS)
      return ccg__mpi_error(M, k, rc, "MPI_Improbe");
    if (flag)
      break;
    if ((it & 15) == 15) {
      CCG_CHECK(ccg__mpi_check(M, k));
      if (ccg__mpi_now() - start > k->deadline_s)
        return ccg__mpi_timeout(M, k, peer);
    }
    if (it > 256)
      sched_yield();
  }
  int bytes = 0;
  MPI_Get_count(&s, MPI_BYTE, &bytes);
  size_t want = count * esize(k);
  if (s.MPI_TAG != tag || (size_t)bytes != want) {
    ccg_status st = ccg__error(
        k->err, CCG_STATUS_COMM,
        "%s at node '%s' on rank %d expects tag %lld and %zu bytes from rank "
        "%d, which sent tag %d and %d bytes",
        k->op, k->node, k->rank, (long long)tag, want, peer, s.MPI_TAG, bytes);
    ccg__mpi_tell(M, k->rank, ccg_last_error(k->err));
    return st;
  }
  MPI_Request req;
  ccg__mpi_lock(M);
  int rc = MPI_Imrecv(out, ic, etype(esize(k)), &msg, &req);
  ccg__mpi_unlock(M);
  return posted(M, k, rc, "MPI_Imrecv", &req, start);
}

static ccg_status mpi_flush(ccg_comm *c, const ccg__coll *k) {
  ccg__mpi *M = (ccg__mpi *)c;
  double start = ccg__mpi_now();
  for (int i = 0; i < M->n_sends; i++)
    CCG_CHECK(ccg__mpi_wait(M, k, 1, &M->sends[i], M->send_peer[i], start));
  M->n_sends = 0;
  return CCG_STATUS_OK;
}

/* The receive space each reducing call takes (the same sizes they ask of
 * ccg__mpi_scratch), kept from create on. */
static ccg_status mpi_reserve(ccg_comm *c, const ccg__coll *k, ccg_op op,
                              size_t count, const size_t *counts, int root) {
  ccg__mpi *M = (ccg__mpi *)c;
  size_t es = esize(k), n = (size_t)k->gsize, need = 0, lo, hi;
  switch (op) {
  case CCG_OP_ALL_REDUCE:
    share(count, k->gsize, k->gidx, &lo, &hi);
    need = count * es <= SMALL_BYTES ? n * count * es : n * (hi - lo) * es + 1;
    break;
  case CCG_OP_REDUCE_SCATTER:
    need = n * counts[k->gidx] * es + 1;
    break;
  case CCG_OP_REDUCE:
    need = k->gidx == root ? n * count * es + 1 : 0;
    break;
  default:
    return CCG_STATUS_OK;
  }
  char *buf;
  return need ? ccg__mpi_scratch(M, k, need, &buf) : CCG_STATUS_OK;
}

const ccg__comm_vt ccg__mpi_vt = {
    "mpi",
    mpi_all_reduce,
    mpi_all_gatherv,
    mpi_reduce_scatterv,
    mpi_all_to_allv,
    mpi_broadcast,
    mpi_reduce,
    mpi_shift,
    mpi_send,
    mpi_recv,
    mpi_flush,
    ccg__mpi_abort,
    ccg__mpi_destroy,
    ccg__mpi_prepare,
    mpi_reserve,
};
