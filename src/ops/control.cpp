// Control flow: cond, while, scan, with their rules. A subgraph is a closed Graph: its args
// are its inputs (params are not allowed) and its outputs are its results. So a rule
// transforms it with the positional transforms (rlx::transform::vjp / jvp / vmap) and wraps the
// result in a branch or a loop again; small wrapper subgraphs reorder args and outputs where the
// loop layout asks for it (carries first, then xs), built by copying ("inlining") nodes.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "ops/families.h"
#include "ops/infer_util.h"
#include "rlx/rules.h"
#include "rlx/transforms.h"

namespace rlx::detail {

// ---- rules ----------------------------------------------------------------------------

namespace {

using Values = std::vector<Value>;
using Types = std::vector<TensorType>;

bool floating(Value v) { return is_float(v.dtype()); }

Types types_of(std::span<const Value> vs) {
  Types out;
  for (Value v : vs) out.push_back(v.type());
  return out;
}

Types arg_types(const Graph& g) {
  Types out;
  for (const Arg& a : g.args()) out.push_back(g.type(a.value));
  return out;
}

Types output_types(const Graph& g) {
  Types out;
  for (const Output& o : g.outputs()) out.push_back(g.type(o.value));
  return out;
}

template <class T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Values slice(std::span<const Value> vs, size_t from, size_t to) {
  return Values(vs.begin() + std::ptrdiff_t(from), vs.begin() + std::ptrdiff_t(to));
}

Values pick(std::span<const Value> vs, const std::vector<int>& at) {
  Values out;
  for (int i : at) out.push_back(vs[size_t(i)]);
  return out;
}

// The given cotangents, zeros where one is missing.
Values cts_or_zeros(std::span<const Value> cts, std::span<const Value> like,
                    const std::vector<int>& at) {
  Values out;
  for (int i : at)
    out.push_back(cts[size_t(i)].valid() ? cts[size_t(i)] : rules::zeros_like(like[size_t(i)]));
  return out;
}

// Positions (from `from` on) of the float values.
std::vector<int> float_positions(std::span<const Value> vs, size_t from = 0, size_t to = SIZE_MAX) {
  std::vector<int> out;
  for (size_t i = from; i < std::min(to, vs.size()); ++i)
    if (floating(vs[i])) out.push_back(int(i));
  return out;
}

std::vector<int> shifted(std::vector<int> v, int by) {
  for (int& i : v) i += by;
  return v;
}

// A subgraph under construction, with args of the given types.
struct Builder {
  std::shared_ptr<Graph> g;
  Values args;

