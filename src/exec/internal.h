/* Private: the executor's compiled form, shared by the planner, the kernels
 * and the collective glue. */
#ifndef CCG_EXEC_INTERNAL_H
#define CCG_EXEC_INTERNAL_H

#include "ccgraph/exec.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/error.h"

#define CCG__ALIGN 64

typedef enum ccg__vkind {
  CCG__V_ARENA,  /* planned in the arena */
  CCG__V_INPUT,  /* given to each run */
  CCG__V_STATIC, /* initializer or Constant: graph data */
  CCG__V_UNUSED, /* no producer in the schedule (optional input) */
} ccg__vkind;

/* One value with its bound shape. */
typedef struct ccg__xval {
  ccg_dtype dtype;
  int rank;
  int64_t dims[CCG_MAX_RANK];
  size_t numel, nbytes;
  ccg__vkind kind;
  int buffer; /* arena buffer index, -1 otherwise */
  size_t offset;
  void *ptr;        /* where the data is during a run */
  const void *init; /* STATIC: the graph's data */
  int first, last;  /* producing and last consuming step */
  bool is_output;
  /* an output that this run's caller reads, marked for a backend with
   * fetch_marked (the CUDA one copies only these back to the host) */
  bool fetch;
} ccg__xval;

/* v viewed as [outer, len, inner] around axis ax: the product of the dims
 * before it, its own (1 for a scalar), and the product of those after it.
 * len may be NULL. */
static inline void ccg__xval_around(const ccg__xval *v, int ax, int64_t *outer,
                                    int64_t *len, int64_t *inner) {
  int64_t o = 1, i = 1;
  for (int d = 0; d < ax; d++)
    o *= v->dims[d];
  for (int d = ax + 1; d < v->rank; d++)
    i *= v->dims[d];
  *outer = o;
  *inner = i;
  if (len)
    *len = v->rank ? v->dims[ax] : 1;
}

typedef struct ccg__xnode ccg__xnode;
typedef ccg_status (*ccg__kernel_fn)(ccg_exec *x, const ccg__xnode *n);

/* Attribute-derived parameters, read once at create. */
typedef struct ccg__xparams {
  int axis, axis2;
  int64_t i0, i1, i2, i3;
  float f0, f1;
  int perm[CCG_MAX_RANK];
  const int64_t *list; /* exec arena */
  size_t n_list;
  const ccg_tensor *t;
  /* collectives */
  ccg_reduce_op rop;
  unsigned mask;
  int64_t *group; /* global ranks in group order */
  int gsize, gidx;
  size_t *counts, *counts2; /* per group rank, elements */
  int64_t *chunk;           /* per group rank, sizes along an axis */
  int64_t *chunk2;
} ccg__xparams;

struct ccg__xnode {
  ccg_node_id id;
  ccg_op op;
  const char *name;
  uint32_t n_in, n_out;
  ccg_value_id *in, *out; /* CCG_NONE for absent optional inputs */
  ccg__kernel_fn run;
  ccg__xparams p;
  size_t scratch;     /* bytes of x->scratch this node needs */
  size_t scratch_off; /* CPU: where they are in the arena (plan.c) */
  int inplace;        /* index of the input whose buffer out[0] reuses, or -1 */
  /* overlap: this node talks to the communicator (runs on the
   * communication thread), and the number of such nodes of the schedule,
   * counted from the start, whose results must be in before it runs */
  bool comm;
  uint32_t need;
  uint32_t ord; /* comm nodes: their number among them, from 0 */
  int join;     /* comm nodes: the first step at which the main thread has
                 * waited for this node's end (n_steps: the end of the run) */
  /* the chain of elementwise nodes this step runs in one pass (cpu/fuse.c);
   * NULL for a node that runs alone */
  const struct ccg__fused *fused;
  /* the attention this step runs in one kernel (cpu/fuse_attn.c): its
   * MatMuls, scale, mask and Softmax, with the Transposes folded in */
  const struct ccg__fattn *attn;
  /* CPU MatMul/Gemm with an epilogue fused at plan time (plan.c): out[0]
   * is then the last fused node's output, epi_bias the 1-D bias added to
   * each row and epi_act the activation (CCG_OP_COUNT: none; Gelu with
   * epi_tanh: its tanh form), whose steps are left empty like the Add's */
  bool epi;
  ccg_value_id epi_bias;
  ccg_op epi_act;
  bool epi_tanh;
  /* CPU MatMul whose A (mm_ta) or B (mm_tb) a Transpose of the last two
   * dims made, folded in at plan time (plan.c): in[0] / in[1] is then the
   * Transpose's input, read transposed by the GEMM */
  bool mm_ta, mm_tb;
};

