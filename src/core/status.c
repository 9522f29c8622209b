#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static const char *const status_names[] = {
#define X(name, desc) #name,
    CCG_STATUS_LIST(X)
#undef X
};
static const char *const status_descs[] = {
#define X(name, desc) desc,
    CCG_STATUS_LIST(X)
#undef X
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) ==
                   CCG_STATUS_COUNT,
               "status_names must cover ccg_status");
_Static_assert(sizeof(status_descs) / sizeof(status_descs[0]) ==
                   CCG_STATUS_COUNT,
               "status_descs must cover ccg_status");

const char *ccg_status_name(ccg_status st) {
  if ((unsigned)st >= CCG_STATUS_COUNT)
    return "UNKNOWN";
  return status_names[st];
}

const char *ccg_status_str(ccg_status st) {
  if ((unsigned)st >= CCG_STATUS_COUNT)
    return "unknown status";
  return status_descs[st];
}

const char *ccg_version(void) { return CCG_VERSION_STRING; }

/* Failures with no handle to go to (a constructor that could not allocate
 * its handle) are kept per thread, so threads never see each other's. */
static _Thread_local ccg_ctx thread_ctx;

static ccg_ctx *resolve(const void *handle) {
  if (!handle)
    return &thread_ctx;
  return (ccg_ctx *)handle;
}

void ccg__ctx_init(ccg_ctx *ctx) {
  ctx->magic = CCG__CTX_MAGIC;
  ctx->status = CCG_STATUS_OK;
  ctx->msg[0] = '\0';
}

ccg_ctx *ccg_ctx_new(void) {
  ccg_ctx *ctx = malloc(sizeof *ctx);
  if (!ctx) {
    ccg__error(NULL, CCG_STATUS_OOM, "cannot allocate an error context");
    return NULL;
  }
  ccg__ctx_init(ctx);
  return ctx;
}

void ccg_ctx_free(ccg_ctx *ctx) {
  if (ctx)
    ctx->magic = 0;
  free(ctx);
}

const char *ccg_last_error(const void *handle) {
  const ccg_ctx *ctx = resolve(handle);
  if (handle && ctx->magic != CCG__CTX_MAGIC)
    return "not a ccgraph handle";
  return ctx->msg;
}

ccg_status ccg_last_status(const void *handle) {
  const ccg_ctx *ctx = resolve(handle);
  if (handle && ctx->magic != CCG__CTX_MAGIC)
    return CCG_STATUS_INVALID_ARG;
  return ctx->status;
}

void ccg_clear_error(void *handle) {
  ccg_ctx *ctx = resolve(handle);
  if (handle && ctx->magic != CCG__CTX_MAGIC)
    return;
  ctx->status = CCG_STATUS_OK;
  ctx->msg[0] = '\0';
}

ccg_status ccg__verror(ccg_ctx *ctx, ccg_status st, const char *fmt,
                       va_list ap) {
  ccg_ctx *c = ctx ? ctx : &thread_ctx;
  c->status = st;
  vsnprintf(c->msg, sizeof c->msg, fmt, ap);
  ccg_log_printf(CCG_LOG_DEBUG, "%s: %s", ccg_status_name(st), c->msg);
  return st;
}

ccg_status ccg__error(ccg_ctx *ctx, ccg_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ccg__verror(ctx, st, fmt, ap);
  va_end(ap);
  return st;
}

ccg_status ccg__error_prefix(ccg_ctx *ctx, const char *fmt, ...) {
  ccg_ctx *c = ctx ? ctx : &thread_ctx;
  char prefix[CCG__ERRMSG_MAX];
  char old[CCG__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, c->msg, sizeof old);
  /* Truncation is intended: messages are capped at CCG__ERRMSG_MAX. */
  size_t n = strnlen(prefix, sizeof c->msg - 1);
  memcpy(c->msg, prefix, n);
  size_t rest = sizeof c->msg - n;
  if (rest > 2) {
    memcpy(c->msg + n, ": ", 2);
    size_t m = strnlen(old, rest - 3);
    memcpy(c->msg + n + 2, old, m);
    c->msg[n + 2 + m] = '\0';
  } else {
    c->msg[n] = '\0';
  }
  return c->status;
}

ccg_status ccg__error_copy(ccg_ctx *to, const ccg_ctx *from) {
  ccg_ctx *t = to ? to : &thread_ctx;
  const ccg_ctx *f = from ? from : &thread_ctx;
  if (t == f)
    return f->status;
  t->status = f->status;
  memcpy(t->msg, f->msg, sizeof t->msg);
  return t->status;
}
