/* Module paths of nodes (module_path.h): shared by the shard pass and the
 * plan proposal, so that both read a model's modules the same way. */
#include <string.h>

#include "passes/module_path.h"

/* "/h.0/attn/q_proj/MatMul" -> "h.0.attn.q_proj" ("" without scopes). */
static void module_of(const char *node_name, char *buf, size_t size) {
  buf[0] = '\0';
  if (!node_name)
    return;
  const char *p = node_name[0] == '/' ? node_name + 1 : node_name;
  const char *last = strrchr(p, '/');
  if (!last)
    return;
  size_t len = (size_t)(last - p);
  if (len >= size)
    len = size - 1;
  memcpy(buf, p, len);
  buf[len] = '\0';
  for (char *c = buf; *c; c++)
    if (*c == '/')
      *c = '.';
}

/* torch's dynamo exporter names nodes "node_<op>_<n>" and says the module
 * path in node metadata: "['', 'h.0', 'h.0.mlp', 'h.0.mlp.c_fc', 'linear']"
 * lists the cumulative module paths, the last entry being the node's own.
 * The deepest module into buf; false when the text is not such a list. */
static bool scopes_module(const char *scopes, char *buf, size_t size) {
  const char *item[2] = {NULL, NULL}; /* the last two entries */
  size_t len[2] = {0, 0};
  int count = 0;
  const char *p = scopes;
  while ((p = strpbrk(p, "'\"")) != NULL) {
    const char *end = strchr(p + 1, *p);
    if (!end)
      return false;
    item[0] = item[1];
    len[0] = len[1];
    item[1] = p + 1;
    len[1] = (size_t)(end - p - 1);
    count++;
    p = end + 1;
  }
  if (count < 2)
    return false;
  size_t n = len[0] < size - 1 ? len[0] : size - 1;
  memcpy(buf, item[0], n);
  buf[n] = '\0';
  return true;
}

/* The module path of node n: from torch's metadata where the node has it,
 * else from its name ("/h.0/attn/q_proj/MatMul"). */
void ccg__node_module(const ccg_graph *g, ccg_node_id n, char *buf,
                      size_t size) {
  const char *scopes = ccg_node_meta(g, n, CCG__META_NAME_SCOPES);
  if (!scopes || !scopes_module(scopes, buf, size))
    module_of(ccg_node_name(g, n), buf, size);
}
