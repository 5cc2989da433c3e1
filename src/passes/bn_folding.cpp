// bn_folding: batch_norm (the inference form: scale, bias, running mean and variance as
// inputs) of a conv's output is folded into the conv (of a one-group conv_transpose's,
// where every input is a constant).
//
// With s = scale / sqrt(var + epsilon) per output channel m,
//   batch_norm(conv(x, w, b)) = conv(x, w * s[m], (b - mean) * s + bias).
// - When w, b (if any) and the four batch_norm inputs are `constant` nodes (an imported
//   model after constant folding), the folded weight and bias are computed here, in f64,
//   and emitted as new constants: the batch_norm costs nothing at run time.
// - Otherwise (params) the same formula is emitted as graph ops. Scaling the weight costs
//   one multiply per weight per run, against one per output element for the batch_norm,
//   so this is done when the weight has no more elements than the conv's output (always,
//   except in late layers at batch 1); there, and when the sizes are symbolic, the
//   batch_norm becomes conv(x, w, b) * s + t with [M, 1, ...] per-channel s and t, which
//   elementwise fusion turns into one pass.
// Only a conv whose output nothing else reads, with a static channel count.
#include <cmath>

#include "passes/fusion.h"
#include "rlx/ops.h"

namespace rlx::passes {

namespace {

// The folded weight and bias as constants, when every input is a constant.
std::optional<std::pair<Literal, Literal>> fold_constants(const Graph& g, const Node& conv,
                                                          const Node& bn) {
  const Literal* w = constant_of(g, conv.inputs[1]);
  const Literal* b = conv.inputs.size() > 2 ? constant_of(g, conv.inputs[2]) : nullptr;
  if (!w || (conv.inputs.size() > 2 && !b)) return std::nullopt;
  const Literal* p[4];
  for (size_t i = 0; i < 4; ++i)
    if (!(p[i] = constant_of(g, bn.inputs[i + 1]))) return std::nullopt;
  std::vector<double> scale = p[0]->to_doubles(), beta = p[1]->to_doubles(),
                      mean = p[2]->to_doubles(), var = p[3]->to_doubles();
  std::vector<double> wv = w->to_doubles(), bv = b ? b->to_doubles() : std::vector<double>();
  double eps = bn.attrs.get_float("epsilon");
  size_t m = scale.size(), per = m ? wv.size() / m : 0;
  // conv: w [M, C, K...], channel m a run of `per`; conv_transpose (one group): w [C, M, K...],
  // channel m a run of the kernel's size in each of the C rows.
  const bool transpose = conv.op_name() == "conv_transpose";
  const size_t ker = transpose && m ? per / size_t(w->shape()[0]) : per;
  std::vector<double> nb(m);
  for (size_t c = 0; c < m; ++c) {
    double s = scale[c] / std::sqrt(var[c] + eps);
    for (size_t k = 0; k < per; ++k)
      wv[transpose ? (k / ker * m + c) * ker + k % ker : c * per + k] *= s;
    nb[c] = ((b ? bv[c] : 0.0) - mean[c]) * s + beta[c];
  }
  DType dt = w->dtype();
  return std::pair{Literal::from_doubles(dt, w->shape(), wv),
                   Literal::from_doubles(dt, {int64_t(m)}, nb)};
}

// Whether scaling the weight is cheaper than a pass over the conv's output.
bool scale_weights(const Node& conv) {
  auto w = conv.inputs[1].type().numel(), y = conv.outputs[0].type().numel();
  return w && y && *w <= *y;
}

std::unique_ptr<Graph> bn_folding(const Graph& g, const PassContext&) {
  if (!has_any_op(g, {"batch_norm"})) return nullptr;
  UseInfo uses(g);
  FusionPlan plan(g);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& bn = nodes[i];
    if (bn.op_name() != "batch_norm") continue;
    Value y = bn.inputs[0];
    const Node* conv = producer_is(g, y, "conv");
    // A conv_transpose of one group folds where every input is a constant.
    const Node* convt = conv ? nullptr : producer_is(g, y, "conv_transpose");
    if (convt && convt->attrs.get_int("groups") == 1) conv = convt;
    if (!conv || !uses.single_use(y) || plan.taken(producer_index(g, y))) continue;
    const Shape& ws = conv->inputs[1].shape();
    if (!ws[0].is_static()) continue;
    int64_t m = ws[0].value();
    auto folded = fold_constants(g, *conv, bn);
    if (!folded && conv == convt) continue;
    plan.claim(producer_index(g, y));
    if (folded) {
      plan.root(int32_t(i), {conv->inputs[0]}, [conv, folded](Rewriter& rw) {
        Graph& d = rw.dst();
        std::vector<Value> in{rw(conv->inputs[0]), d.constant(folded->first),
                              d.constant(folded->second)};
        return std::vector<Value>{d.apply1(conv->op_name(), in, conv->attrs)};
      });
      continue;
    }
    bool into_weights = scale_weights(*conv);
    const Node* norm = &bn;
    std::vector<Value> reads = conv->inputs;
    reads.insert(reads.end(), bn.inputs.begin() + 1, bn.inputs.end());
    plan.root(int32_t(i), reads, [conv, norm, m, into_weights](Rewriter& rw) {
      std::vector<Value> in = rw(conv->inputs);
      std::vector<Value> p = rw(norm->inputs);  // x, scale, bias, mean, var
      Value s = p[1] * op("rsqrt", {p[4] + norm->attrs.get_float("epsilon")});
      auto channels = [m](Value v, int64_t rank) {  // [M] -> [M, 1, ...] of `rank`
        IntList shape(size_t(rank), 1);
        shape[0] = m;
        return reshape(v, shape);
      };
      int64_t rank = conv->outputs[0].rank();
      if (into_weights) {
        Value shift = in.size() > 2 ? (in[2] - p[3]) * s + p[2] : p[2] - p[3] * s;
        in[1] = in[1] * channels(s, rank);
        if (in.size() > 2)
          in[2] = shift;
        else
          in.push_back(shift);
        return std::vector<Value>{rw.dst().apply1("conv", in, conv->attrs)};
      }
      Value out = rw.dst().apply1("conv", in, conv->attrs);
      Value t = p[2] - p[3] * s;
      Value scaled = out * channels(s, rank - 1);
      return std::vector<Value>{scaled + channels(t, rank - 1)};
    });
  }
  return plan.apply(g);
}

}  // namespace

void register_bn_folding(PassRegistry& r) {
  r.add({"bn_folding", bn_folding, "batch_norm of a conv's output -> the conv's weight and bias"});
}

}  // namespace rlx::passes
