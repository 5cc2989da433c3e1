// One instruction-set level's kernels (compiled once per level, backend/cpu/isa.h):
// isa.cpp's register_cpu_kernels calls the level rlx::cpu_isa() chose.
#include "backend/cpu/families.h"
#include "backend/cpu/quant_simd.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

void register_all(KernelRegistry& registry) {
  register_elementwise(registry);
  register_reduce(registry);
  register_linalg(registry);
  register_shape(registry);
  register_conv(registry);
  register_pool(registry);
  register_nn(registry);
  register_random(registry);
  register_control(registry);
  register_autodiff(registry);
  register_window_grad(registry);
  register_fused(registry);
  register_quant(registry);
  register_llm(registry);
  register_blocked(registry);

  register_region(registry);
  register_complex(registry);
  register_fft(registry);
}

// rows16 where the AVX-512 VNNI dots are built (its loads of whole lines stream faster,
// bench/RESULTS.md "rows16"); rows8, AVX2's form, elsewhere.
int layout_rows(DType t) {
  const int rows = qdot::avx512_rows8_act_bytes(quant::kQK) > 0 ? 16 : 8;
  return quant::interleavable(t, rows) ? rows : 1;
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
