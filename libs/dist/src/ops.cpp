// dist.* op definitions: type inference, autodiff and batching rules (written as other
// dist ops), registration, and the graph builders of rlx/dist.h. Public API only.
//
// Every collective carries "group" (the process group's id) and "size" (its number of
// ranks when the graph was built: all_gather's output shape depends on it, and a kernel
// refuses a graph built for another world). They are side_effect ops: never folded,
// merged or dropped, so every rank issues the same collectives in the same order.
#include <mutex>

#include "internal.h"
#include "rlx/axes.h"
#include "rlx/rlx.h"
#include "rlx/rules.h"

namespace rlx::dist {

namespace {

using Types = std::vector<TensorType>;
using Values = std::vector<Value>;

bool is_float_or_int(DType d) { return d != DType::boolean; }

void check_group_attrs(const InferContext& c) {
  if (c.attrs().get_int("size") < 1) c.fail("expected size >= 1, got ", c.attrs().get_int("size"));
  if (c.attrs().get_int("group") < 0)
    c.fail("expected group >= 0, got ", c.attrs().get_int("group"));
}

void check_root(const InferContext& c) {
  int64_t root = c.attrs().get_int("root"), size = c.attrs().get_int("size");
  if (root < 0 || root >= size) c.fail("expected root in [0, ", size, "), got ", root);
}

void check_reduce(const InferContext& c) {
  check_group_attrs(c);
  if (!is_float_or_int(c.dtype(0)))
    c.fail_type("expected a numeric tensor to reduce, got ", c.input(0).str());
  if (c.attrs().get_string("op") == "mean" && !is_float(c.dtype(0)))
    c.fail_type("expected a float tensor for op mean, got ", c.input(0).str());
}

Types same_type(const InferContext& c) { return {c.input(0)}; }

Types infer_all_reduce(const InferContext& c) {
  check_reduce(c);
  return same_type(c);
}

Types infer_rooted(const InferContext& c) {
  check_group_attrs(c);
  check_root(c);
  return same_type(c);
}

Types infer_reduce(const InferContext& c) {
  check_root(c);
  if (!is_float_or_int(c.dtype(0)))
    c.fail_type("expected a numeric tensor to reduce, got ", c.input(0).str());
  return same_type(c);
}

Types infer_all_gather(const InferContext& c) {
  check_group_attrs(c);
  if (c.rank(0) < 1)
    c.fail("expected a tensor of rank >= 1 (gathered along axis 0), got ", c.input(0).str());
  Shape s = c.shape(0);
  int64_t size = c.attrs().get_int("size");
  s[0] = s[0].is_static() ? Dim(s[0].value() * size) : (size == 1 ? s[0] : Dim::unknown());
  return {{c.dtype(0), s}};
}

Types infer_reduce_scatter(const InferContext& c) {
  check_reduce(c);
  if (c.rank(0) < 1)
    c.fail("expected a tensor of rank >= 1 (scattered along axis 0), got ", c.input(0).str());
  const std::string& op = c.attrs().get_string("op");
  if (op != "sum" && op != "mean") c.fail("expected op sum or mean, got ", op);
  Shape s = c.shape(0);
  int64_t size = c.attrs().get_int("size");
  if (s[0].is_static()) {
    if (s[0].value() % size != 0)
      c.fail("expected axis 0 divisible by the ", size, " ranks, got ", c.input(0).str());
    s[0] = Dim(s[0].value() / size);
  } else if (size != 1) {
    s[0] = Dim::unknown();
  }
  return {{c.dtype(0), s}};
}

Types infer_barrier(const InferContext& c) {
  check_group_attrs(c);
  return same_type(c);
}

// ---- rules ----------------------------------------------------------------------------

// The same op with the node's attributes on other operands (cotangents, tangents).
Value again(const RuleArgs& a, const char* name, Value x, Attrs attrs) {
  attrs.set("group", a.attrs.get_int("group"));
  attrs.set("size", a.attrs.get_int("size"));
  return op(name, {x}, std::move(attrs));
}

Value reapply1(const RuleArgs& a, Value x) {
  Attrs at = a.attrs;
  return op(rules::rule_op_name(a), {x}, std::move(at));
}

void linear_only(const RuleArgs& a, const char* transform) {
  if (a.attrs.has("op")) {
    const std::string& o = a.attrs.get_string("op");
    if (o != "sum" && o != "mean")
      fail<NotSupported>(rules::rule_op_name(a), "expected op sum or mean for ", transform,
                         ", got ", o);
  }
}

Values all_reduce_vjp(const RuleArgs& a, std::span<const Value> ct) {
  linear_only(a, "vjp");
  return {reapply1(a, ct[0])};  // the transpose of a sum over ranks is a sum over ranks
}

Values broadcast_vjp(const RuleArgs& a, std::span<const Value> ct) {
  return {again(a, "dist.reduce", ct[0], {{"root", a.attrs.get_int("root")}})};
}

Values reduce_vjp(const RuleArgs& a, std::span<const Value> ct) {
  return {again(a, "dist.broadcast", ct[0], {{"root", a.attrs.get_int("root")}})};
}

Values all_gather_vjp(const RuleArgs& a, std::span<const Value> ct) {
  return {again(a, "dist.reduce_scatter", ct[0], {{"op", "sum"}})};
}

Values reduce_scatter_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value g = again(a, "dist.all_gather", ct[0], {});
  if (a.attrs.get_string("op") == "mean") g = g / double(a.attrs.get_int("size"));
  return {g};
}

Values identity_vjp(const RuleArgs&, std::span<const Value> ct) { return {ct[0]}; }

// Linear ops: the op applied to the tangent.
Values linear_jvp(const RuleArgs& a, std::span<const Value> t) {
  linear_only(a, "jvp");
  return {reapply1(a, t[0])};
}

// Ops that act elementwise across ranks batch by acting on the batched tensor.
VmapResult same_axis_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  return {{reapply1(a, a.inputs[0])}, {in_axes[0]}};
}

