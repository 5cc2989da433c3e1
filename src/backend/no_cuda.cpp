// A build without the CUDA backend (RLX_CUDA=OFF or no toolkit): no device, no kernels.
#include "rlx/cuda.h"
#include "rlx/error.h"
#include "rlx/kernel.h"
#include "rlx/session.h"
#include "rlx/tensor.h"
#include "runtime/device_backend.h"

namespace rlx {

namespace detail {
DeviceBackend* cuda_backend() { return nullptr; }
}  // namespace detail

namespace cuda {
bool available() { return false; }
int device_count() { return 0; }
void synchronize(int) {}
MemoryInfo memory_info(int) { return {}; }
size_t empty_cache(int) { return 0; }
void set_f32_matmul(std::string_view mode) {
  if (mode != "auto" && mode != "sgemm" && mode != "tc")
    fail<ValueError>("set_f32_matmul", "expected auto, sgemm or tc, got '", mode, "'");
}
Event::Event(int device) : device_(device) {
  detail::device_backend(Device::cuda(device));  // throws NotSupported: no backend
}
Event::~Event() = default;
Event::Event(Event&& o) noexcept = default;
Event& Event::operator=(Event&& o) noexcept = default;
void Event::record() {}
bool Event::done() const { return false; }
void Event::synchronize() const {}
double Event::elapsed_ms(const Event&) const { return 0; }

struct Pipeline::Impl {};
Pipeline::Pipeline(int device) {
  detail::device_backend(Device::cuda(device));  // throws NotSupported: no backend
}
Pipeline::~Pipeline() = default;
void Pipeline::read_back(const Tensor&) {}
Tensor Pipeline::take() { return {}; }
size_t Pipeline::queued() const { return 0; }
void Pipeline::finish() {}

unsigned long long* deferred_check(const KernelContext& ctx,
                                   std::function<void(int64_t, int64_t)>) {
  fail<DeviceError>(ctx.op.name, "expected a CUDA kernel's context for deferred_check, got ",
                    ctx.device.str(), " in a build without the CUDA backend");
}
}  // namespace cuda

void register_cuda_kernels(KernelRegistry&) {}

}  // namespace rlx