/* A step a plan-time fusion emptied (its work done by another step): no
 * kernel, no inputs, no outputs. Backends skip it. */
static inline bool ccg__step_empty(const ccg__xnode *n) {
  return !n->run && n->n_in == 0 && n->n_out == 0;
}

typedef struct ccg__overlap ccg__overlap;
typedef struct ccg__xdyn ccg__xdyn;

/* A size a program was compiled for, checked as the program runs
 * (specialize.c): value v, made by step `step`, must measure `want` (its
 * contents, or a count of its data under `rule`). */
typedef struct ccg__xcheck {
  size_t step;
  ccg_value_id v;
  const void *rule;
  const int64_t *want;
} ccg__xcheck;

/* Why a compile stopped at a dim: 1 a symbol no input given binds, 2 a dim
 * set by data (of `value`, dim `dim`); 0 for any other failure. */
typedef struct ccg__xwhy {
  int unbound;
  ccg_value_id value;
  int dim;
} ccg__xwhy;

/* A backend runs a compiled executor on one kind of device (DESIGN's
 * backend vtable): backend_cpu.c (the CPU kernels, threads, the local and
 * mpi communicators) and cuda/gpu.c (or, built without CUDA, the refusals
 * of cuda_off.c). Fields marked optional may be NULL. */
typedef struct ccg__backend_vt {
  const char *name;
  /* optional: can the device be used at all? Fails at once, before
   * anything is compiled, with the reason. */
  ccg_status (*probe)(ccg_ctx *err, int device_index);
  /* optional: settles options the device decides (called before the
   * schedule is made) */
  void (*configure)(ccg_exec *x);
  /* after the memory plan: memory, streams or threads, uploads */
  ccg_status (*create)(ccg_exec *x);
  /* one step over the bound inputs (v->ptr: host data); at its end every
   * graph output's v->ptr is its host data, or, with fetch_marked, every
   * output marked fetch (the others are not copied off the device) */
  ccg_status (*run)(ccg_exec *x);
  /* releases what create made (also after a create that failed half-way) */
  void (*destroy)(ccg_exec *x);
  /* run reads ccg__xval.fetch: the outputs this run's caller names are
   * marked before it (a lookup per output, spared where nothing reads
   * them) */
  bool fetch_marked;
} ccg__backend_vt;

extern const ccg__backend_vt ccg__cpu_backend;
extern const ccg__backend_vt ccg__cuda_backend;

struct ccg_exec {
  ccg_ctx ctx; /* first: see ccg_last_error */
  ccg_allocator alloc;
  ccg_arena arena; /* everything made at create */
  ccg_graph *g;
  const ccg_mesh *mesh;
  int rank;
  ccg_comm *comm;
  double deadline_s;

  size_t n_vals;
  ccg__xval *vals;
  size_t n_steps;
  ccg__xnode *steps;
  ccg_node_id *schedule;

  /* symbol bindings */
  size_t n_binds, cap_binds;
  const char **bind_names;
  int64_t *bind_values;

