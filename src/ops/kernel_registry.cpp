#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "ops/kernel_registrations.h"
#include "rlx/kernel.h"

namespace rlx {

namespace {
std::atomic<uint64_t> g_registrations{0};
}  // namespace

uint64_t detail::kernel_registrations() { return g_registrations.load(); }

struct KernelRegistry::Impl {
  mutable std::shared_mutex mu;
  // Per (op, device), in registration order. Kernels are heap-held: pointers stay valid.
  std::map<std::pair<std::string, DeviceKind>, std::vector<std::unique_ptr<Kernel>>, std::less<>>
      kernels;
};

KernelRegistry::KernelRegistry() : impl_(std::make_unique<Impl>()) {}
KernelRegistry::~KernelRegistry() = default;

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry* reg = new KernelRegistry();  // never destroyed, like OpRegistry
  return *reg;
}

void KernelRegistry::add(std::string op, DeviceKind device, KernelFn fn, SupportsFn supports,
                         KernelFlags flags) {
  if (!fn)
    fail<ValueError>("KernelRegistry", "expected a kernel function for '", op, "', got none");
  std::unique_lock lock(impl_->mu);
  auto k = std::make_unique<Kernel>(Kernel{op, device, std::move(fn), std::move(supports), flags});
  impl_->kernels[{std::move(op), device}].push_back(std::move(k));
  g_registrations.fetch_add(1);
}

void KernelRegistry::add_composite(std::string op, DeviceKind device, DecomposeFn fn,
                                   SupportsFn supports) {
  if (!fn)
    fail<ValueError>("KernelRegistry", "expected a composite function for '", op, "', got none");
  std::unique_lock lock(impl_->mu);
  auto k = std::make_unique<Kernel>(Kernel{op, device, {}, std::move(supports), {}});
  k->composite = std::move(fn);
  impl_->kernels[{std::move(op), device}].push_back(std::move(k));
  g_registrations.fetch_add(1);
}

const Kernel* KernelRegistry::find(const KernelQuery& q, DeviceKind device) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->kernels.find(std::pair{q.op.name, device});
  if (it == impl_->kernels.end()) return nullptr;
  for (const auto& k : it->second)
    if (k->accepts(q)) return k.get();
  return nullptr;
}

bool KernelRegistry::has(std::string_view op, DeviceKind device) const {
  std::shared_lock lock(impl_->mu);
  return impl_->kernels.count(std::pair{std::string(op), device}) > 0;
}

}  // namespace rlx
