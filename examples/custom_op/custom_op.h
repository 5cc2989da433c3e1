// A downstream op package, written as a user outside rlx would: it sees only the
// public headers and registers its ops with one call.
//
//   example.masked_moments(x, mask) {axis=-1, scale=1.0} -> (mean, count)
//     x: any float dtype; mask: bool or integer (nonzero = keep), same shape as x.
//     mean  = scale * sum(x * mask, axis) / max(count, 1)   (x's dtype)
//     count = number of kept elements along axis            (i64)
//   A CPU kernel for it (every float x, every bool/integer mask).
//
//   example.axpby(x, y) {alpha=1.0, beta=1.0} -> alpha * x + beta * y
//     No kernel anywhere: it runs through its decomposition into core ops, on any device
//     whose backend has those.
#pragma once

namespace example {

// Registers the example ops and their CPU kernels in rlx's global registries; safe to call
// more than once.
void register_example_ops();

}  // namespace example
