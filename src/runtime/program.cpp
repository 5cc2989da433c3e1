#include "runtime/program.h"

#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "rlx/op.h"
#include "rlx/settings.h"
#include "runtime/device_backend.h"
#include "runtime/profile.h"

namespace rlx::detail {

namespace {

// Plans kept per Program; beyond this the cache starts over (shapes that change on every
// run would otherwise grow it without bound).
constexpr size_t kMaxPlans = 64;

std::string arg_label(const Arg& a) {
  return str_cat(a.kind == ArgKind::input ? "input '" : "param '", a.name, "'");
}

bool all_static(const TensorType& t) { return is_static(t.shape); }

std::vector<int64_t> sizes_of(const Shape& s) {
  std::vector<int64_t> out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = s[i].value();
  return out;
}

Packing packing_from_settings() {
  return settings().arena_packing == "time" ? Packing::by_time : Packing::by_size;
}

// Whether any element of t lies in [p, p + bytes).
bool overlaps(const Tensor& t, const uint8_t* p, size_t bytes) {
  if (t.numel() == 0 || bytes == 0) return false;
  auto es = int64_t(dtype_size(t.dtype()));
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < t.shape().size(); ++d) {
    int64_t span = (t.shape()[d] - 1) * t.strides()[d];
    (span < 0 ? lo : hi) += span;
  }
  const auto* base = static_cast<const uint8_t*>(t.data());
  return base + lo * es < p + bytes && p < base + (hi + 1) * es;
}

// Whether an output of `bytes` at p may overwrite input k: the planner chose it, and at run
// time it is still a contiguous tensor exactly there while no other input reads that
// memory.
bool can_overwrite(std::span<const Tensor> ins, const std::vector<Value>& values, size_t k,
                   const uint8_t* p, size_t bytes) {
  const Tensor& t = ins[k];
  if (t.data() != p || t.nbytes() != bytes || !t.is_contiguous()) return false;
  for (size_t m = 0; m < ins.size(); ++m)
    if (values[m].id != values[k].id && overlaps(ins[m], p, bytes)) return false;
  return true;
}

}  // namespace

std::vector<Tensor> SubgraphPrograms::run(size_t index, std::span<const Tensor> args) const {
  if (index >= programs.size())
    fail<ValueError>("run", "expected a subgraph index below ", programs.size(), ", got ", index);
  return programs[index]->run(args);
}

Program::Program(const Graph& g, Device device, const KernelRegistry& kernels, int threads,
                 bool graphs, const DispatchReport* earlier)
    : lowered_(lower_for_device(g, device, kernels, earlier)), device_(device), threads_(threads) {
  if (!device.is_cpu()) backend_ = &device_backend(device);
  const Graph& lg = *lowered_.graph;
  const auto& nodes = lg.nodes();
  subgraphs_.resize(nodes.size());
  kept_.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    // Only control ops run their subgraphs as programs; a fused region's body is data its
    // kernel reads (KernelContext::graphs), so compiling it would be wasted work. A
    // control op on the host path runs its subgraphs on the host too.
    if (nodes[i].subgraphs.empty() || !nodes[i].op->has(Trait::control)) continue;
    Device sub_device = lowered_.paths[i] == DispatchPath::host ? Device::cpu() : device;
    auto sp = std::make_unique<SubgraphPrograms>();
    for (const auto& sub : nodes[i].subgraphs)
      sp->programs.push_back(std::make_unique<Program>(*sub, sub_device, kernels, threads));
    subgraphs_[i] = std::move(sp);
  }
  liveness_ = analyze_liveness(lg, lowered_.kernels);
  use_arena_ = settings().arena;
  // Each intermediate is dropped after its last use, so memory follows liveness (the
  // whole of it when the arena is off).
  is_output_.assign(lg.num_values(), false);
  for (const Output& o : lg.outputs()) is_output_[size_t(o.value.id)] = true;
  std::vector<int32_t> last_use(lg.num_values(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (Value v : nodes[i].inputs) last_use[size_t(v.id)] = int32_t(i);
    for (Value v : nodes[i].outputs) last_use[size_t(v.id)] = std::max(last_use[v.id], int32_t(i));
  }
  release_after_.resize(nodes.size());
  for (size_t v = 0; v < last_use.size(); ++v)
    if (last_use[v] >= 0 && !is_output_[v])
      release_after_[size_t(last_use[v])].push_back(int32_t(v));
  // A CUDA Graph records launches on the device's stream: a node on the host path or with
  // subgraph programs of its own does more than that.
  graphs_ = graphs && backend_ && use_arena_ && !profiling();
  for (size_t i = 0; i < nodes.size(); ++i)
    if (lowered_.paths[i] == DispatchPath::host || subgraphs_[i]) graphs_ = false;
}

