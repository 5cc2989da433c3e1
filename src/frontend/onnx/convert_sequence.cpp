// ONNX converters: sequences and optionals, held by the importer as lists of Values
// (Packed). Positions must be known at import, so every sequence has a static length;
// its elements are ordinary tensors of the graph.
#include <onnx/onnx_pb.h>

#include "frontend/onnx/scope.h"

namespace rlx::onnx_import {

namespace {

const Packed& need_sequence(NodeContext& ctx, size_t i) {
  const Packed* p = ctx.packed_input(i);
  if (p && p->optional && p->sequence && !p->has_value)
    ctx.fail("expected input ", i, " to hold a sequence, got an empty optional");
  if (!p || !p->sequence) ctx.fail("expected input ", i, " to be a sequence, got a tensor");
  return *p;
}

Packed sequence_of(std::vector<Value> elems) {
  Packed p;
  p.sequence = true;
  p.elems = std::move(elems);
  return p;
}

// A position in [-n, n) (or [-n, n] where `end_ok`), from a constant scalar input.
int64_t position(NodeContext& ctx, size_t input, int64_t n, bool end_ok) {
  std::vector<int64_t> v = *ctx.ints_input(input);
  if (v.size() != 1) ctx.fail("expected a scalar position, got ", v.size(), " values");
  int64_t p = v[0] < 0 ? v[0] + n : v[0];
  if (p < 0 || p > n || (p == n && !end_ok))
    ctx.fail("expected a position in [", -n, ", ", end_ok ? n + 1 : n, "), got ", v[0]);
  return p;
}

std::vector<Value> one_packed(NodeContext& ctx, Packed p) {
  ctx.set_packed_output(0, std::move(p));
  return {Value{}};
}

std::vector<Value> sequence_empty(NodeContext& ctx) { return one_packed(ctx, sequence_of({})); }

std::vector<Value> sequence_construct(NodeContext& ctx) {
  std::vector<Value> elems;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) elems.push_back(ctx.input(i));
  return one_packed(ctx, sequence_of(elems));
}

std::vector<Value> sequence_insert(NodeContext& ctx) {
  std::vector<Value> elems = need_sequence(ctx, 0).elems;
  int64_t n = int64_t(elems.size());
  int64_t at = ctx.has_input(2) ? position(ctx, 2, n, true) : n;
  elems.insert(elems.begin() + at, ctx.input(1));
  return one_packed(ctx, sequence_of(elems));
}

std::vector<Value> sequence_erase(NodeContext& ctx) {
  std::vector<Value> elems = need_sequence(ctx, 0).elems;
  int64_t n = int64_t(elems.size());
  if (n == 0) ctx.fail("expected a non-empty sequence to erase from");
  int64_t at = ctx.has_input(1) ? position(ctx, 1, n, false) : n - 1;
  elems.erase(elems.begin() + at);
  return one_packed(ctx, sequence_of(elems));
}

std::vector<Value> sequence_at(NodeContext& ctx) {
  const Packed& s = need_sequence(ctx, 0);
  return {s.elems[size_t(position(ctx, 1, int64_t(s.elems.size()), false))]};
}

std::vector<Value> sequence_length(NodeContext& ctx) {
  return {ctx.scalar(DType::i64, double(need_sequence(ctx, 0).elems.size()))};
}

// Sizes known only at run time, but how many there are is static: the chunks are the
// outputs of a Split node converted in this scope (late, when its sizes arrive).
std::vector<Value> split_at_run_time(NodeContext& ctx, int64_t axis) {
  int64_t k = ctx.input(1).shape()[0].value();
  ::onnx::NodeProto split;
  split.set_op_type("Split");
  split.set_name(ctx.name() + "/split");
  split.add_input(ctx.proto().input(0));
  split.add_input(ctx.proto().input(1));
  auto* a = split.add_attribute();
  a->set_name("axis");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(axis);
  std::vector<std::string> names;
  for (int64_t i = 0; i < k; ++i) {
    names.push_back(str_cat(ctx.proto().output(0), "/chunk", i));
    split.add_output(names.back());
  }
  // Split takes its sizes as an input from opset 13: convert it at that opset at least.
  int64_t& opset = ctx.scope().state().opsets[""];
  int64_t saved = opset;
  opset = std::max<int64_t>(opset, 13);
  try {
    convert_node(ctx.scope(), split);
  } catch (...) {
    opset = saved;
    throw;
  }
  opset = saved;
  std::vector<Value> elems;
  for (const auto& n : names) elems.push_back(ctx.scope().lookup(n, ctx.where()));
  return one_packed(ctx, sequence_of(elems));
}

std::vector<Value> split_to_sequence(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  if (!x.shape()[size_t(axis)].is_static())
    ctx.unsupported("expected a static size on the split axis, got ", x.type().str());
  int64_t len = x.shape()[size_t(axis)].value();
  std::vector<int64_t> sizes;
  bool keep = true;
  if (!ctx.has_input(1)) {
    sizes.assign(size_t(len), 1);
    keep = ctx.attr_int("keepdims", 1) != 0;
  } else if (!ctx.constant_input(1) && ctx.input(1).rank() == 1 &&
             ctx.input(1).shape()[0].is_static()) {
    return split_at_run_time(ctx, axis);
  } else {
    Tensor split = ctx.need_constant(1);
    std::vector<int64_t> v = *ctx.ints_input(1);
    if (split.rank() == 0) {
      if (v[0] <= 0) ctx.fail("expected a split size > 0, got ", v[0]);
      for (int64_t at = 0; at < len; at += v[0]) sizes.push_back(std::min(v[0], len - at));
    } else {
      sizes = v;
    }
  }
  std::vector<Value> elems;
  int64_t at = 0;
  for (int64_t sz : sizes) {
    if (sz < 0 || at + sz > len) ctx.fail("expected split sizes summing to ", len);
    IntList starts(size_t(x.rank()), 0), stops, steps(size_t(x.rank()), 1);
    for (const Dim& d : x.shape()) stops.push_back(d.is_static() ? d.value() : INT64_MAX);
    starts[size_t(axis)] = at;
    stops[size_t(axis)] = at + sz;
    Value piece =
        ctx.apply1("slice", {x}, {{"starts", starts}, {"stops", stops}, {"steps", steps}});
    if (!keep) piece = ctx.apply1("squeeze", {piece}, {{"axes", IntList{axis}}});
    elems.push_back(piece);
    at += sz;
  }
  if (at != len) ctx.fail("expected split sizes summing to ", len, ", got ", at);
  return one_packed(ctx, sequence_of(elems));
}

std::vector<Value> concat_from_sequence(NodeContext& ctx) {
  std::vector<Value> elems = need_sequence(ctx, 0).elems;
  if (elems.empty()) ctx.fail("expected a non-empty sequence to concatenate");
  bool new_axis = ctx.attr_int("new_axis", 0) != 0;
  int64_t rank = elems[0].rank() + (new_axis ? 1 : 0);
  int64_t axis = normalize_axis(ctx, ctx.need_attr_int("axis"), rank);
  if (new_axis)
    for (Value& e : elems) e = ctx.apply1("expand_dims", {e}, {{"axes", IntList{axis}}});
  return {ctx.apply1("concat", elems, {{"axis", axis}})};
}

// Runs the body once per position, over the i-th element of every sequence input (tensor
// inputs are passed whole each time).
std::vector<Value> sequence_map(NodeContext& ctx) {
  const ::onnx::GraphProto* body = ctx.attr_graph("body");
  if (!body) ctx.fail("expected attribute body");
  size_t n = need_sequence(ctx, 0).elems.size();
  std::vector<std::vector<Value>> outs(ctx.num_outputs());
  for (size_t k = 0; k < n; ++k) {
    std::vector<std::variant<Value, Packed>> args;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Packed* p = ctx.packed_input(i);
      if (p && p->sequence) {
        if (p->elems.size() != n)
          ctx.fail("expected sequences of one length ", n, ", got ", p->elems.size());
        args.push_back(p->elems[k]);
      } else {
        args.push_back(ctx.input(i));
      }
    }
    std::vector<Value> res = ctx.inline_subgraph(*body, args);
    if (res.size() != outs.size())
      ctx.fail("expected a body of ", outs.size(), " outputs, got ", res.size());
    for (size_t j = 0; j < res.size(); ++j) outs[j].push_back(res[j]);
  }
  for (size_t j = 0; j < outs.size(); ++j) ctx.set_packed_output(j, sequence_of(outs[j]));
  return std::vector<Value>(outs.size());
}

