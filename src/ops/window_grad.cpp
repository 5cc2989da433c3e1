// Backward ops of the sliding-window ops (pools, resize) whose vjp is not a composition
// of other core ops. Each takes the forward input x (for its windows or its shape) and a
// tensor v it is linear in, with the forward op's attributes:
//   max_pool_grad(x, ct)   -> x's shape: ct scattered to each window's argmax in x;
//   max_pool_gather(x, u)  -> max_pool(x)'s shape: u at each window's argmax in x;
//   avg_pool_grad(x, ct)   -> x's shape: ct / divisor spread over each window;
//   resize_grad(x, ct)     -> x's shape: the transpose of resize (nearest or linear).
#include "ops/families.h"
#include "ops/infer_util.h"
#include "ops/window_rules.h"

namespace rlx::detail {

namespace {

struct GradSpec {
  const char* name;
  const char* forward;     // the op whose attributes and windows it shares
  const char* transposed;  // its adjoint in v (its vjp w.r.t. v)
  bool transposed_with_x;  // the adjoint takes (x, ct) rather than ct alone
  bool to_input;           // the output has x's type (else the forward output's)
  VmapResult (*vmap)(const RuleArgs&, std::span<const int>);
  const char* doc;
};

const GradSpec kSpecs[] = {
    {"max_pool_grad", "max_pool", "max_pool_gather", true, true, pool_vmap,
     "The vjp of max_pool: ct [N, C, O...] added at the first maximum of each window of "
     "x [N, C, D...]."},
    {"max_pool_gather", "max_pool", "max_pool_grad", true, false, pool_vmap,
     "u [N, C, D...] read at the first maximum of each window of x: the jvp of max_pool."},
    {"avg_pool_grad", "avg_pool", "avg_pool", false, true, pool_vmap,
     "The vjp of avg_pool: ct [N, C, O...] spread evenly over the windows of x [N, C, D...] "
     "(x gives only the shape)."},
    {"resize_grad", "resize", "resize", false, true, resize_vmap,
     "The vjp of resize: ct accumulated back onto the input positions each output sampled "
     "(x gives only the shape)."},
};

// v (input 1) must have the shape `want` (`role`); fails otherwise.
void expect_shape(const InferContext& ctx, const Shape& want, std::string_view role) {
  if (ctx.rank(1) != int64_t(want.size()))
    ctx.fail("expected input 1 of shape ", shape_str(want), " (", role, "), got ",
             ctx.input(1).str());
  for (size_t d = 0; d < want.size(); ++d)
    unify_dims(ctx, want[d], ctx.shape(1)[d], str_cat("dims of input 1 and ", role));
}

// The forward op's output type for x, its errors reported under this op's name.
TensorType forward_type(const InferContext& ctx, const OpDef& fwd) {
  auto own = [&](const Error& e) {  // "[fwd] message" -> "message"
    std::string m = e.what();
    size_t at = m.find("] ");
    return at == std::string::npos ? m : m.substr(at + 2);
  };
  try {
    return infer_types(fwd, ctx.inputs().first(1), ctx.attrs(), {})[0];
  } catch (const TypeError& e) {
    ctx.fail_type(own(e));
  } catch (const ValueError& e) {
    ctx.fail(own(e));
  }
}

}  // namespace

void register_window_grad_ops(OpRegistry& r) {
  for (const GradSpec& s : kSpecs) {
    const OpDef& fwd = r.get(s.forward);
    OpDef d;
    d.name = s.name;
    d.arity(2);
    d.attrs = fwd.attrs;
    d.doc = s.doc;
    d.infer = [&fwd, s](const InferContext& ctx) {
      expect_float(ctx, 0);
      expect_same_dtype(ctx, 0, 1);
      TensorType y = forward_type(ctx, fwd);
      if (s.to_input) {
        expect_shape(ctx, y.shape, str_cat(s.forward, "'s output"));
        return std::vector<TensorType>{ctx.input(0)};
      }
      expect_shape(ctx, ctx.shape(0), "x");
      return std::vector<TensorType>{y};
    };
    d.vjp = window_grad_vjp(s.transposed, s.transposed_with_x);
    d.jvp = window_grad_jvp;
    d.vmap = s.vmap;
    r.add(std::move(d));
  }
}

}  // namespace rlx::detail
