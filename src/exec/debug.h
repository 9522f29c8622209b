/* Private: collective checks at run time (fingerprints exchanged through the
 * communicator before each collective) and the per-rank flight recorder.
 * docs/verify.md. */
#ifndef CCG_EXEC_DEBUG_H
#define CCG_EXEC_DEBUG_H

#include "exec/comm/comm.h"
#include "exec/internal.h"

/* Reads the options and CCG_DEBUG_COLLECTIVES; allocates in x->arena.
 * Call once the steps are prepared. */
ccg_status ccg__debug_init(ccg_exec *x, const ccg_exec_options *o);
/* Records that node n starts; returns its recorder slot (or SIZE_MAX). */
size_t ccg__flight_begin(ccg_exec *x, const ccg__xnode *n);
/* Records how it ended; returns st. */
ccg_status ccg__flight_end(ccg_exec *x, size_t slot, ccg_status st);
/* With checks on: exchanges fingerprints over n's group and fails (on x,
 * CCG_STATUS_COMM) naming the ranks and nodes that differ. */
ccg_status ccg__debug_check(ccg_exec *x, const ccg__xnode *n,
                            const ccg__coll *k);
/* After a failed run: a communication failure gets the recorder logged
 * and its last entries added to the message on x. */
void ccg__flight_report(ccg_exec *x, ccg_status st);

#endif
