#include "frontend/onnx/ops/control.h"

#include <cstring>

#include "rlx/kernel.h"

namespace rlx::onnx_import {

namespace {

using Types = std::vector<TensorType>;

const SubgraphRunner& runner(const KernelContext& ctx) {
  if (!ctx.subgraphs)
    fail<ValueError>(ctx.op.name, "expected the node's subgraph to be compiled, got none");
  return *ctx.subgraphs;
}

// The declared type of the body's output i.
TensorType body_output(const KernelContext& ctx, size_t i) {
  const Graph& g = *ctx.graphs[0];
  return g.type(g.outputs()[i].value);
}

Types body_outputs(const InferContext& ctx) {
  const Graph& g = ctx.subgraph(0);
  Types out;
  for (const auto& o : g.outputs()) out.push_back(g.type(o.value));
  return out;
}

void expect_body_args(const InferContext& ctx, size_t n) {
  if (ctx.subgraph(0).args().size() != n)
    ctx.fail("expected a body of ", n, " args, got ", ctx.subgraph(0).args().size());
}

TensorType stacked(const TensorType& elem, size_t axis) {
  Shape s = elem.shape;
  s.insert(s.begin() + std::ptrdiff_t(std::min(axis, s.size())), Dim::unknown());
  return {elem.dtype, s};
}

// Stacks equal-shaped steps along `axis` (in reverse order when asked). No steps: an
// empty tensor shaped like the body's declared output `elem`.
Tensor stack(const std::vector<Tensor>& steps, int64_t axis, bool reverse, const TensorType& elem,
             std::string_view op) {
  if (steps.empty()) {
    std::vector<int64_t> shape;
    for (const Dim& d : elem.shape) shape.push_back(d.is_static() ? d.value() : 0);
    shape.insert(shape.begin() + std::min<std::ptrdiff_t>(axis, std::ptrdiff_t(shape.size())), 0);
    return Tensor::zeros(elem.dtype, shape);
  }
  const std::vector<int64_t>& es = steps[0].shape();
  int64_t n = int64_t(steps.size());
  std::vector<int64_t> shape{n};
  shape.insert(shape.end(), es.begin(), es.end());
  Tensor out = Tensor::empty(steps[0].dtype(), shape);
  size_t row = steps[0].nbytes();
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& s = steps[size_t(reverse ? n - 1 - i : i)];
    if (s.shape() != es)
      fail<ValueError>(op, "expected every iteration's scan output of shape ", ints_str(es),
                       ", got ", ints_str(s.shape()));
    Tensor c = s.contiguous();
    if (row) std::memcpy(static_cast<char*>(out.data()) + size_t(i) * row, c.data(), row);
  }
  if (axis == 0) return out;
  std::vector<int64_t> perm;
  for (int64_t d = 1; d <= axis; ++d) perm.push_back(d);
  perm.push_back(0);
  for (int64_t d = axis + 1; d < int64_t(shape.size()); ++d) perm.push_back(d);
  return out.permute(perm).contiguous();
}

// ---- onnx.loop: inputs (max_trips i64[], cond bool[], carried…, captured…); body args
// (iteration i64[], cond bool[], carried…, captured…) -> (cond, carried…, scan…).

void register_loop() {
  OpDef d;
  d.name = "onnx.loop";
  d.traits = Trait::control | Trait::nondifferentiable;
  d.arity(2, kVariadic).attr("num_carried", AttrKind::Int);
  d.subgraphs = {"body"};
  d.doc =
      "ONNX Loop: runs body while cond holds and fewer than max_trips iterations ran; "
      "stacks the scan outputs of each iteration.";
  d.infer = [](const InferContext& ctx) {
    int64_t nc = ctx.attrs().get_int("num_carried");
    if (nc < 0 || size_t(nc) + 2 > ctx.num_inputs())
      ctx.fail("expected num_carried in [0, ", ctx.num_inputs() - 2, "], got ", nc);
    expect_body_args(ctx, ctx.num_inputs());
    Types outs = body_outputs(ctx);
    if (outs.size() < size_t(nc) + 1)
      ctx.fail("expected a body of at least ", nc + 1, " outputs, got ", outs.size());
    Types result;
    const Graph& g = ctx.subgraph(0);
    for (int64_t i = 0; i < nc; ++i) result.push_back(g.type(g.args()[size_t(i) + 2].value));
    for (size_t i = size_t(nc) + 1; i < outs.size(); ++i) result.push_back(stacked(outs[i], 0));
    return result;
  };
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add(
      "onnx.loop", DeviceKind::cpu,
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        const SubgraphRunner& body = runner(ctx);
        size_t nc = size_t(ctx.attrs.get_int("num_carried"));
        int64_t trips = in[0].to_vector<int64_t>()[0];
        bool cond = in[1].to_vector<bool>()[0];
        std::vector<Tensor> args(in.begin(), in.end());
        std::vector<std::vector<Tensor>> scans(out.size() - nc);
        for (int64_t it = 0; it < trips && cond; ++it) {
          args[0] = Tensor::from_vector<int64_t>({it}, {});
          args[1] = Tensor::from_vector<bool>({cond}, {});
          std::vector<Tensor> res = body.run(0, args);
          cond = res[0].to_vector<bool>()[0];
          for (size_t i = 0; i < nc; ++i) args[2 + i] = res[1 + i];
          for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(res[1 + nc + k]);
        }
        for (size_t i = 0; i < nc; ++i) out[i] = args[2 + i].contiguous();
        for (size_t k = 0; k < scans.size(); ++k)
          out[nc + k] = stack(scans[k], 0, false, body_output(ctx, 1 + nc + k), "onnx.loop");
      },
      {}, KernelFlags{.makes_outputs = true});
}