Program::~Program() = default;

// Checks each argument against its declared type and returns the sizes of the dims that
// are not static (the plan-cache key). Named symbols must agree across arguments.
std::vector<int64_t> Program::bind(std::span<const Tensor> args) const {
  const auto& decl = graph().args();
  std::vector<int64_t> key;
  std::vector<std::pair<const std::string*, std::pair<int64_t, size_t>>> symbols;
  for (size_t i = 0; i < decl.size(); ++i) {
    const Tensor& t = args[i];
    const TensorType& want = decl[i].value.type();
    if (!t.defined())
      fail<ValueError>("run", "expected a tensor for ", arg_label(decl[i]), ", got none");
    // A device program takes host tensors too (it copies them over); a CPU program does
    // not copy from devices behind the caller's back.
    if (!t.device().is_cpu() && t.device() != device_)
      fail<ValueError>("run", "expected ", arg_label(decl[i]), " on ", device_.str(), ", got ",
                       t.device().str());
    if (t.dtype() != want.dtype)
      fail<TypeError>("run", "expected ", arg_label(decl[i]), " of type ", want.str(), ", got ",
                      t.type().str());
    if (size_t(t.rank()) != want.shape.size())
      fail<ValueError>("run", "expected ", arg_label(decl[i]), " of type ", want.str(), ", got ",
                       t.type().str());
    for (size_t d = 0; d < want.shape.size(); ++d) {
      const Dim& dim = want.shape[d];
      int64_t n = t.shape()[d];
      if (dim.is_static()) {
        if (dim.value() != n)
          fail<ValueError>("run", "expected ", arg_label(decl[i]), " of type ", want.str(),
                           ", got ", t.type().str());
        continue;
      }
      key.push_back(n);
      if (dim.is_unknown()) continue;
      auto it = std::find_if(symbols.begin(), symbols.end(),
                             [&](const auto& s) { return *s.first == dim.symbol(); });
      if (it == symbols.end()) {
        symbols.push_back({&dim.symbol(), {n, i}});
      } else if (it->second.first != n) {
        fail<ValueError>("run", "expected dim '", dim.symbol(), "' of ", arg_label(decl[i]),
                         " to be ", it->second.first, " as bound by ",
                         arg_label(decl[it->second.second]), ", got ", n);
      }
    }
  }
  return key;
}

