// Test-only ops, registered through the public API under the "test." namespace:
//   test.add(a, b)            a and b of equal types -> that type
//   test.split(x) {num, mode} num copies of x's type (num in [0, 16])
//   test.sink(xs...)          no outputs
//   test.attrs(xs...) {…}     one attribute of every kind; outputs echo the inputs
#pragma once

#include "rlx/rlx.h"

namespace rlx::testing {

void register_test_ops();  // idempotent

}  // namespace rlx::testing
