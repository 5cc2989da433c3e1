// Op definitions and the op registry. Every op — built in or downstream — is an OpDef
// registered through OpRegistry::add: the same API for everyone.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/error.h"
#include "rlx/graph.h"
#include "rlx/shape.h"

namespace rlx {

// Properties that passes ask about instead of matching op names.
enum class Trait : uint32_t {
  none = 0,
  elementwise = 1u << 0,        // output[i] depends only on inputs[i] (after broadcasting)
  commutative = 1u << 1,        // f(a, b) == f(b, a)
  associative = 1u << 2,        // f(f(a, b), c) == f(a, f(b, c))
  reduction = 1u << 3,          // reduces over the `axes` attribute
  view = 1u << 4,               // output can alias the input's buffer (reshape, squeeze…)
  side_effect = 1u << 5,        // must not be removed or reordered
  random = 1u << 6,             // draws random numbers (treated as a constant by autodiff)
  control = 1u << 7,            // has subgraphs that it runs (cond, while, scan)
  nondifferentiable = 1u << 8,  // outputs carry no gradient (comparisons, argmax, …)
  shape_op = 1u << 9,           // moves or selects data without arithmetic
  checkpoint = 1u << 10,        // ends a rematerialisation segment (Remat::checkpoints)
  finite = 1u << 11,            // finite wherever its inputs are (a layout may pad with zero lanes)
};
constexpr Trait operator|(Trait a, Trait b) { return Trait(uint32_t(a) | uint32_t(b)); }
constexpr bool has_trait(Trait set, Trait t) { return (uint32_t(set) & uint32_t(t)) != 0; }

// Schema of one attribute. No default means the attribute is required.
struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> default_value;
  std::vector<std::string> choices;  // for strings: the allowed values (empty: any)
};

// What an infer function sees: the input types, the complete attributes, subgraphs.
class InferContext {
 public:
  InferContext(const OpDef& op, std::span<const TensorType> inputs, const Attrs& attrs,
               std::span<const SubgraphPtr> subgraphs)
      : op_(op), inputs_(inputs), attrs_(attrs), subgraphs_(subgraphs) {}

  const OpDef& op() const { return op_; }
  const std::string& name() const;
  size_t num_inputs() const { return inputs_.size(); }
  const TensorType& input(size_t i) const { return inputs_[i]; }
  std::span<const TensorType> inputs() const { return inputs_; }
  DType dtype(size_t i) const { return inputs_[i].dtype; }
  const Shape& shape(size_t i) const { return inputs_[i].shape; }
  int64_t rank(size_t i) const { return inputs_[i].rank(); }
  const Attrs& attrs() const { return attrs_; }
  size_t num_subgraphs() const { return subgraphs_.size(); }
  const Graph& subgraph(size_t i) const { return *subgraphs_[i]; }

  // Throw "[op] parts…" as ValueError / TypeError.
  template <class... A>
  [[noreturn]] void fail(A&&... parts) const {
    rlx::fail<ValueError>(name(), std::forward<A>(parts)...);
  }
  template <class... A>
  [[noreturn]] void fail_type(A&&... parts) const {
    rlx::fail<TypeError>(name(), std::forward<A>(parts)...);
  }

 private:
  const OpDef& op_;
  std::span<const TensorType> inputs_;
  const Attrs& attrs_;
  std::span<const SubgraphPtr> subgraphs_;
};

// What a rule (decompose / vjp / jvp / vmap) sees: the graph it emits into, and the
// node's inputs and outputs as values of that graph.
struct RuleArgs {
  Graph& g;
  const Attrs& attrs;
  std::span<const Value> inputs;
  std::span<const Value> outputs;  // empty for decompose
  std::span<const SubgraphPtr> subgraphs;
  const OpDef* op = nullptr;  // the op the rule belongs to (set by the transforms)
};

struct VmapResult {
  std::vector<Value> outputs;
  std::vector<int> out_axes;  // -1: the output is not batched
};