  void *data; /* the planned arena */
  size_t data_bytes;
  /* compute nodes: on the CPU the running step's own block of the arena
   * (ccg__step_scratch), NULL for a step that asked for none; a GPU's one
   * block of scratch_bytes */
  void *scratch;
  size_t scratch_bytes;
  void *comm_scratch; /* collectives: packing of non-leading axes */
  size_t comm_scratch_bytes;
  ccg__overlap *ov; /* the communication thread, NULL without overlap */
  /* intra-op threads (cpu/pool.h): the root executor owns it, the
   * programs it runs borrow it; NULL runs every loop on the caller */
  struct ccg__pool *pool;
  bool own_pool;
  uint32_t n_comm; /* nodes that run on it */
  bool overlap;
  ccg_exec_memory mem;
  bool failed_comm;         /* the communicator has been told of a failure */
  struct ccg__debug *debug; /* debug.c: collective checks, flight recorder */
  /* Messages a size guard (specialize.c) received ahead of its program:
   * kept for the program's own Recv, which takes them instead of asking
   * the peer again (collective.c). A program points at its root's list. */
  struct ccg__stashed **stash, *stashed;
  bool guard; /* a size guard's program: the Recvs it makes are kept */

  const ccg__backend_vt *backend;
  ccg_device device;
  int device_index;
  bool cuda_graph, tf32;
  /* the CPU kernels' array math (cpu/vecmath.h) */
  const struct ccg__vm *vm;
  /* what f32 GEMMs run on (ccg__gemm_lib_kind, cpu/cpu.h): chosen once
   * when the program is compiled (CCG_GEMM, the CPU), not read again per
   * product */
  int gemm_lib;
  /* the program's first run is under way: oneDNN's freed packing blocks
   * go back to the system after each library call (cpu/gemm.c); `ran`:
   * one has been */
  bool first_run;
  bool ran;
  struct ccg__gpu *gpu; /* CUDA state (cuda/gpu.h); NULL on the CPU */

  /* run-time specialization (specialize.c). An executor that create
   * returns holds `dyn` (unless max_specializations < 0): the programs
   * compiled for other input shapes. It is itself a program when the graph
   * compiled at create (`compiled`), else a shell that runs them only. */
  ccg__xdyn *dyn;
  bool compiled;
  bool spec;     /* compiled from a specialized copy of the graph */
  ccg__xwhy why; /* a failed compile: the dim it left unbound */
  /* the sizes its guards computed, sorted by step; `checking`: this run
   * checks them (its guards did not run); `stale`: one came out otherwise
   * and the run stopped after the step that made it, outputs unfilled */
  const ccg__xcheck *checks;
  size_t n_checks;
  bool checking, stale;
};

/* Starts x's arena of create-time structures (x->alloc must be set): from
 * the caller's allocator when one was given, else from malloc, never from
 * huge pages (exec.c says why). Also for the arenas a specialization
 * makes. */
void ccg__exec_arena_init(const ccg_exec *x, ccg_arena *arena);

/* Records "node 'N' (Op): <message>" on x and returns st. */
ccg_status ccg__xfail(ccg_exec *x, const ccg__xnode *n, ccg_status st,
                      const char *fmt, ...) CCG_PRINTF(4, 5);

/* bind.c: evaluates a dim under the bindings; false if a symbol is
 * unbound (its atom is written to `missing`). */
bool ccg__eval_dim(ccg_exec *x, ccg_dim d, int64_t *out, char *missing,
                   size_t missing_size);
ccg_status ccg__bind(ccg_exec *x, const ccg_exec_options *o);
/* The error for dim d of value v left unbound (`missing`: the atom). A
 * symbol that no graph input's shape holds comes from a node's data-set
 * output shape (a Reshape to a shape fed at run time): UNSUPPORTED, naming
 * the node. Otherwise SHAPE: an input shape was not given. */
ccg_status ccg__unbound_dim(ccg_exec *x, ccg_value_id v, int d,
                            const char *missing);

/* exec.c: compiles g for o (options already checked, the communicator
 * prepared): a program of its own, errors on err. On failure *why says
 * whether a dim was left unbound. `spec`: g is a specialized copy (its
 * messages say so). */
ccg_status ccg__exec_compile(ccg_graph *g, const ccg_exec_options *o,
                             const ccg__backend_vt *backend, bool spec,
                             ccg_ctx *err, ccg_exec **out, ccg__xwhy *why);
/* Runs program p (no specialization): binds the inputs, runs, fills the
 * outputs. */
