/* What the bench programs share: the clocks they time with, and the
 * check that stops a bench whose setup failed (exit 3, naming the program
 * and the library's error) so that a broken run never prints a ratio.
 * A program defines BENCH_NAME before including this. */
#ifndef CCG_BENCH_UTIL_H
#define CCG_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ccgraph/ccgraph.h"

/* Seconds on clock c (CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID, ...). */
static inline double bench_clock_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double bench_now(void) { return bench_clock_s(CLOCK_MONOTONIC); }

#define CHECK(h, call)                                                         \
  do {                                                                         \
    if ((call) != CCG_STATUS_OK) {                                             \
      fprintf(stderr, "%s: %s\n", BENCH_NAME,                                  \
              ccg_last_error((const void *)(h)));                              \
      exit(3);                                                                 \
    }                                                                          \
  } while (0)

#endif
