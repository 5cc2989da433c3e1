// The graph verifier. It reads graphs that the low-level mutation API may have broken,
// so every index and handle is checked before it is used.
#include "rlx/verify.h"

#include <algorithm>
#include <set>

#include "rlx/op.h"

namespace rlx {

namespace {

class Verifier {
 public:
  // `where` prefixes every message: "" for the top graph, "node 2 (while), subgraph
  // 'body': " inside a subgraph.
  Verifier(const Graph& g, std::string where) : g_(g), where_(std::move(where)) {}

  void run(bool is_subgraph) {
    defined_.assign(g_.num_values(), false);
    args(is_subgraph);
    for (size_t i = 0; i < g_.nodes().size(); ++i) node(i);
    outputs();
  }

 private:
  template <class... A>
  [[noreturn]] void fail(A&&... parts) const {
    throw ValueError(str_cat("[verify] ", where_, std::forward<A>(parts)...));
  }

  bool owned(Value v) const {
    return v.graph == &g_ && v.id >= 0 && size_t(v.id) < g_.num_values();
  }

  // Why v is not a usable value of this graph, or "" when it is.
  std::string bad_handle(Value v) const {
    if (!v.valid()) return "an empty handle";
    // Another graph may be gone already: do not read it.
    if (v.graph != &g_) return "a value of another graph";
    if (size_t(v.id) >= g_.num_values())
      return str_cat("value id ", v.id, ", out of range (the graph has ", g_.num_values(),
                     " values)");
    return "";
  }

  void names(const std::string& what, size_t i, const std::string& name,
             std::set<std::string, std::less<>>& seen) const {
    if (!is_identifier(name))
      fail(what, " ", i, ": expected an identifier as the name, got '", name, "'");
    if (!seen.insert(name).second)
      fail(what, " ", i, ": expected a unique name, got duplicate '", name, "'");
  }

  void args(bool is_subgraph) {
    std::set<std::string, std::less<>> seen;
    for (size_t i = 0; i < g_.args().size(); ++i) {
      const Arg& a = g_.args()[i];
      names("arg", i, a.name, seen);
      if (is_subgraph && a.kind == ArgKind::param)
        fail("arg ", i, ": expected no params in a subgraph, got param '", a.name, "'");
      if (auto why = bad_handle(a.value); !why.empty())
        fail("arg ", i, " ('", a.name, "'): expected a value of this graph, got ", why);
      const ValueInfo& info = g_.info(a.value);
      if (info.node != -1 || info.index != int32_t(i))
        fail("arg ", i, " ('", a.name, "'): expected value ", a.value.id, " recorded as argument ",
             i, ", got node ", info.node, " index ", info.index);
      if (defined_[size_t(a.value.id)])
        fail("arg ", i, " ('", a.name, "'): expected a new value, got value ", a.value.id,
             " defined twice");
      defined_[size_t(a.value.id)] = true;
      if (auto why = bad_blocks(g_.type(a.value)); !why.empty())
        fail("arg ", i, " ('", a.name, "'): ", why);
    }
  }

  // A quantized value's rows must be whole blocks.
  static std::string bad_blocks(const TensorType& t) {
    if (!is_quantized(t.dtype)) return {};
    int64_t b = dtype_block(t.dtype);
    if (t.rank() == 0 || (t.shape.back().is_static() && t.shape.back().value() % b != 0))
      return str_cat("expected a ", dtype_name(t.dtype), " type whose last dim is a multiple of ",
                     b, ", got ", t.str());
    return {};
  }

  void node(size_t i) {
    const Node& n = g_.nodes()[i];
    if (!n.op) fail("node ", i, ": expected an op, got null");
    const OpDef& op = *n.op;
    std::string at = str_cat("node ", i, " (", op.name, "): ");

    // Inputs: values of this graph, defined before the node.
    std::vector<TensorType> in_types;
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      Value v = n.inputs[j];
      if (auto why = bad_handle(v); !why.empty())
        fail(at, "expected input ", j, " to be a value of graph '", g_.name(), "', got ", why);
      if (!defined_[size_t(v.id)]) {
        int32_t p = g_.info(v).node;
        if (p > int32_t(i))
          fail(at, "expected input ", j, " defined before use, got value ", v.id,
               " defined later by node ", p);
        fail(at, "expected input ", j, " defined before use, got value ", v.id,
             " that no node or argument defines");
      }
      in_types.push_back(g_.type(v));
    }
    int num_in = int(n.inputs.size());
    if (num_in < op.min_inputs || (op.max_inputs != kVariadic && num_in > op.max_inputs))
      fail(at, "expected ",
           op.max_inputs == kVariadic       ? str_cat(op.min_inputs, " or more")
           : op.min_inputs == op.max_inputs ? str_cat(op.min_inputs)
                                            : str_cat(op.min_inputs, " to ", op.max_inputs),
           " inputs, got ", num_in);