ccg_status ccg__exec_run_program(ccg_exec *p, const ccg_exec_tensor *inputs,
                                 size_t n_inputs, ccg_exec_tensor *outputs,
                                 size_t n_outputs);

/* specialize.c: makes x (a program, or NULL) the root of run-time
 * specialization for graph g under options o; *out is x, or a new shell
 * when x is NULL (then the programs come from o's input shapes now, when
 * they give every input, or from the first run). */
ccg_status ccg__dyn_create(ccg_graph *g, const ccg_exec_options *o,
                           const ccg__backend_vt *backend, ccg_exec *x,
                           ccg_ctx *err, ccg_exec **out);
/* The program for these inputs: x itself, a cached one, or a new one
 * compiled now (errors on x, naming the input and dim at fault).
 * `trust`: the last program may be chosen without running its guards,
 * checking their sizes as it runs instead (then a stale run is chosen for
 * again without trust). */
ccg_status ccg__dyn_select(ccg_exec *x, const ccg_exec_tensor *inputs,
                           size_t n_inputs, bool trust, ccg_exec **prog);
/* Does the value of check c measure what the program was compiled for? */
bool ccg__dyn_check(const ccg_exec *p, const ccg__xcheck *c);
/* The program that ran last (or the only one); NULL before any. */
const ccg_exec *ccg__dyn_current(const ccg_exec *x);
void ccg__dyn_free(ccg_exec *x);

/* cpu/fuse.c: on the CPU backend (unless CCG_EXEC_FUSE=0), after every
 * node is prepared and before the memory plan: chains of elementwise steps
 * whose intermediate values nothing else reads run as their last step, in
 * one blocked pass; the other steps of a chain run nothing and their
 * outputs take no memory (docs/exec.md, "Fused kernels"). */
ccg_status ccg__fuse_plan(ccg_exec *x);
/* cpu/fuse_attn.c: on the CPU backend (unless CCG_EXEC_FUSE=0), before
 * the other fusions: MatMul, scale, mask, Softmax, MatMul (and the
 * Transposes around them) as one step per attention. */
ccg_status ccg__fuse_attention(ccg_exec *x);

/* plan.c: liveness and offsets; fills x->mem and every ARENA value's
 * offset. */
ccg_status ccg__plan_memory(ccg_exec *x);
/* Points x->scratch at CPU step n's planned scratch before it runs (NULL
 * for a step that asked for none, and for collectives: they pack in
 * x->comm_scratch). */
static inline void ccg__step_scratch(ccg_exec *x, const ccg__xnode *n) {
  x->scratch = n->scratch && !ccg_op_is_collective(n->op)
                   ? (char *)x->data + n->scratch_off
                   : NULL;
}

/* collective.c: runs collective node n, recording failures on err and
 * packing in `scratch` (n->scratch bytes). */
ccg_status ccg__collective_exec(ccg_exec *x, const ccg__xnode *n, ccg_ctx *err,
                                void *scratch);
/* Frees the messages x keeps for its programs (x->stashed). */
void ccg__stash_free(ccg_exec *x);

/* How a collective's body reaches memory: the host's (collective.c) or the
 * device's (cuda/gpu_coll.c, enqueued on the stream of the moment). The
 * communicator's calls get the pointers `ptr` gives. */
typedef struct ccg__xmem {
  void *(*ptr)(const ccg_exec *x, ccg_value_id v);
  ccg_status (*copy)(ccg_exec *x, const ccg__xnode *n, void *dst,
                     const void *src, size_t bytes);
  ccg_status (*zero)(ccg_exec *x, const ccg__xnode *n, void *dst, size_t bytes);
  /* `outer` rows of `row` bytes, src rows `spitch` bytes apart, dst rows
   * `dpitch` apart. */
  ccg_status (*rows)(ccg_exec *x, const ccg__xnode *n, void *dst, size_t dpitch,
                     const void *src, size_t spitch, size_t row, size_t outer);
  /* ccg__chunk_copy of the node's input chunks (which 0: p.chunk) or output
   * chunks (1: p.chunk2, or p.chunk where the node has one list). */
  ccg_status (*chunks)(ccg_exec *x, const ccg__xnode *n, int which,
                       void *packed, void *full, size_t es, size_t outer,
                       size_t inner, const int64_t *sizes, int nr, bool unpack);
} ccg__xmem;
/* Asks the communicator to ready what the executor's reducing collectives
 * will need (ccg__comm_vt.reserve), so that runs allocate nothing. */