// all_gather / reduce_scatter work on axis 0: the batch axis goes to 1, out of the way.
VmapResult axis0_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  Value x = rules::moveaxis(a.inputs[0], in_axes[0], 1);
  return {{reapply1(a, x)}, {1}};
}

std::vector<AttrSpec> group_attrs(std::vector<AttrSpec> extra) {
  extra.push_back({"group", AttrKind::Int, AttrValue(int64_t(0)), {}});
  extra.push_back({"size", AttrKind::Int, AttrValue(int64_t(1)), {}});
  return extra;
}

void add(const char* name, InferFn infer, VjpFn vjp, JvpFn jvp, VmapFn vmap,
         std::vector<AttrSpec> attrs, const char* doc) {
  OpDef d;
  d.name = name;
  d.traits = Trait::side_effect;
  d.arity(1);
  d.attrs = group_attrs(std::move(attrs));
  d.infer = std::move(infer);
  d.vjp = std::move(vjp);
  d.jvp = std::move(jvp);
  d.vmap = std::move(vmap);
  d.doc = doc;
  OpRegistry::global().add(std::move(d));
}

AttrSpec op_attr() {
  return {"op", AttrKind::String, AttrValue("sum"), {"sum", "mean", "max", "min"}};
}
AttrSpec root_attr() { return {"root", AttrKind::Int, AttrValue(int64_t(0)), {}}; }

const ProcessGroup& built_for() {
  if (!initialized())
    fail<ValueError>("dist", "expected rlx::dist::init() before building collectives, got none");
  return world();
}

Attrs group_attrs_of(const ProcessGroup& pg) {
  return {{"group", int64_t(pg.id())}, {"size", int64_t(pg.size())}};
}

int64_t norm_axis(Value x, int64_t axis, const char* what) {
  int64_t r = x.rank();
  if (axis < -r || axis >= r)
    fail<ValueError>(what, "expected axis in [", -r, ", ", r, "), got ", axis, " for ",
                     x.type().str());
  return rlx::norm_axis(axis, r);
}

}  // namespace

void register_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    add("dist.all_reduce", infer_all_reduce, all_reduce_vjp, linear_jvp, same_axis_vmap,
        {op_attr()}, "x reduced (sum, mean, max, min) over the ranks; every rank gets it.");
    add("dist.broadcast", infer_rooted, broadcast_vjp, linear_jvp, same_axis_vmap, {root_attr()},
        "Rank root's x, on every rank.");
    add("dist.reduce", infer_reduce, reduce_vjp, linear_jvp, same_axis_vmap, {root_attr()},
        "The sum of x over the ranks on rank root; zeros on the others.");
    add("dist.all_gather", infer_all_gather, all_gather_vjp, linear_jvp, axis0_vmap, {},
        "The ranks' x concatenated along axis 0, in rank order.");
    add("dist.reduce_scatter", infer_reduce_scatter, reduce_scatter_vjp, linear_jvp, axis0_vmap,
        {op_attr()},
        "x reduced (sum, mean) over the ranks, split along axis 0; rank r keeps chunk r.");
    add("dist.barrier", infer_barrier, identity_vjp, linear_jvp, same_axis_vmap, {},
        "x, once every rank has reached this node.");
    detail::register_cpu_kernels();
    detail::register_nccl_kernels();
  });
}

// ---- graph builders ---------------------------------------------------------------------

Value all_reduce(Value x, ReduceOp o) {
  Attrs at = group_attrs_of(built_for());
  at.set("op", reduce_op_name(o));
  return op("dist.all_reduce", {x}, std::move(at));
}

Value broadcast(Value x, int root) {
  Attrs at = group_attrs_of(built_for());
  at.set("root", int64_t(root));
  return op("dist.broadcast", {x}, std::move(at));
}

Value reduce(Value x, int root) {
  Attrs at = group_attrs_of(built_for());
  at.set("root", int64_t(root));
  return op("dist.reduce", {x}, std::move(at));
}

Value all_gather(Value x, int64_t axis) {
  Attrs at = group_attrs_of(built_for());
  axis = norm_axis(x, axis, "dist.all_gather");
  Value y = op("dist.all_gather", {axis == 0 ? x : rules::moveaxis(x, axis, 0)}, std::move(at));
  return axis == 0 ? y : rules::moveaxis(y, 0, axis);
}

Value reduce_scatter(Value x, ReduceOp o, int64_t axis) {
  Attrs at = group_attrs_of(built_for());
  at.set("op", reduce_op_name(o));
  axis = norm_axis(x, axis, "dist.reduce_scatter");
  Value y = op("dist.reduce_scatter", {axis == 0 ? x : rules::moveaxis(x, axis, 0)}, std::move(at));
  return axis == 0 ? y : rules::moveaxis(y, 0, axis);
}

Value barrier(Value x) { return op("dist.barrier", {x}, group_attrs_of(built_for())); }

namespace detail {

ReduceOp reduce_op_of(const Attrs& attrs) {
  const std::string& o = attrs.get_string("op");
  if (o == "mean") return ReduceOp::mean;
  if (o == "max") return ReduceOp::max;
  if (o == "min") return ReduceOp::min;
  return ReduceOp::sum;
}

}  // namespace detail

}  // namespace rlx::dist
