// attention's layout "bshd": q, k, v (dy, and the outputs) are [..., s, h, d], the "bhsd"
// form with the sequence and head axes swapped; a bias stays [..., h, sq, sk]. The swap is
// defined once here for the op's rules, its kernels and the attention_layout pass.
#pragma once

#include <cstdint>
#include <utility>

#include "rlx/attrs.h"

namespace rlx::detail {

inline bool is_bshd(const Attrs& a) { return a.get_string("layout") == "bshd"; }

// The perm that swaps the axes -3 and -2 of rank r (r >= 3): bshd <-> bhsd.
inline IntList seq_head_swap(int64_t r) {
  IntList p;
  for (int64_t i = 0; i < r; ++i) p.push_back(i);
  std::swap(p[size_t(r - 3)], p[size_t(r - 2)]);
  return p;
}

}  // namespace rlx::detail
