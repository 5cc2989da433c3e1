// The device code every generated region kernel starts with (region.cpp): loads and
// stores per dtype (f16 / bf16 through PTX conversions, so NVRTC needs no header) and the
// offset of an element of a broadcast or strided input; then the eager kernels' functors,
// the text of elementwise_ops.cuh (kElementwiseOpsText, embedded by the build).
#pragma once

namespace rlx::cuda {

// elementwise_ops.cuh as text (generated from it at build time: cmake/embed_text.cmake).
extern const char* const kElementwiseOpsText;

// A region's first statement: a programmatically dependent kernel after it (a matvec
// reading its output, kernels.cuh's launch_pdl) may start and prefetch its weights.
inline constexpr const char* kPdlTrigger =
    "#if __CUDA_ARCH__ >= 900\n  asm volatile(\"griddepcontrol.launch_dependents;\");\n#endif\n";

inline constexpr const char* kRegionPrelude = R"(
typedef long long i64;
#define RLX_MAX_SITES 24
#define RLX_MAX_OUTS 8
#define RLX_DIMS 8
struct Args {
  i64 n;
  int rank;
  i64 size[RLX_DIMS];
  const void* in[RLX_MAX_SITES];
  void* out[RLX_MAX_OUTS];
  i64 stride[RLX_MAX_SITES][RLX_DIMS];
  i64 ostride[RLX_MAX_OUTS][RLX_DIMS];
  unsigned char flat[RLX_MAX_SITES];
  unsigned char oflat[RLX_MAX_OUTS];
};
__device__ __forceinline__ i64 site_off(const Args& a, int s, i64 i) {
  if (a.flat[s] == 1) return i;  // contiguous, the region's shape
  if (a.flat[s] == 2) return 0;  // one value for every element
  i64 off = 0;
  for (int d = a.rank - 1; d >= 0; --d) {
    i64 q = i / a.size[d];
    off += (i - q * a.size[d]) * a.stride[s][d];
    i = q;
  }
  return off;
}
// Outputs smaller than the region (a per-row value beside full rows) are written through
// stride-0 dims: every thread of a row writes the same value.
__device__ __forceinline__ i64 out_off(const Args& a, int j, i64 i) {
  if (a.oflat[j]) return i;
  i64 off = 0;
  for (int d = a.rank - 1; d >= 0; --d) {
    i64 q = i / a.size[d];
    off += (i - q * a.size[d]) * a.ostride[j][d];
    i = q;
  }
  return off;
}
__device__ __forceinline__ float ld_f32(const void* p, i64 o) { return ((const float*)p)[o]; }
__device__ __forceinline__ double ld_f64(const void* p, i64 o) { return ((const double*)p)[o]; }
__device__ __forceinline__ bool ld_bool(const void* p, i64 o) { return ((const unsigned char*)p)[o] != 0; }
__device__ __forceinline__ float ld_f16(const void* p, i64 o) {
  unsigned short h = ((const unsigned short*)p)[o];
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ float ld_bf16(const void* p, i64 o) {
  return __uint_as_float(((unsigned)((const unsigned short*)p)[o]) << 16);
}
__device__ __forceinline__ void st_f32(void* p, i64 o, float v) { ((float*)p)[o] = v; }
__device__ __forceinline__ void st_f64(void* p, i64 o, double v) { ((double*)p)[o] = v; }
__device__ __forceinline__ void st_bool(void* p, i64 o, bool v) { ((unsigned char*)p)[o] = v; }
__device__ __forceinline__ unsigned short to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ unsigned short to_bf16(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ void st_f16(void* p, i64 o, float v) { ((unsigned short*)p)[o] = to_f16(v); }
__device__ __forceinline__ void st_bf16(void* p, i64 o, float v) { ((unsigned short*)p)[o] = to_bf16(v); }
// A value rounded to f16 / bf16 and back: a cast to them quantises right away.
__device__ __forceinline__ float q_f16(float f) {
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(to_f16(f)));
  return r;
}
__device__ __forceinline__ float q_bf16(float f) { return __uint_as_float(((unsigned)to_bf16(f)) << 16); }
// Four consecutive elements from / to element o of a 16-byte-aligned buffer (o a multiple
// of 4): one or two vector loads or stores instead of four narrow ones.
template <class R, int N> struct Raw { R r[N]; };
#define RLX_VEC(sfx, C, E, R, N)                                                       \
  __device__ __forceinline__ void ldv_##sfx(const void* p, i64 o, C (&v)[4]) {       \
    Raw<R, N> w = *(const Raw<R, N>*)((const E*)p + o);                                \
    _Pragma("unroll") for (int k = 0; k < 4; ++k) v[k] = ld_##sfx(w.r, k);             \
  }                                                                                    \
  __device__ __forceinline__ void stv_##sfx(void* p, i64 o, const C (&v)[4]) {       \
    Raw<R, N> w;                                                                       \
    _Pragma("unroll") for (int k = 0; k < 4; ++k) st_##sfx(w.r, k, v[k]);              \
    *(Raw<R, N>*)((E*)p + o) = w;                                                      \
  }
RLX_VEC(f32, float, float, float4, 1)
RLX_VEC(f64, double, double, double2, 2)
RLX_VEC(f16, float, unsigned short, uint2, 1)
RLX_VEC(bf16, float, unsigned short, uint2, 1)
RLX_VEC(bool, bool, unsigned char, unsigned, 1)
)";

}  // namespace rlx::cuda
