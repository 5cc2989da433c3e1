// OpRegistry::global(): the process-wide registry, holding the core ops from its first use.
// It lives in the ops layer, which defines those ops (ir/ declares the registry and keeps it
// free of the op families: tools/check_layers.py).
#include "ops/families.h"
#include "rlx/op.h"

namespace rlx {

OpRegistry& OpRegistry::global() {
  static OpRegistry* reg = [] {
    auto* r = new OpRegistry();  // never destroyed: ops may be used during static teardown
    detail::register_core_ops(*r);
    return r;
  }();
  return *reg;
}

}  // namespace rlx
