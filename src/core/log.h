/* Private: logging shortcuts. */
#ifndef CCG_CORE_LOG_H
#define CCG_CORE_LOG_H

#include "ccgraph/core.h"

#define CCG_DEBUG(...) ccg_log_printf(CCG_LOG_DEBUG, __VA_ARGS__)
#define CCG_INFO(...) ccg_log_printf(CCG_LOG_INFO, __VA_ARGS__)
#define CCG_WARN(...) ccg_log_printf(CCG_LOG_WARN, __VA_ARGS__)

#endif