std::vector<Value> optional(NodeContext& ctx) {
  Packed p;
  p.optional = true;
  if (!ctx.has_input(0)) {
    p.has_value = false;
    const auto* a = ctx.attr("type");
    p.sequence = a && a->has_tp() && a->tp().has_sequence_type();
  } else if (const Packed* s = ctx.packed_input(0)) {
    p.sequence = s->sequence;
    p.elems = s->elems;
  } else {
    p.elems = {ctx.input(0)};
  }
  return one_packed(ctx, p);
}

std::vector<Value> optional_has_element(NodeContext& ctx) {
  bool has = false;
  if (ctx.has_input(0)) {
    const Packed* p = ctx.packed_input(0);
    has = !p || !p->optional || p->has_value;
  }
  return {ctx.constant(Literal::from<bool>({has}, {}))};
}

std::vector<Value> optional_get_element(NodeContext& ctx) {
  const Packed* p = ctx.packed_input(0);
  if (!p) return {ctx.input(0)};
  if (p->optional && !p->has_value) ctx.fail("expected an optional with a value, got none");
  if (!p->sequence) return {p->elems.at(0)};
  Packed s = *p;
  s.optional = false;
  s.has_value = true;
  return one_packed(ctx, s);
}

}  // namespace

void register_sequence_converters() {
  add_converter("", "SequenceEmpty", sequence_empty);
  add_converter("", "SequenceConstruct", sequence_construct);
  add_converter("", "SequenceInsert", sequence_insert);
  add_converter("", "SequenceErase", sequence_erase);
  add_converter("", "SequenceAt", sequence_at);
  add_converter("", "SequenceLength", sequence_length);
  add_converter("", "SplitToSequence", split_to_sequence);
  add_converter("", "ConcatFromSequence", concat_from_sequence);
  add_converter("", "SequenceMap", sequence_map);
  add_converter("", "Optional", optional);
  add_converter("", "OptionalHasElement", optional_has_element);
  add_converter("", "OptionalGetElement", optional_get_element);
}

}  // namespace rlx::onnx_import
