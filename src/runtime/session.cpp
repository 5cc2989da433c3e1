#include "rlx/session.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "ops/kernel_registrations.h"
#include "rlx/compile_cache.h"
#include "rlx/settings.h"
#include "runtime/device_backend.h"
#include "runtime/program.h"

namespace rlx {

struct CompiledGraph::Impl {
  Device device;
  std::shared_ptr<const detail::Program> program;
  std::vector<std::string> inputs, params, outputs;
  std::map<std::string, size_t, std::less<>> param_index;  // a train step sets hundreds
  std::vector<size_t> input_slot, param_slot;              // argument index of each input / param
  std::vector<PassStat> pass_stats;
  bool from_cache = false;

  // Params are swapped as a whole, so a run sees one consistent set while another thread
  // calls set_param; with no run holding the set, set_param writes it in place (a train
  // step rebinds every param and state: copying the set each time was quadratic).
  mutable std::shared_mutex mu;
  std::shared_ptr<std::vector<Tensor>> param_values;

  size_t param_at(std::string_view name) const {
    auto it = param_index.find(name);
    return it == param_index.end() ? params.size() : it->second;
  }
};

CompiledGraph::CompiledGraph() = default;
CompiledGraph::~CompiledGraph() = default;
CompiledGraph::CompiledGraph(CompiledGraph&&) noexcept = default;
CompiledGraph& CompiledGraph::operator=(CompiledGraph&&) noexcept = default;

namespace {

std::string names_str(const std::vector<std::string>& names) {
  std::string s = "[";
  for (const auto& n : names) s += (s.size() > 1 ? ", " : "") + n;
  return s + "]";
}

size_t index_of(const std::vector<std::string>& names, std::string_view name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return i;
  return names.size();
}

int resolved_opt_level(const CompileOptions& options) {
  return options.opt_level >= 0 ? options.opt_level : settings().opt_level;
}

}  // namespace

std::vector<std::string> compile_pipeline(Device device, const CompileOptions& options) {
  std::vector<std::string> names =
      options.passes ? *options.passes
                     : default_pipeline(device, resolved_opt_level(options), options.precision);
  std::erase_if(names, [&](const std::string& n) {
    return std::find(options.disable_passes.begin(), options.disable_passes.end(), n) !=
           options.disable_passes.end();
  });
  return names;
}

const CompiledGraph::Impl& CompiledGraph::impl() const {
  if (!impl_) fail<ValueError>("run", "expected a compiled graph, got an empty CompiledGraph");
  return *impl_;
}

Device CompiledGraph::device() const { return impl().device; }
const DispatchReport& CompiledGraph::report() const { return impl().program->lowered().report; }
const Graph& CompiledGraph::lowered() const { return impl().program->graph(); }
const std::vector<PassStat>& CompiledGraph::pass_stats() const { return impl().pass_stats; }
bool CompiledGraph::from_cache() const { return impl().from_cache; }
std::vector<std::string> CompiledGraph::input_names() const { return impl().inputs; }
std::vector<std::string> CompiledGraph::param_names() const { return impl().params; }
std::vector<std::string> CompiledGraph::output_names() const { return impl().outputs; }
size_t CompiledGraph::cached_plans() const { return impl().program->cached_plans(); }
size_t CompiledGraph::graph_launches() const { return impl().program->graph_launches(); }
size_t CompiledGraph::graph_captures() const { return impl().program->graph_captures(); }
MemoryStats CompiledGraph::memory_stats(const std::map<std::string, int64_t>& dims) const {
  return impl().program->memory_stats(dims);
}

void CompiledGraph::set_param(std::string_view name, Tensor value) {
  const Impl& im = impl();
  size_t i = im.param_at(name);
  if (i == im.params.size())
    fail<ValueError>("set_param", "expected one of the params ", names_str(im.params), ", got '",
                     name, "'");
  if (!value.defined())
    fail<ValueError>("set_param", "expected a tensor for param '", name, "', got none");
  // The full check (dtype, rank, static dims) runs with the other arguments at run time;
  // dtype and rank are checked here too so the mistake shows where it was made.
  const TensorType& want = im.program->graph().args()[im.param_slot[i]].value.type();
  if (value.dtype() != want.dtype || size_t(value.rank()) != want.shape.size())
    fail<TypeError>("set_param", "expected param '", name, "' of type ", want.str(), ", got ",
                    value.type().str());
  std::unique_lock lock(impl_->mu);
  if (impl_->param_values.use_count() > 1)  // a run holds this set: a new one
    impl_->param_values = std::make_shared<std::vector<Tensor>>(*impl_->param_values);
  (*impl_->param_values)[i] = std::move(value);
}

Tensor CompiledGraph::param(std::string_view name) const {
  const Impl& im = impl();
  size_t i = im.param_at(name);
  if (i == im.params.size()) return {};
  std::shared_lock lock(im.mu);
  return (*im.param_values)[i];
}

std::vector<Tensor> CompiledGraph::run(std::span<const Tensor> inputs) const {
  const Impl& im = impl();
  if (inputs.size() != im.inputs.size())
    fail<ValueError>("run", "expected ", im.inputs.size(), " inputs ", names_str(im.inputs),
                     ", got ", inputs.size());
  std::shared_ptr<const std::vector<Tensor>> params;
  {
    std::shared_lock lock(im.mu);
    params = im.param_values;
  }
  std::vector<Tensor> args(im.input_slot.size() + im.param_slot.size());
  for (size_t i = 0; i < inputs.size(); ++i) args[im.input_slot[i]] = inputs[i];
  for (size_t i = 0; i < im.params.size(); ++i) {
    if (!(*params)[i].defined())
      fail<ValueError>("run", "expected param '", im.params[i],
                       "' to be set with set_param, got none");
    args[im.param_slot[i]] = (*params)[i];
  }
  return im.program->run(args);
}

TensorMap CompiledGraph::run(const TensorMap& inputs) const {
  const Impl& im = impl();
  for (const auto& [name, t] : inputs)
    if (index_of(im.inputs, name) == im.inputs.size())
      fail<ValueError>("run", "expected inputs ", names_str(im.inputs), ", got unknown input '",
                       name, "'");
  std::vector<Tensor> ordered;
  ordered.reserve(im.inputs.size());
  for (const auto& name : im.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) fail<ValueError>("run", "expected input '", name, "', got none");
    ordered.push_back(it->second);
  }
  std::vector<Tensor> outs = run(std::span<const Tensor>(ordered));
  TensorMap result;
  for (size_t i = 0; i < outs.size(); ++i) result.emplace(im.outputs[i], std::move(outs[i]));
  return result;
}

