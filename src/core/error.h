/* Private: error contexts and the propagation macros of STYLE.md. */
#ifndef CCG_CORE_ERROR_H
#define CCG_CORE_ERROR_H

#include "ccgraph/core.h"

#define CCG__CTX_MAGIC 0x43434758u /* "CCGX" */
#define CCG__ERRMSG_MAX 1024

/* First member of every handle struct; see ccg_last_error. */
struct ccg_ctx {
  uint32_t magic;
  ccg_status status;
  char msg[CCG__ERRMSG_MAX];
};

void ccg__ctx_init(ccg_ctx *ctx);

/* Records a failure on ctx (or on the calling thread when ctx is NULL) and
 * returns `st`, so callers write `return ccg__error(ctx, CCG_STATUS_SHAPE,
 * "...")`. The message is truncated to fit, never overflows. */
ccg_status ccg__error(ccg_ctx *ctx, ccg_status st, const char *fmt, ...)
    CCG_PRINTF(3, 4);
ccg_status ccg__verror(ccg_ctx *ctx, ccg_status st, const char *fmt,
                       va_list ap);

/* Prefixes the message already recorded on ctx with "<prefix>: " (to add the
 * outer context, e.g. the file name) and returns the recorded status. */
ccg_status ccg__error_prefix(ccg_ctx *ctx, const char *fmt, ...)
    CCG_PRINTF(2, 3);

/* Copies the failure recorded on `from` to `to`; returns its status. */
ccg_status ccg__error_copy(ccg_ctx *to, const ccg_ctx *from);

#define CCG_CHECK(expr)                                                        \
  do {                                                                         \
    ccg_status ccg__st_ = (expr);                                              \
    if (ccg__st_ != CCG_STATUS_OK)                                             \
      return ccg__st_;                                                         \
  } while (0)

#define CCG_CHECK_GOTO(expr, st, label)                                        \
  do {                                                                         \
    (st) = (expr);                                                             \
    if ((st) != CCG_STATUS_OK)                                                 \
      goto label;                                                              \
  } while (0)

#endif
