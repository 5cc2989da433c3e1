// Registers the CPU kernels of the instruction-set level rlx::cpu_isa() chose (each level's
// kernels are their own inline namespace, backend/cpu/isa.h). Compiled once, for the
// baseline.
#include <mutex>
#include <set>

#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/quant.h"
#include "rlx/session.h"

namespace rlx {

// What one level's register.cpp defines.
#define RLX_CPU_LEVEL_API(level)               \
  namespace cpu {                              \
  inline namespace level {                     \
  void register_all(KernelRegistry& registry); \
  int layout_rows(DType t);                    \
  }                                            \
  }

#if defined(RLX_CPU_MULTI_ISA)
RLX_CPU_LEVEL_API(baseline)
RLX_CPU_LEVEL_API(avx2)
RLX_CPU_LEVEL_API(avx512)
#else
RLX_CPU_LEVEL_API(native)
#endif
#undef RLX_CPU_LEVEL_API

namespace {

struct Level {
  void (*register_all)(KernelRegistry&);
  int (*layout_rows)(DType);
};

Level level() {
  switch (cpu_isa()) {
#if defined(RLX_CPU_MULTI_ISA)
    case CpuIsa::baseline:
      return {cpu::baseline::register_all, cpu::baseline::layout_rows};
    case CpuIsa::avx2:
      return {cpu::avx2::register_all, cpu::avx2::layout_rows};
    case CpuIsa::avx512:
      return {cpu::avx512::register_all, cpu::avx512::layout_rows};
#else
    case CpuIsa::native:
      return {cpu::native::register_all, cpu::native::layout_rows};
#endif
    default:
      break;
  }
  fail<NotSupported>("cpu", "expected a level this build has, got ", cpu_isa_name(cpu_isa()));
}

}  // namespace

void register_cpu_kernels(KernelRegistry& registry) {
  static std::mutex mu;
  static std::set<const KernelRegistry*> done;
  std::lock_guard lock(mu);
  if (!done.insert(&registry).second) return;
  level().register_all(registry);
}

namespace quant {

int cpu_layout_rows(DType t) { return level().layout_rows(t); }

}  // namespace quant

}  // namespace rlx
