/* Rendezvous specs, the launch as the environment describes it, and the
 * dispatch of ccg__rdv_share to its transports (rendezvous_file.c,
 * rendezvous_tcp.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/comm/rendezvous.h"

/* Room left in a path for the suffixes the file transport adds. */
#define SUFFIX_ROOM 32

double ccg__rdv_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void ccg__rdv_nap(double s) {
  if (s <= 0)
    return;
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR)
    ;
}

/* ---- specs --------------------------------------------------------------- */

static ccg_status bad_spec(ccg_ctx *err, const char *spec, const char *why) {
  return ccg__error(err, CCG_STATUS_INVALID_ARG, "rendezvous '%s': %s", spec,
                    why);
}

/* A decimal port 1..65535, the whole string. */
static bool parse_port(const char *s, int *out) {
  if (!*s || strlen(s) > 5)
    return false;
  int v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9')
      return false;
    v = v * 10 + (*p - '0');
  }
  if (v < 1 || v > 65535)
    return false;
  *out = v;
  return true;
}

static ccg_status parse_tcp(const char *spec, const char *rest, ccg__rdv *out,
                            ccg_ctx *err) {
  const char *host = rest, *colon;
  size_t hlen;
  if (*rest == '[') { /* [v6addr]:port */
    const char *close = strchr(rest, ']');
    if (!close || close[1] != ':')
      return bad_spec(err, spec, "expected tcp:[ADDRESS]:PORT after '['");
    host = rest + 1;
    hlen = (size_t)(close - host);
    colon = close + 1;
  } else {
    colon = strrchr(rest, ':');
    if (!colon)
      return bad_spec(err, spec, "expected tcp:HOST:PORT (no port)");
    hlen = (size_t)(colon - rest);
    if (memchr(rest, ':', hlen))
      return bad_spec(err, spec,
                      "an IPv6 address must be written in brackets: "
                      "tcp:[ADDRESS]:PORT");
  }
  if (hlen == 0)
    return bad_spec(err, spec, "the host is empty (expected tcp:HOST:PORT)");
  if (hlen >= sizeof out->host)
    return bad_spec(err, spec, "the host name is too long");
  if (!parse_port(colon + 1, &out->port))
    return bad_spec(err, spec, "the port must be a number from 1 to 65535");
  memcpy(out->host, host, hlen);
  out->host[hlen] = '\0';
  out->kind = CCG__RDV_TCP;
  return CCG_STATUS_OK;
}

ccg_status ccg__rdv_parse(const char *spec, ccg__rdv *out, ccg_ctx *err) {
  memset(out, 0, sizeof *out);
  if (!spec || !*spec)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "the rendezvous spec is empty (expected mpi, file:PATH "
                      "or tcp:HOST:PORT)");
  if (strcmp(spec, "mpi") == 0) {
    out->kind = CCG__RDV_MPI;
    return CCG_STATUS_OK;
  }
  if (strncmp(spec, "file:", 5) == 0) {
    const char *path = spec + 5;
    if (!*path)
      return bad_spec(err, spec, "the path is empty (expected file:PATH)");
    if (strlen(path) + SUFFIX_ROOM >= sizeof out->path)
      return bad_spec(err, spec, "the path is too long");
    if (path[strlen(path) - 1] == '/')
      return bad_spec(err, spec, "the path names a directory, not a file");
    strcpy(out->path, path);
    out->kind = CCG__RDV_FILE;
    return CCG_STATUS_OK;
  }
  if (strncmp(spec, "tcp:", 4) == 0)
    return parse_tcp(spec, spec + 4, out, err);
  return bad_spec(err, spec,
                  "unknown kind (expected mpi, file:PATH or "
                  "tcp:HOST:PORT)");
}

/* ---- the environment ----------------------------------------------------- */

/* An integer variable: false when unset (or empty); INVALID_ARG naming it
 * when it is not a whole number >= min. */
static ccg_status env_int(const char *name, int min, int *out, bool *set,
                          ccg_ctx *err) {
  const char *v = getenv(name);
  *set = false;
  if (!v || !*v)
    return CCG_STATUS_OK;
  char *end = NULL;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno || end == v || *end || n < min || n > INT_MAX)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "environment variable %s='%s' is not a whole number "
                      ">= %d",
                      name, v, min);
  *out = (int)n;
  *set = true;
  return CCG_STATUS_OK;
}

static bool under_mpirun(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                     "PMIX_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i]))
      return true;
  return false;
}

/* The rendezvous from the options' spec, else from the environment. */
static ccg_status resolve_spec(const char *spec, ccg__rdv *out, ccg_ctx *err) {
  if (spec) {
    if (ccg__rdv_parse(spec, out, err) != CCG_STATUS_OK)
      return ccg__error_prefix(err, "options.rendezvous");
    return CCG_STATUS_OK;
  }
  const char *env = getenv("CCG_RENDEZVOUS");
  if (env && *env) {
    if (ccg__rdv_parse(env, out, err) != CCG_STATUS_OK)
      return ccg__error_prefix(err, "CCG_RENDEZVOUS");
    return CCG_STATUS_OK;
  }
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (addr && *addr && !(port && *port))
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "MASTER_ADDR is set but MASTER_PORT is not");
  if (port && *port && !(addr && *addr))
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "MASTER_PORT is set but MASTER_ADDR is not");
  if (addr && *addr) {
    char tcp[CCG__RDV_HOST_MAX + 32];
    bool v6 = strchr(addr, ':') && addr[0] != '[';
    snprintf(tcp, sizeof tcp, "tcp:%s%s%s:%s", v6 ? "[" : "", addr,
             v6 ? "]" : "", port);
    if (ccg__rdv_parse(tcp, out, err) != CCG_STATUS_OK)
      return ccg__error_prefix(err, "MASTER_ADDR/MASTER_PORT");
    return CCG_STATUS_OK;
  }
  memset(out, 0, sizeof *out);
  out->kind = under_mpirun() ? CCG__RDV_MPI : CCG__RDV_NONE;
  return CCG_STATUS_OK;
}

