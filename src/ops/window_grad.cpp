// Backward ops of the sliding-window ops (pools, resize) whose vjp is not a composition
// of other core ops, with their inference and rules. Each takes the forward input x (for
// its windows or its shape) and a tensor v it is linear in, with the forward op's
// attributes:
//   max_pool_grad(x, ct)   -> x's shape: ct scattered to each window's argmax in x;
//   max_pool_gather(x, u)  -> max_pool(x)'s shape: u at each window's argmax in x;
//   avg_pool_grad(x, ct)   -> x's shape: ct / divisor spread over each window;
//   resize_grad(x, ct)     -> x's shape: the transpose of resize (nearest or linear).
#include "ops/families.h"
#include "ops/infer_util.h"
#include "rlx/ops.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

struct GradSpec {
  const char* name;
  const char* forward;             // the op whose attributes, windows and vmap it shares
  const char* transposed;          // its adjoint in v (its vjp w.r.t. v)
  bool transposed_with_x = false;  // the adjoint takes (x, ct) rather than ct alone
  bool to_input = false;           // the output has x's type (else the forward output's)
  const char* doc;
};

const GradSpec kSpecs[] = {
    {.name = "max_pool_grad",
     .forward = "max_pool",
     .transposed = "max_pool_gather",
     .transposed_with_x = true,
     .to_input = true,
     .doc = "The vjp of max_pool: ct [N, C, O...] added at the first maximum of each window of "
            "x [N, C, D...]."},
    {.name = "max_pool_gather",
     .forward = "max_pool",
     .transposed = "max_pool_grad",
     .transposed_with_x = true,
     .doc = "u [N, C, D...] read at the first maximum of each window of x: the jvp of max_pool."},
    {.name = "avg_pool_grad",
     .forward = "avg_pool",
     .transposed = "avg_pool",
     .to_input = true,
     .doc = "The vjp of avg_pool: ct [N, C, O...] spread evenly over the windows of x [N, C, "
            "D...] (x gives only the shape)."},
    {.name = "resize_grad",
     .forward = "resize",
     .transposed = "resize",
     .to_input = true,
     .doc = "The vjp of resize: ct accumulated back onto the input positions each output "
            "sampled (x gives only the shape)."},
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

// ---- rules -----------------------------------------------------------------------------

// f(x, v) is linear in v and piecewise constant in x. vjp: `transposed` (the adjoint in v,
// with the same attributes) applied to the cotangent — as (x, ct) when `with_x`, else to
// the cotangent alone; none for x.
VjpFn window_grad_vjp(std::string transposed, bool with_x) {
  return [transposed, with_x](const RuleArgs& a, std::span<const Value> cts) {
    Value x = a.inputs[0], ct = cts[0];
    Value v = with_x ? op(transposed, {x, ct}, a.attrs) : op(transposed, {ct}, a.attrs);
    return std::vector<Value>{Value{}, rules::reshape_like(v, a.inputs[1])};
  };
}

// jvp: the op again on v's tangent.
std::vector<Value> window_grad_jvp(const RuleArgs& a, std::span<const Value> t) {
  if (!t[1].valid()) return {Value{}};
  return {op(rules::rule_op_name(a), {a.inputs[0], t[1]}, a.attrs)};
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
    // The forward's vmap (pools: every input merged into N; resize: the batch a leading
    // dim of scale 1) takes the two inputs the same way.
    d.vmap = fwd.vmap;
    r.add(std::move(d));
  }
}

}  // namespace rlx::detail
