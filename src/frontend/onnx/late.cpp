#include "frontend/onnx/late.h"

#include <onnx/onnx_pb.h>

#include <mutex>
#include <unordered_map>

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

// Inputs up to this many elements are what converters read as constants (shapes, axes,
// pads, scales): they are baked into the graph built at run time. Larger ones stay its
// inputs, so one compiled graph serves every run with the same small values and shapes.
constexpr int64_t kSmallInput = 64;

struct LateProgram {
  CompiledGraph compiled;
  std::vector<size_t> inputs;  // which node inputs the compiled graph takes, in order
};

// Converts `node` with the small inputs (or all of them) as constants and compiles it.
std::shared_ptr<LateProgram> build(const ::onnx::NodeProto& node, int64_t opset,
                                   const IntList& slots, std::span<const Tensor> in,
                                   bool all_constant, size_t num_outputs) {
  ImportState state;
  state.opsets[node.domain() == "ai.onnx" ? "" : node.domain()] = opset;
  state.at_run_time = true;
  Graph g("late");
  Scope scope(state, g, nullptr);
  auto prog = std::make_shared<LateProgram>();
  for (size_t s = 0; s < slots.size() && int(s) < node.input_size(); ++s) {
    if (slots[s] < 0) continue;
    if (size_t(slots[s]) >= in.size())
      fail<ValueError>("onnx.late", "expected input ", slots[s], ", got ", in.size(), " inputs");
    const Tensor& t = in[size_t(slots[s])];
    Value v;
    if (all_constant || t.numel() <= kSmallInput) {
      v = g.constant(t.to_literal());
    } else {
      v = g.input(str_cat("x", s), t.type());
      prog->inputs.push_back(size_t(slots[s]));
    }
    scope.define(node.input(int(s)), v);
  }
  convert_node(scope, node);
  size_t j = 0;
  for (int i = 0; i < node.output_size() && j < num_outputs; ++i) {
    if (node.output(i).empty()) continue;
    g.output(scope.lookup(node.output(i), "onnx.late"));
    ++j;
  }
  CompileOptions options;
  options.threads = 1;
  prog->compiled = Session(Device::cpu()).compile(g, options);
  return prog;
}

// Programs by (node, opset, input types, small inputs' bytes).
struct LateCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<LateProgram>> map;
};

LateCache& late_cache() {
  static LateCache c;
  return c;
}

void late_kernel(const KernelContext& kc, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& hex = kc.attrs.get_string("node");
  ::onnx::NodeProto node;
  if (!node.ParseFromString(hex_decode(hex)))
    fail<ValueError>("onnx.late", "expected a serialized NodeProto in attribute 'node'");
  const IntList& slots = kc.attrs.get_ints("slots");
  int64_t opset = kc.attrs.get_int("opset");
  std::string key = str_cat(hex, "/", opset);
  for (const Tensor& t : in) {
    key += '|';
    key += t.type().str();
    if (t.numel() <= kSmallInput) {
      Tensor c = t.contiguous();
      key.append(static_cast<const char*>(c.data()), c.nbytes());
    }
  }
  LateCache& cache = late_cache();
  std::shared_ptr<LateProgram> prog;
  {
    std::lock_guard lock(cache.mu);
    if (auto it = cache.map.find(key); it != cache.map.end()) prog = it->second;
  }
  if (!prog) {
    try {
      prog = build(node, opset, slots, in, false, out.size());
    } catch (const NeedsConstant&) {
      // The converter reads a large input's contents: every input becomes a constant,
      // and the program serves this run only.
      prog = build(node, opset, slots, in, true, out.size());
      key.clear();
    }
    if (!key.empty()) {
      std::lock_guard lock(cache.mu);
      if (cache.map.size() >= 256) cache.map.clear();
      cache.map.emplace(key, prog);
    }
  }
  std::vector<Tensor> args;
  for (size_t i : prog->inputs) args.push_back(in[i]);
  std::vector<Tensor> res = prog->compiled.run(std::span<const Tensor>(args));
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