/* A value from the options (>= min, or -1), else from the variable. */
static ccg_status pick(int opt, const char *opt_name, const char *var, int min,
                       int *out, const char **from, ccg_ctx *err) {
  *out = -1;
  *from = NULL;
  if (opt != -1) {
    if (opt < min)
      return ccg__error(err, CCG_STATUS_INVALID_ARG,
                        "%s is %d: it must be >= %d (or -1: from %s)", opt_name,
                        opt, min, var);
    *out = opt;
    *from = opt_name;
    return CCG_STATUS_OK;
  }
  bool set = false;
  CCG_CHECK(env_int(var, min, out, &set, err));
  if (set)
    *from = var;
  else
    *out = -1;
  return CCG_STATUS_OK;
}

static ccg_status resolve_local(int local_rank, ccg__launch *l, ccg_ctx *err) {
  CCG_CHECK(pick(local_rank, "options.local_rank", "LOCAL_RANK", 0,
                 &l->local_rank, &l->local_from, err));
  static const char *const mpi_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
                                         "MPI_LOCALRANKID"};
  for (size_t i = 0; l->local_rank < 0 && i < 2; i++)
    CCG_CHECK(
        pick(-1, NULL, mpi_vars[i], 0, &l->local_rank, &l->local_from, err));
  if (l->local_rank < 0) {
    l->local_rank = 0;
    l->local_from = "default";
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__launch_resolve(int rank, int world, int local_rank,
                               const char *spec, ccg__launch *out,
                               ccg_ctx *err) {
  ccg__launch *l = out;
  memset(l, 0, sizeof *l);
  CCG_CHECK(
      pick(rank, "options.rank", "RANK", 0, &l->rank, &l->rank_from, err));
  CCG_CHECK(pick(world, "options.world_size", "WORLD_SIZE", 1, &l->world,
                 &l->world_from, err));
  CCG_CHECK(resolve_local(local_rank, l, err));
  CCG_CHECK(resolve_spec(spec, &l->rdv, err));
  if (l->rdv.kind != CCG__RDV_MPI) {
    if (l->rank < 0 && l->world < 0 && l->rdv.kind == CCG__RDV_NONE) {
      l->rank = 0; /* nothing set: a process on its own */
      l->world = 1;
      l->rank_from = l->world_from = "default";
    }
    if (l->rank < 0)
      return ccg__error(err, CCG_STATUS_INVALID_ARG,
                        "the rank is not known: set options.rank or RANK");
    if (l->world < 0)
      return ccg__error(err, CCG_STATUS_INVALID_ARG,
                        "the world size is not known: set "
                        "options.world_size or WORLD_SIZE");
    if (l->rdv.kind == CCG__RDV_NONE && l->world > 1)
      return ccg__error(err, CCG_STATUS_INVALID_ARG,
                        "a world of %d (%s) needs a rendezvous: set "
                        "options.rendezvous or CCG_RENDEZVOUS (file:PATH or "
                        "tcp:HOST:PORT), or MASTER_ADDR and MASTER_PORT, or "
                        "launch with mpirun",
                        l->world, l->world_from);
  }
  if (l->rank >= 0 && l->world >= 1 && l->rank >= l->world)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "rank %d (%s) is out of range for a world size of %d "
                      "(%s)",
                      l->rank, l->rank_from, l->world, l->world_from);
  return CCG_STATUS_OK;
}

/* ---- sharing ------------------------------------------------------------- */

ccg_status ccg__rdv_share(const ccg__rdv *r, int rank, int world, void *blob,
                          size_t bytes, double timeout_s, ccg_ctx *err) {
  if (!r || !blob || bytes == 0 || bytes > 65536 || world < 1 || rank < 0 ||
      rank >= world || !(timeout_s > 0))
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "rendezvous: bad arguments (rank %d of %d, %zu bytes, "
                      "timeout %g s)",
                      rank, world, bytes, timeout_s);
  double deadline = ccg__rdv_now() + timeout_s;
  switch (r->kind) {
  case CCG__RDV_FILE:
    return ccg__rdv_share_file(r, rank, world, blob, bytes, deadline, err);
  case CCG__RDV_TCP:
    return ccg__rdv_share_tcp(r, rank, world, blob, bytes, deadline, err);
  case CCG__RDV_MPI:
  case CCG__RDV_NONE:
    break;
  }
  return ccg__error(err, CCG_STATUS_INVALID_ARG,
                    "rendezvous: only file: and tcp: specs share through "
                    "this call");
}
