// Optimizer updates emitted as graph ops, following torch.optim's single-tensor code
// paths step for step. Scalars that torch computes as Python floats (bias corrections,
// step sizes) are computed here in f64 and cast to the param's dtype once.
#include <cmath>

#include "rlx/ops.h"
#include "rlx/train.h"

namespace rlx::train {

namespace {

Value to(Value v, DType dt) { return v.dtype() == dt ? v : cast(v, dt); }

// A state slot of `param`, declared as a param of g: "<opt>.<slot>.<param>".
std::pair<std::string, Value> state(Graph& g, const std::string& opt, const std::string& slot,
                                    const std::string& param_name, Value param) {
  std::string name = opt + "." + slot + "." + param_name;
  return {name, g.param(name, param.type())};
}

void check_args(const char* where, Value param, Value grad) {
  if (!is_float(param.dtype()))
    fail<TypeError>(where, "expected a float param, got ", param.type().str());
  if (grad.type() != param.type())
    fail<TypeError>(where, "expected a gradient of type ", param.type().str(), ", got ",
                    grad.type().str());
}

void check_nonneg(const char* where, const char* what, double v) {
  if (!(v >= 0)) fail<ValueError>(where, "expected ", what, " >= 0, got ", v);
}

// Adam and AdamW: the same moments and bias corrections; the weight decay differs.
Update emit_adam(Graph& g, const std::string& opt, double beta1, double beta2, double eps,
                 double weight_decay, bool decoupled, const std::string& param_name, Value p,
                 Value grad, const StepScalars& s) {
  std::string where = "train." + opt;
  check_args(where.c_str(), p, grad);
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    fail<ValueError>(where, "expected betas in [0, 1), got (", beta1, ", ", beta2, ")");
  check_nonneg(where.c_str(), "eps", eps);
  check_nonneg(where.c_str(), "weight_decay", weight_decay);
  DType dt = p.dtype();
  if (weight_decay != 0) {
    if (decoupled)
      p = p * to(1.0 - s.lr * weight_decay, dt);  // param.mul_(1 - lr * weight_decay)
    else
      grad = grad + p * weight_decay;  // grad.add(param, alpha=weight_decay)
  }
  auto [m_name, m] = state(g, opt, "m", param_name, p);
  auto [v_name, v] = state(g, opt, "v", param_name, p);
  // exp_avg.lerp_(grad, 1 - beta1): torch's lerp picks its form by the weight.
  double w = 1.0 - beta1;
  Value m_new = w < 0.5 ? m + (grad - m) * w : grad - (grad - m) * (1.0 - w);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  Value v_new = v * beta2 + grad * (1.0 - beta2) * grad;
  Value bc1 = 1.0 - op("pow", {scalar_like(s.step, beta1), s.step});
  Value bc2 = 1.0 - op("pow", {scalar_like(s.step, beta2), s.step});
  Value step_size = s.lr / bc1;
  Value bc2_sqrt = op("sqrt", {bc2});
  Value denom = op("sqrt", {v_new}) / to(bc2_sqrt, dt) + eps;
  Value p_new = p - to(step_size, dt) * (m_new / denom);  // addcdiv_(m, denom, -step_size)
  return {p_new, {{m_name, m_new}, {v_name, v_new}}};
}

}  // namespace

Update SGD::emit(Graph& g, const std::string& param_name, Value p, Value grad,
                 const StepScalars& s) const {
  check_args("train.sgd", p, grad);
  check_nonneg("train.sgd", "momentum", momentum);
  check_nonneg("train.sgd", "weight_decay", weight_decay);
  if (nesterov && (momentum <= 0 || dampening != 0))
    fail<ValueError>("train.sgd", "expected momentum > 0 and dampening 0 for nesterov, got ",
                     "momentum ", momentum, ", dampening ", dampening);
  DType dt = p.dtype();
  Update u;
  Value d = weight_decay != 0 ? grad + p * weight_decay : grad;
  if (momentum != 0) {
    auto [slot, buf] = state(g, name(), "momentum", param_name, p);
    // The first step takes the gradient as the buffer (no dampening), as torch does.
    Value first = op("eq", {s.step, scalar_like(s.step, 1.0)});
    Value later = buf * momentum + d * (1.0 - dampening);
    Value buf_new = op("select", {first, d, later});
    u.state.emplace_back(slot, buf_new);
    d = nesterov ? d + buf_new * momentum : buf_new;
  }
  u.param = p - to(s.lr, dt) * d;  // param.add_(d, alpha=-lr)
  return u;
}

Update Adam::emit(Graph& g, const std::string& param_name, Value p, Value grad,
                  const StepScalars& s) const {
  return emit_adam(g, name(), beta1, beta2, eps, weight_decay, false, param_name, p, grad, s);
}

Update AdamW::emit(Graph& g, const std::string& param_name, Value p, Value grad,
                   const StepScalars& s) const {
  return emit_adam(g, name(), beta1, beta2, eps, weight_decay, true, param_name, p, grad, s);
}

}  // namespace rlx::train