  Builder(const std::string& name, const Types& types) : g(std::make_shared<Graph>(name)) {
    for (size_t i = 0; i < types.size(); ++i) args.push_back(g->input(str_cat("a", i), types[i]));
  }
  Values args_at(size_t from, size_t to) const { return slice(args, from, to); }
  SubgraphPtr finish(const Values& outputs) {
    for (Value v : outputs) g->output(v);
    return prune(*g);
  }
};

// Copies sub's nodes into g with sub's args bound to `args`; returns sub's outputs in g.
Values inline_graph(Graph& g, const Graph& sub, std::span<const Value> args) {
  if (args.size() != sub.args().size())
    fail<ValueError>("inline", "expected ", sub.args().size(), " args for subgraph '", sub.name(),
                     "', got ", args.size());
  Values map(sub.num_values());
  for (size_t i = 0; i < args.size(); ++i) map[size_t(sub.args()[i].value.id)] = args[i];
  for (const Node& n : sub.nodes()) {
    Values ins;
    for (Value v : n.inputs) ins.push_back(map[size_t(v.id)]);
    Values outs = g.apply(*n.op, std::move(ins), n.attrs, n.subgraphs);
    for (size_t k = 0; k < outs.size(); ++k) map[size_t(n.outputs[k].id)] = outs[k];
  }
  Values res;
  for (const Output& o : sub.outputs()) res.push_back(map[size_t(o.value.id)]);
  return res;
}

// A subgraph whose outputs are its args from position `from` on.
SubgraphPtr passthrough(const std::string& name, const Types& types, size_t from) {
  Builder b(name, types);
  return b.finish(b.args_at(from, types.size()));
}

// ---- vmap helpers ----------------------------------------------------------------------

Value to_front(Value x, int axis) { return axis == 0 ? x : rules::moveaxis(x, axis, 0); }

// The batch dimension and a batched input with its axis (to materialise others against).
struct Batch {
  Dim size;
  Value ref;
  int axis = 0;
};

Batch batch_of(const RuleArgs& a, std::span<const int> in_axes) {
  for (size_t i = 0; i < in_axes.size(); ++i)
    if (in_axes[i] >= 0) return {a.inputs[i].shape()[size_t(in_axes[i])], a.inputs[i], in_axes[i]};
  fail<ValueError>(rules::rule_op_name(a), "vmap: expected a batched input, got none");
}

// Input i batched at 0: moved there, or materialised when it is not batched.
Value batched_front(const RuleArgs& a, std::span<const int> in_axes, const Batch& b, size_t i) {
  return in_axes[i] >= 0 ? to_front(a.inputs[i], in_axes[i])
                         : rules::materialize_batch(a.inputs[i], b.ref, b.axis);
}

// g vmapped over its args batched at 0 (in_axes[i] == 0) or not (-1). Batched outputs are
// moved to axis 0; outputs with force[i] are batched even when no batched arg reaches
// them. out_axes (optional) gets each output's axis: 0 or -1.
SubgraphPtr vmap_front(const Graph& g, const std::vector<int>& in_axes,
                       const std::vector<bool>& force, const Dim& size,
                       std::vector<int>* out_axes = nullptr) {
  std::vector<int> chosen;
  std::unique_ptr<Graph> v = transform::vmap(g, in_axes, {}, size, &chosen);
  bool as_is = true;
  for (size_t i = 0; i < chosen.size(); ++i) {
    as_is = as_is && (chosen[i] == 0 || (chosen[i] < 0 && !force[i]));
    if (out_axes) out_axes->push_back(chosen[i] >= 0 || force[i] ? 0 : -1);
  }
  if (as_is) return v;
  Builder b(g.name(), arg_types(*v));
  Values outs = inline_graph(*b.g, *v, b.args);
  Value ref;
  for (size_t i = 0; i < in_axes.size() && !ref.valid(); ++i)
    if (in_axes[i] == 0) ref = b.args[i];
  for (size_t i = 0; i < outs.size(); ++i) {
    if (chosen[i] > 0) {
      outs[i] = rules::moveaxis(outs[i], chosen[i], 0);
    } else if (chosen[i] < 0 && force[i]) {
      if (!ref.valid())
        fail<NotSupported>(g.name(),
                           "vmap: cannot batch an output of a subgraph without batched args");
      outs[i] = rules::materialize_batch(outs[i], ref, 0);
    }
  }
  return b.finish(outs);
}

std::vector<int> axes_of(const std::vector<bool>& batched) {
  std::vector<int> out;
  for (bool b : batched) out.push_back(b ? 0 : -1);
  return out;
}

// Loop state that the body makes batched must be batched on entry too: grows `batched`
// (the first num_state args of body) to a fixed point; `rest` are the other args' axes.
// Returns the body vmapped with the state outputs batched exactly where the state is.
SubgraphPtr vmap_loop_body(const Graph& body, std::vector<bool>& batched,
                           const std::vector<int>& rest, const Dim& size,
                           std::vector<int>* out_axes) {
  size_t n = batched.size(), num_out = body.outputs().size();
  for (;;) {
    std::vector<bool> force = batched;
    force.resize(num_out, false);
    std::vector<int> axes;
    SubgraphPtr v = vmap_front(body, concat(axes_of(batched), rest), force, size, &axes);
    bool grown = false;
    for (size_t i = 0; i < n; ++i)
      if (axes[i] == 0 && !batched[i]) batched[i] = grown = true;
    if (!grown) {
      if (out_axes) *out_axes = std::move(axes);
      return v;
    }
  }
}

Value any_true(Value pred) {
  Value m = op("reduce_max", {cast(pred, DType::i32)});
  return op("gt", {m, scalar_like(m, 0)});
}

// pred ([batch]) with size-1 axes appended up to rank + 1, to select batched values.
Value pred_for(Value pred, int64_t rank) {
  if (rank == 0) return pred;
  IntList axes;
  for (int64_t k = 1; k <= rank; ++k) axes.push_back(k);
  return rules::expand_dims(pred, axes);
}

}  // namespace

// ---- cond ------------------------------------------------------------------------------

// A cond over (pred, operands, cotangents) whose branches are the branches' vjps.
std::vector<Value> cond_vjp(const RuleArgs& a, std::span<const Value> cts) {
  Values grads(a.inputs.size());
  std::vector<int> wrt = shifted(float_positions(a.inputs, 1), -1);
  if (wrt.empty()) return grads;
  Values ins(a.inputs.begin(), a.inputs.end());
  ins = concat(ins, cts_or_zeros(cts, a.outputs, float_positions(a.outputs)));
  SubgraphPtr then_g = transform::vjp(*a.subgraphs[0], wrt);
  SubgraphPtr else_g = transform::vjp(*a.subgraphs[1], wrt);
  Values res = a.g.apply("cond", ins, {}, {then_g, else_g});
  for (size_t k = 0; k < wrt.size(); ++k) grads[size_t(wrt[k]) + 1] = res[k];
  return grads;
}

namespace {

// The jvp of g without its primal outputs (the first `num_primal`; the node has them).
SubgraphPtr tangents_only(const Graph& g, const std::vector<int>& wrt, size_t num_primal) {
  std::unique_ptr<Graph> j = transform::jvp(g, wrt);
  Builder b(g.name(), arg_types(*j));
  Values outs = inline_graph(*b.g, *j, b.args);
  return b.finish(slice(outs, num_primal, outs.size()));
}

}  // namespace

// A cond whose branches are the branches' jvps, over the operands that have tangents.
std::vector<Value> cond_jvp(const RuleArgs& a, std::span<const Value> tangents) {
  Values out(a.outputs.size());
  std::vector<int> wrt;
  Values ins(a.inputs.begin(), a.inputs.end());
  for (size_t i = 1; i < a.inputs.size(); ++i) {
    if (!floating(a.inputs[i]) || !tangents[i].valid()) continue;
    wrt.push_back(int(i) - 1);
    ins.push_back(tangents[i]);
  }
  if (wrt.empty()) return out;
  size_t m = a.outputs.size();
  SubgraphPtr then_g = tangents_only(*a.subgraphs[0], wrt, m);
  SubgraphPtr else_g = tangents_only(*a.subgraphs[1], wrt, m);
  Values res = a.g.apply("cond", ins, {}, {then_g, else_g});
  size_t k = 0;
  for (int i : float_positions(a.outputs)) out[size_t(i)] = res[k++];
  return out;
}

// An unbatched pred picks one branch for the whole batch: a cond of the vmapped branches.
// A batched one may pick both: both vmapped branches run, and select takes each element's.
VmapResult cond_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  Batch b = batch_of(a, in_axes);
  Types out_types = output_types(*a.subgraphs[0]);  // a.outputs is empty under vmap
  size_t m = out_types.size();
  Values ops;
  std::vector<int> axes;
  bool any_batched = false;
  for (size_t i = 1; i < a.inputs.size(); ++i) {
    ops.push_back(in_axes[i] >= 0 ? to_front(a.inputs[i], in_axes[i]) : a.inputs[i]);
    axes.push_back(in_axes[i] >= 0 ? 0 : -1);
    any_batched = any_batched || in_axes[i] >= 0;
  }
  if (in_axes[0] < 0) {
    std::vector<bool> force(m, true);  // both branches must agree on the output types
    SubgraphPtr then_g = vmap_front(*a.subgraphs[0], axes, force, b.size);
    SubgraphPtr else_g = vmap_front(*a.subgraphs[1], axes, force, b.size);
    Values ins = concat(Values{a.inputs[0]}, ops);
    return {a.g.apply("cond", ins, {}, {then_g, else_g}), std::vector<int>(m, 0)};
  }
  Value pred = a.inputs[0];  // rank 0 unbatched: batched at 0
  Values outs;
  std::vector<Values> branch(2);
  for (size_t s = 0; s < 2; ++s) {
    // Unbatched outputs broadcast against the batched pred in select.
    SubgraphPtr g = any_batched ? vmap_front(*a.subgraphs[s], axes, std::vector<bool>(m), b.size)
                                : a.subgraphs[s];
    branch[s] = inline_graph(a.g, *g, ops);
  }
  for (size_t i = 0; i < m; ++i)
    outs.push_back(op("select", {pred_for(pred, out_types[i].rank()), branch[0][i], branch[1][i]}));
  return {outs, std::vector<int>(m, 0)};
}

