// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2,
// 3", SC'11; the Random123 reference) and the streams rlx draws from it. Header-only and
// dependency-free so that tests and other backends can reproduce the exact numbers: CUDA
// sources call the same functions in device code (the CUDA sampler's draws).
//
// The stream of a random op (uniform, normal, dropout):
//   key      = (low 32 bits of seed, high 32 bits of seed)
//   counter  = (low 32 bits of b, high 32 bits of b, low 32 of s, high 32 of s) for block b,
//              where s is the optional key input as a 64-bit integer (0 without one), i.e.
//              the key input is added to the 128-bit counter times 2^64, so different key
//              inputs give disjoint streams rather than shifted copies of one stream.
//   block b  = philox4x32_10(counter, key), four 32-bit words w0..w3.
// Floats from words (the standard top-bits construction, exact in every precision):
//   u24(w)      = (w >> 8) * 2^-24                        in [0, 1)
//   u53(a, b)   = (((a << 32) | b) >> 11) * 2^-53         in [0, 1)
// How elements map to words is described next to each op (random.cpp, dropout in nn.cpp).
#pragma once

#include <array>
#include <cstdint>

#include "backend/cpu/isa.h"

#ifdef __CUDACC__
#define RLX_PHILOX_FN __host__ __device__ inline
#else
#define RLX_PHILOX_FN inline
#endif

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace philox {

using Block = std::array<uint32_t, 4>;

inline constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
inline constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (Weyl)

// Ten rounds; the key is bumped between rounds.
RLX_PHILOX_FN Block philox4x32_10(Block c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(kM0) * c[0], p1 = uint64_t(kM1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1,
         uint32_t(p0)};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

// One op's stream (see above).
struct Stream {
  uint64_t seed = 0;
  uint64_t key_input = 0;

  RLX_PHILOX_FN Block block(uint64_t b) const {
    return philox4x32_10(
        {uint32_t(b), uint32_t(b >> 32), uint32_t(key_input), uint32_t(key_input >> 32)},
        uint32_t(seed), uint32_t(seed >> 32));
  }
};

RLX_PHILOX_FN float u24(uint32_t w) { return float(w >> 8) * 0x1p-24f; }
RLX_PHILOX_FN double u53(uint32_t a, uint32_t b) {
  return double(((uint64_t(a) << 32) | b) >> 11) * 0x1p-53;
}

}  // namespace philox
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
