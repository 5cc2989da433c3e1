#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "ir/global_registry.h"
#include "rlx/op.h"

namespace rlx {

const std::string& InferContext::name() const { return op_.name; }

const AttrSpec* OpDef::find_attr(std::string_view key) const {
  for (const auto& a : attrs)
    if (a.name == key) return &a;
  return nullptr;
}

Attrs validate_attrs(const OpDef& op, const Attrs& attrs) {
  Attrs out;
  for (const auto& [key, value] : attrs) {
    const AttrSpec* spec = op.find_attr(key);
    if (!spec) {
      std::string known;
      for (const auto& a : op.attrs) known += (known.empty() ? "" : ", ") + a.name;
      fail<ValueError>(op.name, "expected attributes among {", known, "}, got unknown '", key, "'");
    }
    AttrValue v = value;
    if (spec->kind == AttrKind::Float && v.kind() == AttrKind::Int)
      v = AttrValue(double(*v.get_if<int64_t>()));
    if (spec->kind == AttrKind::Floats && v.kind() == AttrKind::Ints) {
      const auto& ints = *v.get_if<IntList>();
      v = AttrValue(FloatList(ints.begin(), ints.end()));
    }
    if (v.kind() != spec->kind)
      fail<TypeError>(op.name, "expected attribute '", key, "' of kind ",
                      attr_kind_name(spec->kind), ", got ", attr_kind_name(v.kind()));
    if (!spec->choices.empty()) {
      const auto& s = *v.get_if<std::string>();
      if (std::find(spec->choices.begin(), spec->choices.end(), s) == spec->choices.end()) {
        std::string list;
        for (const auto& c : spec->choices) list += (list.empty() ? "" : "|") + c;
        fail<ValueError>(op.name, "expected attribute '", key, "' to be one of ", list, ", got '",
                         s, "'");
      }
    }
    out.set(key, std::move(v));
  }
  for (const auto& spec : op.attrs) {
    if (out.has(spec.name)) continue;
    if (!spec.default_value)
      fail<ValueError>(op.name, "expected attribute '", spec.name, "' (required), got none");
    out.set(spec.name, *spec.default_value);
  }
  return out;
}

std::vector<TensorType> infer_types(const OpDef& op, std::span<const TensorType> inputs,
                                    const Attrs& attrs, std::span<const SubgraphPtr> subgraphs) {
  int n = int(inputs.size());
  if (n < op.min_inputs || (op.max_inputs != kVariadic && n > op.max_inputs)) {
    std::string want = op.max_inputs == kVariadic ? str_cat("at least ", op.min_inputs)
                       : op.min_inputs == op.max_inputs
                           ? std::to_string(op.min_inputs)
                           : str_cat(op.min_inputs, " to ", op.max_inputs);
    fail<ValueError>(op.name, "expected ", want, " inputs, got ", n);
  }
  if (subgraphs.size() != op.subgraphs.size())
    fail<ValueError>(op.name, "expected ", op.subgraphs.size(), " subgraphs, got ",
                     subgraphs.size());
  for (size_t i = 0; i < subgraphs.size(); ++i)
    if (!subgraphs[i])
      fail<ValueError>(op.name, "expected subgraph '", op.subgraphs[i], "', got null");
  InferContext ctx(op, inputs, attrs, subgraphs);
  return op.infer(ctx);
}

struct OpRegistry::Impl {
  mutable std::shared_mutex mu;
  std::deque<OpDef> defs;  // deque: references stay valid as ops are added
  std::map<std::string, const OpDef*, std::less<>> by_name;
};

OpRegistry::OpRegistry() : impl_(std::make_unique<Impl>()) {}
OpRegistry::~OpRegistry() = default;

const OpDef& OpRegistry::add(OpDef def) {
  if (!is_identifier(def.name))
    fail<ValueError>("OpRegistry", "expected an op name like 'add' or 'sparse.spmv', got '",
                     def.name, "'");
  if (!def.infer) fail<ValueError>("OpRegistry", "expected an infer function for '", def.name, "'");
  if (def.min_inputs < 0 || (def.max_inputs != kVariadic && def.max_inputs < def.min_inputs))
    fail<ValueError>("OpRegistry", "expected a valid arity for '", def.name, "', got ",
                     def.min_inputs, "..", def.max_inputs);
  for (const auto& a : def.attrs) {
    if (!is_identifier(a.name))
      fail<ValueError>("OpRegistry", "expected attribute names to be identifiers in '", def.name,
                       "', got '", a.name, "'");
    if (a.default_value && a.default_value->kind() != a.kind)
      fail<TypeError>("OpRegistry", "expected the default of '", def.name, ".", a.name, "' to be ",
                      attr_kind_name(a.kind), ", got ", attr_kind_name(a.default_value->kind()));
  }
  std::unique_lock lock(impl_->mu);
  if (impl_->by_name.count(def.name))
    fail<ValueError>("OpRegistry", "expected a new op name, got '", def.name,
                     "' which is already registered");
  const OpDef& stored = impl_->defs.emplace_back(std::move(def));
  impl_->by_name.emplace(stored.name, &stored);
  return stored;
}

const OpDef* OpRegistry::find(std::string_view name) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : it->second;
}

const OpDef& OpRegistry::get(std::string_view name) const {
  const OpDef* d = find(name);
  if (!d) fail<ValueError>("OpRegistry", "expected a registered op, got unknown '", name, "'");
  return *d;
}

namespace {

// Set by the ops layer at start-up; constant-initialised to null, so a global() before that
// (another library's static initialiser) sees none and the next one after adds them.
std::atomic<void (*)(OpRegistry&)> core_ops{nullptr};
std::atomic<bool> core_added{false};
std::mutex core_mutex;
thread_local bool adding_core = false;  // the registration's own global() calls

void add_core_ops(OpRegistry& r) {
  auto* add = core_ops.load(std::memory_order_acquire);
  if (!add || adding_core) return;
  std::lock_guard lock(core_mutex);  // other threads wait for the whole set
  if (core_added.load(std::memory_order_relaxed)) return;
  adding_core = true;
  struct Reset {
    ~Reset() { adding_core = false; }
  } reset;
  add(r);
  core_added.store(true, std::memory_order_release);
}

}  // namespace

OpRegistry& OpRegistry::global() {
  static OpRegistry* reg = new OpRegistry();  // never destroyed: ops may be used in teardown
  if (!core_added.load(std::memory_order_acquire)) add_core_ops(*reg);
  return *reg;
}

void detail::install_core_ops(void (*add)(OpRegistry&)) {
  core_ops.store(add, std::memory_order_release);
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::shared_lock lock(impl_->mu);
  std::vector<const OpDef*> out;
  for (const auto& [_, d] : impl_->by_name) out.push_back(d);
  return out;
}

}  // namespace rlx
