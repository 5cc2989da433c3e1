// Builder conveniences: free functions and operators over Values (MLX-like). Each call
// adds one node to the values' graph; scalars become constants of the other operand's
// dtype. For any registered op, op("name", {inputs}, attrs) works too.
#pragma once

#include <vector>

#include "rlx/graph.h"

namespace rlx {

// Applies a registered op in the graph of the first input; returns all outputs.
std::vector<Value> op_n(std::string_view name, std::vector<Value> inputs, Attrs attrs = {});
// Applies a registered op with one output.
Value op(std::string_view name, std::vector<Value> inputs, Attrs attrs = {});

// A scalar constant of `like`'s dtype in `like`'s graph.
Value scalar_like(Value like, double v);
// Casts a and b to their promoted dtype (promote_types), adding casts only where needed.
std::pair<Value, Value> promote(Value a, Value b);

Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator-(Value a);
Value operator+(Value a, double b);
Value operator-(Value a, double b);
Value operator*(Value a, double b);
Value operator/(Value a, double b);
Value operator+(double a, Value b);
Value operator-(double a, Value b);
Value operator*(double a, Value b);
Value operator/(double a, Value b);

Value matmul(Value a, Value b);
Value relu(Value x);
Value gelu(Value x, bool tanh_approx = false);
Value exp(Value x);
Value log(Value x);
Value tanh(Value x);
Value sigmoid(Value x);
Value softmax(Value x, int64_t axis = -1);
Value sum(Value x, IntList axes = {}, bool keepdims = false);
Value mean(Value x, IntList axes = {}, bool keepdims = false);
Value reshape(Value x, IntList shape);
Value transpose(Value x, IntList perm = {});
Value cast(Value x, DType dtype);

}  // namespace rlx
