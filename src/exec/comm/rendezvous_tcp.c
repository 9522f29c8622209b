/* The tcp rendezvous: rank 0 listens on PORT (every interface of HOST's
 * address family), every other rank connects to HOST:PORT, retrying until
 * the deadline, and sends a hello (magic, rank, world). Once every rank has
 * come and all agree, rank 0 answers each with the blob; otherwise each
 * connected rank gets the reason, and rank 0 fails with it. Sockets are
 * non-blocking: every wait is a poll() bounded by the deadline. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exec/comm/rendezvous.h"

#define HELLO_MAGIC 0x43434748u /* "CCGH" */
#define REPLY_MAGIC 0x43434752u /* "CCGR" */
#define REPLY_OK 0u
#define REPLY_REFUSED 1u
#define MSG_MAX 512
#define RETRY_NAP 0.02

/* Milliseconds left until the deadline, at least 0, at most `cap`. */
static int ms_left(double deadline, int cap) {
  double ms = (deadline - ccg__rdv_now()) * 1e3;
  if (ms <= 0)
    return 0;
  return ms > cap ? cap : (int)ms + 1;
}

static bool nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0 &&
         fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
}

typedef enum io_result { IO_DONE, IO_CLOSED, IO_FAILED, IO_TIMEOUT } io_result;

/* Moves n bytes through a non-blocking socket before the deadline. */
static io_result io_all(int fd, void *buf, size_t n, bool out,
                        double deadline) {
  char *p = buf;
  while (n > 0) {
    ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
      continue;
    }
    if (k == 0 && !out)
      return IO_CLOSED;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return errno == EPIPE || errno == ECONNRESET ? IO_CLOSED : IO_FAILED;
    struct pollfd pf = {fd, out ? POLLOUT : POLLIN, 0};
    int wait = ms_left(deadline, 100);
    if (wait == 0)
      return IO_TIMEOUT;
    if (poll(&pf, 1, wait) < 0 && errno != EINTR)
      return IO_FAILED;
  }
  return IO_DONE;
}

/* A reply: magic, status, length, payload. */
static io_result reply(int fd, uint32_t status, const void *data, size_t n,
                       double deadline) {
  unsigned char head[12];
  ccg__rdv_put_u32(head, REPLY_MAGIC);
  ccg__rdv_put_u32(head + 4, status);
  ccg__rdv_put_u32(head + 8, (uint32_t)n);
  io_result r = io_all(fd, head, sizeof head, true, deadline);
  return r == IO_DONE && n ? io_all(fd, (void *)data, n, true, deadline) : r;
}

static ccg_status resolve(const ccg__rdv *r, bool passive,
                          struct addrinfo **out, ccg_ctx *err) {
  char port[8];
  snprintf(port, sizeof port, "%d", r->port);
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  int rc = getaddrinfo(r->host, port, &hints, out);
  if (rc != 0)
    return ccg__error(err, CCG_STATUS_COMM,
                      "rendezvous tcp:%s:%d: cannot resolve '%s': %s", r->host,
                      r->port, r->host, gai_strerror(rc));
  return CCG_STATUS_OK;
}

/* ---- rank 0 -------------------------------------------------------------- */

static ccg_status listen_on(const ccg__rdv *r, int *out, ccg_ctx *err) {
  struct addrinfo *ai = NULL;
  CCG_CHECK(resolve(r, true, &ai, err));
  /* the wildcard address of HOST's family: HOST is where the others
   * connect, which need not be an address this machine can bind */
  struct sockaddr_storage sa;
  memset(&sa, 0, sizeof sa);
  socklen_t len;
  int family = ai->ai_family;
  freeaddrinfo(ai);
  if (family == AF_INET6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&sa;
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6addr_any;
    s6->sin6_port = htons((uint16_t)r->port);
    len = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&sa;
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_ANY);
    s4->sin_port = htons((uint16_t)r->port);
    len = sizeof *s4;
    family = AF_INET;
  }
  int fd = socket(family, SOCK_STREAM, 0);
  int one = 1;
  const char *call = "socket";
  if (fd >= 0) {
    call = "setsockopt(SO_REUSEADDR)";
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
        (call = "bind", bind(fd, (struct sockaddr *)&sa, len) == 0) &&
        (call = "listen", listen(fd, SOMAXCONN) == 0) &&
        (call = "fcntl", nonblocking(fd))) {
      *out = fd;
      return CCG_STATUS_OK;
    }
  }
  int e = errno;
  if (fd >= 0)
    close(fd);
  return ccg__error(err, CCG_STATUS_COMM,
                    "rendezvous tcp:%s:%d: rank 0 cannot listen on port %d: "
                    "%s: %s",
                    r->host, r->port, r->port, call, strerror(e));
}

