// Shared pieces of the CPU kernels: storage types per dtype, dtype dispatch, f16/bf16
// conversion (computed in f32), threads, and registration.
#pragma once

#include <omp.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "backend/cpu/isa.h"
#include "rlx/error.h"
#include "rlx/kernel.h"
#include "rlx/tensor.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

// 16-bit floats as stored; arithmetic happens in float (compute_t).
struct f16_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

inline float to_f32(f16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h.bits);
#else
  return f16_to_f32(h.bits);
#endif
}
inline float to_f32(bf16_t h) {
  uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline f16_t to_f16(float f) {
#if defined(__F16C__)
  return {uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT))};
#else
  return {f32_to_f16(f)};
#endif
}
inline bf16_t to_bf16(float f) {  // round to nearest even; NaN stays a quiet NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {uint16_t(u >> 16)};
}

// The type arithmetic is done in: float for the 16-bit floats, the type itself otherwise
// (bool is stored and computed as uint8_t 0/1).
template <class T>
using compute_t =
    std::conditional_t<std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>, float, T>;

template <class T>
inline compute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>)
    return to_f32(v);
  else
    return v;
}
template <class T, class C>
inline T store(C v) {
  if constexpr (std::is_same_v<T, f16_t>)
    return to_f16(float(v));
  else if constexpr (std::is_same_v<T, bf16_t>)
    return to_bf16(float(v));
  else
    return T(v);
}

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>;

// Block conversion for loops that run in f32 over 16-bit data.
template <class T>
inline void widen(const T* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = to_f32(in[i]);
}
template <class T>
inline void narrow(const float* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = store<T>(in[i]);
}

// The storage type of a dtype, passed to visitors as a tag.
template <class T>
struct Tag {
  using type = T;
};

enum DTypeSet : unsigned {
  kFloat = 1u << 0,    // f32 f64 f16 bf16
  kInt = 1u << 1,      // i8 i16 i32 i64 u8
  kBool = 1u << 2,     // bool (as uint8_t)
  kString = 1u << 3,   // string handles (rlx/strings.h): only kernels that name it take them
  kComplex = 1u << 4,  // c64 c128 (std::complex): visit_complex, not visit
  kNumeric = kFloat | kInt,
  kAll = kFloat | kInt | kBool,
};

// Calls f(Tag<T>{}) with the storage type of `t`; `t` outside `allowed` throws
// NotSupported naming `where` (a kernel's supports() should have refused it already).
template <class F>
decltype(auto) visit(DType t, unsigned allowed, const char* where, F&& f) {
  auto deny = [&]() -> decltype(f(Tag<float>{})) {
    fail<NotSupported>(where, "expected a dtype this kernel handles, got ", dtype_name(t));
  };
  switch (t) {
    case DType::f32:
      return allowed & kFloat ? f(Tag<float>{}) : deny();
    case DType::f64:
      return allowed & kFloat ? f(Tag<double>{}) : deny();
    case DType::f16:
      return allowed & kFloat ? f(Tag<f16_t>{}) : deny();
    case DType::bf16:
      return allowed & kFloat ? f(Tag<bf16_t>{}) : deny();
    case DType::i8:
      return allowed & kInt ? f(Tag<int8_t>{}) : deny();
    case DType::i16:
      return allowed & kInt ? f(Tag<int16_t>{}) : deny();
    case DType::i32:
      return allowed & kInt ? f(Tag<int32_t>{}) : deny();
    case DType::i64:
      return allowed & kInt ? f(Tag<int64_t>{}) : deny();
    case DType::u8:
      return allowed & kInt ? f(Tag<uint8_t>{}) : deny();
    case DType::boolean:
      return allowed & kBool ? f(Tag<uint8_t>{}) : deny();
    default:  // string handles and quantized blocks are no numbers: their kernels say so
      return deny();
  }
}

// std::complex<float> / <double>, the storage of c64 / c128.
template <class T>
inline constexpr bool is_complex_v = false;
template <class R>
inline constexpr bool is_complex_v<std::complex<R>> = true;

// Calls f(Tag<std::complex<float>>{}) for c64, f(Tag<std::complex<double>>{}) for c128;
// any other dtype throws NotSupported naming `where`. (visit() leaves them out, so that
// the kernels that take no complex numbers are never compiled for them.)
template <class F>
decltype(auto) visit_complex(DType t, const char* where, F&& f) {
  if (t == DType::c64) return f(Tag<std::complex<float>>{});
  if (t != DType::c128)
    fail<NotSupported>(where, "expected a complex dtype (c64, c128), got ", dtype_name(t));
  return f(Tag<std::complex<double>>{});
}

// 16 bytes moved as one element (c128, by the kernels that only move data).
struct Bytes16 {
  uint64_t lo, hi;
};

// visit() over the float dtypes only: f is instantiated for float, double, f16_t, bf16_t.
template <class F>
void visit_float(DType t, const char* where, F&& f) {
  visit(t, kFloat, where, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) f(tag);
  });
}
// The same over the integer dtypes (i8 i16 i32 i64 u8).
template <class F>
void visit_int(DType t, const char* where, F&& f) {
  visit(t, kInt, where, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) f(tag);
  });
}

// Calls f(Tag<E>{}) with an unsigned type of `bytes` bytes: moving data does not care what
// the bits mean, so one instantiation per element size serves every dtype.
template <class F>
decltype(auto) visit_bytes(size_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(Tag<uint8_t>{});
    case 2:
      return f(Tag<uint16_t>{});
    case 4:
      return f(Tag<uint32_t>{});
    case 16:
      return f(Tag<Bytes16>{});
    default:
      return f(Tag<uint64_t>{});
  }
}

inline bool in_set(DType t, unsigned set) {
  if (is_float(t)) return set & kFloat;
  if (is_complex(t)) return set & kComplex;
  if (is_bool(t)) return set & kBool;
  if (is_string(t)) return set & kString;
  return set & kInt;
}

// The threads a parallel region started here would get: 1 inside one (nested regions run
// inline on the caller's thread).
inline int threads_here() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

// Runs f(begin, end) over [0, n) on the OpenMP threads, in chunks of at least `grain`
// items; small ranges (and calls from inside a parallel region) run inline. An exception
// thrown by f is rethrown on the calling thread (it must not escape an OpenMP region).
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  int64_t threads = threads_here();
  int64_t chunks = std::min<int64_t>(
      threads, (n + std::max<int64_t>(grain, 1) - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    f(int64_t(0), n);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel for num_threads(int(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      f(n * c / chunks, n * (c + 1) / chunks);
    } catch (...) {
#pragma omp critical(rlx_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Registration of one CPU kernel.
inline void add_kernel(KernelRegistry& r, std::string op, KernelFn fn, SupportsFn supports = {},
                       KernelFlags flags = {}) {
  r.add(std::move(op), DeviceKind::cpu, std::move(fn), std::move(supports), flags);
}

// supports(): the dtype of input `index` (or of output 0 when the op has no inputs)
// belongs to `set`.
inline SupportsFn dtype_in(unsigned set, size_t index = 0) {
  return [set, index](const KernelQuery& q) {
    if (index < q.inputs.size()) return in_set(q.inputs[index].dtype, set);
    return !q.outputs.empty() && in_set(q.outputs[0].dtype, set);
  };
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
