// vjp / jvp / vmap rules of the control-flow ops (cond, while, scan). Their subgraphs are
// closed graphs, so each rule transforms them with the positional transforms and wraps
// the results in the same kind of branch or loop.
#pragma once

#include <span>
#include <vector>

#include "rlx/op.h"

namespace rlx::detail {

std::vector<Value> cond_vjp(const RuleArgs& a, std::span<const Value> cotangents);
std::vector<Value> cond_jvp(const RuleArgs& a, std::span<const Value> tangents);
VmapResult cond_vmap(const RuleArgs& a, std::span<const int> in_axes);

std::vector<Value> while_vjp(const RuleArgs& a, std::span<const Value> cotangents);
std::vector<Value> while_jvp(const RuleArgs& a, std::span<const Value> tangents);
VmapResult while_vmap(const RuleArgs& a, std::span<const int> in_axes);

std::vector<Value> scan_vjp(const RuleArgs& a, std::span<const Value> cotangents);
std::vector<Value> scan_jvp(const RuleArgs& a, std::span<const Value> tangents);
VmapResult scan_vmap(const RuleArgs& a, std::span<const int> in_axes);

}  // namespace rlx::detail
