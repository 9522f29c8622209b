/* The export entry points. Files are written under temporary names beside
 * their final ones and renamed only once everything succeeded, so a failed
 * export (of any rank) leaves nothing behind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/internal.h"

ccg_status ccg_onnx_export_buffer(ccg_graph *g,
                                  const ccg_onnx_export_options *opts,
                                  void **data, size_t *size) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "ONNX export: no graph");
  if (!data || !size)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "ONNX export: no output buffer");
  ccg_onnx_export_options o;
  CCG_CHECK(ccg__onnx_export_opts(g, opts, &o));
  ccg__onnx_shared *sh = NULL;
  CCG_CHECK(ccg__onnx_shared_new(g, &o, o.rank, NULL, &sh));
  ccg_status st = ccg__onnx_shared_pack(sh, o.rank, data, size);
  ccg__onnx_shared_free(sh);
  return st;
}

ccg_status ccg_onnx_export_rank_buffers(ccg_graph *g,
                                        const ccg_onnx_export_options *opts,
                                        void **data, size_t *sizes) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "ONNX export: no graph");
  if (!data || !sizes)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "ONNX export: no output buffers");
  ccg_onnx_export_options o;
  CCG_CHECK(ccg__onnx_export_opts(g, opts, &o));
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  size_t world = mesh ? (size_t)ccg_mesh_world_size(mesh) : 1;
  ccg__onnx_shared *sh = NULL;
  CCG_CHECK(ccg__onnx_shared_new(g, &o, 0, NULL, &sh));
  ccg_status st = CCG_STATUS_OK;
  size_t r = 0;
  for (; r < world && st == CCG_STATUS_OK; r++)
    st = ccg__onnx_shared_pack(sh, (int64_t)r, &data[r], &sizes[r]);
  ccg__onnx_shared_free(sh);
  if (st != CCG_STATUS_OK) /* r - 1 failed: nothing is handed out */
    for (size_t k = 0; k + 1 < r; k++) {
      free(data[k]);
      data[k] = NULL;
    }
  return st;
}

/* One file being written: model and (maybe) external data. */
typedef struct pending {
  char *path, *tmp, *data_path, *data_tmp;
  bool has_data, renamed, data_renamed;
} pending;

static char *join(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  char *s = malloc(na + nb + 1);
  if (s) {
    memcpy(s, a, na);
    memcpy(s + na, b, nb + 1);
  }
  return s;
}

static void pending_free(pending *p) {
  free(p->path);
  free(p->tmp);
  free(p->data_path);
  free(p->data_tmp);
}

/* Removes whatever p left on disk. */
static void pending_discard(pending *p) {
  if (p->tmp)
    unlink(p->tmp);
  if (p->data_tmp)
    unlink(p->data_tmp);
  if (p->renamed)
    unlink(p->path);
  if (p->data_renamed)
    unlink(p->data_path);
}

/* Writes the model for `rank` to p->tmp (and its data to p->data_tmp). */
static ccg_status write_pending(ccg_graph *g, const ccg_onnx_export_options *o,
                                int64_t rank, pending *p,
                                ccg__onnx_shared **sh) {
  char suffix[48];
  snprintf(suffix, sizeof suffix, ".tmp%ld", (long)getpid());
  p->data_path = join(p->path, ".data");
  p->tmp = join(p->path, suffix);
  p->data_tmp = p->data_path ? join(p->data_path, suffix) : NULL;
  if (!p->data_path || !p->tmp || !p->data_tmp)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "exporting '%s'", p->path);
  const char *base = strrchr(p->data_path, '/');
  ccg__onnx_ext ext = {NULL, p->data_tmp, base ? base + 1 : p->data_path, 0,
                       false};
  /* the first rank of a graph builds the model its other ranks share */
  ccg_status st = CCG_STATUS_OK;
  if (!*sh)
    st = ccg__onnx_shared_new(g, o, rank, &ext, sh);
  if (st == CCG_STATUS_OK)
    st = ccg__onnx_shared_pack_file(*sh, rank, &ext, p->tmp);
  if (ext.file && fclose(ext.file) != 0 && st == CCG_STATUS_OK)
    st = ccg__error(&g->ctx, CCG_STATUS_IO, "writing '%s': %s", p->data_tmp,
                    strerror(errno));
  p->has_data = ext.used;
  if (st != CCG_STATUS_OK)
    ccg__error_prefix(&g->ctx, "exporting '%s'", p->path);
  return st;
}

static ccg_status commit(ccg_graph *g, pending *p) {
  if (p->has_data) {
    if (rename(p->data_tmp, p->data_path) != 0)
      return ccg__error(&g->ctx, CCG_STATUS_IO, "renaming '%s' to '%s': %s",
                        p->data_tmp, p->data_path, strerror(errno));
    p->data_renamed = true;
  }
  if (rename(p->tmp, p->path) != 0)
    return ccg__error(&g->ctx, CCG_STATUS_IO, "renaming '%s' to '%s': %s",
                      p->tmp, p->path, strerror(errno));
  p->renamed = true;
  return CCG_STATUS_OK;
}

