// An addend that both backends' product kernels add as they store (quant_matmul's c):
// they take it where it repeats over the output in memory order, y[i] += c[i % c.numel()],
// i.e. c's shape without its leading unit dims is a suffix of y's (a residual stream of
// y's shape, a bias per column). Other broadcasts take the op's decomposition.
#pragma once

#include "rlx/shape.h"

namespace rlx {

inline bool addend_repeats(const TensorType& c, const TensorType& y) {
  size_t lead = 0;
  while (lead < c.shape.size() && c.shape[lead].is(1)) ++lead;
  const size_t rank = c.shape.size() - lead;
  if (rank > y.shape.size() || c.dtype != y.dtype) return false;
  for (size_t d = 0; d < rank; ++d)
    if (c.shape[lead + d] != y.shape[y.shape.size() - rank + d]) return false;
  return true;
}

}  // namespace rlx
