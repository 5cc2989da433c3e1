// The process-wide OpRegistry lives here, below the ops that fill it: the ops layer hands
// the core ops' registration down at start-up (ops/global.cpp), as the backends hand their
// table to the runtime (runtime/device_backend.h).
#pragma once

#include "rlx/op.h"

namespace rlx::detail {

// Sets what registers the core ops into OpRegistry::global(): once, on the first global()
// from then on (at once where one came earlier). Lookups made before it is set (another
// library's static initialisers running first) find only what was registered by then.
void install_core_ops(void (*add)(OpRegistry&));

}  // namespace rlx::detail
