/* libFuzzer target: arbitrary bytes through the ONNX importer (wire
 * pre-scan, capped unpack, conversion) and, when they import, back out
 * through the exporter. No external data (no folder is given), a small byte
 * cap, everything freed: ASan and UBSan report any crash, overflow or leak.
 * Built only with -DCCG_FUZZ=ON and clang; see tests/fuzz/CMakeLists.txt. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ccgraph/ccgraph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ccg_onnx_import_options o = CCG_ONNX_IMPORT_OPTIONS_INIT;
  o.max_bytes = (size_t)64 << 20;
  ccg_graph *g = NULL;
  if (ccg_onnx_import_buffer(data, size, NULL, &o, &g) != CCG_STATUS_OK)
    return 0;
  void *out = NULL;
  size_t out_size = 0;
  if (ccg_onnx_export_buffer(g, NULL, &out, &out_size) == CCG_STATUS_OK)
    free(out);
  ccg_graph_free(g);
  return 0;
}
