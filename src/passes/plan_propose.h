/* Private: the plan proposal, split in what it finds (plan_find.c: the
 * attention blocks, MLPs, embeddings, LM head and LayerNorms of a model,
 * each part a finding with its role and why) and what it makes of the
 * findings (plan_propose.c: plan keys, layer indices generalized, the JSON
 * plan and the report). */
#ifndef CCG_PASSES_PLAN_PROPOSE_H
#define CCG_PASSES_PLAN_PROPOSE_H

#include "ccgraph/ccgraph.h"
#include "core/error.h"

#define PP_KEY_MAX 256
#define PP_WHY_MAX 512

typedef enum pp_role {
  PP_ATTN_IN,
  PP_ATTN_OUT,
  PP_MLP_IN,
  PP_MLP_OUT,
  PP_EMBED,
  PP_HEAD,
  PP_HEAD_LOSS, /* an LM head feeding SoftmaxCrossEntropyLoss: kept sharded */
  PP_NORM,
  PP_ROLE_COUNT
} pp_role;

/* One node given a role. `key` is "" when the node has no module path nor
 * a named parameter to be matched by. */
typedef struct pp_finding {
  char key[PP_KEY_MAX];
  pp_role role;
  ccg_node_id node;
  bool left_out;
  char reason[PP_KEY_MAX]; /* why it is left out, or "" */
  char why[PP_WHY_MAX];
} pp_finding;

typedef struct pp {
  ccg_graph *g;
  int64_t W;
  char axis[CCG_MESH_NAME_MAX];
  bool sp;
  size_t nn, nv;
  uint32_t *seen; /* per node: the trace that visited it */
  uint32_t gen;
  ccg_value_id *stack; /* one trace's values to visit */
  size_t stack_cap;
  bool *claimed; /* per node: given a role */
  pp_finding *f;
  size_t nf, capf;
  /* for the summary */
  int n_attn, n_mlp, n_norm;
  int64_t heads, ffn, vocab;
  int64_t kv_heads; /* of the attention being checked, when fewer than W */
  bool head;
  ccg_value_id embed_w;  /* the word embeddings' weight, or CCG_NONE */
  const char *embed_bad; /* why they are left out, or NULL */
  char embed_reason[PP_KEY_MAX];
} pp;

extern const char *const pp_role_names[PP_ROLE_COUNT];
extern const ccg_plan_style pp_role_styles[PP_ROLE_COUNT];

/* plan_find.c: consumers and trace buffers of p->g, then every finding. */
ccg_status pp_prepare(pp *p);
ccg_status pp_find(pp *p);
void pp_release(pp *p);

/* The plan key of node n: its module path, else the module of its
 * parameter `param` ("h.0.fc1" for "h.0.fc1.weight"; not an anonymous
 * "onnx::MatMul_7"); "" when neither. */
void pp_node_key(const pp *p, ccg_node_id n, ccg_value_id param, char *key);

#endif
