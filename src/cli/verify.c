/* ccgraph verify: proves that a program's ranks issue matching collectives
 * and p2p calls (ccg_verify_program) before anything runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int cmd_verify(int argc, char **argv);

const command cli_verify_command = {
    "verify", "prove that every rank's collectives and sends/recvs match",
    "usage: ccgraph verify DIR|MODEL.onnx... [--name NAME]\n"
    "         [--stage-axis AXIS] [--dims NAME=V,...] [--p2p-buffer N] "
    "[--json]\n"
    "\n"
    "Replays each rank's communication in the executor's order and checks\n"
    "that the ranks of every group issue the same collectives (op, group,\n"
    "dtype, shapes, reduce_op, root, axes, split sizes), that every Send\n"
    "meets a Recv of the same tag, dtype and shape, and that no rank waits\n"
    "forever; then that every value's declared placement (Replicate,\n"
    "Shard(d), Partial) is what its collective or elementwise op makes of\n"
    "its input's (a Partial value sliced instead of reduce-scattered is an\n"
    "error). The first disagreement is printed with the ranks, nodes and\n"
    "position; exit status 2.\n"
    "\n"
    "DIR holds per-rank models <name>.rank<r>.onnx (a file of that form\n"
    "stands for all of them). One other MODEL.onnx is an SPMD graph run by\n"
    "every rank of its mesh; several are one graph per rank, or one per\n"
    "pipeline stage with --stage-axis.\n"
    "  --name NAME        the program in a folder holding several\n"
    "  --stage-axis AXIS  the models are the stages along mesh axis AXIS\n"
    "  --dims NAME=V,...  values of named dims (batch=8,seq=128)\n"
    "  --p2p-buffer N     sends in flight per peer before a Send blocks\n"
    "                     (default 16, the local communicator; 0 = a Send\n"
    "                     waits for its Recv)\n"
    "  --json             one JSON document on stdout\n",
    cmd_verify};

static json_t *report_json(const ccg_verify_report *r, size_t n_graphs,
                           int world) {
  json_t *doc =
      json_pack("{s:b,s:s,s:I,s:I,s:i}", "ok", r->kind == CCG_VERIFY_OK, "kind",
                ccg_verify_kind_name(r->kind), "calls", (json_int_t)r->n_calls,
                "graphs", (json_int_t)n_graphs, "ranks", world);
  if (doc && r->kind != CCG_VERIFY_OK)
    json_object_set_new(doc, "mismatch",
                        json_pack("{s:i,s:i,s:s,s:s,s:I,s:s,s:s}", "rank_a",
                                  r->rank_a, "rank_b", r->rank_b, "node_a",
                                  r->node_a, "node_b", r->node_b, "position",
                                  (json_int_t)r->position, "group", r->group,
                                  "message", r->message));
  return doc;
}

static int cmd_verify(int argc, char **argv) {
  const command *self = &cli_verify_command;
  const char *buffer = NULL;
  const option extra[] = {{"--p2p-buffer", &buffer, NULL}};
  cli_program_args a;
  int rc = cli_parse_program_args(self, argc, argv, extra, 1, &a);
  if (rc >= 0)
    return rc;
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  cli_program_options(&a, &o);
  if (buffer) {
    char *end;
    long b = strtol(buffer, &end, 10);
    if (*end || end == buffer || b < 0 || b > 1 << 20)
      return usage_error(self, "--p2p-buffer '%s' is not a count", buffer);
    o.p2p_buffer = (int)b;
  }
  cli_program prog;
  rc = cli_load_program(self->name, a.paths, a.n_paths, a.name, &prog);
  if (rc != EXIT_OK)
    return rc;
  ccg_verify_report rep;
  ccg_status st = ccg_verify_program(prog.graphs, prog.n, &o, &rep);
  /* then what each graph's placements say against its collectives */
  for (size_t i = 0; i < prog.n && st == CCG_STATUS_OK; i++) {
    ccg_verify_report pr;
    if (ccg_verify_placements(prog.graphs[i], &pr) != CCG_STATUS_OK) {
      if (pr.kind != CCG_VERIFY_PLACEMENT) {
        st = ccg_last_status(NULL);
        break;
      }
      pr.n_calls = rep.n_calls;
      pr.rank_a = prog.per_rank ? (int)i : -1;
      if (prog.per_rank) {
        /* "rank i: " in front, the message cut to fit */
        char head[32];
        int hl = snprintf(head, sizeof head, "rank %zu: ", i);
        size_t keep = sizeof pr.message - (size_t)hl - 1;
        memmove(pr.message + hl, pr.message, keep);
        memcpy(pr.message, head, (size_t)hl);
        pr.message[sizeof pr.message - 1] = '\0';
      }
      rep = pr;
      st = CCG_STATUS_COMM;
    }
  }
  const ccg_mesh *m = ccg_graph_mesh(prog.graphs[0]);
  int world = m ? (int)ccg_mesh_world_size(m) : 1;
  size_t n_graphs = prog.n;
  cli_program_free(&prog);
  if (st != CCG_STATUS_OK && st != CCG_STATUS_COMM) {
    fprintf(stderr, "ccgraph verify: %s\n", ccg_last_error(NULL));
    return st == CCG_STATUS_OOM ? EXIT_RUNTIME : EXIT_BAD_INPUT;
  }
  if (a.json) {
    int jrc = print_json(report_json(&rep, n_graphs, world));
    return jrc != EXIT_OK        ? jrc
           : st == CCG_STATUS_OK ? EXIT_OK
                                 : EXIT_BAD_INPUT;
  }
  if (st == CCG_STATUS_COMM) {
    fprintf(stderr, "ccgraph verify: %s\n", rep.message);
    return EXIT_BAD_INPUT;
  }
  printf("ok: %d ranks, %zu communication calls match; placements agree "
         "with every collective\n",
         world, rep.n_calls);
  return EXIT_OK;
}
