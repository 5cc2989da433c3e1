#include "runtime/evaluate.h"

#include "rlx/passes.h"
#include "rlx/session.h"
#include "rlx/strings.h"

namespace rlx {
namespace detail {

std::optional<std::vector<Literal>> evaluate_on_cpu(const OpDef& op,
                                                    const std::vector<Tensor>& inputs,
                                                    const Attrs& attrs) {
  try {
    Graph g("fold");
    std::vector<Value> ins;
    for (size_t i = 0; i < inputs.size(); ++i)
      ins.push_back(g.input(str_cat("x", i), inputs[i].type()));
    for (Value v : g.apply(op, ins, attrs)) g.output(v);
    CompileOptions options;
    options.opt_level = 0;
    options.threads = 1;
    std::vector<Tensor> outs = Session(Device::cpu()).compile(g, options).run(inputs);
    std::vector<Literal> lits;
    for (const Tensor& t : outs) lits.push_back(t.to_literal());
    return lits;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace detail

Evaluator cpu_evaluator() {
  return [](const OpDef& op, std::span<const FoldInput> inputs, const Attrs& attrs) {
    std::vector<Tensor> tensors;
    for (const FoldInput& in : inputs) {
      // A tensor over the literal's bytes (no copy; the literal is kept alive with it), or
      // its one element (as rank 0) broadcast.
      const Literal& lit = *in.value;
      auto* data = const_cast<void*>(lit.data());
      const bool own = lit.shape() == in.shape;
      Tensor t = Tensor::wrap(lit.dtype(), own ? in.shape : std::vector<int64_t>{}, data,
                              [keep = lit](void*) {});
      tensors.push_back(own ? std::move(t) : t.broadcast_to(in.shape));
    }
    return detail::evaluate_on_cpu(op, tensors, attrs);
  };
}

}  // namespace rlx