// ---- while -----------------------------------------------------------------------------

// A while over (state, tangents of the float state); the body is the body's jvp and the
// cond ignores the tangents. Every float state gets a tangent (zeros where none is
// given): the body can carry one into state that had none.
std::vector<Value> while_jvp(const RuleArgs& a, std::span<const Value> tangents) {
  size_t n = a.inputs.size();
  Values out(n);
  std::vector<int> wrt = float_positions(a.inputs);
  if (wrt.empty()) return out;
  Values state(a.inputs.begin(), a.inputs.end());
  Values ins = concat(state, cts_or_zeros(tangents, a.inputs, wrt));
  Builder c("while_jvp_cond", types_of(ins));
  SubgraphPtr cond_g = c.finish(inline_graph(*c.g, *a.subgraphs[0], c.args_at(0, n)));
  SubgraphPtr body_g = transform::jvp(*a.subgraphs[1], wrt);
  Values res = a.g.apply("while", ins, a.attrs, {cond_g, body_g});
  for (size_t k = 0; k < wrt.size(); ++k) out[size_t(wrt[k])] = res[n + k];
  return out;
}

// Needs max_iter. Forward: the loop replayed as a scan of max_iter steps whose carry is
// (state, active); a step runs the body only while active && cond(state), and stacks the
// state it started from and whether it ran. Backward: a reverse scan over those steps
// whose carry is the state cotangent, pulled back through the body's vjp where it ran.
std::vector<Value> while_vjp(const RuleArgs& a, std::span<const Value> cts) {
  size_t n = a.inputs.size();
  Values grads(n);
  int64_t max_iter = a.attrs.get_int("max_iter");
  if (max_iter < 0)
    fail<NotSupported>(rules::rule_op_name(a),
                       "vjp: while without max_iter (set max_iter to bound the loop)");
  std::vector<int> fl = float_positions(a.inputs);
  if (fl.empty()) return grads;
  size_t nf = fl.size();
  const SubgraphPtr& body = a.subgraphs[1];
  Types st = types_of(a.inputs), ct_types = types_of(pick(a.inputs, fl));
  TensorType flag(DType::boolean, {});

  Builder f("while_replay", concat(st, {flag}));
  Values s = f.args_at(0, n);
  Value go = inline_graph(*f.g, *a.subgraphs[0], s)[0];
  Value taken = f.g->apply1("logical_and", {f.args[n], go});
  Values next = f.g->apply("cond", concat({taken}, s), {}, {body, passthrough("keep", st, 0)});
  SubgraphPtr replay = f.finish(concat(concat(next, {taken}), concat(s, {taken})));
  Values init = concat(Values(a.inputs.begin(), a.inputs.end()),
                       {a.g.constant(Literal::scalar(DType::boolean, 1))});
  Values rec =
      a.g.apply("scan", init, {{"num_carry", int64_t(n + 1)}, {"length", max_iter}}, {replay});
  Values steps = slice(rec, n + 1, rec.size());  // stacked states, then stacked flags

  Builder bw("while_backward", concat(concat(ct_types, st), {flag}));
  Values bins = concat(concat({bw.args[nf + n]}, bw.args_at(nf, nf + n)), bw.args_at(0, nf));
  SubgraphPtr vjp_body = transform::vjp(*body, fl);
  SubgraphPtr keep_ct = passthrough("keep_ct", concat(st, ct_types), n);
  SubgraphPtr back_g = bw.finish(bw.g->apply("cond", bins, {}, {vjp_body, keep_ct}));
  Values back = a.g.apply("scan", concat(cts_or_zeros(cts, a.outputs, fl), steps),
                          {{"num_carry", int64_t(nf)}, {"reverse", true}}, {back_g});
  for (size_t k = 0; k < nf; ++k) grads[size_t(fl[k])] = back[k];
  return grads;
}

