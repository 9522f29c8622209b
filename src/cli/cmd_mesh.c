/* ccgraph mesh: a device mesh's ranks, coordinates and groups. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* ---- mesh ---------------------------------------------------------------- */

static json_t *group_json(const ccg_mesh *m, unsigned mask) {
  json_t *groups = json_array();
  int64_t world = ccg_mesh_world_size(m), w = ccg_mesh_group_size(m, mask);
  int64_t *ranks = calloc((size_t)w, sizeof *ranks);
  if (!ranks)
    return groups;
  for (int64_t r = 0; r < world; r++) {
    if (ccg_mesh_rank_in_group(m, r, mask) != 0)
      continue; /* each group once, from its first rank */
    ccg_mesh_group_ranks(m, r, mask, ranks);
    json_t *g = json_array();
    for (int64_t k = 0; k < w; k++)
      json_array_append_new(g, json_integer(ranks[k]));
    json_array_append_new(groups, g);
  }
  free(ranks);
  return groups;
}

static void print_groups(const ccg_mesh *m, unsigned mask, const char *axes) {
  json_t *groups = group_json(m, mask);
  printf("groups over %s (size %lld):", axes,
         (long long)ccg_mesh_group_size(m, mask));
  size_t i, k;
  json_t *g, *r;
  json_array_foreach(groups, i, g) {
    printf(" [");
    json_array_foreach(g, k, r) {
      printf("%s%lld", k ? " " : "", (long long)json_integer_value(r));
    }
    printf("]");
  }
  printf("\n");
  json_decref(groups);
}

static int run_mesh(const cli_command *self, int argc, char **argv) {
  const char *spec = NULL, *axes = NULL;
  bool json = false;
  const cli_option opts[] = {{"--json", NULL, &json, NULL, NULL, 0},
                             {"--axes", &axes, NULL, NULL, NULL, 0}};
  int rc = cli_parse_args(self, argc, argv, opts, 2, &spec, 1, NULL);
  if (rc >= 0)
    return rc;
  if (!spec)
    return cli_usage_error(self, "missing the mesh SPEC");
  ccg_mesh m;
  if (ccg_mesh_parse(spec, &m) != CCG_STATUS_OK) {
    return cli_fail(self, CLI_BAD_INPUT, "%s", ccg_last_error(NULL));
  }
  unsigned mask = 0;
  if (axes && ccg_mesh_axes_mask(&m, axes, &mask) != CCG_STATUS_OK) {
    return cli_fail(self, CLI_BAD_INPUT, "%s", ccg_last_error(NULL));
  }
  int64_t world = ccg_mesh_world_size(&m);
  if (json) {
    json_t *jaxes = json_array(), *coords = json_array(),
           *groups = json_object();
    for (int i = 0; i < m.ndims; i++)
      json_array_append_new(jaxes, json_pack("{s:s,s:I}", "name", m.names[i],
                                             "size", (json_int_t)m.sizes[i]));
    for (int64_t r = 0; r < world; r++) {
      int64_t c[CCG_MAX_MESH_AXES];
      ccg_mesh_coords(&m, r, c);
      json_t *jc = json_array();
      for (int i = 0; i < m.ndims; i++)
        json_array_append_new(jc, json_integer(c[i]));
      json_array_append_new(coords, jc);
    }
    for (int i = 0; i < m.ndims && !axes; i++)
      json_object_set_new(groups, m.names[i], group_json(&m, 1u << i));
    if (axes)
      json_object_set_new(groups, axes, group_json(&m, mask));
    return cli_print_json(json_pack("{s:o,s:I,s:o,s:o}", "axes", jaxes, "world",
                                    (json_int_t)world, "coords", coords,
                                    "groups", groups));
  }
  char buf[128];
  ccg_mesh_format(&m, buf, sizeof buf);
  printf("mesh %s: %lld ranks\n", buf, (long long)world);
  for (int64_t r = 0; r < world; r++) {
    int64_t c[CCG_MAX_MESH_AXES];
    ccg_mesh_coords(&m, r, c);
    printf("  rank %lld:", (long long)r);
    for (int i = 0; i < m.ndims; i++)
      printf(" %s=%lld", m.names[i], (long long)c[i]);
    printf("\n");
  }
  if (axes)
    print_groups(&m, mask, axes);
  for (int i = 0; i < m.ndims && !axes; i++)
    print_groups(&m, 1u << i, m.names[i]);
  return CLI_OK;
}

const cli_command cli_cmd_mesh = {
    "mesh", "show a device mesh: ranks, coordinates and groups",
    "usage: ccgraph mesh SPEC [--axes AXES] [--json]\n"
    "\n"
    "SPEC names the mesh axes and sizes, e.g. tp=4 or dp=2,pp=2,tp=2.\n"
    "Prints each rank's coordinates and, for the group over AXES (default:\n"
    "every axis in turn), the ranks of each group in group order.\n"
    "  --axes AXES  comma-separated mesh axes of the group, e.g. dp,tp\n"
    "  --json       one JSON document instead of text\n",
    run_mesh};
