// Derivatives of the elementwise ops, and the vjp / jvp / vmap rules built from them.
#pragma once

#include "rlx/op.h"

namespace rlx::detail {

// dy/dx of a unary op, from its input x, output y and attributes.
using UnaryDeriv = Value (*)(Value x, Value y, const Attrs& attrs);
// Partial derivatives of a binary op; nullptr means the constant 1 (add), so no multiply
// is emitted.
struct BinaryDeriv {
  Value (*da)(Value a, Value b, Value y);
  Value (*db)(Value a, Value b, Value y);
};

// The derivative of each differentiable unary / binary op, by name; nullptr if none.
UnaryDeriv unary_deriv(std::string_view op);
const BinaryDeriv* binary_deriv(std::string_view op);

// Sets vjp / jvp from the derivative (when there is one) and vmap for every op.
void set_unary_rules(OpDef& d, UnaryDeriv deriv);
void set_binary_rules(OpDef& d, const BinaryDeriv* deriv);
void set_select_rules(OpDef& d);
void set_clamp_rules(OpDef& d);
void set_cast_rules(OpDef& d);

}  // namespace rlx::detail
