// The clean-up passes, one file each; cleanup.cpp registers them.
#pragma once

#include <memory>

#include "rlx/passes.h"

namespace rlx::passes {

// dce.cpp: drops the nodes that no output or side effect needs.
std::unique_ptr<Graph> dce(const Graph& g, const PassContext& ctx);
// cse.cpp: merges nodes that compute the same thing.
std::unique_ptr<Graph> cse(const Graph& g, const PassContext& ctx);
// constant_folding.cpp: evaluates nodes of constants; resolves shape arithmetic.
std::unique_ptr<Graph> constant_folding(const Graph& g, const PassContext& ctx);
// simplify.cpp: algebraic identities (x * 1, double negation, cast and reshape chains…).
std::unique_ptr<Graph> simplify(const Graph& g, const PassContext& ctx);

}  // namespace rlx::passes