ccg_status ccg__collective_reserve(ccg_exec *x);
/* The body of collective node n over memory m (no recorder, no checks). */
ccg_status ccg__collective_body(ccg_exec *x, const ccg__xnode *n, ccg_ctx *err,
                                void *scratch, const ccg__xmem *m);

/* overlap.c: marks the nodes that run on the communication thread and what
 * each node waits for (before the memory plan, which reads them); starts
 * the thread after it. Runs the schedule with collectives posted to the
 * thread; joins it at free. */
ccg_status ccg__overlap_mark(ccg_exec *x);
/* Whether an executor runs a communication thread: CCG_EXEC_OVERLAP (env:
 * "0" or "1"; anything else is ignored) over the option (0 off, 1 on),
 * else (option -1) on only when the `cores` the process may run on give
 * each of the `ranks_here` ranks it runs (a local communicator's size,
 * else 1) a core to compute on and one for its communication thread. */
bool ccg__overlap_wanted(int option, const char *env, int cores,
                         int ranks_here);
/* Reorders x->schedule (before the steps are made from it): each
 * collective as soon as what it needs has run, the compute the old order
 * ran before it and it does not need right after it. Collectives keep
 * their order. */
ccg_status ccg__overlap_schedule(ccg_exec *x);
ccg_status ccg__overlap_start(ccg_exec *x);
ccg_status ccg__overlap_run(ccg_exec *x);
void ccg__overlap_free(ccg_exec *x);

/* kernels: fills n->run, n->p, n->scratch; an op or dtype without a kernel
 * is CCG_STATUS_UNSUPPORTED naming the node. */
ccg_status ccg__prepare_node(ccg_exec *x, ccg__xnode *n);
/* plan.c: are plan-time fusions on? Yes unless the environment has
 * CCG_EXEC_FUSE=0. */
bool ccg__exec_fuse_enabled(void);
/* How the steps read a value: `count` distinct steps, `step` the last of
 * them. ccg__count_uses fills u[v] (n_vals zeroed entries) from the steps
 * as they are now: each fusion pass counts again after the last one
 * rewrote steps. */
typedef struct ccg__xuse {
  uint32_t count;
  uint32_t step;
} ccg__xuse;
void ccg__count_uses(const ccg_exec *x, ccg__xuse *u);
/* plan.c: MatMul/Gemm + Add of a 1-D bias (+ Relu, Gelu, Tanh or Sigmoid)
 * into the GEMM's epilogue where the intermediates have no other use (CPU,
 * f32, a bias that is an input or initializer). Before the memory plan. */
void ccg__fuse_epilogues(ccg_exec *x);
/* plan.c: a Transpose of the last two dims read by a MatMul alone folded
 * into it (mm_ta / mm_tb; the GEMM reads the Transpose's input transposed):
 * the backward's dY B^T and A^T dY copy neither operand. CPU and CUDA,
 * f32. Before ccg__fuse_epilogues. */
void ccg__fuse_transposes(ccg_exec *x);
/* The one element of a constant (initializer or Constant) f32 value;
 * false for any other value. */
bool ccg__const_scalar(const ccg_exec *x, ccg_value_id v, float *out);
/* True if op reads and writes element i only (in-place able). */
bool ccg__op_inplace_ok(ccg_op op);

static inline const ccg__xval *ccg__in(const ccg_exec *x, const ccg__xnode *n,
                                       uint32_t i) {
  return n->in[i] == CCG_NONE ? NULL : &x->vals[n->in[i]];
}
static inline const ccg__xval *ccg__out(const ccg_exec *x, const ccg__xnode *n,
                                        uint32_t i) {
  return &x->vals[n->out[i]];
}

#endif
