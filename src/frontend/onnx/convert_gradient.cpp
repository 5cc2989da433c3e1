// ONNX converter: Gradient (ai.onnx.preview.training). rlx differentiates graphs itself:
// the part of the graph that computes y from xs is copied into a function, rlx::grad
// takes its gradient, and the gradient graph is inlined back.
#include <onnx/onnx_pb.h>

#include <map>

#include "frontend/onnx/scope.h"
#include "rlx/transforms.h"
#include "transforms/common.h"

namespace rlx::onnx_import {

namespace {

// A closed graph computing `y` from `xs`; values of g that y reads besides xs (other than
// constants) become extra args, returned in `extra`.
std::unique_ptr<Graph> function_of(NodeContext& ctx, const std::vector<Value>& xs, Value y,
                                   std::vector<Value>& extra) {
  const Graph& g = ctx.graph();
  auto f = std::make_unique<Graph>("gradient_of");
  std::map<int32_t, Value> map;
  for (size_t i = 0; i < xs.size(); ++i) map[xs[i].id] = f->input(str_cat("x", i), xs[i].type());
  // The nodes y depends on (stopping at xs), in graph order.
  std::vector<bool> needed(g.nodes().size(), false);
  std::vector<Value> stack{y};
  while (!stack.empty()) {
    Value v = stack.back();
    stack.pop_back();
    if (map.count(v.id)) continue;
    const ValueInfo& info = g.info(v);
    if (info.node < 0 || needed[size_t(info.node)]) continue;
    needed[size_t(info.node)] = true;
    for (Value in : g.nodes()[size_t(info.node)].inputs) stack.push_back(in);
  }
  auto value_of = [&](Value v) {
    if (auto it = map.find(v.id); it != map.end()) return it->second;
    Value a = f->input(str_cat("z", extra.size()), v.type());  // an arg of g, outside xs
    extra.push_back(v);
    map[v.id] = a;
    return a;
  };
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!needed[i]) continue;
    const Node& n = g.nodes()[i];
    std::vector<Value> ins;
    for (Value v : n.inputs) ins.push_back(value_of(v));
    std::vector<Value> outs = f->apply(*n.op, ins, n.attrs, n.subgraphs);
    for (size_t j = 0; j < outs.size(); ++j) map[n.outputs[j].id] = outs[j];
  }
  Value out = value_of(y);
  if (out.rank() != 0) out = f->apply1("sum", {out}, {{"axes", IntList{}}, {"keepdims", false}});
  f->output(out, "y");
  return f;
}

std::vector<Value> convert_gradient(NodeContext& ctx) {
  std::vector<std::string> xs = ctx.attr_strings("xs");
  std::string y_name = ctx.attr_string("y", "");
  if (xs.empty() || y_name.empty()) ctx.fail("expected attributes xs and y");
  if (ctx.num_inputs() < xs.size())
    ctx.fail("expected an input for each of the ", xs.size(), " xs, got ", ctx.num_inputs());
  std::vector<Value> x;
  for (size_t i = 0; i < xs.size(); ++i) x.push_back(ctx.input(i));
  Value y = ctx.scope().lookup(y_name, ctx.where());
  if (!is_float(y.dtype())) ctx.fail_type("expected a float y, got ", y.type().str());
  std::vector<Value> extra;
  std::unique_ptr<Graph> f = function_of(ctx, x, y, extra);
  std::vector<std::string> wrt;
  for (size_t i = 0; i < xs.size(); ++i) wrt.push_back(str_cat("x", i));
  std::unique_ptr<Graph> dg = grad(*f, {.wrt = wrt, .output = "y"});
  std::vector<Value> args = x;
  args.insert(args.end(), extra.begin(), extra.end());
  return detail::inline_graph(*dg, ctx.graph(), args);
}

}  // namespace

void register_gradient_converter() {
  add_converter("ai.onnx.preview.training", "Gradient", convert_gradient);
}

}  // namespace rlx::onnx_import
