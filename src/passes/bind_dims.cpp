#include <set>

#include "passes/rewrite.h"
#include "rlx/error.h"
#include "rlx/passes.h"

namespace rlx {

std::unique_ptr<Graph> bind_dims(const Graph& g, const std::map<std::string, int64_t>& dims) {
  std::set<std::string> known;
  for (const Arg& a : g.args())
    for (const Dim& d : a.value.type().shape)
      if (d.is_symbolic() && !d.is_unknown()) known.insert(d.symbol());
  for (const auto& [name, size] : dims) {
    if (!known.count(name)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      fail<ValueError>("bind_dims", "expected a dim symbol of the graph's args among {", list,
                       "}, got '", name, "'");
    }
    if (size < 0)
      fail<ValueError>("bind_dims", "expected a size >= 0 for dim '", name, "', got ", size);
  }
  auto out = std::make_unique<Graph>(g.name());
  detail::ValueMap map(g.num_values());
  for (const Arg& a : g.args()) {
    TensorType t = a.value.type();
    for (Dim& d : t.shape)
      if (d.is_symbolic() && !d.is_unknown())
        if (auto it = dims.find(d.symbol()); it != dims.end()) d = Dim(it->second);
    map[size_t(a.value.id)] =
        a.kind == ArgKind::input ? out->input(a.name, t) : out->param(a.name, t);
  }
  detail::copy_nodes(g, *out, map);  // re-infers every node with the static sizes
  for (const Output& o : g.outputs()) out->output(detail::mapped(map, o.value), o.name);
  return out;
}

}  // namespace rlx