/* Takes one connection and its hello. *peer: its socket (-1: a stray
 * connection, dropped); rank and world from the hello. */
static ccg_status take_hello(int lfd, int *peer, uint32_t *rank,
                             uint32_t *world, double deadline,
                             const ccg__rdv *r, ccg_ctx *err) {
  *peer = -1;
  struct pollfd pf = {lfd, POLLIN, 0};
  int wait = ms_left(deadline, 100);
  if (wait == 0)
    return CCG_STATUS_TIMEOUT;
  if (poll(&pf, 1, wait) <= 0)
    return CCG_STATUS_OK;
  int fd = accept(lfd, NULL, NULL);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
        errno == ECONNABORTED)
      return CCG_STATUS_OK;
    return ccg__error(err, CCG_STATUS_COMM,
                      "rendezvous tcp:%s:%d: rank 0: accept: %s", r->host,
                      r->port, strerror(errno));
  }
  unsigned char hello[12];
  if (!nonblocking(fd) ||
      io_all(fd, hello, sizeof hello, false, deadline) != IO_DONE ||
      ccg__rdv_get_u32(hello) != HELLO_MAGIC) {
    close(fd); /* not one of ours, or gone: the others may still come */
    return CCG_STATUS_OK;
  }
  *rank = ccg__rdv_get_u32(hello + 4);
  *world = ccg__rdv_get_u32(hello + 8);
  *peer = fd;
  return CCG_STATUS_OK;
}

/* Tells every connected rank the outcome, then closes them. */
static void answer_all(int *fds, int world, ccg_status st, const void *blob,
                       size_t bytes, const char *why, double deadline) {
  for (int i = 1; i < world; i++) {
    if (fds[i] < 0)
      continue;
    if (st == CCG_STATUS_OK)
      (void)reply(fds[i], REPLY_OK, blob, bytes, deadline);
    else
      (void)reply(fds[i], REPLY_REFUSED, why, strlen(why), deadline);
    close(fds[i]);
    fds[i] = -1;
  }
}

static ccg_status give(const ccg__rdv *r, int world, const void *blob,
                       size_t bytes, double deadline, ccg_ctx *err) {
  if (world == 1)
    return CCG_STATUS_OK; /* nobody to give it to: no port taken */
  int lfd = -1;
  CCG_CHECK(listen_on(r, &lfd, err));
  int *fds = malloc((size_t)world * sizeof *fds);
  if (!fds) {
    close(lfd);
    return ccg__error(err, CCG_STATUS_OOM, "rendezvous: out of memory");
  }
  for (int i = 0; i < world; i++)
    fds[i] = -1;
  ccg_status st = CCG_STATUS_OK;
  char why[MSG_MAX] = "";
  for (int left = world - 1; left > 0 && st == CCG_STATUS_OK;) {
    int fd;
    uint32_t rank = 0, theirs = 0;
    st = take_hello(lfd, &fd, &rank, &theirs, deadline, r, err);
    if (st == CCG_STATUS_TIMEOUT)
      st = ccg__error(err, CCG_STATUS_TIMEOUT,
                      "rendezvous tcp:%s:%d: rank 0 timed out waiting for "
                      "%d of %d ranks to connect",
                      r->host, r->port, left, world - 1);
    if (st != CCG_STATUS_OK || fd < 0)
      continue;
    if (theirs != (uint32_t)world)
      snprintf(why, sizeof why,
               "rank %u was launched with a world size of %u, rank 0 with %d",
               (unsigned)rank, (unsigned)theirs, world);
    else if (rank == 0 || rank >= (uint32_t)world)
      snprintf(why, sizeof why,
               "a process connected as rank %u, out of range for a world of "
               "%d",
               (unsigned)rank, world);
    else if (fds[rank] >= 0)
      snprintf(why, sizeof why,
               "rank %u is claimed by two processes (duplicate rank %u)",
               (unsigned)rank, (unsigned)rank);
    if (why[0]) {
      (void)reply(fd, REPLY_REFUSED, why, strlen(why), deadline);
      close(fd);
      st = ccg__error(err, CCG_STATUS_INVALID_ARG, "rendezvous tcp:%s:%d: %s",
                      r->host, r->port, why);
      break;
    }
    fds[rank] = fd;
    left--;
  }
  close(lfd);
  if (st != CCG_STATUS_OK && !why[0])
    snprintf(why, sizeof why, "rank 0 failed: %s", ccg_last_error(err));
  answer_all(fds, world, st, blob, bytes, why, deadline);
  free(fds);
  return st;
}

/* ---- the other ranks ----------------------------------------------------- */

