#include "rlx/error.h"
#include "rlx/ops.h"

namespace rlx {

std::vector<Value> op_n(std::string_view name, std::vector<Value> inputs, Attrs attrs) {
  if (inputs.empty() || !inputs[0].valid())
    fail<ValueError>(name, "expected at least one valid input to find the graph, got none");
  return inputs[0].graph->apply(name, std::move(inputs), std::move(attrs));
}

Value op(std::string_view name, std::vector<Value> inputs, Attrs attrs) {
  if (inputs.empty() || !inputs[0].valid())
    fail<ValueError>(name, "expected at least one valid input to find the graph, got none");
  return inputs[0].graph->apply1(name, std::move(inputs), std::move(attrs));
}

Value scalar_like(Value like, double v) {
  return like.graph->constant(Literal::scalar(like.dtype(), v));
}

Value cast(Value x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return op("cast", {x}, {{"dtype", dtype}});
}

std::pair<Value, Value> promote(Value a, Value b) {
  DType t = promote_types(a.dtype(), b.dtype());
  return {cast(a, t), cast(b, t)};
}

namespace {
Value binary(std::string_view name, Value a, Value b) {
  auto [x, y] = promote(a, b);
  return op(name, {x, y});
}
}  // namespace

Value operator+(Value a, Value b) { return binary("add", a, b); }
Value operator-(Value a, Value b) { return binary("sub", a, b); }
Value operator*(Value a, Value b) { return binary("mul", a, b); }
Value operator/(Value a, Value b) { return binary("div", a, b); }
Value operator-(Value a) { return op("neg", {a}); }
Value operator+(Value a, double b) { return a + scalar_like(a, b); }
Value operator-(Value a, double b) { return a - scalar_like(a, b); }
Value operator*(Value a, double b) { return a * scalar_like(a, b); }
Value operator/(Value a, double b) { return a / scalar_like(a, b); }
Value operator+(double a, Value b) { return scalar_like(b, a) + b; }
Value operator-(double a, Value b) { return scalar_like(b, a) - b; }
Value operator*(double a, Value b) { return scalar_like(b, a) * b; }
Value operator/(double a, Value b) { return scalar_like(b, a) / b; }

Value matmul(Value a, Value b) { return binary("matmul", a, b); }
Value relu(Value x) { return op("relu", {x}); }
Value gelu(Value x, bool tanh_approx) {
  return op("gelu", {x}, {{"approximate", tanh_approx ? "tanh" : "none"}});
}
Value exp(Value x) { return op("exp", {x}); }
Value log(Value x) { return op("log", {x}); }
Value tanh(Value x) { return op("tanh", {x}); }
Value sigmoid(Value x) { return op("sigmoid", {x}); }
Value softmax(Value x, int64_t axis) { return op("softmax", {x}, {{"axis", axis}}); }
Value sum(Value x, IntList axes, bool keepdims) {
  return op("sum", {x}, {{"axes", std::move(axes)}, {"keepdims", keepdims}});
}
Value mean(Value x, IntList axes, bool keepdims) {
  return op("mean", {x}, {{"axes", std::move(axes)}, {"keepdims", keepdims}});
}
Value reshape(Value x, IntList shape) { return op("reshape", {x}, {{"shape", std::move(shape)}}); }
Value transpose(Value x, IntList perm) { return op("transpose", {x}, {{"perm", std::move(perm)}}); }

}  // namespace rlx