Session::Session(Device device) : device_(device) {
  // A device session needs the device (device_backend says what is missing) and the CPU
  // kernels too: they serve the host path.
  if (!device.is_cpu()) detail::device_backend(device);
  const detail::BuiltinBackends& bb = detail::builtin_backends();
  if (!bb.cpu_kernels)
    fail<NotSupported>("Session", "expected librlx's CPU backend linked in, got none (a static ",
                       "librlx: link it through its CMake target rlx::rlx, which keeps it)");
  bb.cpu_kernels(KernelRegistry::global());
  if (device.kind == DeviceKind::cuda && bb.cuda_kernels) bb.cuda_kernels(KernelRegistry::global());
}

namespace {

// A compile that can be shared: the program (immutable but for its own locked plan
// cache) and what the pipeline did.
struct CacheEntry {
  std::shared_ptr<const detail::Program> program;
  std::vector<PassStat> pass_stats;
};

// The process-wide in-memory compile cache; least recently used entries go first.
class ProgramCache {
 public:
  static ProgramCache& global() {
    static ProgramCache* c = new ProgramCache();
    return *c;
  }
  std::shared_ptr<const CacheEntry> find(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    it->second.last_use = ++clock_;
    return it->second.entry;
  }
  void put(const std::string& key, std::shared_ptr<const CacheEntry> e) {
    std::lock_guard lock(mu_);
    if (entries_.size() >= kMaxEntries) {
      auto oldest = entries_.begin();
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->second.last_use < oldest->second.last_use) oldest = it;
      entries_.erase(oldest);
    }
    entries_[key] = {std::move(e), ++clock_};
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return entries_.size();
  }
  void clear() {
    std::lock_guard lock(mu_);
    entries_.clear();
  }

 private:
  static constexpr size_t kMaxEntries = 64;
  struct Slot {
    std::shared_ptr<const CacheEntry> entry;
    uint64_t last_use = 0;
  };
  std::mutex mu_;
  std::map<std::string, Slot> entries_;
  uint64_t clock_ = 0;
};

// Only compiles against the global registry are cached: a caller's registry may die and
// another take its address.
bool cache_enabled(const CompileOptions& options) {
  return options.cache && settings().compile_cache &&
         (!options.kernels || options.kernels == &KernelRegistry::global());
}

