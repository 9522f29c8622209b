/* Output folders made on demand (mkdir -p), and removed again when the
 * command fails: a failed command leaves nothing behind. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

static int made(const command *self, cli_dirs *d, const char *path) {
  if (d->n == CLI_MAX_DIRS)
    return cli_fail(self, EXIT_BAD_INPUT,
                    "cannot create folder '%s': more than %d levels to make",
                    path, CLI_MAX_DIRS);
  d->made[d->n] = strdup(path);
  if (!d->made[d->n]) {
    rmdir(path);
    return cli_fail(self, EXIT_RUNTIME, "out of memory");
  }
  d->n++;
  return EXIT_OK;
}

/* One folder: there already (a folder), or made and recorded. */
static int one(const command *self, cli_dirs *d, const char *path) {
  struct stat sb;
  if (stat(path, &sb) == 0) {
    if (S_ISDIR(sb.st_mode))
      return EXIT_OK;
    return cli_fail(self, EXIT_BAD_INPUT,
                    "cannot create folder '%s': a file of that name is there",
                    path);
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST)
    return cli_fail(self, EXIT_BAD_INPUT, "cannot create folder '%s': %s", path,
                    strerror(errno));
  return made(self, d, path);
}

/* `path` and every missing folder above it; the first `len` bytes only. */
static int make(const command *self, const char *path, size_t len,
                cli_dirs *d) {
  char *buf = malloc(len + 1);
  if (!buf)
    return cli_fail(self, EXIT_RUNTIME, "out of memory");
  memcpy(buf, path, len);
  buf[len] = '\0';
  while (len > 1 && buf[len - 1] == '/')
    buf[--len] = '\0';
  int rc = EXIT_OK, n0 = d->n;
  for (size_t i = 1; i <= len && rc == EXIT_OK; i++) {
    if (i < len && buf[i] != '/')
      continue;
    if (i < len && buf[i - 1] == '/')
      continue; /* "a//b" */
    char c = buf[i];
    buf[i] = '\0';
    rc = one(self, d, buf);
    buf[i] = c;
  }
  free(buf);
  while (rc != EXIT_OK && d->n > n0) { /* this call's folders only */
    d->n--;
    rmdir(d->made[d->n]);
    free(d->made[d->n]);
  }
  return rc;
}

int cli_make_dirs(const command *self, const char *path, cli_dirs *d) {
  return make(self, path, strlen(path), d);
}

int cli_make_parent_dirs(const command *self, const char *file, cli_dirs *d) {
  const char *slash = strrchr(file, '/');
  if (!slash || slash == file)
    return EXIT_OK;
  return make(self, file, (size_t)(slash - file), d);
}

void cli_dirs_undo(cli_dirs *d) {
  while (d->n > 0) {
    d->n--;
    rmdir(d->made[d->n]);
    free(d->made[d->n]);
  }
}

void cli_dirs_keep(cli_dirs *d) {
  for (int i = 0; i < d->n; i++)
    free(d->made[i]);
  d->n = 0;
}
