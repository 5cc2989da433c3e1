#include "frontend/onnx/late.h"

#include <onnx/onnx_pb.h>

#include "frontend/onnx/scope.h"
#include "rlx/kernel.h"
#include "rlx/session.h"

namespace rlx::onnx_import {

namespace {

struct OutType {
  DType dtype;
  int64_t rank;
};

// Static length of a rank-1 input (what axes / shape inputs are).
int64_t length_of(const NodeContext& ctx, size_t i) {
  const Shape& s = ctx.input(i).shape();
  if (s.size() != 1 || !s[0].is_static())
    ctx.unsupported("expected input ", i, " of static length to convert it at run time, got ",
                    ctx.input(i).type().str());
  return s[0].value();
}

// The dtype and rank of each output, from input types alone, for the ops whose
// shape-determining inputs are commonly computed at run time.
std::optional<std::vector<OutType>> late_types(const NodeContext& ctx) {
  const std::string& op = ctx.op_type();
  DType xt = ctx.input(0).dtype();
  int64_t xr = ctx.input(0).rank();
  auto same = [&](size_t n) { return std::vector<OutType>(n, OutType{xt, xr}); };
  if (op == "Reshape") return std::vector<OutType>{{xt, length_of(ctx, 1)}};
  if (op == "Expand") return std::vector<OutType>{{xt, std::max(xr, length_of(ctx, 1))}};
  if (op == "ConstantOfShape") {
    DType t = DType::f32;
    if (auto v = ctx.attr_tensor("value")) t = v->dtype();
    return std::vector<OutType>{{t, length_of(ctx, 0)}};
  }
  if (op == "Tile" || op == "Slice" || op == "Pad" || op == "CumSum" || op == "Resize" ||
      op == "Upsample" || op == "Clip")
    return same(1);
  if (op == "TopK") return std::vector<OutType>{{xt, xr}, {DType::i64, xr}};
  if (op == "Split") return same(ctx.num_outputs());
  if (op == "Range") return std::vector<OutType>{{xt, 1}};
  if (op == "OneHot") return std::vector<OutType>{{ctx.input(2).dtype(), xr + 1}};
  if (op == "Squeeze" && ctx.has_input(1))
    return std::vector<OutType>{{xt, xr - length_of(ctx, 1)}};
  if (op == "Unsqueeze") return std::vector<OutType>{{xt, xr + length_of(ctx, 1)}};
  if (op.rfind("Reduce", 0) == 0 && ctx.has_input(1)) {
    int64_t n = length_of(ctx, 1);
    bool keep = ctx.attr_int("keepdims", 1) != 0;
    if (n == 0)
      return std::vector<OutType>{{xt, (keep || ctx.attr_int("noop_with_empty_axes", 0)) ? xr : 0}};
    return std::vector<OutType>{{xt, keep ? xr : xr - n}};
  }
  return std::nullopt;
}

std::string hex_encode(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string hex_decode(const std::string& text) {
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() % 2) fail<ValueError>("onnx.late", "expected hex text of even length");
  std::string out(text.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = val(text[2 * i]), lo = val(text[2 * i + 1]);
    if (hi < 0 || lo < 0) fail<ValueError>("onnx.late", "expected hex digits in attribute 'node'");
    out[i] = char(hi * 16 + lo);
  }
  return out;
}

std::vector<TensorType> infer_late(const InferContext& ctx) {
  const IntList& dtypes = ctx.attrs().get_ints("dtypes");
  const IntList& ranks = ctx.attrs().get_ints("ranks");
  if (dtypes.size() != ranks.size())
    ctx.fail("expected as many dtypes as ranks, got ", dtypes.size(), " and ", ranks.size());
  std::vector<TensorType> out;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (dtypes[i] < 0 || dtypes[i] > int64_t(DType::boolean) || ranks[i] < 0)
      ctx.fail("expected a dtype code and a rank >= 0 for output ", i);
    out.push_back({DType(dtypes[i]), Shape(size_t(ranks[i]), Dim::unknown())});
  }
  return out;
}

void late_kernel(const KernelContext& kc, std::span<const Tensor> in, std::span<Tensor> out) {
  ::onnx::NodeProto node;
  std::string bytes = hex_decode(kc.attrs.get_string("node"));
  if (!node.ParseFromString(bytes))
    fail<ValueError>("onnx.late", "expected a serialized NodeProto in attribute 'node'");
  const IntList& slots = kc.attrs.get_ints("slots");
  ImportState state;
  state.opsets[node.domain() == "ai.onnx" ? "" : node.domain()] = kc.attrs.get_int("opset");
  Graph g("late");
  Scope scope(state, g, nullptr);
  for (size_t s = 0; s < slots.size() && int(s) < node.input_size(); ++s)
    if (slots[s] >= 0) {
      if (size_t(slots[s]) >= in.size())
        fail<ValueError>("onnx.late", "expected input ", slots[s], ", got ", in.size(), " inputs");
      scope.define(node.input(int(s)), g.constant(in[size_t(slots[s])].to_literal()));
    }
  convert_node(scope, node);
  size_t j = 0;
  for (int i = 0; i < node.output_size() && j < out.size(); ++i) {
    if (node.output(i).empty()) continue;
    g.output(scope.lookup(node.output(i), "onnx.late"));
    ++j;
  }
  CompileOptions options;
  options.threads = 1;
  std::vector<Tensor> res = Session(Device::cpu()).compile(g, options).run(std::vector<Tensor>{});
  for (size_t k = 0; k < out.size() && k < res.size(); ++k) out[k] = res[k].contiguous();
}

}  // namespace

std::vector<Value> convert_late(NodeContext& ctx, size_t needed_input) {
  auto types = late_types(ctx);
  if (!types)
    ctx.unsupported("expected input ", needed_input, " ('", ctx.proto().input(int(needed_input)),
                    "') to be known at import time, got a value computed at run time");
  IntList slots, dtypes, ranks;
  std::vector<Value> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) {
      slots.push_back(-1);
      continue;
    }
    slots.push_back(int64_t(inputs.size()));
    inputs.push_back(ctx.input(i));
  }
  // Outputs in node order, skipping the empty slots (which stay absent).
  std::vector<size_t> present;
  for (size_t i = 0; i < ctx.num_outputs() && i < types->size(); ++i)
    if (ctx.has_output(i)) present.push_back(i);
  for (size_t i : present) {
    dtypes.push_back(int64_t((*types)[i].dtype));
    ranks.push_back((*types)[i].rank);
  }
  std::string bytes;
  ctx.proto().SerializeToString(&bytes);
  Attrs attrs{{"node", hex_encode(bytes)},
              {"opset", ctx.opset()},
              {"slots", slots},
              {"dtypes", dtypes},
              {"ranks", ranks}};
  std::vector<Value> made = ctx.graph().apply("onnx.late", inputs, attrs);
  std::vector<Value> outs(ctx.num_outputs());
  for (size_t k = 0; k < present.size(); ++k) outs[present[k]] = made[k];
  return outs;
}

void register_late_op() {
  OpDef d;
  d.name = "onnx.late";
  d.traits = Trait::nondifferentiable;
  d.arity(0, kVariadic)
      .attr("node", AttrKind::String)
      .attr("opset", AttrKind::Int)
      .attr("slots", AttrKind::Ints)
      .attr("dtypes", AttrKind::Ints)
      .attr("ranks", AttrKind::Ints);
  d.infer = infer_late;
  d.doc = "An ONNX node converted at run time, once the inputs that fix its shapes are known.";
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.late", DeviceKind::cpu, late_kernel);
}

}  // namespace rlx::onnx_import