// State that is (or becomes) batched is batched at 0. With an unbatched predicate, a while
// of the vmapped cond and body. With a batched one, the loop runs while any element is
// active, and the body keeps the state of the finished elements.
VmapResult while_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  size_t n = a.inputs.size();
  Batch b = batch_of(a, in_axes);
  std::vector<bool> batched(n);
  for (size_t i = 0; i < n; ++i) batched[i] = in_axes[i] >= 0;
  SubgraphPtr body_g = vmap_loop_body(*a.subgraphs[1], batched, {}, b.size, nullptr);
  std::vector<int> pred_axes;
  SubgraphPtr cond_g = vmap_front(*a.subgraphs[0], axes_of(batched), {false}, b.size, &pred_axes);
  Values ins;
  if (pred_axes[0] < 0) {
    for (size_t i = 0; i < n; ++i)
      ins.push_back(batched[i] ? batched_front(a, in_axes, b, i) : a.inputs[i]);
    return {a.g.apply("while", ins, a.attrs, {cond_g, body_g}), axes_of(batched)};
  }
  for (size_t i = 0; i < n; ++i) ins.push_back(batched_front(a, in_axes, b, i));
  std::vector<int> all(n, 0);
  body_g = vmap_front(*a.subgraphs[1], all, std::vector<bool>(n, true), b.size);
  cond_g = vmap_front(*a.subgraphs[0], all, {true}, b.size);
  Types st = types_of(ins);
  Builder c("while_any", st);
  SubgraphPtr any_g = c.finish({any_true(inline_graph(*c.g, *cond_g, c.args)[0])});
  Builder m("while_masked", st);
  Value active = inline_graph(*m.g, *cond_g, m.args)[0];
  Values next = inline_graph(*m.g, *body_g, m.args);
  for (size_t i = 0; i < n; ++i)
    next[i] = op("select", {pred_for(active, m.args[i].rank() - 1), next[i], m.args[i]});
  SubgraphPtr masked_g = m.finish(next);
  return {a.g.apply("while", ins, a.attrs, {any_g, masked_g}), all};
}

