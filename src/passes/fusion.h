// The epilogue / pattern fusion passes (one file each) and what they share: a plan of
// matched patterns applied in one Rewriter walk, and the check that the device runs the
// fused op natively.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "passes/rewrite.h"
#include "rlx/passes.h"

namespace rlx::passes {

void register_matmul_fusion(PassRegistry& r);     // matmul_fusion.cpp
void register_conv_fusion(PassRegistry& r);       // conv_fusion.cpp
void register_nchwc_layout(PassRegistry& r);      // nchwc_layout.cpp
void register_bn_folding(PassRegistry& r);        // bn_folding.cpp
void register_attention_fusion(PassRegistry& r);  // attention_fusion.cpp
void register_norm_fusion(PassRegistry& r);       // norm_fusion.cpp
void register_cast_batching(PassRegistry& r);     // cast_batching.cpp
void register_attention_stats(PassRegistry& r);   // attention_stats.cpp

// The lanes nchwc_layout blocks channels in on this CPU: 16 with AVX-512, else 8.
int64_t nchwc_lanes();

// The output type of `op` on these inputs when the pass's device has a native kernel for
// it (asked through the kernel's supports()); nullopt when it has none or the op rejects
// the inputs. A fused op without a native kernel would only be decomposed again.
std::optional<TensorType> native_type(const PassContext& ctx, std::string_view op,
                                      const std::vector<TensorType>& inputs, const Attrs& attrs);
// The same for an op of any number of outputs.
std::optional<std::vector<TensorType>> native_types(const PassContext& ctx, std::string_view op,
                                                    const std::vector<TensorType>& inputs,
                                                    const Attrs& attrs);

// Whether any node of g is one of `ops`: a pass with nothing to match returns at once.
bool has_any_op(const Graph& g, std::initializer_list<std::string_view> ops);

// The index of the node that makes v (-1 for an argument).
inline int32_t producer_index(const Graph& g, Value v) { return g.info(v).node; }

// Matched patterns, applied in one Rewriter walk. A pattern claims its nodes (no other
// pattern may take them) and names its root, its last node, where every value it reads
// already exists: there the fused op is emitted, replacing the root's outputs. Nodes that
// only the replaced roots read (directly or through other such nodes) are dropped in the
// same walk, unless they have side effects; nodes that were dead before are left to dce.
class FusionPlan {
 public:
  using Emit = std::function<std::vector<Value>(Rewriter&)>;

  explicit FusionPlan(const Graph& g) : claimed_(g.nodes().size(), 0), roots_(g.nodes().size()) {}

  // Whether a node already belongs to a pattern.
  bool taken(int32_t node) const { return claimed_[size_t(node)] != 0; }
  void claim(int32_t node) { claimed_[size_t(node)] = 1; }
  // `reads`: the source values `emit` reads (through the Rewriter).
  void root(int32_t node, std::vector<Value> reads, Emit emit) {
    claim(node);
    roots_[size_t(node)] = {std::move(reads), std::move(emit)};
    planned_ = true;
  }
  bool empty() const { return !planned_; }

  // The rewritten graph; null when nothing was planned.
  std::unique_ptr<Graph> apply(const Graph& g) const;

 private:
  struct Root {
    std::vector<Value> reads;
    Emit emit;
  };
  std::vector<uint8_t> claimed_;
  std::vector<Root> roots_;
  bool planned_ = false;
};

// The bias + activation tail of a matmul / conv at node `root`: an `add` (taken when
// `bias_of(other operand)` accepts it) and then an activation, each the only, still free
// reader of the value before it.
struct Epilogue {
  std::vector<int32_t> chain;  // root first, then the absorbed nodes
  Value bias;                  // invalid: no add absorbed
  Value out;                   // the last value of the chain
  std::string activation = "none";
};
Epilogue grow_epilogue(const Graph& g, const UseInfo& uses, const FusionPlan& plan, int32_t root,
                       const std::function<bool(Value)>& bias_ok);

}  // namespace rlx::passes
