/* What the bench programs share: the wall clock they time with, and the
 * check that stops a bench whose setup failed (exit 3, naming the program
 * and the library's error) so that a broken run never prints a ratio.
 * A program defines BENCH_NAME before including this. */
#ifndef CCG_BENCH_UTIL_H
#define CCG_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ccgraph/ccgraph.h"

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(h, call)                                                         \
  do {                                                                         \
    if ((call) != CCG_STATUS_OK) {                                             \
      fprintf(stderr, "%s: %s\n", BENCH_NAME,                                  \
              ccg_last_error((const void *)(h)));                              \
      exit(3);                                                                 \
    }                                                                          \
  } while (0)

#endif