// ---- onnx.scan (opset 9+): inputs (state…, scan inputs…, captured…); body args
// (state…, one slice of each scan input…, captured…) -> (state…, scan outputs…).

void register_scan() {
  OpDef d;
  d.name = "onnx.scan";
  d.traits = Trait::control | Trait::nondifferentiable;
  d.arity(0, kVariadic)
      .attr("num_state", AttrKind::Int)
      .attr("num_scan_inputs", AttrKind::Int)
      .attr("input_axes", AttrKind::Ints)
      .attr("input_reverse", AttrKind::Ints)
      .attr("output_axes", AttrKind::Ints)
      .attr("output_reverse", AttrKind::Ints);
  d.subgraphs = {"body"};
  d.doc =
      "ONNX Scan: threads state through body over an axis of each scan input; stacks "
      "the scan outputs along their axes.";
  d.infer = [](const InferContext& ctx) {
    int64_t ns = ctx.attrs().get_int("num_state"), nx = ctx.attrs().get_int("num_scan_inputs");
    if (ns < 0 || nx < 1 || size_t(ns + nx) > ctx.num_inputs())
      ctx.fail("expected num_state >= 0 and num_scan_inputs >= 1 within ", ctx.num_inputs(),
               " inputs, got ", ns, " and ", nx);
    if (ctx.attrs().get_ints("input_axes").size() != size_t(nx) ||
        ctx.attrs().get_ints("input_reverse").size() != size_t(nx))
      ctx.fail("expected one input axis and direction per scan input");
    expect_body_args(ctx, ctx.num_inputs());
    Types outs = body_outputs(ctx);
    if (outs.size() < size_t(ns) ||
        ctx.attrs().get_ints("output_axes").size() != outs.size() - size_t(ns) ||
        ctx.attrs().get_ints("output_reverse").size() != outs.size() - size_t(ns))
      ctx.fail("expected one output axis and direction per scan output");
    Types result;
    for (int64_t i = 0; i < ns; ++i) result.push_back(ctx.input(size_t(i)));
    const IntList& axes = ctx.attrs().get_ints("output_axes");
    for (size_t i = size_t(ns); i < outs.size(); ++i) {
      int64_t a = axes[i - size_t(ns)];
      if (a < 0) a += outs[i].rank() + 1;
      result.push_back(stacked(outs[i], size_t(std::max<int64_t>(a, 0))));
    }
    return result;
  };
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add(
      "onnx.scan", DeviceKind::cpu,
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        const SubgraphRunner& body = runner(ctx);
        size_t ns = size_t(ctx.attrs.get_int("num_state"));
        size_t nx = size_t(ctx.attrs.get_int("num_scan_inputs"));
        const IntList& in_axes = ctx.attrs.get_ints("input_axes");
        const IntList& in_rev = ctx.attrs.get_ints("input_reverse");
        const IntList& out_axes = ctx.attrs.get_ints("output_axes");
        const IntList& out_rev = ctx.attrs.get_ints("output_reverse");
        std::vector<int64_t> axes;
        int64_t len = -1;
        for (size_t k = 0; k < nx; ++k) {
          const Tensor& x = in[ns + k];
          int64_t a = in_axes[k] < 0 ? in_axes[k] + x.rank() : in_axes[k];
          if (a < 0 || a >= x.rank())
            fail<ValueError>("onnx.scan", "expected scan input axis in [0, ", x.rank(), "), got ",
                             in_axes[k]);
          if (len >= 0 && x.shape()[size_t(a)] != len)
            fail<ValueError>("onnx.scan", "expected scan inputs of one length ", len, ", got ",
                             x.shape()[size_t(a)]);
          len = x.shape()[size_t(a)];
          axes.push_back(a);
        }
        std::vector<Tensor> args(in.begin(), in.end());
        std::vector<std::vector<Tensor>> scans(out.size() - ns);
        for (int64_t t = 0; t < len; ++t) {
          for (size_t k = 0; k < nx; ++k) {
            const Tensor& x = in[ns + k];
            int64_t i = in_rev[k] ? len - 1 - t : t;
            std::vector<int64_t> shape = x.shape();
            shape.erase(shape.begin() + axes[k]);
            args[ns + k] = x.slice(axes[k], i, i + 1).contiguous().reshape(shape);
          }
          std::vector<Tensor> res = body.run(0, args);
          for (size_t i = 0; i < ns; ++i) args[i] = res[i];
          for (size_t j = 0; j < scans.size(); ++j) scans[j].push_back(res[ns + j]);
        }
        for (size_t i = 0; i < ns; ++i) out[i] = args[i].contiguous();
        for (size_t j = 0; j < scans.size(); ++j) {
          int64_t a = out_axes[j];
          if (a < 0 && !scans[j].empty()) a += scans[j][0].rank() + 1;
          out[ns + j] = stack(scans[j], std::max<int64_t>(a, 0), out_rev[j] != 0,
                              body_output(ctx, ns + j), "onnx.scan");
        }
      },
      {}, KernelFlags{.makes_outputs = true});
}

