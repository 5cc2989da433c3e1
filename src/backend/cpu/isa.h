// The CPU kernels are compiled once per instruction-set level (CMake's RLX_CPU_LEVELS:
// baseline, avx2, avx512), and rlx::register_cpu_kernels registers the level that
// rlx::cpu_isa() chose at run time (backend/cpu/isa.cpp). RLX_ISA_NS names the level's inline
// namespace (rlx::cpu::avx2, say): each level's functions and inline helpers are then symbols
// of their own, so the linker can never take a helper built for AVX-512 in place of the
// baseline's. Code outside the kernel sources that includes their headers (the CUDA
// backend, tests) sees rlx::cpu::generic; a build for one -march (RLX_MARCH) uses native.
#pragma once

#ifndef RLX_ISA_NS
#define RLX_ISA_NS generic
#endif
