// Control flow: cond, while, scan. A subgraph is a closed Graph: its args are its
// inputs (params are not allowed) and its outputs are its results.
#include "ops/control_rules.h"
#include "ops/families.h"
#include "ops/infer_util.h"

namespace rlx::detail {

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