    attrs(at, op, n.attrs);

    // Subgraphs: one per slot, each verified on its own (closed, no params).
    if (n.subgraphs.size() != op.subgraphs.size())
      fail(at, "expected ", op.subgraphs.size(), " subgraphs, got ", n.subgraphs.size());
    for (size_t s = 0; s < n.subgraphs.size(); ++s) {
      std::string sub = str_cat(where_, at, "subgraph '", op.subgraphs[s], "': ");
      if (!n.subgraphs[s])
        throw ValueError(str_cat("[verify] ", sub, "expected a graph, got null"));
      Verifier(*n.subgraphs[s], sub).run(true);
    }

    // Output types, re-inferred.
    std::vector<TensorType> want;
    try {
      want = infer_types(op, in_types, n.attrs, n.subgraphs);
    } catch (const Error& e) {
      std::string msg = e.what();
      std::string prefix = "[" + op.name + "] ";
      if (msg.rfind(prefix, 0) == 0) msg.erase(0, prefix.size());
      fail(at, msg);
    }
    if (n.outputs.size() != want.size())
      fail(at, "expected ", want.size(), " outputs, got ", n.outputs.size());
    for (size_t j = 0; j < n.outputs.size(); ++j) {
      Value v = n.outputs[j];
      if (auto why = bad_handle(v); !why.empty())
        fail(at, "expected output ", j, " to be a value of graph '", g_.name(), "', got ", why);
      const ValueInfo& info = g_.info(v);
      if (info.node != int32_t(i) || info.index != int32_t(j))
        fail(at, "expected output ", j, " (value ", v.id, ") recorded with producer node ", i,
             " index ", j, ", got node ", info.node, " index ", info.index);
      if (defined_[size_t(v.id)])
        fail(at, "expected output ", j, " to be a new value, got value ", v.id, " defined twice");
      if (info.type != want[j])
        fail(at, "expected output ", j, " of type ", want[j].str(), ", got ", info.type.str());
      defined_[size_t(v.id)] = true;
    }
  }

  // Complete attributes: exactly the schema's keys, each of the schema's kind.
  void attrs(const std::string& at, const OpDef& op, const Attrs& a) const {
    for (const auto& [key, value] : a) {
      const AttrSpec* spec = op.find_attr(key);
      if (!spec) {
        std::string known;
        for (const auto& s : op.attrs) known += (known.empty() ? "" : ", ") + s.name;
        fail(at, "expected attributes among {", known, "}, got unknown '", key, "'");
      }
      if (value.kind() != spec->kind)
        fail(at, "expected attribute '", key, "' of kind ", attr_kind_name(spec->kind), ", got ",
             attr_kind_name(value.kind()));
      if (!spec->choices.empty()) {
        const std::string& s = *value.get_if<std::string>();
        if (std::find(spec->choices.begin(), spec->choices.end(), s) == spec->choices.end())
          fail(at, "expected attribute '", key, "' to be one of its choices, got '", s, "'");
      }
    }
    for (const auto& spec : op.attrs)
      if (!a.has(spec.name))
        fail(at, "expected attribute '", spec.name, "' (nodes hold complete attributes), got none");
  }

  void outputs() const {
    std::set<std::string, std::less<>> seen;
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const Output& o = g_.outputs()[i];
      names("output", i, o.name, seen);
      if (auto why = bad_handle(o.value); !why.empty())
        fail("output ", i, " ('", o.name, "'): expected a value of graph '", g_.name(), "', got ",
             why);
      if (!defined_[size_t(o.value.id)])
        fail("output ", i, " ('", o.name, "'): expected a defined value, got value ", o.value.id,
             " that no node or argument defines");
    }
  }

  const Graph& g_;
  std::string where_;
  std::vector<bool> defined_;
};

}  // namespace

void verify(const Graph& g) { Verifier(g, "").run(false); }

}  // namespace rlx
