/* The file rendezvous: rank 0 publishes PATH, every other rank R reads it
 * and answers with PATH.ack.R; rank 0 removes everything once all have
 * answered, so the next launch finds the directory clean. Every file
 * appears whole: it is written under a temporary name, then linked to its
 * final name, which also refuses a name that exists (a second rank 0, a
 * rank claimed twice). A rank that finds its ack taken leaves PATH.dup.R
 * for rank 0 to see. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/comm/rendezvous.h"

#define HEADER 16 /* magic (8), world (4), size or rank (4) */
static const char ID_MAGIC[8] = {'C', 'C', 'G', 'R', 'D', 'V', '1', '\n'};
static const char ACK_MAGIC[8] = {'C', 'C', 'G', 'A', 'C', 'K', '1', '\n'};

#define NAP_MIN 0.001
#define NAP_MAX 0.05

typedef char name_buf[CCG__RDV_PATH_MAX + 64];

static void sibling(name_buf out, const char *path, const char *what,
                    int rank) {
  snprintf(out, sizeof(name_buf), "%s.%s.%d", path, what, rank);
}

static bool exists(const char *name) {
  struct stat st;
  return stat(name, &st) == 0;
}

static bool write_all(int fd, const void *data, size_t n) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* Writes `name` whole or not at all. *taken: it existed already (nothing
 * written). IO on err naming the file otherwise. */
static ccg_status publish(const char *name, const void *data, size_t n,
                          bool *taken, ccg_ctx *err) {
  *taken = false;
  name_buf tmp;
  snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", name);
  int fd = mkstemp(tmp);
  if (fd < 0)
    return ccg__error(err, CCG_STATUS_IO,
                      "rendezvous: cannot create a file beside '%s': %s", name,
                      strerror(errno));
  bool ok = write_all(fd, data, n);
  int e = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    unlink(tmp);
    return ccg__error(err, CCG_STATUS_IO, "rendezvous: cannot write '%s': %s",
                      tmp, strerror(e));
  }
  int rc = link(tmp, name);
  e = errno;
  if (rc != 0 && e != EEXIST) {
    /* a file system without hard links: no exclusive create, so look
     * first (a race between two claimants stays possible there) */
    if (exists(name)) {
      e = EEXIST;
    } else {
      rc = rename(tmp, name);
      e = errno;
    }
  }
  unlink(tmp);
  if (rc == 0)
    return CCG_STATUS_OK;
  if (e == EEXIST) {
    *taken = true;
    return CCG_STATUS_OK;
  }
  return ccg__error(err, CCG_STATUS_IO, "rendezvous: cannot create '%s': %s",
                    name, strerror(e));
}

/* Reads up to n bytes of `name`. *got: bytes read; -1: no such file. */
static ccg_status slurp(const char *name, void *buf, size_t n, long *got,
                        ccg_ctx *err) {
  *got = -1;
  int fd = open(name, O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT)
      return CCG_STATUS_OK;
    return ccg__error(err, CCG_STATUS_IO, "rendezvous: cannot open '%s': %s",
                      name, strerror(errno));
  }
  size_t at = 0;
  while (at < n) {
    ssize_t r = read(fd, (char *)buf + at, n - at);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      return ccg__error(err, CCG_STATUS_IO, "rendezvous: cannot read '%s': %s",
                        name, strerror(e));
    }
    if (r == 0)
      break;
    at += (size_t)r;
  }
  close(fd);
  *got = (long)at;
  return CCG_STATUS_OK;
}

/* Removes PATH and every ack and duplicate mark of ranks 1..world-1. */
static void clean(const char *path, int world) {
  name_buf name;
  for (int r = 1; r < world; r++) {
    sibling(name, path, "ack", r);
    unlink(name);
    sibling(name, path, "dup", r);
    unlink(name);
  }
  unlink(path);
}

/* Rank 0: has rank r answered? INVALID_ARG for a duplicate or a world
 * size that differs. */
static ccg_status look_for_ack(const char *path, int r, int world, bool *acked,
                               ccg_ctx *err) {
  name_buf name;
  sibling(name, path, "dup", r);
  if (exists(name))
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "rendezvous '%s': rank %d is claimed by two processes "
                      "(duplicate rank %d in a world of %d)",
                      path, r, r, world);
  if (*acked)
    return CCG_STATUS_OK;
  unsigned char ack[HEADER];
  long got;
  sibling(name, path, "ack", r);
  CCG_CHECK(slurp(name, ack, sizeof ack, &got, err));
  if (got < 0)
    return CCG_STATUS_OK;
  if (got != HEADER || memcmp(ack, ACK_MAGIC, 8) != 0 ||
      ccg__rdv_get_u32(ack + 12) != (uint32_t)r)
    return ccg__error(err, CCG_STATUS_IO,
                      "rendezvous: '%s' is not an acknowledgement of rank %d",
                      name, r);
  uint32_t theirs = ccg__rdv_get_u32(ack + 8);
  if (theirs != (uint32_t)world)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "rendezvous '%s': rank %d was launched with a world "
                      "size of %u, rank 0 with %d",
                      path, r, (unsigned)theirs, world);
  *acked = true;
  return CCG_STATUS_OK;
}