using InferFn = std::function<std::vector<TensorType>(const InferContext&)>;
// Returns the op's outputs built from more primitive ops.
using DecomposeFn = std::function<std::vector<Value>(const RuleArgs&)>;
// Returns one cotangent per input; an invalid Value means "no gradient". Every output
// of a float dtype gets a valid cotangent (zeros where the loss does not depend on it).
using VjpFn = std::function<std::vector<Value>(const RuleArgs&, std::span<const Value> cotangents)>;
// Returns one tangent per output (invalid: zero); input tangents may be invalid (zero),
// but at least one is valid.
using JvpFn = std::function<std::vector<Value>(const RuleArgs&, std::span<const Value> tangents)>;
// in_axes[i] is the batch axis of input i (in [0, rank)), or -1 when it is not batched;
// at least one input is batched. Returns the batched outputs and their batch axes.
using VmapFn = std::function<VmapResult(const RuleArgs&, std::span<const int> in_axes)>;

inline constexpr int kVariadic = -1;

// How an op runs under a mixed precision (PassContext::precision, passes/mixed_precision.cpp).
enum class AmpRole : uint8_t {
  follow,    // in its inputs' precision: 16 bits when its float inputs are, f32 when any is f32
  low,       // compute-bound: 16-bit inputs, the kernels accumulating in f32 (matmul, conv)
  keep_f32,  // needs range or accuracy: f32 inputs (exp / log, norms, reductions, softmax)
  wide,      // reads 16-bit inputs as they are and keeps f32 outputs when its bool attribute
             // OpDef::amp_attr is set (its math is f32 either way: a cast is saved)
};

struct OpDef {
  std::string name;  // "add"; downstream ops are namespaced: "sparse.cg_solve"
  Trait traits = Trait::none;
  int min_inputs = 0;
  int max_inputs = 0;  // kVariadic: no upper bound
  std::vector<AttrSpec> attrs;
  std::vector<std::string> subgraphs;  // slot names, in order ("then", "else")
  InferFn infer;
  DecomposeFn decompose;
  VjpFn vjp;
  JvpFn jvp;
  VmapFn vmap;
  std::string doc;
  AmpRole amp = AmpRole::follow;
  std::string amp_attr;  // AmpRole::wide: the bool attribute the pass sets

  bool has(Trait t) const { return has_trait(traits, t); }
  const AttrSpec* find_attr(std::string_view key) const;

  // Fluent helpers for registration code.
  OpDef& arity(int min, int max) {
    min_inputs = min;
    max_inputs = max;
    return *this;
  }
  OpDef& arity(int n) { return arity(n, n); }
  OpDef& attr(std::string key, AttrKind kind, std::optional<AttrValue> def = std::nullopt,
              std::vector<std::string> choices = {}) {
    attrs.push_back({std::move(key), kind, std::move(def), std::move(choices)});
    return *this;
  }
};

// Checks attrs against op's schema and returns them complete: unknown keys are a
// ValueError, a wrong kind a TypeError, a missing required one a ValueError; defaults
// are filled in; Int→Float and Ints→Floats are converted where the schema asks.
Attrs validate_attrs(const OpDef& op, const Attrs& attrs);

// Runs op's checks (arity, attrs, subgraph count) and its infer function.
std::vector<TensorType> infer_types(const OpDef& op, std::span<const TensorType> inputs,
                                    const Attrs& complete_attrs,
                                    std::span<const SubgraphPtr> subgraphs);

class OpRegistry {
 public:
  // The process-wide registry, with the core ops registered on first use.
  static OpRegistry& global();

  // Registers an op; the returned reference stays valid for the registry's life.
  // Throws ValueError when the name is taken or the definition is incomplete.
  const OpDef& add(OpDef def);
  const OpDef* find(std::string_view name) const;
  const OpDef& get(std::string_view name) const;  // ValueError if unknown
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  std::vector<const OpDef*> all() const;  // sorted by name

  OpRegistry();
  ~OpRegistry();
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx
