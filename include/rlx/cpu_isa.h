// The instruction-set level the CPU kernels run at. A default build compiles them once per
// level (baseline: x86-64-v2; avx2: x86-64-v3, AVX2 + FMA + F16C; avx512: x86-64-v4 with
// AVX-512 VNNI) and picks one when the first CPU kernels are registered: the best this CPU
// has, or the one RLX_CPU_ISA (settings().cpu_isa) names. A build for one -march (CMake's
// RLX_MARCH, such as native) has the single level `native`.
#pragma once

#include <string_view>
#include <vector>

namespace rlx {

enum class CpuIsa { baseline, avx2, avx512, native };

// The level in use: fixed at the first call (which the first CPU compile makes).
CpuIsa cpu_isa();

// "baseline", "avx2", "avx512" or "native".
std::string_view cpu_isa_name(CpuIsa isa);

// The levels this build has, lowest first, and whether this CPU can run one.
std::vector<CpuIsa> cpu_isas_built();
bool cpu_isa_supported(CpuIsa isa);

// Whether the kernels in use have AVX-512 (16-float vectors): the avx512 level, or a native
// build on a CPU with AVX-512.
bool cpu_isa_avx512();

}  // namespace rlx
