/* The module's entry (module.h): the launchers of this build, with its
 * version, for the library that loaded it. Taking every launcher's address
 * here also makes the module's link fail when one of the list is not
 * defined. */
#include "exec/cuda/module.h"

#define CCG__CU_TAKE(f) f,

extern "C" __attribute__((visibility("default"))) const ccg__cuda_module *
ccg__cuda_module_get(void) {
  static const ccg__cuda_module m = {CCG_VERSION_STRING, sizeof m,
                                     CCG__CU_FNS(CCG__CU_TAKE)};
  return &m;
}
