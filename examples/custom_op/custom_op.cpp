#include "custom_op.h"

#include <algorithm>
#include <mutex>

#include "rlx/axes.h"
#include "rlx/parallel.h"
#include "rlx/rlx.h"

namespace example {

namespace {

std::vector<rlx::TensorType> infer_masked_moments(const rlx::InferContext& ctx) {
  const rlx::TensorType& x = ctx.input(0);
  const rlx::TensorType& mask = ctx.input(1);
  if (!rlx::is_float(x.dtype)) ctx.fail_type("expected a float x, got ", x.str());
  if (rlx::is_float(mask.dtype)) ctx.fail_type("expected a bool or integer mask, got ", mask.str());
  if (x.shape != mask.shape)
    ctx.fail("expected a mask of x's shape ", x.str(), ", got ", mask.str());
  if (x.rank() == 0) ctx.fail("expected x of rank >= 1, got ", x.str());
  int64_t axis = ctx.attrs().get_int("axis");
  if (axis < -x.rank() || axis >= x.rank())
    ctx.fail("expected axis in [", -x.rank(), ", ", x.rank(), "), got ", axis);
  rlx::Shape reduced = x.shape;
  reduced.erase(reduced.begin() + rlx::norm_axis(axis, x.rank()));
  return {{x.dtype, reduced}, {rlx::DType::i64, reduced}};
}

// Written against the public API only: element access through load_double/store_double
// keeps the example short for every dtype (a production kernel would template on them);
// rlx/axes.h splits the shape around the axis, rlx/parallel.h spreads the output elements
// over the CPU threads.
void masked_moments_cpu(const rlx::KernelContext& ctx, std::span<const rlx::Tensor> in,
                        std::span<rlx::Tensor> out) {
  const rlx::Tensor& x = in[0];
  const rlx::Tensor& mask = in[1];
  const auto [outer, n, inner] = rlx::split_at(x.shape(), ctx.attrs.get_int("axis"));
  double scale = ctx.attrs.get_float("scale");
  size_t xs = rlx::dtype_size(x.dtype()), ms = rlx::dtype_size(mask.dtype());
  const auto* xp = static_cast<const char*>(x.data());
  const auto* mp = static_cast<const char*>(mask.data());
  auto* mean = static_cast<char*>(out[0].data());
  auto* count = out[1].data_as<int64_t>();
  rlx::parallel_for(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)),
                    [&](int64_t r0, int64_t r1) {
                      for (int64_t r = r0; r < r1; ++r) {
                        const int64_t o = r / inner, i = r % inner;
                        double sum = 0;
                        int64_t kept = 0;
                        for (int64_t k = 0; k < n; ++k) {
                          size_t e = size_t((o * n + k) * inner + i);
                          if (rlx::load_double(mask.dtype(), mp + e * ms) == 0) continue;
                          sum += rlx::load_double(x.dtype(), xp + e * xs);
                          ++kept;
                        }
                        rlx::store_double(x.dtype(), mean + size_t(r) * xs,
                                          scale * sum / double(std::max<int64_t>(kept, 1)));
                        count[r] = kept;
                      }
                    });
}

// Rules, written with the public rule helpers (rlx/rules.h) as any downstream package
// would. mean is linear in x: its tangent is the op applied to the tangent, and its
// cotangent spreads ct * scale / max(count, 1) over the kept elements.
std::vector<rlx::Value> masked_moments_vjp(const rlx::RuleArgs& a, std::span<const rlx::Value> ct) {
  rlx::Value x = a.inputs[0], mask = a.inputs[1];
  const int64_t axis = rlx::norm_axis(a.attrs.get_int("axis"), x.rank());
  rlx::Value kept = rlx::cast(rlx::op("ne", {mask, rlx::scalar_like(mask, 0)}), x.dtype());
  rlx::Value count = rlx::cast(a.outputs[1], x.dtype());
  rlx::Value denom = rlx::op("max", {count, rlx::scalar_like(count, 1)});
  rlx::Value per = ct[0] * a.attrs.get_float("scale") / denom;
  return {rlx::rules::expand_dims(per, {axis}) * kept, rlx::Value{}};
}

std::vector<rlx::Value> masked_moments_jvp(const rlx::RuleArgs& a, std::span<const rlx::Value> t) {
  return {rlx::rules::reapply(a, {t[0], a.inputs[1]})[0], rlx::Value{}};
}

rlx::VmapResult masked_moments_vmap(const rlx::RuleArgs& a, std::span<const int> in_axes) {
  static const char* const axis_attrs[] = {"axis"};
  return rlx::rules::vmap_shift_axes(a, in_axes, axis_attrs, /*all_inputs=*/true);
}

}  // namespace

void register_example_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    rlx::OpDef d;
    d.name = "example.masked_moments";
    d.traits = rlx::Trait::reduction;
    d.arity(2).attr("axis", rlx::AttrKind::Int, -1).attr("scale", rlx::AttrKind::Float, 1.0);
    d.doc = "Scaled mean and count of the elements of x kept by mask along axis.";
    d.infer = infer_masked_moments;
    d.vjp = masked_moments_vjp;
    d.jvp = masked_moments_jvp;
    d.vmap = masked_moments_vmap;
    rlx::OpRegistry::global().add(std::move(d));
    rlx::KernelRegistry::global().add("example.masked_moments", rlx::DeviceKind::cpu,
                                      masked_moments_cpu);

    rlx::OpDef axpby;
    axpby.name = "example.axpby";
    axpby.traits = rlx::Trait::elementwise;
    axpby.arity(2).attr("alpha", rlx::AttrKind::Float, 1.0).attr("beta", rlx::AttrKind::Float, 1.0);
    axpby.doc = "alpha * x + beta * y, by decomposition.";
    axpby.infer = [](const rlx::InferContext& ctx) {
      if (!rlx::is_float(ctx.dtype(0)) || ctx.input(0) != ctx.input(1))
        ctx.fail_type("expected two float inputs of one type, got ", ctx.input(0).str(), " and ",
                      ctx.input(1).str());
      return std::vector<rlx::TensorType>{ctx.input(0)};
    };
    axpby.decompose = [](const rlx::RuleArgs& a) {
      double alpha = a.attrs.get_float("alpha"), beta = a.attrs.get_float("beta");
      return std::vector<rlx::Value>{a.inputs[0] * alpha + a.inputs[1] * beta};
    };
    axpby.vjp = [](const rlx::RuleArgs& a, std::span<const rlx::Value> ct) {
      return std::vector<rlx::Value>{ct[0] * a.attrs.get_float("alpha"),
                                     ct[0] * a.attrs.get_float("beta")};
    };
    axpby.jvp = rlx::rules::linear_jvp;
    // Both operands must have one type, so an unbatched one is given the batch too.
    axpby.vmap = [](const rlx::RuleArgs& a, std::span<const int> in_axes) {
      auto ins = rlx::rules::all_batched_front(a, in_axes);
      return rlx::VmapResult{rlx::rules::reapply(a, ins), {0}};
    };
    rlx::OpRegistry::global().add(std::move(axpby));
  });
}

}  // namespace example
