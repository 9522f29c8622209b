/* A helper of the network tests (include after <cmocka.h>). */
#ifndef CCG_TEST_NET_UTIL_H
#define CCG_TEST_NET_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A TCP port nobody listens on right now: the kernel's pick for port 0 on
 * the loopback (a listener must not use port 0 itself: the others could
 * not know where to connect). */
static inline int ccg_test_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  socklen_t len = sizeof sa;
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  close(fd);
  return ntohs(sa.sin_port);
}

#endif
