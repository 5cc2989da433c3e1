// The LLM family's CPU kernels, one file each: rope and kv_cache_write (llm.cpp),
// attention_cached (llm_attention.cpp), sample (llm_sample.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_util.h"

namespace rlx::cpu {

void register_attention_cached(KernelRegistry& r);  // llm_attention.cpp
void register_sample(KernelRegistry& r);            // llm_sample.cpp

// The B positions of an i32 / i64 tensor, checked so that pos[b] + rows <= limit; the
// error names the op, the offending entry, S and C.
inline void read_positions(const char* op, const Tensor& pos, int64_t rows, int64_t limit,
                           std::vector<int64_t>& out) {
  out.resize(size_t(pos.numel()));
  visit_int(pos.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = pos.data_as<I>();
    for (size_t b = 0; b < out.size(); ++b) out[b] = int64_t(p[b]);
  });
  for (size_t b = 0; b < out.size(); ++b)
    if (out[b] < 0 || out[b] > limit - rows)
      fail<ValueError>(op, "expected 0 <= pos[b] and pos[b] + S <= C = ", limit, ", got pos[", b,
                       "] = ", out[b], " with S = ", rows);
}

}  // namespace rlx::cpu
