// A downstream op package, written as a user outside rlx would: it sees only the
// public headers and registers its ops with one call.
//
//   example.masked_moments(x, mask) {axis=-1, scale=1.0} -> (mean, count)
//     x: any float dtype; mask: bool or integer (nonzero = keep), same shape as x.
//     mean  = scale * sum(x * mask, axis) / max(count, 1)   (x's dtype)
//     count = number of kept elements along axis            (i64)
#pragma once

namespace example {

// Registers the example ops in rlx's global registry; safe to call more than once.
void register_example_ops();

}  // namespace example
