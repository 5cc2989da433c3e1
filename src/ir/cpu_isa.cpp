#include "rlx/cpu_isa.h"

#include <cstdio>
#include <string>

#include "rlx/settings.h"

namespace rlx {

namespace {

CpuIsa choose() {
  const std::vector<CpuIsa> built = cpu_isas_built();
  if (built.size() == 1) {
    if (settings().cpu_isa != "auto" && settings().cpu_isa != "native")
      std::fprintf(stderr, "rlx: ignoring RLX_CPU_ISA='%s' (this build has one level, native)\n",
                   settings().cpu_isa.c_str());
    return built.front();
  }
  CpuIsa best = CpuIsa::baseline;
  for (CpuIsa l : built)
    if (cpu_isa_supported(l)) best = l;
  const std::string& want = settings().cpu_isa;
  if (want == "auto") return best;
  for (CpuIsa l : built) {
    if (cpu_isa_name(l) != want) continue;
    if (cpu_isa_supported(l)) return l;
    std::fprintf(stderr, "rlx: RLX_CPU_ISA=%s: this CPU lacks it; running %s\n", want.c_str(),
                 std::string(cpu_isa_name(best)).c_str());
    return best;
  }
  std::fprintf(stderr,
               "rlx: ignoring RLX_CPU_ISA='%s' (expected auto, baseline, avx2 or avx512); "
               "running %s\n",
               want.c_str(), std::string(cpu_isa_name(best)).c_str());
  return best;
}

}  // namespace

std::vector<CpuIsa> cpu_isas_built() {
#if defined(RLX_CPU_MULTI_ISA)
  return {CpuIsa::baseline, CpuIsa::avx2, CpuIsa::avx512};
#else
  return {CpuIsa::native};
#endif
}

namespace {

// The x86-64 levels by their features, in names both g++ and clang accept (clang 14 knows
// neither "x86-64-v3" nor "f16c"; every CPU with AVX2, FMA and BMI2 has F16C, LZCNT and
// MOVBE). The runtime's checks (libgcc, compiler-rt) include the OS's: AVX and AVX-512
// state saved by XSAVE (XCR0).
bool has_v2() {
  return __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("sse3") &&
         __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1") &&
         __builtin_cpu_supports("sse4.2");
}
bool has_v3() {
  return has_v2() && __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
         __builtin_cpu_supports("fma");
}
bool has_v4_vnni() {
  return has_v3() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

}  // namespace

bool cpu_isa_supported(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::baseline:
      return has_v2();
    case CpuIsa::avx2:
      return has_v3();
    case CpuIsa::avx512:
      return has_v4_vnni();
    case CpuIsa::native:
      return true;  // built for this machine (-march)
  }
  return false;
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::baseline:
      return "baseline";
    case CpuIsa::avx2:
      return "avx2";
    case CpuIsa::avx512:
      return "avx512";
    case CpuIsa::native:
      return "native";
  }
  return "?";
}

CpuIsa cpu_isa() {
  static const CpuIsa chosen = choose();
  return chosen;
}

bool cpu_isa_avx512() {
  const CpuIsa isa = cpu_isa();
  return isa == CpuIsa::avx512 || (isa == CpuIsa::native && __builtin_cpu_supports("avx512f"));
}

}  // namespace rlx
