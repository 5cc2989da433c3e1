// ONNX converters: RNN, GRU, LSTM, as onnx.rnn / onnx.gru / onnx.lstm (ops/rnn.cpp). The
// converter resolves the defaults (hidden_size, activations and their alpha / beta), moves
// layout 1 to layout 0 and back, and computes f16 / bf16 layers in f32.
#include <algorithm>
#include <cctype>

#include "frontend/onnx/context.h"
#include "frontend/onnx/ops/rnn.h"

namespace rlx::onnx_import {

namespace {

struct CellSpec {
  const char* op;
  int64_t gates;
  std::vector<std::string> default_acts;  // per direction
  size_t max_inputs;                      // ONNX inputs
};

// Functions that read alpha / beta, and their defaults (as onnxruntime).
struct ActDefault {
  const char* name;
  int uses;  // 0 none, 1 alpha, 2 alpha and beta
  double alpha, beta;
};
constexpr ActDefault kActDefaults[] = {
    {"affine", 2, 1.0, 0.0},     {"leakyrelu", 1, 0.01, 0.0},  {"thresholdedrelu", 1, 1.0, 0.0},
    {"scaledtanh", 2, 1.0, 1.0}, {"hardsigmoid", 2, 0.2, 0.5}, {"elu", 1, 1.0, 0.0},
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Value transpose(NodeContext& ctx, Value v, IntList perm) {
  return ctx.apply1("transpose", {v}, {{"perm", std::move(perm)}});
}

std::vector<Value> convert_recurrent(NodeContext& ctx, const CellSpec& spec) {
  Value x = ctx.input(0);
  DType dt = x.dtype();
  if (!is_float(dt)) ctx.fail_type("expected X of a float dtype, got ", x.type().str());
  DType cd = dt == DType::f64 ? DType::f64 : DType::f32;  // f16 / bf16 computed in f32
  int64_t layout = ctx.attr_int("layout", 0);
  if (layout != 0 && layout != 1) ctx.fail("expected layout 0 or 1, got ", layout);
  std::string dir = ctx.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    ctx.fail("expected direction forward, reverse or bidirectional, got '", dir, "'");
  int64_t dirs = dir == "bidirectional" ? 2 : 1;

  Value r = ctx.input(2);
  int64_t hidden = ctx.attr_int("hidden_size", -1);
  if (hidden < 0) {
    if (r.rank() != 3 || !r.shape()[2].is_static())
      ctx.fail("expected hidden_size, or R of static shape [dirs, gates*hidden, hidden], got ",
               r.type().str());
    hidden = r.shape()[2].value();
  }

  // Activations: one list for all directions; a single direction's list serves both.
  std::vector<std::string> acts = ctx.attr_strings("activations");
  size_t per_dir = spec.default_acts.size();
  if (acts.empty())
    for (int64_t d = 0; d < dirs; ++d)
      acts.insert(acts.end(), spec.default_acts.begin(), spec.default_acts.end());
  else if (dirs == 2 && acts.size() == per_dir)
    acts.insert(acts.end(), acts.begin(), acts.end());
  if (acts.size() != per_dir * size_t(dirs))
    ctx.fail("expected ", per_dir * size_t(dirs), " activations, got ", acts.size());
  // alpha / beta are consumed in order by the functions that read them.
  std::vector<double> alpha_in = ctx.attr_floats("activation_alpha"),
                      beta_in = ctx.attr_floats("activation_beta");
  size_t ia = 0, ib = 0;
  FloatList alpha, beta;
  std::string names;
  for (const std::string& a : acts) {
    names += (names.empty() ? "" : ",") + a;
    std::string n = lower(a);
    const ActDefault* def = nullptr;
    for (const ActDefault& d : kActDefaults)
      if (n == d.name) def = &d;
    double al = def ? def->alpha : 0.0, be = def ? def->beta : 0.0;
    if (def && def->uses >= 1 && ia < alpha_in.size()) al = alpha_in[ia++];
    if (def && def->uses >= 2 && ib < beta_in.size()) be = beta_in[ib++];
    alpha.push_back(al);
    beta.push_back(be);
  }

  Attrs attrs{{"hidden_size", hidden},
              {"direction", dir},
              {"activations", names},
              {"activation_alpha", alpha},
              {"activation_beta", beta},
              {"clip", ctx.has_attr("clip") ? ctx.attr_float("clip", 0.0) : 0.0}};
  if (spec.gates == 3)
    attrs.set("linear_before_reset", ctx.attr_int("linear_before_reset", 0) != 0);
  if (spec.gates == 4) attrs.set("input_forget", ctx.attr_int("input_forget", 0) != 0);

  std::vector<Value> inputs;
  IntList slots;
  for (size_t i = 0; i < std::min(ctx.num_inputs(), spec.max_inputs); ++i) {
    if (!ctx.has_input(i)) continue;
    Value v = ctx.input(i);
    if (i == 4) {  // sequence_lens
      if (!is_integer(v.dtype()))
        ctx.fail_type("expected sequence_lens of an integer dtype, got ", v.type().str());
    } else {
      if (!is_float(v.dtype()))
        ctx.fail_type("expected input ", i, " of a float dtype, got ", v.type().str());
      v = ctx.cast(v, cd);
    }
    // Layout 1: X [batch, seq, input], initial_h / initial_c [batch, dirs, hidden].
    if (layout == 1 && (i == 0 || i == 5 || i == 6)) v = transpose(ctx, v, {1, 0, 2});
    inputs.push_back(v);
    slots.push_back(int64_t(i));
  }
  attrs.set("slots", slots);
  std::vector<Value> outs = ctx.apply(spec.op, inputs, attrs);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (layout == 1)
      outs[i] = transpose(ctx, outs[i], i == 0 ? IntList{2, 0, 1, 3} : IntList{1, 0, 2});
    outs[i] = ctx.cast(outs[i], dt);
  }
  outs.resize(std::max(ctx.num_outputs(), size_t(1)));
  return outs;
}

}  // namespace

void register_sequence_model_converters() {
  register_rnn_onnx_ops();
  static const CellSpec kRnn{"onnx.rnn", 1, {"Tanh"}, 6};
  static const CellSpec kGru{"onnx.gru", 3, {"Sigmoid", "Tanh"}, 6};
  static const CellSpec kLstm{"onnx.lstm", 4, {"Sigmoid", "Tanh", "Tanh"}, 8};
  add_converter("", "RNN", [](NodeContext& ctx) { return convert_recurrent(ctx, kRnn); });
  add_converter("", "GRU", [](NodeContext& ctx) { return convert_recurrent(ctx, kGru); });
  add_converter("", "LSTM", [](NodeContext& ctx) { return convert_recurrent(ctx, kLstm); });
}

}  // namespace rlx::onnx_import
