// cond, while and scan: the subgraphs run as their own compiled programs (through
// KernelContext::subgraphs), so their nodes use the same kernels as the outer graph.
#include <cstring>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

const SubgraphRunner& runner(const KernelContext& ctx) {
  if (!ctx.subgraphs)
    fail<ValueError>(ctx.op.name, "expected the node's subgraphs to be compiled, got none");
  return *ctx.subgraphs;
}

bool truth(const Tensor& pred) { return *static_cast<const uint8_t*>(pred.data()) != 0; }

void cond_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  auto results = runner(ctx).run(truth(in[0]) ? 0 : 1, in.subspan(1));
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::move(results[i]);
}

void while_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const SubgraphRunner& sub = runner(ctx);
  int64_t max_iter = ctx.attrs.get_int("max_iter");
  std::vector<Tensor> state(in.begin(), in.end());
  for (int64_t it = 0; max_iter < 0 || it < max_iter; ++it) {
    if (!truth(sub.run(0, state)[0])) break;
    state = sub.run(1, state);
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::move(state[i]);
}

// Copies `step` (one slice of a stacked output) into row t of `stacked`, which is made
// on the first step when its shape was not known before the body ran.
void put_row(Tensor& stacked, int64_t t, int64_t len, const Tensor& step) {
  if (!stacked.defined()) {
    std::vector<int64_t> shape{len};
    shape.insert(shape.end(), step.shape().begin(), step.shape().end());
    stacked = Tensor::empty(step.dtype(), shape);
  }
  Tensor c = step.contiguous();
  size_t row = c.nbytes();
  if (row) std::memcpy(static_cast<char*>(stacked.data()) + size_t(t) * row, c.data(), row);
}

void scan_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const SubgraphRunner& sub = runner(ctx);
  size_t nc = size_t(ctx.attrs.get_int("num_carry"));
  bool reverse = ctx.attrs.get_bool("reverse");
  int64_t len = ctx.attrs.get_int("length");
  if (in.size() > nc)
    len = in[nc].shape()[0];
  else if (len < 0)
    len = 0;
  std::vector<Tensor> carry(in.begin(), in.begin() + std::ptrdiff_t(nc));
  std::vector<Tensor> args(in.size());
  for (int64_t s = 0; s < len; ++s) {
    int64_t t = reverse ? len - 1 - s : s;
    for (size_t i = 0; i < nc; ++i) args[i] = carry[i];
    for (size_t i = nc; i < in.size(); ++i) {
      std::vector<int64_t> row(in[i].shape().begin() + 1, in[i].shape().end());
      args[i] = in[i].slice(0, t, t + 1).contiguous().reshape(row);
    }
    auto res = sub.run(0, args);
    for (size_t i = 0; i < nc; ++i) carry[i] = std::move(res[i]);
    for (size_t i = nc; i < res.size(); ++i) put_row(out[i], t, len, res[i]);
  }
  for (size_t i = 0; i < nc; ++i) out[i] = std::move(carry[i]);
  for (size_t i = nc; i < out.size(); ++i)
    if (!out[i].defined())
      fail<ValueError>("scan", "expected the shape of output ", i,
                       " to be known for a scan of length 0, got a symbolic one");
}

}  // namespace

void register_control(KernelRegistry& r) {
  // cond and while return their subgraph's results; scan writes its stacked outputs.
  KernelFlags results{.strided_inputs = true, .makes_outputs = true};
  add_kernel(r, "cond", cond_kernel, {}, results);
  add_kernel(r, "while", while_kernel, {}, results);
  add_kernel(r, "scan", scan_kernel, {}, {.strided_inputs = true});
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