// ---- scan ------------------------------------------------------------------------------

// Forward: the scan again, also stacking the carries that enter each step. Backward: a
// scan the other way over (stacked carries, xs, cotangents of ys) whose carry is the carry
// cotangent and whose body is the body's vjp; its ys are the cotangents of xs.
std::vector<Value> scan_vjp(const RuleArgs& a, std::span<const Value> cts) {
  size_t n = a.inputs.size(), nc = size_t(a.attrs.get_int("num_carry"));
  Values grads(n);
  std::vector<int> fc = float_positions(a.inputs, 0, nc), fx = float_positions(a.inputs, nc);
  if (fc.empty() && fx.empty()) return grads;
  const Graph& body = *a.subgraphs[0];
  Types body_args = arg_types(body), body_outs = output_types(body);

  Values stacked;
  if (nc > 0) {
    Builder f("scan_replay", body_args);
    Values outs = inline_graph(*f.g, body, f.args);
    SubgraphPtr replay = f.finish(concat(slice(outs, 0, nc), f.args_at(0, nc)));
    Values rec = a.g.apply("scan", Values(a.inputs.begin(), a.inputs.end()), a.attrs, {replay});
    stacked = slice(rec, nc, 2 * nc);
  }

  std::vector<int> fy = float_positions(a.outputs, nc);
  Types ct_c = types_of(pick(a.inputs, fc)), ct_y;
  for (int j : fy) ct_y.push_back(body_outs[size_t(j)]);
  size_t nfc = fc.size();
  Builder bw("scan_backward", concat(concat(ct_c, body_args), ct_y));
  SubgraphPtr vjp_body = transform::vjp(body, concat(fc, fx));
  Values vin = concat(concat(bw.args_at(nfc, nfc + n), bw.args_at(0, nfc)),
                      bw.args_at(nfc + n, bw.args.size()));
  SubgraphPtr back_g = bw.finish(inline_graph(*bw.g, *vjp_body, vin));

  Values ins = concat(cts_or_zeros(cts, a.outputs, fc), stacked);
  ins = concat(ins, slice(a.inputs, nc, n));
  ins = concat(ins, cts_or_zeros(cts, a.outputs, fy));
  Attrs attrs = a.attrs;
  attrs.set("num_carry", int64_t(nfc));
  attrs.set("reverse", !a.attrs.get_bool("reverse"));
  Values back = a.g.apply("scan", ins, attrs, {back_g});
  for (size_t k = 0; k < nfc; ++k) grads[size_t(fc[k])] = back[k];
  for (size_t k = 0; k < fx.size(); ++k) grads[size_t(fx[k])] = back[nfc + k];
  return grads;
}

