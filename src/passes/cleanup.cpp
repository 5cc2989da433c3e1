#include "passes/cleanup.h"

#include "passes/families.h"

namespace rlx::passes {

void register_cleanup_passes(PassRegistry& r) {
  r.add({"dce", dce, "drops nodes that no output or side effect depends on"});
  r.add({"cse", cse, "merges nodes with the same op, inputs and attributes, and equal constants"});
  r.add({"constant_folding", constant_folding,
         "evaluates nodes whose inputs are constants; folds shape_of and dynamic_reshape once "
         "shapes are known"});
  r.add({"simplify", simplify,
         "algebraic simplification: identities, double negation, transpose / reshape / cast "
         "chains, implicit broadcasts, division by constants"});
}

}  // namespace rlx::passes
