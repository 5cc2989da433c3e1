// Graph transforms in the JAX style: each takes a graph and returns a new graph, so they
// compose (grad of grad, vmap of grad, jvp of vjp). The per-op rules live with the ops
// (OpDef::vjp / jvp / vmap); a missing rule is a NotSupported error naming the op and the
// transform.
//
//   auto dg = rlx::grad(g, {.wrt = {"w"}});      // outputs: "grad.w"
//   auto bg = rlx::vmap(g, {.in_axes = {{"x", 0}}});
//
// Naming: the args of the result keep g's names. Added inputs and outputs are named
// "<prefix>.<name>": "grad.w", "tan.x", "ct.loss", "hvp.w", "jac.y.x".
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

// How grad keeps the forward activations the backward pass needs.
enum class Remat {
  none,         // store every activation
  checkpoints,  // store only the outputs of `checkpoint` ops (and args); recompute the rest
                // of each segment between checkpoints just before its backward pass
};

struct GradOptions {
  // Args (inputs or params) to differentiate, by name. Empty: every float param, or
  // every float input when the graph has no params. Each must have a float dtype.
  std::vector<std::string> wrt;
  // The scalar output to differentiate (empty: the first output). Rank 0, float.
  std::string output;
  Remat remat = Remat::none;
};

// Outputs: "grad.<arg>" for each wrt arg, in wrt order.
std::unique_ptr<Graph> grad(const Graph& g, const GradOptions& options = {});
// Outputs: g's outputs, then "grad.<arg>" for each wrt arg.
std::unique_ptr<Graph> value_and_grad(const Graph& g, const GradOptions& options = {});

struct VjpOptions {
  std::vector<std::string> wrt;  // as GradOptions::wrt
  Remat remat = Remat::none;
};
// Inputs: g's args, then "ct.<output>" (the output's type) for each float output.
// Outputs: g's outputs, then "grad.<arg>" for each wrt arg.
std::unique_ptr<Graph> vjp(const Graph& g, const VjpOptions& options = {});

// Inputs: g's args, then "tan.<arg>" (the arg's type) for each wrt arg.
// Outputs: g's outputs, then "tan.<output>" for each float output.
std::unique_ptr<Graph> jvp(const Graph& g, const std::vector<std::string>& wrt = {});

// Hessian-vector product of a scalar output, forward-over-reverse (jvp of grad).
// Inputs: g's args, then "tan.<arg>" for each wrt arg. Outputs: "hvp.<arg>".
std::unique_ptr<Graph> hvp(const Graph& g, const GradOptions& options = {});

// A batch axis that means "not batched".
inline constexpr int kNotBatched = -1000000;

struct VmapOptions {
  // Batch axis of each arg, by name (negative counts from the end of the batched rank;
  // kNotBatched: not batched). Args not listed use default_in_axis for inputs and are not
  // batched for params.
  std::map<std::string, int, std::less<>> in_axes;
  int default_in_axis = 0;
  // Batch axis of each output, by name (negative counts from the end); default 0.
  std::map<std::string, int, std::less<>> out_axes;
  // The batch size: by default the symbol "vmap" (bound from the inputs at run time).
  Dim size = Dim::sym("vmap");
};
// Every output is batched (outputs that do not depend on a batched arg are broadcast).
std::unique_ptr<Graph> vmap(const Graph& g, const VmapOptions& options = {});

// Jacobians of every float output w.r.t. each wrt arg (static shapes only).
// Outputs: "jac.<output>.<arg>" of shape output.shape + arg.shape.
std::unique_ptr<Graph> jacfwd(const Graph& g, const std::vector<std::string>& wrt = {});
std::unique_ptr<Graph> jacrev(const Graph& g, const std::vector<std::string>& wrt = {});

// Positional forms, used by the rules of control-flow ops on their subgraphs (whose args
// carry no meaningful names). `wrt` / `in_axes` are indexed by arg position.
namespace transform {
// Inputs: g's args, then one cotangent per output (for every output whose dtype is
// float; others get none). Outputs: one gradient per wrt arg (zeros when unreachable).
std::unique_ptr<Graph> vjp(const Graph& g, const std::vector<int>& wrt, Remat remat = Remat::none);
// Inputs: g's args, then one tangent per wrt arg. Outputs: g's outputs, then one tangent
// per float output (zeros when unreachable).
std::unique_ptr<Graph> jvp(const Graph& g, const std::vector<int>& wrt);
// in_axes: per arg, -1 for unbatched. Outputs are batched at out_axes[i] (materialised
// when unbatched) — or, when out_axes is empty, left where the rules put them, with
// the chosen axes (-1: not batched) returned through `chosen_out_axes`.
std::unique_ptr<Graph> vmap(const Graph& g, const std::vector<int>& in_axes,
                            const std::vector<int>& out_axes, const Dim& size,
                            std::vector<int>* chosen_out_axes = nullptr);
}  // namespace transform

// Copies g without the nodes that no output depends on (args are kept). Transforms call
// it on their results; it is public because graph builders often want it too.
std::unique_ptr<Graph> prune(const Graph& g);

// Emits a copy of src's nodes into dst with src's args bound to `args` (values of dst, one
// per arg of src in order, each of the arg's type); returns src's outputs as values of
// dst. This is a call inlined: how a transformed graph is used inside another graph being
// built (Python's function transforms nest this way). TypeError / ValueError on a
// mismatch.
std::vector<Value> inline_call(const Graph& src, Graph& dst, const std::vector<Value>& args);

}  // namespace rlx