/* One connection attempt to one address. Returns the socket or -1. */
static int try_connect(const struct addrinfo *a, double deadline, int *e) {
  int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
  if (fd < 0) {
    *e = errno;
    return -1;
  }
  if (!nonblocking(fd)) {
    *e = errno;
    close(fd);
    return -1;
  }
  if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
    return fd;
  if (errno != EINPROGRESS && errno != EINTR) {
    *e = errno;
    close(fd);
    return -1;
  }
  struct pollfd pf = {fd, POLLOUT, 0};
  int soerr = 0;
  socklen_t sl = sizeof soerr;
  int rc = poll(&pf, 1, ms_left(deadline, 1000));
  if (rc > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 &&
      soerr == 0)
    return fd;
  *e = rc > 0 ? soerr : ETIMEDOUT;
  close(fd);
  return -1;
}

static ccg_status connect_to(const ccg__rdv *r, int rank, double deadline,
                             int *out, ccg_ctx *err) {
  struct addrinfo *ai = NULL;
  CCG_CHECK(resolve(r, false, &ai, err));
  int e = 0;
  for (;;) {
    for (const struct addrinfo *a = ai; a; a = a->ai_next) {
      int fd = try_connect(a, deadline, &e);
      if (fd >= 0) {
        freeaddrinfo(ai);
        *out = fd;
        return CCG_STATUS_OK;
      }
    }
    if (ccg__rdv_now() > deadline)
      break;
    ccg__rdv_nap(RETRY_NAP);
  }
  freeaddrinfo(ai);
  return ccg__error(err, CCG_STATUS_TIMEOUT,
                    "rendezvous tcp:%s:%d: rank %d timed out connecting to "
                    "rank 0 (last: %s; is rank 0 running?)",
                    r->host, r->port, rank, strerror(e));
}

static ccg_status io_error(const ccg__rdv *r, int rank, io_result res,
                           const char *what, ccg_ctx *err) {
  return ccg__error(err,
                    res == IO_TIMEOUT ? CCG_STATUS_TIMEOUT : CCG_STATUS_COMM,
                    "rendezvous tcp:%s:%d: rank %d %s rank 0: %s", r->host,
                    r->port, rank, what,
                    res == IO_TIMEOUT  ? "timed out"
                    : res == IO_CLOSED ? "the connection closed"
                                       : strerror(errno));
}

static ccg_status take(const ccg__rdv *r, int rank, int world, void *blob,
                       size_t bytes, double deadline, ccg_ctx *err) {
  int fd = -1;
  CCG_CHECK(connect_to(r, rank, deadline, &fd, err));
  unsigned char hello[12], head[12] = {0};
  ccg__rdv_put_u32(hello, HELLO_MAGIC);
  ccg__rdv_put_u32(hello + 4, (uint32_t)rank);
  ccg__rdv_put_u32(hello + 8, (uint32_t)world);
  ccg_status st = CCG_STATUS_OK;
  io_result res = io_all(fd, hello, sizeof hello, true, deadline);
  if (res != IO_DONE)
    st = io_error(r, rank, res, "sending its hello to", err);
  if (st == CCG_STATUS_OK &&
      (res = io_all(fd, head, sizeof head, false, deadline)) != IO_DONE)
    st = io_error(r, rank, res, "waiting for the answer of", err);
  uint32_t status = ccg__rdv_get_u32(head + 4), n = ccg__rdv_get_u32(head + 8);
  if (st != CCG_STATUS_OK) {
    /* nothing to read */
  } else if (ccg__rdv_get_u32(head) != REPLY_MAGIC ||
             (status == REPLY_OK && n != bytes) ||
             (status != REPLY_OK && n >= MSG_MAX)) {
    st = ccg__error(err, CCG_STATUS_COMM,
                    "rendezvous tcp:%s:%d: rank %d got an answer that is not "
                    "from a ccgraph rank 0 (or another size of id)",
                    r->host, r->port, rank);
  } else if (status == REPLY_OK) {
    res = io_all(fd, blob, bytes, false, deadline);
    if (res != IO_DONE)
      st = io_error(r, rank, res, "reading the id from", err);
  } else {
    char why[MSG_MAX];
    res = io_all(fd, why, n, false, deadline);
    why[res == IO_DONE ? n : 0] = '\0';
    st = ccg__error(err, CCG_STATUS_INVALID_ARG,
                    "rendezvous tcp:%s:%d: rank 0 refused rank %d (world "
                    "size %d): %s",
                    r->host, r->port, rank, world, why);
  }
  close(fd);
  return st;
}

ccg_status ccg__rdv_share_tcp(const ccg__rdv *r, int rank, int world,
                              void *blob, size_t bytes, double deadline,
                              ccg_ctx *err) {
  return rank == 0 ? give(r, world, blob, bytes, deadline, err)
                   : take(r, rank, world, blob, bytes, deadline, err);
}
