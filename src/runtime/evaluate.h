// Compile-time evaluation of one op on the CPU kernels: what constant folding and the ONNX
// importer's eager folds run (passes get it as PassContext::evaluate, so they need no
// runtime of their own).
#pragma once

#include <optional>
#include <vector>

#include "rlx/op.h"
#include "rlx/tensor.h"

namespace rlx::detail {

// Runs op once on the CPU on known inputs. Null when it cannot (no kernel, a bad index in
// the data…): the caller then leaves the node to run time.
std::optional<std::vector<Literal>> evaluate_on_cpu(const OpDef& op,
                                                    const std::vector<Tensor>& inputs,
                                                    const Attrs& attrs);

}  // namespace rlx::detail
