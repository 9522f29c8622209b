/* ccgraph core: status codes, last-error contexts, allocator hook, logging.
 * Every other layer builds on these; nothing here knows about graphs. */
#ifndef CCGRAPH_CORE_H
#define CCGRAPH_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CCG_API __declspec(dllexport)
#elif defined(__GNUC__)
#define CCG_API __attribute__((visibility("default")))
#else
#define CCG_API
#endif

#if defined(__GNUC__)
#define CCG_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CCG_PRINTF(fmt, args)
#endif

#define CCG_VERSION_MAJOR 0
#define CCG_VERSION_MINOR 1
#define CCG_VERSION_PATCH 0
#define CCG_VERSION_STRING "0.1.0"

/* The one list of status codes: X(NAME, description). */
#define CCG_STATUS_LIST(X)                                                     \
  X(OK, "ok")                                                                  \
  X(INVALID_ARG, "invalid argument")                                           \
  X(SHAPE, "shape mismatch")                                                   \
  X(DTYPE, "dtype mismatch")                                                   \
  X(UNSUPPORTED, "unsupported")                                                \
  X(PARSE, "parse error")                                                      \
  X(IO, "i/o error")                                                           \
  X(OOM, "out of memory")                                                      \
  X(BACKEND, "backend error")                                                  \
  X(COMM, "communication error")                                               \
  X(TIMEOUT, "timeout")                                                        \
  X(INTERNAL, "internal error")

/* clang-format off */
typedef enum ccg_status {
#define CCG__STATUS_ENUM(name, desc) CCG_STATUS_##name,
  CCG_STATUS_LIST(CCG__STATUS_ENUM)
#undef CCG__STATUS_ENUM
  CCG_STATUS_COUNT
} ccg_status;
/* clang-format on */

/* Upper-case name of a status ("SHAPE"); "UNKNOWN" for out-of-range values.
 * Returns a static string. Thread-safe. */
CCG_API const char *ccg_status_name(ccg_status st);

/* Human description of a status ("shape mismatch"). Static string. */
CCG_API const char *ccg_status_str(ccg_status st);

/* Library version as "MAJOR.MINOR.PATCH". Static string. */
CCG_API const char *ccg_version(void);

/* Error context. Every stateful handle (ccg_graph, ccg_exec, ...) begins
 * with one, so any handle pointer can be passed where a context is asked
 * for. A standalone context is for calls that have no handle (parsers). */
typedef struct ccg_ctx ccg_ctx;

/* A standalone error context. "new": free with ccg_ctx_free. NULL on OOM. */
CCG_API ccg_ctx *ccg_ctx_new(void);
CCG_API void ccg_ctx_free(ccg_ctx *ctx);

/* Message of the last failure recorded on `handle` (any ccgraph handle or a
 * ccg_ctx), or "" if none. With NULL: the calling thread's last failure that
 * had no handle to go to (a constructor that failed). "borrowed": valid until
 * the next failing call on the same handle. */
CCG_API const char *ccg_last_error(const void *handle);

/* Status of the last failure recorded on `handle` (CCG_STATUS_OK if none). */
CCG_API ccg_status ccg_last_status(const void *handle);

/* Clears the recorded failure of `handle` (or of the thread, for NULL). */
CCG_API void ccg_clear_error(void *handle);

/* Allocator hook: every allocation a handle makes goes through the allocator
 * it was created with. NULL fields mean libc. Functions must be thread-safe if
 * the handles using them are used from several threads. */
typedef struct ccg_allocator {
  void *(*alloc)(void *user, size_t size);
  void *(*realloc)(void *user, void *ptr, size_t old_size, size_t new_size);
  void (*free)(void *user, void *ptr, size_t size);
  void *user;
} ccg_allocator;

/* Logging. The level comes from the environment variable CCG_LOG
 * (debug|info|warn|error|off, default warn) unless set with
 * ccg_log_set_level. Messages go to stderr, one line each. Thread-safe. */
typedef enum ccg_log_level {
  CCG_LOG_DEBUG,
  CCG_LOG_INFO,
  CCG_LOG_WARN,
  CCG_LOG_ERROR,
  CCG_LOG_OFF,
  CCG_LOG_LEVEL_COUNT
} ccg_log_level;

CCG_API ccg_log_level ccg_log_get_level(void);
CCG_API void ccg_log_set_level(ccg_log_level level);
/* Parses "debug", "info", "warn", "error" or "off" (any case). Returns
 * CCG_STATUS_PARSE for anything else, leaving *out unchanged. */
CCG_API ccg_status ccg_log_parse_level(const char *text, ccg_log_level *out);
CCG_API void ccg_log_printf(ccg_log_level level, const char *fmt, ...)
    CCG_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif
#endif