static ccg_status give(const char *path, int world, const void *blob,
                       size_t bytes, double deadline, ccg_ctx *err) {
  if (exists(path))
    return ccg__error(err, CCG_STATUS_IO,
                      "rendezvous: '%s' exists before the launch (left by an "
                      "earlier launch, or another process is rank 0 too): "
                      "remove it",
                      path);
  clean(path, world); /* marks an earlier launch may have left */
  unsigned char *msg = malloc(HEADER + bytes);
  if (!msg)
    return ccg__error(err, CCG_STATUS_OOM, "rendezvous: out of memory");
  memcpy(msg, ID_MAGIC, 8);
  ccg__rdv_put_u32(msg + 8, (uint32_t)world);
  ccg__rdv_put_u32(msg + 12, (uint32_t)bytes);
  memcpy(msg + HEADER, blob, bytes);
  bool taken = false;
  ccg_status st = publish(path, msg, HEADER + bytes, &taken, err);
  free(msg);
  CCG_CHECK(st);
  if (taken)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "rendezvous: '%s' appeared while rank 0 was writing it: "
                      "another process is rank 0 too",
                      path);
  bool *acked = calloc((size_t)world, sizeof *acked);
  if (!acked) {
    clean(path, world);
    return ccg__error(err, CCG_STATUS_OOM, "rendezvous: out of memory");
  }
  int left = world - 1;
  double nap = NAP_MIN;
  while (st == CCG_STATUS_OK && left > 0) {
    /* answered ranks too: a second claimant may come after the first */
    for (int r = 1; r < world && st == CCG_STATUS_OK; r++) {
      bool was = acked[r];
      st = look_for_ack(path, r, world, &acked[r], err);
      left -= acked[r] && !was;
    }
    if (st != CCG_STATUS_OK || left == 0)
      break;
    if (ccg__rdv_now() > deadline) {
      int r = 1;
      while (acked[r])
        r++;
      st = ccg__error(err, CCG_STATUS_TIMEOUT,
                      "rendezvous '%s': rank 0 timed out waiting for %d of "
                      "%d ranks (rank %d first) to read it",
                      path, left, world - 1, r);
      break;
    }
    ccg__rdv_nap(nap);
    nap = nap * 2 < NAP_MAX ? nap * 2 : NAP_MAX;
  }
  free(acked);
  clean(path, world);
  return st;
}

/* Rank r: tells rank 0 it has read PATH (with its own world size). */
static ccg_status answer(const char *path, int rank, int world, ccg_ctx *err) {
  unsigned char ack[HEADER];
  memcpy(ack, ACK_MAGIC, 8);
  ccg__rdv_put_u32(ack + 8, (uint32_t)world);
  ccg__rdv_put_u32(ack + 12, (uint32_t)rank);
  name_buf name;
  sibling(name, path, "ack", rank);
  bool taken = false;
  CCG_CHECK(publish(name, ack, sizeof ack, &taken, err));
  if (!taken)
    return CCG_STATUS_OK;
  sibling(name, path, "dup", rank);
  ccg_ctx quiet; /* the mark is best effort: the error below is the news */
  ccg__ctx_init(&quiet);
  (void)publish(name, ack, sizeof ack, &taken, &quiet);
  return ccg__error(err, CCG_STATUS_INVALID_ARG,
                    "rendezvous '%s': rank %d is claimed by two processes "
                    "(another process already answered as rank %d)",
                    path, rank, rank);
}

static ccg_status take(const char *path, int rank, int world, void *blob,
                       size_t bytes, double deadline, ccg_ctx *err) {
  unsigned char *msg = malloc(HEADER + bytes + 1);
  if (!msg)
    return ccg__error(err, CCG_STATUS_OOM, "rendezvous: out of memory");
  ccg_status st = CCG_STATUS_OK;
  long got = -1;
  double nap = NAP_MIN;
  for (;;) {
    st = slurp(path, msg, HEADER + bytes + 1, &got, err);
    if (st != CCG_STATUS_OK || got >= 0)
      break;
    if (ccg__rdv_now() > deadline) {
      st = ccg__error(err, CCG_STATUS_TIMEOUT,
                      "rendezvous: rank %d timed out waiting for rank 0 to "
                      "write '%s' (is rank 0 running, and does every rank "
                      "see that file system?)",
                      rank, path);
      break;
    }
    ccg__rdv_nap(nap);
    nap = nap * 2 < NAP_MAX ? nap * 2 : NAP_MAX;
  }
  uint32_t theirs = got >= HEADER ? ccg__rdv_get_u32(msg + 8) : 0;
  if (st != CCG_STATUS_OK) {
    /* nothing read */
  } else if (got < HEADER || memcmp(msg, ID_MAGIC, 8) != 0) {
    st = ccg__error(err, CCG_STATUS_IO,
                    "rendezvous: '%s' is not a rendezvous file", path);
  } else if (theirs != (uint32_t)world) {
    /* rank 0 names the mismatch too if it waits for this rank's answer */
    if ((uint32_t)rank < theirs)
      (void)answer(path, rank, world, err);
    st = ccg__error(err, CCG_STATUS_INVALID_ARG,
                    "rendezvous '%s': rank %d was launched with a world size "
                    "of %d, rank 0 with %u",
                    path, rank, world, (unsigned)theirs);
  } else if (ccg__rdv_get_u32(msg + 12) != bytes ||
             (size_t)got != HEADER + bytes) {
    st = ccg__error(err, CCG_STATUS_IO,
                    "rendezvous: '%s' holds %u bytes, rank %d expects %zu",
                    path, (unsigned)ccg__rdv_get_u32(msg + 12), rank, bytes);
  } else {
    memcpy(blob, msg + HEADER, bytes);
    st = answer(path, rank, world, err);
  }
  free(msg);
  return st;
}

ccg_status ccg__rdv_share_file(const ccg__rdv *r, int rank, int world,
                               void *blob, size_t bytes, double deadline,
                               ccg_ctx *err) {
  return rank == 0 ? give(r->path, world, blob, bytes, deadline, err)
                   : take(r->path, rank, world, blob, bytes, deadline, err);
}