std::shared_ptr<const Plan> Program::plan_for(
    const std::vector<int64_t>& key,
    const std::function<std::vector<TensorType>()>& arg_types) const {
  {
    std::shared_lock lock(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  const Graph& g = graph();
  std::vector<TensorType> types(g.num_values());
  std::vector<TensorType> args = arg_types();
  for (size_t i = 0; i < g.args().size(); ++i) types[size_t(g.args()[i].value.id)] = args[i];
  auto plan = std::make_shared<Plan>();
  plan->shapes.resize(g.nodes().size());
  plan->dynamic.assign(g.nodes().size(), false);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    std::vector<TensorType> in;
    bool dynamic = false;
    for (Value v : n.inputs) {
      in.push_back(types[size_t(v.id)]);
      dynamic |= !all_static(in.back());
    }
    std::vector<TensorType> out;
    // A control op's subgraphs keep their symbolic signature, which concrete inputs do not
    // match: its outputs keep their declared types and, where those are not static, the
    // kernel makes them. Other ops with subgraphs (fused regions) infer from their inputs.
    if (dynamic || n.op->has(Trait::control)) {
      for (Value v : n.outputs) out.push_back(v.type());
    } else {
      out = infer_types(*n.op, in, n.attrs, n.subgraphs);
    }
    for (size_t j = 0; j < out.size(); ++j) {
      types[size_t(n.outputs[j].id)] = out[j];
      dynamic |= !all_static(out[j]);
      plan->shapes[i].push_back(all_static(out[j]) ? sizes_of(out[j].shape)
                                                   : std::vector<int64_t>{});
    }
    plan->dynamic[i] = dynamic;
  }
  plan->memory = plan_memory(g, lowered_.kernels, liveness_, args, plan->shapes, plan->dynamic,
                             packing_from_settings());
  if (graphs_ && std::none_of(plan->dynamic.begin(), plan->dynamic.end(), [](bool d) { return d; }))
    plan->graphs = make_graph_runs(*plan, args);
  std::unique_lock lock(cache_mu_);
  if (cache_.size() >= kMaxPlans) cache_.clear();
  return cache_.emplace(key, std::move(plan)).first->second;
}

namespace {

// The OpenMP threads of the calling thread for one run, given back after it: a run with
// 1 thread (constant folding's, inside a compile) must not leave the caller's later runs
// and the oneDNN primitives made meanwhile on one thread.
class ThreadsScope {
 public:
  explicit ThreadsScope(int64_t n) : saved_(n > 0 ? omp_get_max_threads() : 0) {
    if (n > 0) omp_set_num_threads(int(n));
  }
  ~ThreadsScope() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

}  // namespace

std::vector<Tensor> Program::run(std::span<const Tensor> args) const {
  const Graph& g = graph();
  if (args.size() != g.args().size())
    fail<ValueError>("run", "expected ", g.args().size(), " arguments, got ", args.size());
  std::shared_ptr<const Plan> plan = plan_for(bind(args), [&] {
    std::vector<TensorType> types;
    for (const Tensor& t : args) types.push_back(t.type());
    return types;
  });
  ThreadsScope threads(threads_);
  if (plan->graphs)
    if (std::optional<std::vector<Tensor>> out = run_graph(*plan, args)) return std::move(*out);
  DeviceRunGuard guard(backend_ != nullptr);
  std::vector<Tensor> vals(g.num_values());
  for (size_t i = 0; i < args.size(); ++i) vals[size_t(g.args()[i].value.id)] = args[i].to(device_);
  // This run's arena: each planned intermediate is a slice of it, and each slice keeps it
  // alive. A run of its own, so runs on several threads never share one.
  std::shared_ptr<Buffer> arena;
  if (use_arena_ && plan->memory.arena_bytes > 0)
    arena = Buffer::allocate(plan->memory.arena_bytes, device_);
  try {
    execute(*plan, plan->memory, arena, vals, /*release=*/true);
  } catch (...) {
    if (backend_) backend_->finish_checks(device_, false);
    throw;
  }
  if (backend_) backend_->finish_checks(device_, true);
  return collect(vals);
}

void Program::execute(const Plan& plan, const MemoryPlan& memory,
                      const std::shared_ptr<Buffer>& arena, std::vector<Tensor>& vals,
                      bool release) const {
  const Graph& g = graph();
  auto in_arena = [&](const Tensor& t) {
    const auto* p = static_cast<const uint8_t*>(t.data());
    const auto* base = static_cast<const uint8_t*>(arena->data());
    return p >= base && p < base + arena->size();
  };
  void* stream = backend_ ? backend_->stream(device_) : nullptr;
  std::vector<Tensor> ins, outs;
  std::vector<const Buffer*> handed;  // per output: the storage the kernel was given
  std::vector<std::vector<int64_t>> dyn_shapes;
  std::vector<bool> dyn_known;
  struct Marks {
    size_t node;
    std::shared_ptr<void> from, to;
  };
  std::vector<Marks> marks;  // profiling on a device: read once the run is queued
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const Kernel& k = *lowered_.kernels[i];
    if (kept_on_device(i)) {
      std::lock_guard lock(kept_mu_);
      if (kept_[i].empty()) {
        std::vector<Tensor> kept(n.outputs.size());
        if (!k.flags.makes_outputs)
          for (size_t j = 0; j < n.outputs.size(); ++j)
            kept[j] = Tensor::empty(n.outputs[j].dtype(), plan.shapes[i][j], device_);
        if (lowered_.paths[i] == DispatchPath::host) {
          run_on_host(i, k, {}, plan.shapes[i], kept);
        } else {
          KernelContext ctx{*n.op, n.attrs, device_, stream, nullptr, plan.shapes[i], {}};
          k.fn(ctx, {}, kept);
        }
        kept_[i] = std::move(kept);
      }
      for (size_t j = 0; j < n.outputs.size(); ++j) vals[size_t(n.outputs[j].id)] = kept_[i][j];
      continue;
    }
    // Assigned over the previous op's inputs: a Tensor's shape and strides keep their
    // storage, so the ops of a run copy their inputs without allocating.
    ins.resize(n.inputs.size());
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      const Tensor& t = vals[size_t(n.inputs[j].id)];
      if (k.flags.strided_inputs || t.is_contiguous())
        ins[j] = t;
      else
        ins[j] = t.contiguous();
    }
    // Output shapes: from the plan, or (dynamic nodes) from the tensors now at hand.
    std::span<const std::vector<int64_t>> shapes = plan.shapes[i];
    if (plan.dynamic[i]) {
      dyn_shapes.clear();
      std::vector<TensorType> in;
      for (const Tensor& t : ins) in.push_back(t.type());
      std::vector<TensorType> out;
      if (!n.op->has(Trait::control)) {
        out = infer_types(*n.op, in, n.attrs, n.subgraphs);
      } else {
        for (Value v : n.outputs) out.push_back(v.type());
      }
      dyn_known.clear();
      for (const TensorType& t : out) {
        dyn_known.push_back(all_static(t));
        dyn_shapes.push_back(all_static(t) ? sizes_of(t.shape) : std::vector<int64_t>{});
      }
      shapes = dyn_shapes;
    }
    outs.assign(n.outputs.size(), Tensor());
    handed.assign(n.outputs.size(), nullptr);
    if (!k.flags.makes_outputs)
      for (size_t j = 0; j < outs.size(); ++j) {
        if (plan.dynamic[i] && !dyn_known[j]) continue;
        outs[j] = plan.dynamic[i] ? Tensor::empty(n.outputs[j].dtype(), shapes[j], device_)
                                  : output_storage(plan, memory, i, j, ins, arena);
        handed[j] = outs[j].buffer().get();
      }
    KernelContext ctx{*n.op, n.attrs, device_, stream, subgraphs_[i].get(), shapes, n.subgraphs};
    auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<void> m0 = profiling() && backend_ ? backend_->mark(device_) : nullptr;
    if (lowered_.paths[i] == DispatchPath::host)
      run_on_host(i, k, ins, shapes, outs);
    else
      k.fn(ctx, ins, outs);
    if (m0)
      marks.push_back({i, std::move(m0), backend_->mark(device_)});
    else if (profiling())
      record_op_time(n,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (size_t j = 0; j < outs.size(); ++j) {
      if (!outs[j].defined() || outs[j].dtype() != n.outputs[j].dtype())
        fail<ValueError>(n.op->name, "expected the kernel to produce output ", j, " of dtype ",
                         dtype_name(n.outputs[j].dtype()), ", got ",
                         outs[j].defined() ? dtype_name(outs[j].dtype()) : "none");
      // A kernel that was handed its outputs but put others in their place (scan's
      // carries) may have returned an input: arena memory the plan gives to others later.
      if (arena && !k.flags.makes_outputs && outs[j].buffer().get() != handed[j] &&
          in_arena(outs[j]))
        outs[j] = outs[j].clone();
      vals[size_t(n.outputs[j].id)] = std::move(outs[j]);
    }
    if (release)
      for (int32_t v : release_after_[i]) vals[size_t(v)] = Tensor();
  }
  for (const Marks& m : marks)
    record_op_time(nodes[m.node], backend_->seconds_between(m.from.get(), m.to.get()));
}

std::vector<Tensor> Program::collect(const std::vector<Tensor>& vals) const {
  const Graph& g = graph();
  std::vector<Tensor> result;
  for (const Output& o : g.outputs()) {
    // A constant's tensor is its literal's bytes, a kept node's is reused by every run: the
    // caller gets a copy it may write.
    const Node* p = g.producer(o.value);
    const Tensor& t = vals[size_t(o.value.id)];
    bool shared = p && (p->op->name == "constant" || kept_on_device(size_t(p - g.nodes().data())));
    result.push_back(shared ? t.clone() : t);
  }
  return result;
}

// Node i's output j: its arena slice (taking over a dying input's storage where the plan
// says so and the input is still laid out as planned), else fresh memory.
Tensor Program::output_storage(const Plan& plan, const MemoryPlan& memory, size_t node, size_t j,
                               std::span<const Tensor> ins,
                               const std::shared_ptr<Buffer>& arena) const {
  const Node& n = graph().nodes()[node];
  Value o = n.outputs[j];
  const std::vector<int64_t>& shape = plan.shapes[node][j];
  int64_t off = arena ? memory.offset[size_t(o.id)] : -1;
  if (off < 0) return Tensor::empty(o.dtype(), shape, device_);
  uint8_t* p = static_cast<uint8_t*>(arena->data()) + off;
  int32_t k = memory.inplace[size_t(o.id)];
  if (k >= 0) {
    size_t bytes = dtype_nbytes(o.dtype(), checked_numel(shape, "run"));
    if (!can_overwrite(ins, n.inputs, size_t(k), p, bytes))
      return Tensor::empty(o.dtype(), shape, device_);
  }
  return Tensor::wrap(o.dtype(), shape, p, device_, [arena](void*) {});
}

bool Program::kept_on_device(size_t node) const {
  if (!backend_) return false;
  const Node& n = graph().nodes()[node];
  if (!n.inputs.empty() || n.op->has(Trait::random) || n.op->has(Trait::side_effect)) return false;
  for (Value v : n.outputs)
    if (!all_static(v.type())) return false;
  return true;
}

void Program::run_on_host(size_t node, const Kernel& k, std::span<const Tensor> ins,
                          std::span<const std::vector<int64_t>> shapes,
                          std::span<Tensor> outs) const {
  const Node& n = graph().nodes()[node];
  std::vector<Tensor> hins, houts(outs.size());
  for (const Tensor& t : ins) hins.push_back(t.to(Device::cpu()));
  if (!k.flags.makes_outputs)
    for (size_t j = 0; j < outs.size(); ++j)
      if (outs[j].defined()) houts[j] = Tensor::empty(outs[j].dtype(), outs[j].shape());
  KernelContext ctx{*n.op,  n.attrs,    Device::cpu(), nullptr, subgraphs_[node].get(),
                    shapes, n.subgraphs};
  k.fn(ctx, hins, houts);
  for (size_t j = 0; j < outs.size(); ++j) {
    if (!houts[j].defined()) continue;  // reported by the caller
    if (outs[j].defined() && outs[j].shape() == houts[j].shape() &&
        outs[j].dtype() == houts[j].dtype())
      backend_->copy(houts[j], outs[j]);
    else
      outs[j] = houts[j].to(device_);
  }
}

MemoryStats Program::memory_stats(const std::map<std::string, int64_t>& dims) const {
  std::vector<TensorType> types;
  std::vector<int64_t> key;
  for (const Arg& a : graph().args()) {
    TensorType t = a.value.type();
    for (Dim& d : t.shape) {
      if (d.is_static()) continue;
      if (d.is_unknown())
        fail<ValueError>("memory_stats", "expected named or static dims in ", arg_label(a),
                         ", got ", t.str());
      auto it = dims.find(d.symbol());
      if (it == dims.end())
        fail<ValueError>("memory_stats", "expected a size for dim '", d.symbol(), "' of ",
                         arg_label(a), ", got none");
      if (it->second < 0)
        fail<ValueError>("memory_stats", "expected a size >= 0 for dim '", d.symbol(), "', got ",
                         it->second);
      key.push_back(it->second);
      d = Dim(it->second);
    }
    types.push_back(std::move(t));
  }
  return plan_for(key, [&] { return types; })->memory.stats;
}

size_t Program::cached_plans() const {
  std::shared_lock lock(cache_mu_);
  return cache_.size();
}

}  // namespace rlx::detail
