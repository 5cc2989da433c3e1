// Decompositions and rules of the LLM ops (llm.cpp). The decompositions are written in core
// ops so that a device without a kernel runs them, and kv_cache_write's and
// attention_cached's vjp / jvp / vmap are those of their decompositions.
#pragma once

#include <span>
#include <vector>

#include "rlx/op.h"

namespace rlx::detail {

std::vector<Value> rope_decomposed(const RuleArgs& a);
std::vector<Value> rope_vjp(const RuleArgs& a, std::span<const Value> ct);
std::vector<Value> rope_jvp(const RuleArgs& a, std::span<const Value> t);
VmapResult rope_vmap(const RuleArgs& a, std::span<const int> in_axes);

// The functional update: scatter_elements of the new rows into the cache (a new tensor).
std::vector<Value> kv_cache_write_decomposed(const RuleArgs& a);

// attention over the heads grouped per KV head, with an additive causal bias built from
// pos; cache rows no query sees are zeroed first, so that whatever they hold (NaN from an
// uninitialised cache) never reaches the output.
std::vector<Value> attention_cached_decomposed(const RuleArgs& a);

// rope of q and k, kv_cache_write of k and v, attention_cached: the parts it fuses.
std::vector<Value> rope_attention_cached_decomposed(const RuleArgs& a);

VmapResult sample_vmap(const RuleArgs& a, std::span<const int> in_axes);

}  // namespace rlx::detail