// A scan over (carries, carry tangents; xs, xs tangents) with the body's jvp. Every float
// carry gets a tangent (the body can carry one into a carry that had none); xs only where
// given.
std::vector<Value> scan_jvp(const RuleArgs& a, std::span<const Value> tangents) {
  size_t n = a.inputs.size(), nc = size_t(a.attrs.get_int("num_carry"));
  size_t ny = a.outputs.size() - nc;
  Values out(a.outputs.size());
  std::vector<int> fc = float_positions(a.inputs, 0, nc), fx;
  for (size_t i = nc; i < n; ++i)
    if (floating(a.inputs[i]) && tangents[i].valid()) fx.push_back(int(i));
  if (fc.empty() && fx.empty()) return out;
  size_t nfc = fc.size();
  const Graph& body = *a.subgraphs[0];
  Types bargs = arg_types(body);
  Types carry_t(bargs.begin(), bargs.begin() + std::ptrdiff_t(nc));
  Types xs_t(bargs.begin() + std::ptrdiff_t(nc), bargs.end());
  Types tc_t, tx_t;
  for (int i : fc) tc_t.push_back(bargs[size_t(i)]);
  for (int i : fx) tx_t.push_back(bargs[size_t(i)]);

  std::unique_ptr<Graph> j = transform::jvp(body, concat(fc, fx));
  Builder w("scan_jvp", concat(concat(carry_t, tc_t), concat(xs_t, tx_t)));
  size_t x0 = nc + nfc, tx0 = x0 + (n - nc);
  Values jin = concat(concat(w.args_at(0, nc), w.args_at(x0, tx0)),
                      concat(w.args_at(nc, x0), w.args_at(tx0, w.args.size())));
  Values r = inline_graph(*w.g, *j, jin);
  // r: carries, ys, then tangents of the float outputs (carries, then ys).
  size_t t0 = nc + ny;
  Values wout = concat(slice(r, 0, nc), slice(r, t0, r.size()));
  SubgraphPtr jbody = w.finish(wout);

  Values ins = concat(slice(a.inputs, 0, nc), cts_or_zeros(tangents, a.inputs, fc));
  ins = concat(ins, slice(a.inputs, nc, n));
  ins = concat(ins, pick(tangents, fx));
  Attrs attrs = a.attrs;
  attrs.set("num_carry", int64_t(nc + nfc));
  Values res = a.g.apply("scan", ins, attrs, {jbody});
  for (size_t k = 0; k < nfc; ++k) out[size_t(fc[k])] = res[nc + k];
  std::vector<int> fy = float_positions(a.outputs, nc);
  for (size_t k = 0; k < fy.size(); ++k) out[size_t(fy[k])] = res[nc + nfc + k];
  return out;
}

