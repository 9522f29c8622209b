/* Libraries loaded on first use (dynlib.h). */
#include <dlfcn.h>
#include <stdio.h>

#include "exec/dynlib.h"

static void *open_mode(ccg__dynlib *s, const char *soname, const char *dir,
                       int mode) {
  void *h = dlopen(soname, RTLD_NOW | mode);
  if (h)
    return h;
  char first[256], path[1024];
  snprintf(first, sizeof first, "%s", dlerror());
  snprintf(path, sizeof path, "%s/%s", dir, soname);
  h = dlopen(path, RTLD_NOW | mode);
  if (!h) {
    s->st = CCG_STATUS_BACKEND;
    snprintf(s->why, sizeof s->why, "cannot load %s (%s; %s)", soname, first,
             dlerror());
  }
  return h;
}

void *ccg__dynlib_open(ccg__dynlib *s, const char *soname, const char *dir) {
  return open_mode(s, soname, dir, RTLD_LOCAL);
}

void *ccg__dynlib_open_global(ccg__dynlib *s, const char *soname,
                              const char *dir) {
  return open_mode(s, soname, dir, RTLD_GLOBAL);
}

void *ccg__dynlib_sym(ccg__dynlib *s, void *h, const char *lib,
                      const char *name) {
  void *p = s->st == CCG_STATUS_OK ? dlsym(h, name) : NULL;
  if (!p && s->st == CCG_STATUS_OK) {
    s->st = CCG_STATUS_BACKEND;
    snprintf(s->why, sizeof s->why, "%s has no function %s", lib, name);
  }
  return p;
}

ccg_status ccg__dynlib_load(ccg__dynlib *s, void (*load)(void), ccg_ctx *err,
                            const char *what) {
  pthread_once(&s->once, load);
  if (s->st != CCG_STATUS_OK)
    return ccg__error(err, s->st, "%s: %s", what, s->why);
  return CCG_STATUS_OK;
}
