#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "passes/families.h"
#include "rlx/error.h"
#include "rlx/settings.h"
#include "rlx/text.h"
#include "rlx/verify.h"

namespace rlx {

std::string_view precision_name(Precision p) {
  static constexpr std::string_view kNames[] = {"f32", "bf16", "f16", "auto_bf16", "auto_f16"};
  return kNames[size_t(p)];
}

struct PassRegistry::Impl {
  mutable std::shared_mutex mu;
  std::map<std::string, PassInfo, std::less<>> passes;
};

PassRegistry::PassRegistry() : impl_(std::make_unique<Impl>()) {}
PassRegistry::~PassRegistry() = default;

PassRegistry& PassRegistry::global() {
  static PassRegistry* r = [] {
    auto* reg = new PassRegistry();
    passes::register_core_passes(*reg);
    return reg;
  }();
  return *r;
}

void PassRegistry::add(PassInfo pass) {
  if (pass.name.empty() || !pass.run)
    fail<ValueError>("PassRegistry", "expected a pass with a name and a function, got '", pass.name,
                     "'", pass.run ? "" : " without a function");
  std::unique_lock lock(impl_->mu);
  if (impl_->passes.count(pass.name))
    fail<ValueError>("PassRegistry", "expected a new pass name, got '", pass.name,
                     "' (already registered)");
  std::string name = pass.name;
  impl_->passes.emplace(std::move(name), std::move(pass));
}

const PassInfo* PassRegistry::find(std::string_view name) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->passes.find(name);
  return it == impl_->passes.end() ? nullptr : &it->second;
}

const PassInfo& PassRegistry::get(std::string_view name) const {
  if (const PassInfo* p = find(name)) return *p;
  std::string known;
  for (const PassInfo* p : all()) known += (known.empty() ? "" : ", ") + p->name;
  fail<ValueError>("passes", "expected a pass among {", known, "}, got '", name, "'");
}

std::vector<const PassInfo*> PassRegistry::all() const {
  std::shared_lock lock(impl_->mu);
  std::vector<const PassInfo*> out;
  for (const auto& [name, p] : impl_->passes) out.push_back(&p);
  return out;
}

std::vector<std::string> default_pipeline(Device device, int opt_level, Precision precision) {
  std::vector<std::string> want;
  // dce again after simplify and cse: the nodes they bypass (x * sigmoid(x)'s sigmoid, now a
  // silu) would otherwise still read their inputs when the fusions ask for single readers.
  if (opt_level >= 1) want = {"dce", "constant_folding", "simplify", "cse", "dce"};
  if (opt_level >= 2) {
    // Epilogue fusions first (they see plain matmul / conv nodes), then precision (so the
    // fused ops compute in 16 bits), then the clean-up its casts need, and elementwise
    // fusion last, over everything that is left.
    for (const char* p :
         {"bn_folding", "layout_sinking", "attention_fusion", "attention_layout", "matmul_fusion",
          "conv_taps", "conv_fusion", "nchwc_layout", "conv_prologue"})
      want.push_back(p);
  }
  if (opt_level >= 1 && precision != Precision::f32) {
    want.push_back("mixed_precision");
    // Again, for the casts back to f32 after 16-bit products (a GEMM can store f32), and
    // for transposed weights now read through a cast.
    if (opt_level >= 2) {
      want.push_back("matmul_fusion");
      want.push_back("layout_sinking");
    }
  }
  if (opt_level >= 2) {
    // norm_fusion and cast_batching after the casts settle, before elementwise fusion
    // takes the adds and casts; attention_stats once the layouts and casts of attention's
    // inputs are final (a forward and its backward then read the same values).
    for (const char* p : {"simplify", "cse", "attention_stats", "norm_fusion", "cast_batching",
                          "elementwise_fusion"})
      want.push_back(p);
  }
  if (opt_level >= 1) want.push_back("dce");
  // The CPU's own layouts (blocked conv, fused conv prologues) mean nothing elsewhere; its
  // attention kernel reads bshd through copies, no better than the transposes.
  std::erase_if(want, [&](const std::string& p) {
    return device.is_cpu() ? p == "attention_layout" : p == "nchwc_layout" || p == "conv_prologue";
  });
  // A build without some pass (a backend that registers its own later) leaves it out.
  std::vector<std::string> out;
  for (auto& p : want)
    if (PassRegistry::global().find(p)) out.push_back(std::move(p));
  return out;
}

namespace {}  // namespace

std::string PipelineResult::str() const {
  std::string s = "pass                    nodes before -> after      ms\n";
  char line[160];
  double total = 0;
  for (const PassStat& st : stats) {
    std::snprintf(line, sizeof line, "%-22s %8zu -> %-8zu %8.2f%s\n", st.name.c_str(),
                  st.nodes_before, st.nodes_after, st.ms, st.changed ? "" : "  (no change)");
    s += line;
    total += st.ms;
  }
  std::snprintf(line, sizeof line, "%-22s %8s    %-8s %8.2f\n", "total", "", "", total);
  return s + line;
}

std::unique_ptr<Graph> run_pass(std::string_view name, const Graph& g, const PassContext& ctx) {
  return PassRegistry::global().get(name).run(g, ctx);
}

PipelineResult run_pipeline(const Graph& g, std::span<const std::string> passes,
                            const PassContext& ctx) {
  const PassRegistry& reg = PassRegistry::global();
  std::vector<const PassInfo*> infos;
  for (const std::string& name : passes) infos.push_back(&reg.get(name));
  const bool verify_each = settings().verify;
  const bool debug = settings().debug_has("passes");

  PipelineResult result;
  std::unique_ptr<Graph> owned;
  const Graph* cur = &g;
  for (const PassInfo* p : infos) {
    PassStat st{p->name, cur->nodes().size(), cur->nodes().size(), 0, false};
    auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<Graph> next = p->run(*cur, ctx);
    st.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (next) {
      st.changed = true;
      st.nodes_after = next->nodes().size();
      if (verify_each) {
        try {
          verify(*next);
        } catch (const Error& e) {
          fail<ValueError>("passes", "expected pass '", p->name,
                           "' to leave a valid graph, got: ", e.what());
        }
      }
      owned = std::move(next);
      cur = owned.get();
    }
    result.stats.push_back(std::move(st));
  }
  result.graph = owned ? std::move(owned) : g.clone();
  if (debug) std::fprintf(stderr, "%s", result.str().c_str());
  if (settings().debug_has("graph"))  // the graph the pipeline leaves, as text
    std::fprintf(stderr, "%s", print_graph(*result.graph).c_str());
  return result;
}

}  // namespace rlx
