// The core ops, handed down to OpRegistry::global() (ir/global_registry.h) at start-up: the
// registry lives in ir/, below the op families, so that Graph's by-name builders and the
// transforms reach them without naming this layer. Also parse_graph without a registry.
#include "ir/global_registry.h"
#include "ops/families.h"
#include "rlx/text.h"

namespace rlx {
namespace {

const bool installed = [] {
  detail::install_core_ops(detail::register_core_ops);
  return true;
}();

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text) {
  return parse_graph(text, OpRegistry::global());
}

}  // namespace rlx

// A static librlx keeps this file through the CMake target's --undefined of this symbol
// (nothing below the ops names it, so the linker would drop it and the core ops with it).
extern "C" const bool* rlx_core_ops() { return &rlx::installed; }