// Carries batched at 0 (those the body makes batched too); batched xs carry their batch at
// axis 1, as axis 0 is the scanned one; the body is vmapped with those axes, so batched ys
// come out at 1.
VmapResult scan_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  size_t n = a.inputs.size(), nc = size_t(a.attrs.get_int("num_carry"));
  Batch b = batch_of(a, in_axes);
  std::vector<bool> batched(nc);
  std::vector<int> xs_axes;
  for (size_t i = 0; i < n; ++i) {
    if (i < nc)
      batched[i] = in_axes[i] >= 0;
    else
      xs_axes.push_back(in_axes[i] >= 0 ? 0 : -1);
  }
  std::vector<int> body_axes;
  SubgraphPtr body_g = vmap_loop_body(*a.subgraphs[0], batched, xs_axes, b.size, &body_axes);
  Values ins;
  for (size_t i = 0; i < nc; ++i)
    ins.push_back(batched[i] ? batched_front(a, in_axes, b, i) : a.inputs[i]);
  for (size_t i = nc; i < n; ++i) {
    int ax = in_axes[i];
    ins.push_back(ax < 0 || ax == 1 ? a.inputs[i] : rules::moveaxis(a.inputs[i], ax, 1));
  }
  std::vector<int> out_axes = axes_of(batched);
  for (size_t j = nc; j < body_axes.size(); ++j) out_axes.push_back(body_axes[j] == 0 ? 1 : -1);
  return {a.g.apply("scan", ins, a.attrs, {body_g}), out_axes};
}

// ---- definitions ----------------------------------------------------------------------