// ---- onnx.if: inputs (pred bool[], captured…); both branches take the captured values.
// Unlike core `cond`, the branches may give outputs whose dims differ (torchvision's
// batched_nms returns an empty constant in one branch and NMS's data-dependent count in
// the other): such a dim is left to run time.

void register_if() {
  OpDef d;
  d.name = "onnx.if";
  d.traits = Trait::control | Trait::nondifferentiable;
  d.arity(1, kVariadic);
  d.subgraphs = {"then", "else"};
  d.doc =
      "ONNX If: runs then or else on the operands; dims the branches disagree on are "
      "known at run time only.";
  d.infer = [](const InferContext& ctx) {
    const TensorType& pred = ctx.input(0);
    if (pred.dtype != DType::boolean || pred.rank() != 0)
      ctx.fail("expected pred (input 0) of type bool[], got ", pred.str());
    for (size_t b = 0; b < 2; ++b) {
      const Graph& g = ctx.subgraph(b);
      if (g.args().size() + 1 != ctx.num_inputs())
        ctx.fail("expected branch ", b, " of ", ctx.num_inputs() - 1, " args, got ",
                 g.args().size());
      for (size_t i = 0; i < g.args().size(); ++i)
        if (g.type(g.args()[i].value) != ctx.input(i + 1))
          ctx.fail("expected branch ", b, " arg ", i, " of type ", ctx.input(i + 1).str(), ", got ",
                   g.type(g.args()[i].value).str());
    }
    const Graph &t = ctx.subgraph(0), &e = ctx.subgraph(1);
    if (t.outputs().size() != e.outputs().size())
      ctx.fail("expected branches of one number of outputs, got ", t.outputs().size(), " and ",
               e.outputs().size());
    Types out;
    for (size_t i = 0; i < t.outputs().size(); ++i) {
      TensorType a = t.type(t.outputs()[i].value), b = e.type(e.outputs()[i].value);
      if (a.dtype != b.dtype || a.rank() != b.rank())
        ctx.fail("expected branch outputs ", i, " of one dtype and rank, got ", a.str(), " and ",
                 b.str());
      for (size_t k = 0; k < a.shape.size(); ++k)
        if (a.shape[k] != b.shape[k]) a.shape[k] = Dim::unknown();
      out.push_back(a);
    }
    return out;
  };
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add(
      "onnx.if", DeviceKind::cpu,
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        bool taken = *static_cast<const uint8_t*>(in[0].data()) != 0;
        std::vector<Tensor> res = runner(ctx).run(taken ? 0 : 1, in.subspan(1));
        for (size_t i = 0; i < out.size(); ++i) out[i] = std::move(res[i]);
      },
      {}, KernelFlags{.strided_inputs = true, .makes_outputs = true});
}

}  // namespace

void register_control_onnx_ops() {
  register_loop();
  register_scan();
  register_if();
}

}  // namespace rlx::onnx_import