// CUDA Graphs: as the options say, unless settings().cuda_graphs (0 / 1) says otherwise.
bool graphs_on(const CompileOptions& options) {
  int forced = settings().cuda_graphs;
  return forced >= 0 ? forced == 1 : options.cuda_graphs;
}

// Everything that decides the compiled program: the graph, the device, the kernels (by
// how many have been registered), the pipeline and its context, the thread count, the
// bound dims and the runtime's environment switches.
std::string cache_key(const Graph& g, Device device, const std::vector<std::string>& pipeline,
                      const PassContext& ctx, const CompileOptions& options) {
  std::string key = std::to_string(graph_hash(g)) + "|" + device.str() + "|" +
                    std::to_string(detail::kernel_registrations()) + "|" +
                    std::to_string(ctx.opt_level) + "|" +
                    std::string(precision_name(ctx.precision)) + "|" +
                    std::to_string(options.threads) + "|" + (graphs_on(options) ? "g" : "-") + "|";
  for (const auto& p : pipeline) key += p + ",";
  key += "|";
  for (const auto& [name, size] : options.dims) key += name + "=" + std::to_string(size) + ",";
  // Programs are built under the settings of the moment (the arena, the f32 GEMM mode, …).
  for (const SettingInfo& s : setting_table()) key += std::string("|") + s.value;
  return key;
}

std::shared_ptr<const CacheEntry> build(const Graph& g, Device device,
                                        const KernelRegistry& kernels,
                                        const std::vector<std::string>& pipeline,
                                        const PassContext& ctx, const CompileOptions& options) {
  std::unique_ptr<Graph> bound = options.dims.empty() ? nullptr : bind_dims(g, options.dims);
  // Decompositions first, so that the passes see (and fuse, fold, sink) what they are made of.
  DispatchReport decomposed;
  std::unique_ptr<Graph> inlined =
      inline_decompositions(bound ? *bound : g, device, kernels, decomposed);
  PipelineResult opt = run_pipeline(*inlined, pipeline, ctx);
  auto e = std::make_shared<CacheEntry>();
  e->pass_stats = std::move(opt.stats);
  e->program = std::make_shared<detail::Program>(*opt.graph, device, kernels, options.threads,
                                                 graphs_on(options), &decomposed);
  return e;
}

}  // namespace

size_t compile_cache_size() { return ProgramCache::global().size(); }
void clear_compile_cache() { ProgramCache::global().clear(); }

CompiledGraph Session::compile(const Graph& g, const CompileOptions& options) const {
  const KernelRegistry& kernels = options.kernels ? *options.kernels : KernelRegistry::global();
  PassContext ctx{device_, resolved_opt_level(options), options.precision, &kernels,
                  cpu_evaluator()};
  std::vector<std::string> pipeline = compile_pipeline(device_, options);
  std::shared_ptr<const CacheEntry> entry;
  bool hit = false;
  if (cache_enabled(options)) {
    std::string key = cache_key(g, device_, pipeline, ctx, options);
    entry = ProgramCache::global().find(key);
    hit = entry != nullptr;
    if (!entry) {
      entry = build(g, device_, kernels, pipeline, ctx, options);
      ProgramCache::global().put(key, entry);
    }
  } else {
    entry = build(g, device_, kernels, pipeline, ctx, options);
  }

  auto im = std::make_unique<CompiledGraph::Impl>();
  im->device = device_;
  im->program = entry->program;
  im->pass_stats = entry->pass_stats;
  im->from_cache = hit;
  if (options.print_report) std::fprintf(stderr, "%s", im->program->lowered().report.str().c_str());
  const Graph& lg = im->program->graph();
  for (size_t i = 0; i < lg.args().size(); ++i) {
    const Arg& a = lg.args()[i];
    if (a.kind == ArgKind::input) {
      im->inputs.push_back(a.name);
      im->input_slot.push_back(i);
    } else {
      im->param_index.emplace(a.name, im->params.size());
      im->params.push_back(a.name);
      im->param_slot.push_back(i);
    }
  }
  for (const Output& o : lg.outputs()) im->outputs.push_back(o.name);
  im->param_values = std::make_shared<std::vector<Tensor>>(im->params.size());
  CompiledGraph cg;
  cg.impl_ = std::move(im);
  return cg;
}

}  // namespace rlx
