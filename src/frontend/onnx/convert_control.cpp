// ONNX converters: If (core `cond`, onnx.if where the branches' dims differ, or the taken
// branch inlined when the condition is known at import), Loop (onnx.loop) and Scan
// (onnx.scan). Outer values a body reads become extra operands (captures).
#include <onnx/onnx_pb.h>

#include "frontend/onnx/ops/control.h"
#include "frontend/onnx/proto.h"
#include "frontend/onnx/scope.h"

namespace rlx::onnx_import {

namespace {

struct Body {
  std::shared_ptr<Graph> graph;
  std::vector<Value> captures;
};

// Builds `body` as a closed graph with args: `declared` (one per ONNX input), then
// `extra` (placeholders another branch needs), then the captures it finds.
Body build_body(NodeContext& ctx, const ::onnx::GraphProto& body,
                const std::vector<TensorType>& declared, const std::vector<TensorType>& extra) {
  auto g = std::make_shared<Graph>(sanitize(body.name().empty() ? "body" : body.name()));
  Scope inner(ctx.scope().state(), *g, &ctx.scope());
  for (const auto& t : body.initializer())
    inner.define(
        t.name(),
        g->constant(tensor_from_proto(t, ctx.scope().state().base_dir, ctx.where()).to_literal()));
  if (size_t(body.input_size()) != declared.size())
    ctx.fail("expected a body of ", declared.size(), " inputs, got ", body.input_size());
  for (int i = 0; i < body.input_size(); ++i)
    inner.define(body.input(i).name(),
                 g->input(inner.arg_name(body.input(i).name()), declared[size_t(i)]));
  for (size_t i = 0; i < extra.size(); ++i)
    g->input(inner.arg_name(str_cat("unused_", i)), extra[i]);
  inner.convert_nodes(body);
  for (const auto& o : body.output())
    g->output(inner.lookup(o.name(), ctx.where()), sanitize(o.name()));
  return {g, inner.captures()};
}

std::vector<TensorType> types_of(const std::vector<Value>& vs) {
  std::vector<TensorType> out;
  for (Value v : vs) out.push_back(v.type());
  return out;
}

std::vector<TensorType> output_types(const Graph& g) {
  std::vector<TensorType> out;
  for (const auto& o : g.outputs()) out.push_back(g.type(o.value));
  return out;
}

bool returns_packed(const ::onnx::GraphProto& g) {
  for (const auto& o : g.output())
    if (o.type().has_sequence_type() || o.type().has_optional_type()) return true;
  return false;
}

// An If whose branches return sequences or optionals (lists the importer holds): both
// branches are computed and each element selected by the condition. Both must give lists
// of one length and element types.
std::vector<Value> select_branches(NodeContext& ctx, Value pred, const ::onnx::GraphProto& then_g,
                                   const ::onnx::GraphProto& else_g) {
  std::vector<std::optional<Packed>> tp, ep;
  std::vector<Value> t = ctx.inline_subgraph(then_g, {}, &tp);
  std::vector<Value> e = ctx.inline_subgraph(else_g, {}, &ep);
  tp.resize(t.size());
  ep.resize(e.size());
  if (t.size() != e.size()) ctx.fail("expected branches with one number of outputs");
  auto pick = [&](Value a, Value b) {
    if (a.type() != b.type())
      ctx.unsupported("expected branch outputs of one type, got ", a.type().str(), " and ",
                      b.type().str());
    return ctx.apply1("select", {pred, a, b});
  };
  std::vector<Value> out(t.size());
  for (size_t j = 0; j < t.size(); ++j) {
    if (!tp[j] && !ep[j]) {
      out[j] = pick(t[j], e[j]);
      continue;
    }
    if (!tp[j] || !ep[j] || tp[j]->sequence != ep[j]->sequence ||
        tp[j]->has_value != ep[j]->has_value || tp[j]->elems.size() != ep[j]->elems.size())
      ctx.unsupported("expected both branches to give output ", j,
                      " as sequences / optionals of one length, decided at run time");
    Packed p = *tp[j];
    for (size_t k = 0; k < p.elems.size(); ++k) p.elems[k] = pick(tp[j]->elems[k], ep[j]->elems[k]);
    ctx.set_packed_output(j, p);
  }
  return out;
}

std::vector<Value> convert_if(NodeContext& ctx) {
  const ::onnx::GraphProto* then_g = ctx.attr_graph("then_branch");
  const ::onnx::GraphProto* else_g = ctx.attr_graph("else_branch");
  if (!then_g || !else_g) ctx.fail("expected attributes then_branch and else_branch");
  if (auto c = ctx.constant_input(0)) {
    if (c->numel() != 1) ctx.fail("expected a one-element condition, got ", c->type().str());
    std::vector<std::optional<Packed>> packed;
    std::vector<Value> outs =
        ctx.inline_subgraph(c->to_doubles()[0] != 0 ? *then_g : *else_g, {}, &packed);
    for (size_t j = 0; j < packed.size(); ++j)
      if (packed[j]) ctx.set_packed_output(j, *packed[j]);
    return outs;
  }
  Value pred = ctx.input(0);
  if (pred.rank() != 0) pred = ctx.apply1("reshape", {pred}, {{"shape", IntList{}}});
  if (pred.dtype() != DType::boolean) pred = ctx.cast(pred, DType::boolean);
  if (returns_packed(*then_g) || returns_packed(*else_g))
    return select_branches(ctx, pred, *then_g, *else_g);
  // then: args (A); else: args (A placeholders, B); then gets B placeholders appended,
  // so both take (A, B).
  Body t = build_body(ctx, *then_g, {}, {});
  Body e = build_body(ctx, *else_g, {}, types_of(t.captures));
  for (size_t i = 0; i < e.captures.size(); ++i)
    t.graph->input(str_cat("unused_else_", i), e.captures[i].type());
  std::vector<Value> operands{pred};
  operands.insert(operands.end(), t.captures.begin(), t.captures.end());
  operands.insert(operands.end(), e.captures.begin(), e.captures.end());
  // Branches that disagree on dims (an empty constant vs a data-dependent count) run as
  // onnx.if, which leaves those dims to run time; onnx.if checks dtypes and ranks.
  const char* op = output_types(*t.graph) == output_types(*e.graph) ? "cond" : "onnx.if";
  return ctx.graph().apply(op, operands, {}, {t.graph, e.graph});
}

// Loop-carried values keep their type when the body keeps it; otherwise their dims are
// left to run time.
TensorType relaxed(const TensorType& t) { return {t.dtype, Shape(t.shape.size(), Dim::unknown())}; }

// A Loop that carries sequences (lists the importer holds) is unrolled at import: its
// trip count and condition must then be known at import.
constexpr int64_t kMaxUnroll = 4096;

std::vector<Value> unroll_loop(NodeContext& ctx, const ::onnx::GraphProto& body) {
  int64_t trips = kMaxUnroll + 1;
  if (ctx.has_input(0)) trips = ctx.ints_input(0)->at(0);
  bool cond = !ctx.has_input(1) || ctx.need_constant(1).to_doubles().at(0) != 0;
  std::vector<std::variant<Value, Packed>> carried;
  for (size_t i = 2; i < ctx.num_inputs(); ++i) {
    if (const Packed* p = ctx.packed_input(i))
      carried.push_back(*p);
    else
      carried.push_back(ctx.input(i));
  }
  size_t nc = carried.size();
  std::vector<std::vector<Value>> scans;
  int64_t it = 0;
  for (; it < trips && cond; ++it) {
    if (it >= kMaxUnroll)
      ctx.unsupported("expected a loop over sequences to end within ", kMaxUnroll, " iterations");
    std::vector<std::variant<Value, Packed>> args{ctx.scalar(DType::i64, double(it)),
                                                  ctx.constant(Literal::from<bool>({cond}, {}))};
    args.insert(args.end(), carried.begin(), carried.end());
    std::vector<std::optional<Packed>> packed;
    std::vector<Value> outs = ctx.inline_subgraph(body, args, &packed);
    packed.resize(outs.size());
    if (outs.size() < nc + 1) ctx.fail("expected a body of at least ", nc + 1, " outputs");
    auto c = ctx.constant_of(outs[0]);
    if (!c)
      ctx.unsupported("expected the condition of a loop over sequences to be known at import");
    cond = c->to_doubles().at(0) != 0;
    for (size_t k = 0; k < nc; ++k)
      carried[k] = packed[1 + k] ? std::variant<Value, Packed>(*packed[1 + k]) : outs[1 + k];
    scans.resize(outs.size() - 1 - nc);
    for (size_t k = 0; k < scans.size(); ++k) {
      if (packed[1 + nc + k]) ctx.unsupported("scan outputs of sequences are not supported");
      scans[k].push_back(ctx.apply1("expand_dims", {outs[1 + nc + k]}, {{"axes", IntList{0}}}));
    }
  }
  std::vector<Value> out(nc + scans.size());
  for (size_t k = 0; k < nc; ++k) {
    if (const Value* v = std::get_if<Value>(&carried[k]))
      out[k] = *v;
    else
      ctx.set_packed_output(k, std::get<Packed>(carried[k]));
  }
  for (size_t k = 0; k < scans.size(); ++k) {
    if (scans[k].empty()) ctx.unsupported("a loop over sequences that runs no iteration");
    out[nc + k] = ctx.apply1("concat", scans[k], {{"axis", int64_t{0}}});
  }
  return out;
}

bool carries_packed(NodeContext& ctx, const ::onnx::GraphProto& body) {
  for (size_t i = 2; i < ctx.num_inputs(); ++i)
    if (ctx.packed_input(i)) return true;
  return returns_packed(body);
}

std::vector<Value> convert_loop(NodeContext& ctx) {
  const ::onnx::GraphProto* body = ctx.attr_graph("body");
  if (!body) ctx.fail("expected attribute body");
  if (carries_packed(ctx, *body)) return unroll_loop(ctx, *body);
  Value trips = ctx.has_input(0) ? ctx.cast(ctx.input(0), DType::i64)
                                 : ctx.scalar(DType::i64, double(INT64_MAX));
  Value cond = ctx.has_input(1) ? ctx.cast(ctx.input(1), DType::boolean)
                                : ctx.constant(Literal::from<bool>({true}, {}));
  if (trips.rank() != 0) trips = ctx.apply1("reshape", {trips}, {{"shape", IntList{}}});
  if (cond.rank() != 0) cond = ctx.apply1("reshape", {cond}, {{"shape", IntList{}}});
  std::vector<Value> carried;
  for (size_t i = 2; i < ctx.num_inputs(); ++i) carried.push_back(ctx.input(i));
  std::vector<TensorType> declared{{DType::i64, {}}, {DType::boolean, {}}};
  for (Value v : carried) declared.push_back(v.type());
  Body b = build_body(ctx, *body, declared, {});
  std::vector<TensorType> outs = output_types(*b.graph);
  if (outs.size() < carried.size() + 1)
    ctx.fail("expected a body of at least ", carried.size() + 1, " outputs, got ", outs.size());
  bool changed = false;
  for (size_t i = 0; i < carried.size(); ++i)
    if (outs[1 + i] != declared[2 + i]) {
      declared[2 + i] = relaxed(declared[2 + i]);
      changed = true;
    }
  if (changed) b = build_body(ctx, *body, declared, {});
  std::vector<Value> inputs{trips, cond};
  inputs.insert(inputs.end(), carried.begin(), carried.end());
  inputs.insert(inputs.end(), b.captures.begin(), b.captures.end());
  return ctx.graph().apply("onnx.loop", inputs, {{"num_carried", int64_t(carried.size())}},
                           {b.graph});
}

std::vector<Value> convert_scan(NodeContext& ctx) {
  if (ctx.opset() < 9)
    ctx.unsupported("Scan before opset 9 (batched, with sequence_lens) is not supported");
  const ::onnx::GraphProto* body = ctx.attr_graph("body");
  if (!body) ctx.fail("expected attribute body");
  int64_t nx = ctx.need_attr_int("num_scan_inputs");
  int64_t n = int64_t(ctx.num_inputs());
  if (nx < 1 || nx > n) ctx.fail("expected num_scan_inputs in [1, ", n, "], got ", nx);
  int64_t ns = n - nx;
  int64_t nout = body->output_size() - ns;
  if (nout < 0) ctx.fail("expected a body of at least ", ns, " outputs, got ", body->output_size());
  std::vector<int64_t> in_axes =
      ctx.attr_ints("scan_input_axes", std::vector<int64_t>(size_t(nx), 0));
  std::vector<int64_t> in_rev =
      ctx.attr_ints("scan_input_directions", std::vector<int64_t>(size_t(nx), 0));
  std::vector<int64_t> out_axes =
      ctx.attr_ints("scan_output_axes", std::vector<int64_t>(size_t(nout), 0));
  std::vector<int64_t> out_rev =
      ctx.attr_ints("scan_output_directions", std::vector<int64_t>(size_t(nout), 0));
  if (in_axes.size() != size_t(nx) || in_rev.size() != size_t(nx) ||
      out_axes.size() != size_t(nout) || out_rev.size() != size_t(nout))
    ctx.fail("expected one axis and direction per scan input and output");
  std::vector<Value> inputs;
  std::vector<TensorType> declared;
  for (int64_t i = 0; i < n; ++i) {
    Value v = ctx.input(size_t(i));
    inputs.push_back(v);
    TensorType t = v.type();
    if (i >= ns) {
      int64_t a = normalize_axis(ctx, in_axes[size_t(i - ns)], t.rank());
      t.shape.erase(t.shape.begin() + a);
    }
    declared.push_back(t);
  }
  Body b = build_body(ctx, *body, declared, {});
  inputs.insert(inputs.end(), b.captures.begin(), b.captures.end());
  return ctx.graph().apply("onnx.scan", inputs,
                           {{"num_state", ns},
                            {"num_scan_inputs", nx},
                            {"input_axes", in_axes},
                            {"input_reverse", in_rev},
                            {"output_axes", out_axes},
                            {"output_reverse", out_rev}},
                           {b.graph});
}

}  // namespace

void register_control_converters() {
  register_control_onnx_ops();
  add_converter("", "If", convert_if);
  add_converter("", "Loop", convert_loop);
  add_converter("", "Scan", convert_scan);
}

}  // namespace rlx::onnx_import
