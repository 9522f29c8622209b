#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "core/error.h"

static const char *const level_names[] = {"debug", "info", "warn", "error",
                                          "off"};
_Static_assert(sizeof(level_names) / sizeof(level_names[0]) ==
                   CCG_LOG_LEVEL_COUNT,
               "level_names must cover ccg_log_level");

/* -1 until first use; then the level from CCG_LOG or the one set. The log
 * level is the one process-wide setting: it only filters diagnostics. */
static atomic_int log_level = -1;

ccg_status ccg_log_parse_level(const char *text, ccg_log_level *out) {
  if (!text)
    return CCG_STATUS_PARSE;
  for (int i = 0; i < CCG_LOG_LEVEL_COUNT; i++) {
    if (strcasecmp(text, level_names[i]) == 0) {
      *out = (ccg_log_level)i;
      return CCG_STATUS_OK;
    }
  }
  return CCG_STATUS_PARSE;
}

ccg_log_level ccg_log_get_level(void) {
  int lv = atomic_load_explicit(&log_level, memory_order_relaxed);
  if (lv >= 0)
    return (ccg_log_level)lv;
  ccg_log_level parsed = CCG_LOG_WARN;
  const char *env = getenv("CCG_LOG");
  if (env && *env && ccg_log_parse_level(env, &parsed) != CCG_STATUS_OK) {
    fprintf(stderr,
            "ccgraph: [warn] CCG_LOG=%s is not one of debug, info, warn, "
            "error, off; using warn\n",
            env);
    parsed = CCG_LOG_WARN;
  }
  int expected = -1;
  atomic_compare_exchange_strong(&log_level, &expected, (int)parsed);
  return (ccg_log_level)atomic_load(&log_level);
}

void ccg_log_set_level(ccg_log_level level) {
  if ((unsigned)level < CCG_LOG_LEVEL_COUNT)
    atomic_store(&log_level, (int)level);
}

void ccg_log_printf(ccg_log_level level, const char *fmt, ...) {
  if (level >= CCG_LOG_OFF || level < ccg_log_get_level())
    return;
  /* One fprintf per line so lines from different threads do not mix. */
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "ccgraph: [%s] %s\n", level_names[level], line);
}