/* Writes every pending file, then renames them all; on any failure removes
 * everything written, renamed files included. */
static ccg_status export_all(ccg_graph *const *gs,
                             const ccg_onnx_export_options *o, pending *ps,
                             size_t n, bool per_rank) {
  ccg_status st = CCG_STATUS_OK;
  size_t bad = n; /* the rank whose step failed */
  ccg__onnx_shared *sh = NULL;
  for (size_t r = 0; r < n && st == CCG_STATUS_OK; r++) {
    if (r && gs[r] != gs[r - 1]) { /* a program: one graph per rank */
      ccg__onnx_shared_free(sh);
      sh = NULL;
    }
    if ((st = write_pending(gs[r], o, per_rank ? (int64_t)r : o->rank, &ps[r],
                            &sh)) != CCG_STATUS_OK)
      bad = r;
  }
  ccg__onnx_shared_free(sh);
  for (size_t r = 0; r < n && st == CCG_STATUS_OK; r++)
    if ((st = commit(gs[r], &ps[r])) != CCG_STATUS_OK)
      bad = r;
  /* the first graph carries the failure, whichever rank's it was */
  if (st != CCG_STATUS_OK && bad < n && gs[bad] != gs[0])
    ccg__error_copy(&gs[0]->ctx, &gs[bad]->ctx);
  for (size_t r = 0; r < n; r++) {
    if (st != CCG_STATUS_OK)
      pending_discard(&ps[r]);
    pending_free(&ps[r]);
  }
  return st;
}

ccg_status ccg_onnx_export_file(ccg_graph *g, const char *path,
                                const ccg_onnx_export_options *opts) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "ONNX export: no graph");
  if (!path || !*path)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "ONNX export: no file name");
  ccg_onnx_export_options o;
  CCG_CHECK(ccg__onnx_export_opts(g, opts, &o));
  pending p = {0};
  p.path = join(path, "");
  if (!p.path)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "exporting '%s'", path);
  return export_all(&g, &o, &p, 1, false);
}

/* Graph r as rank r into dir/<name>.rank<r>.onnx, all or nothing. */
static ccg_status export_each(ccg_graph *const *gs, size_t world,
                              const char *dir, const char *name,
                              const ccg_onnx_export_options *opts) {
  ccg_graph *g = gs[0];
  if (!dir || !*dir || !name || !*name || strchr(name, '/'))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "ONNX export: per-rank export needs a folder and a "
                      "model name without '/' (got '%s')",
                      name ? name : "(null)");
  ccg_onnx_export_options o;
  CCG_CHECK(ccg__onnx_export_opts(g, opts, &o));
  pending *ps = calloc(world, sizeof *ps);
  if (!ps)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "exporting %zu ranks", world);
  for (size_t r = 0; r < world; r++) {
    size_t len = strlen(dir) + strlen(name) + 48;
    ps[r].path = malloc(len);
    if (!ps[r].path) {
      for (size_t k = 0; k < r; k++)
        pending_free(&ps[k]);
      free(ps);
      return ccg__error(&g->ctx, CCG_STATUS_OOM, "exporting %zu ranks", world);
    }
    snprintf(ps[r].path, len, "%s/%s.rank%zu.onnx", dir, name, r);
  }
  /* the folder itself when it is missing (one level), gone again if the
   * export fails */
  struct stat sb;
  bool made = false;
  if (stat(dir, &sb) != 0) {
    if (mkdir(dir, 0777) != 0) {
      int e = errno;
      for (size_t r = 0; r < world; r++)
        pending_free(&ps[r]);
      free(ps);
      return ccg__error(&g->ctx, CCG_STATUS_IO,
                        "ONNX export: cannot create folder '%s': %s", dir,
                        strerror(e));
    }
    made = true;
  }
  ccg_status st = export_all(gs, &o, ps, world, true);
  free(ps);
  if (st != CCG_STATUS_OK && made)
    rmdir(dir);
  return st;
}

ccg_status ccg_onnx_export_ranks(ccg_graph *g, const char *dir,
                                 const char *name,
                                 const ccg_onnx_export_options *opts) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "ONNX export: no graph");
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  size_t world = mesh ? (size_t)ccg_mesh_world_size(mesh) : 1;
  ccg_graph **gs = calloc(world, sizeof *gs);
  if (!gs)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "exporting %zu ranks", world);
  for (size_t r = 0; r < world; r++)
    gs[r] = g;
  ccg_status st = export_each(gs, world, dir, name, opts);
  free(gs);
  return st;
}

ccg_status ccg_onnx_export_rank_graphs(ccg_graph *const *graphs, size_t n,
                                       const char *dir, const char *name,
                                       const ccg_onnx_export_options *opts) {
  if (!graphs || n == 0)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "ONNX export: no graphs");
  for (size_t r = 0; r < n; r++)
    if (!graphs[r])
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "ONNX export: graph %zu is NULL", r);
  return export_each(graphs, n, dir, name, opts);
}