namespace {

using Types = std::vector<TensorType>;

std::string types_str(const Types& ts) {
  std::string s = "(";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s + ")";
}

const std::string& slot_name(const InferContext& ctx, size_t slot) {
  return ctx.op().subgraphs[slot];
}

// The subgraph's arg types; params are rejected (a subgraph only sees its operands).
// Types are read through the subgraph (Graph::type checks the handle, never crashes).
Types arg_types(const InferContext& ctx, size_t slot) {
  const Graph& g = ctx.subgraph(slot);
  Types out;
  for (const auto& a : g.args()) {
    if (a.kind == ArgKind::param)
      ctx.fail("expected subgraph '", slot_name(ctx, slot), "' without params, got param '", a.name,
               "'");
    out.push_back(g.type(a.value));
  }
  return out;
}

Types output_types(const InferContext& ctx, size_t slot) {
  const Graph& g = ctx.subgraph(slot);
  Types out;
  for (const auto& o : g.outputs()) out.push_back(g.type(o.value));
  return out;
}

// Fails unless got == want: a TypeError when only dtypes differ, else a ValueError.
void expect_types(const InferContext& ctx, const Types& want, const Types& got,
                  std::string_view what) {
  if (want == got) return;
  bool only_dtypes = want.size() == got.size();
  for (size_t i = 0; only_dtypes && i < want.size(); ++i)
    only_dtypes = want[i].shape == got[i].shape;
  if (only_dtypes) ctx.fail_type("expected ", what, " ", types_str(want), ", got ", types_str(got));
  ctx.fail("expected ", what, " ", types_str(want), ", got ", types_str(got));
}

void expect_args(const InferContext& ctx, size_t slot, const Types& want) {
  expect_types(ctx, want, arg_types(ctx, slot),
               str_cat("subgraph '", slot_name(ctx, slot), "' args"));
}

// A predicate: one bool scalar.
void expect_pred(const InferContext& ctx, const TensorType& t, std::string_view what) {
  if (!is_bool(t.dtype)) ctx.fail_type("expected ", what, " of dtype bool, got ", t.str());
  if (t.rank() != 0) ctx.fail("expected ", what, " of rank 0, got ", t.str());
}

Types inputs_from(const InferContext& ctx, size_t begin) {
  return Types(ctx.inputs().begin() + std::ptrdiff_t(begin), ctx.inputs().end());
}

void register_cond(OpRegistry& r) {
  OpDef d;
  d.name = "cond";
  d.traits = Trait::control;
  d.arity(1, kVariadic);
  d.subgraphs = {"then", "else"};
  d.doc = "Runs `then` or `else` on the operands, as the bool scalar pred says.";
  d.infer = [](const InferContext& ctx) {
    expect_pred(ctx, ctx.input(0), "pred (input 0)");
    Types operands = inputs_from(ctx, 1);
    expect_args(ctx, 0, operands);
    expect_args(ctx, 1, operands);
    Types then_out = output_types(ctx, 0);
    expect_types(ctx, then_out, output_types(ctx, 1),
                 "subgraph 'else' outputs equal to subgraph 'then' outputs");
    return then_out;
  };
  d.vjp = cond_vjp;
  d.jvp = cond_jvp;
  d.vmap = cond_vmap;
  r.add(std::move(d));
}

void register_while(OpRegistry& r) {
  OpDef d;
  d.name = "while";
  d.traits = Trait::control;
  d.arity(1, kVariadic).attr("max_iter", AttrKind::Int, int64_t{-1});
  d.subgraphs = {"cond", "body"};
  d.doc = "Runs `body` on the loop state while `cond` holds (at most max_iter times if >= 0).";
  d.infer = [](const InferContext& ctx) {
    int64_t max_iter = ctx.attrs().get_int("max_iter");
    if (max_iter < -1) ctx.fail("expected max_iter >= -1 (-1: unbounded), got ", max_iter);
    Types state = inputs_from(ctx, 0);
    expect_args(ctx, 0, state);
    Types cond_out = output_types(ctx, 0);
    if (cond_out.size() != 1)
      ctx.fail("expected subgraph 'cond' to have 1 output, got ", types_str(cond_out));
    expect_pred(ctx, cond_out[0], "subgraph 'cond' output");
    expect_args(ctx, 1, state);
    expect_types(ctx, state, output_types(ctx, 1), "subgraph 'body' outputs");
    return state;
  };
  d.vjp = while_vjp;
  d.jvp = while_jvp;
  d.vmap = while_vmap;
  r.add(std::move(d));
}

void register_scan(OpRegistry& r) {
  OpDef d;
  d.name = "scan";
  d.traits = Trait::control;
  d.arity(0, kVariadic)
      .attr("num_carry", AttrKind::Int)
      .attr("reverse", AttrKind::Bool, false)
      .attr("length", AttrKind::Int, int64_t{-1});
  d.subgraphs = {"body"};
  d.doc = "lax.scan: threads carries through `body` over the leading axis of xs, stacks ys.";
  d.infer = [](const InferContext& ctx) {
    int64_t n = int64_t(ctx.num_inputs());
    int64_t num_carry = ctx.attrs().get_int("num_carry");
    int64_t length = ctx.attrs().get_int("length");
    if (num_carry < 0 || num_carry > n)
      ctx.fail("expected num_carry in [0, ", n, "] (the number of inputs), got ", num_carry);
    if (length < -1) ctx.fail("expected length >= 0 or -1 (from xs), got ", length);

    Types carries(ctx.inputs().begin(), ctx.inputs().begin() + num_carry);
    Types body_args = carries;
    std::optional<Dim> len;
    for (size_t i = size_t(num_carry); i < size_t(n); ++i) {
      if (ctx.rank(i) < 1)
        ctx.fail("expected xs input ", i, " of rank >= 1, got ", ctx.input(i).str());
      const Dim& lead = ctx.shape(i)[0];
      len = len ? unify_dims(ctx, *len, lead, "leading dims of xs") : lead;
      body_args.emplace_back(ctx.dtype(i), Shape(ctx.shape(i).begin() + 1, ctx.shape(i).end()));
    }
    if (length >= 0)
      len = len ? unify_dims(ctx, *len, Dim(length), "length and leading dim of xs") : Dim(length);
    if (!len) ctx.fail("expected length >= 0 when there are no xs, got ", length);

    expect_args(ctx, 0, body_args);
    Types body_out = output_types(ctx, 0);
    if (int64_t(body_out.size()) < num_carry)
      ctx.fail("expected subgraph 'body' to have at least ", num_carry,
               " outputs (the carries), got ", types_str(body_out));
    Types carry_out(body_out.begin(), body_out.begin() + num_carry);
    expect_types(ctx, carries, carry_out, "subgraph 'body' carry outputs");

    Types out = carries;
    for (size_t i = size_t(num_carry); i < body_out.size(); ++i) {
      Shape s{*len};
      s.insert(s.end(), body_out[i].shape.begin(), body_out[i].shape.end());
      out.emplace_back(body_out[i].dtype, std::move(s));
    }
    return out;
  };
  d.vjp = scan_vjp;
  d.jvp = scan_jvp;
  d.vmap = scan_vmap;
  r.add(std::move(d));
}

}  // namespace

void register_control_ops(OpRegistry& r) {
  register_cond(r);
  register_while(r);
  register_scan(r);
}

}  // namespace rlx::detail
