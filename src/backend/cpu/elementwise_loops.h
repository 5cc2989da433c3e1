// The loop machinery of the elementwise kernels: an iteration space over the output
// with broadcast and strided inputs (dims collapsed where every operand is contiguous
// across them), walked in runs of the innermost dim; each run goes to an inner loop that
// has plain vectorisable fast paths (contiguous, scalar-broadcast) and otherwise gathers
// blocks of converted operands onto the stack.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/isa.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace ew {

constexpr int64_t kGrain = 32768;  // elements per thread chunk (cheap elementwise work)
constexpr int64_t kBlock = 256;    // elements gathered / converted on the stack at a time
// Tiles for transposed inputs: rows x columns (measured best of 16..128 x 8..64 on an
// add of a transposed 4096^2 / 3840^2 f32 input, about 3x faster than 64 x 64).
constexpr int64_t kTileRows = 128, kTileCols = 16;

template <class T>
inline constexpr bool is_float_storage_v = std::is_floating_point_v<T> || is_half_v<T>;

// The output shape with each input's strides (0 along broadcast dims), size-1 dims
// dropped and neighbouring dims merged where every input steps through them evenly. The
// output is contiguous, so flat element i of the space is output element i.
template <size_t N>
struct Space {
  std::vector<int64_t> shape;                   // innermost last; at least one dim
  std::vector<std::array<int64_t, N>> strides;  // [dim][input], in elements
  int64_t numel = 1;
  const std::array<int64_t, N>& inner() const { return strides.back(); }
};

template <size_t N>
Space<N> make_space(const std::array<const Tensor*, N>& in, const std::vector<int64_t>& out) {
  Space<N> s;
  size_t rank = out.size();
  for (size_t d = 0; d < rank; ++d) {
    int64_t n = out[d];
    s.numel *= n;
    if (n == 1) continue;
    std::array<int64_t, N> st{};
    for (size_t i = 0; i < N; ++i) {
      const Tensor& t = *in[i];
      int64_t k = int64_t(d) - int64_t(rank) + t.rank();  // inputs align on the right
      st[i] = k < 0 || t.shape()[size_t(k)] == 1 ? 0 : t.strides()[size_t(k)];
    }
    if (!s.shape.empty()) {
      bool merge = true;
      for (size_t i = 0; i < N; ++i) merge &= s.strides.back()[i] == st[i] * n;
      if (merge) {
        s.shape.back() *= n;
        s.strides.back() = st;
        continue;
      }
    }
    s.shape.push_back(n);
    s.strides.push_back(st);
  }
  if (s.shape.empty()) {
    s.shape.push_back(1);
    s.strides.push_back({});
  }
  return s;
}

// Calls f(out_index, offsets, n) for each run of the innermost dim within the flat output
// range [begin, end): n elements from output element out_index; input i starts at
// element offset offsets[i] and steps by s.inner()[i].
template <size_t N, class F>
void walk(const Space<N>& s, int64_t begin, int64_t end, F&& f) {
  size_t outer = s.shape.size() - 1;
  int64_t inner = s.shape[outer];
  int64_t col = begin % inner, row = begin / inner;
  std::vector<int64_t> idx(outer);
  std::array<int64_t, N> off{};
  for (size_t d = outer; d-- > 0;) {
    idx[d] = row % s.shape[d];
    row /= s.shape[d];
    for (size_t i = 0; i < N; ++i) off[i] += idx[d] * s.strides[d][i];
  }
  while (begin < end) {
    int64_t n = std::min(inner - col, end - begin);
    std::array<int64_t, N> o = off;
    for (size_t i = 0; i < N; ++i) o[i] += col * s.inner()[i];
    f(begin, o, n);
    begin += n;
    col = 0;
    for (size_t d = outer; d-- > 0;) {  // next row, carrying into outer dims
      for (size_t i = 0; i < N; ++i) off[i] += s.strides[d][i];
      if (++idx[d] < s.shape[d]) break;
      for (size_t i = 0; i < N; ++i) off[i] -= s.strides[d][i] * s.shape[d];
      idx[d] = 0;
    }
  }
}

// Whether an input reads across the inner dim with a wide step while the dim above is
// the narrower one (a transposed view): row-by-row runs would touch a new cache line
// and page per element, so the last two dims go in tiles instead.
template <size_t N>
bool wants_tiles(const Space<N>& s) {
  size_t r = s.shape.size();
  if (r < 2) return false;
  for (size_t i = 0; i < N; ++i) {
    int64_t inner = std::abs(s.strides[r - 1][i]), above = std::abs(s.strides[r - 2][i]);
    if (inner > 1 && above > 0 && above < inner) return true;
  }
  return false;
}

// Each input's offset at index `outer` of the dims before the last two (row-major).
template <size_t N>
std::array<int64_t, N> outer_offsets(const Space<N>& s, int64_t outer) {
  std::array<int64_t, N> off{};
  for (size_t d = s.shape.size() - 2; d-- > 0;) {
    int64_t k = outer % s.shape[d];
    outer /= s.shape[d];
    for (size_t i = 0; i < N; ++i) off[i] += k * s.strides[d][i];
  }
  return off;
}

// Runs of at most kTileCols along the inner dim, kTileRows rows at a time: a tile reads
// kTileCols lines of the transposed input per row, each line serving several rows.
template <size_t N, class F>
void walk_tiles(const Space<N>& s, int64_t begin, int64_t end, F&& f) {
  size_t r = s.shape.size();
  int64_t rows = s.shape[r - 2], cols = s.shape[r - 1];
  int64_t row_tiles = (rows + kTileRows - 1) / kTileRows;
  for (int64_t task = begin; task < end; ++task) {  // (outer index, row tile)
    int64_t outer = task / row_tiles, r0 = task % row_tiles * kTileRows;
    int64_t r1 = std::min(rows, r0 + kTileRows);
    const std::array<int64_t, N> base = outer_offsets(s, outer);
    for (int64_t c0 = 0; c0 < cols; c0 += kTileCols)
      for (int64_t row = r0; row < r1; ++row) {
        std::array<int64_t, N> off;
        for (size_t i = 0; i < N; ++i)
          off[i] = base[i] + row * s.strides[r - 2][i] + c0 * s.strides[r - 1][i];
        f((outer * rows + row) * cols + c0, off, std::min(kTileCols, cols - c0));
      }
  }
}

// Whether the inner runs are short (a blocked layout's 8 or 16 channels, broadcast over
// the pixels above them): one call of f per run would cost more than its few elements.
template <size_t N>
bool short_runs(const Space<N>& s) {
  return s.numel > 0 && s.shape.size() >= 2 && s.shape.back() < 32 &&
         s.numel >= 4 * s.shape.back() && !wants_tiles(s);
}

// Calls f(out_index, offsets, rows) for blocks of rows of the last two dims, in parallel:
// `rows` runs of the inner dim from output element out_index, input i starting at offsets[i]
// and stepping s.strides[r - 2][i] per row.
template <size_t N, class F>
void for_each_rows(const Space<N>& s, F&& f) {
  size_t r = s.shape.size();
  int64_t rows = s.shape[r - 2], cols = s.shape[r - 1];
  int64_t block = std::max<int64_t>(1, 2048 / cols);  // rows per task
  int64_t blocks = (rows + block - 1) / block, tasks = s.numel / (rows * cols) * blocks;
  parallel_for(tasks, std::max<int64_t>(1, kGrain / (block * cols)), [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      int64_t outer = task / blocks, r0 = task % blocks * block;
      std::array<int64_t, N> off = outer_offsets(s, outer);
      for (size_t i = 0; i < N; ++i) off[i] += r0 * s.strides[r - 2][i];
      f((outer * rows + r0) * cols, off, std::min(block, rows - r0));
    }
  });
}

// Runs f over the space in parallel chunks: of the flat output range, or of row tiles.
template <size_t N, class F>
void for_each_run(const Space<N>& s, F&& f) {
  if (s.numel == 0) return;
  if (!wants_tiles(s)) {
    parallel_for(s.numel, kGrain, [&](int64_t b, int64_t e) { walk(s, b, e, f); });
    return;
  }
  size_t r = s.shape.size();
  int64_t rows = s.shape[r - 2], cols = s.shape[r - 1];
  int64_t tasks = s.numel / (rows * cols) * ((rows + kTileRows - 1) / kTileRows);
  int64_t per_task = std::min(rows, kTileRows) * cols;
  parallel_for(tasks, std::max<int64_t>(1, kGrain / per_task),
               [&](int64_t b, int64_t e) { walk_tiles(s, b, e, f); });
}

// --- blocks on the stack ------------------------------------------------------------

// n elements from p (step `step`) into out, converted to the compute type.
template <class T>
inline void load_block(const T* p, int64_t step, compute_t<T>* out, int64_t n) {
#if defined(__F16C__)
  if constexpr (std::is_same_v<T, f16_t>) {
    if (step == 1) {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i,
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))));
      for (; i < n; ++i) out[i] = to_f32(p[i]);
      return;
    }
  }
#endif
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (step == 1) {
      for (int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(uint32_t(p[i].bits) << 16);
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) out[i] = load(p[i * step]);
}

// n compute-type values into contiguous storage (f16 / bf16 rounded to nearest even).
template <class T>
inline void store_block(const compute_t<T>* in, T* p, int64_t n) {
  if constexpr (std::is_same_v<T, f16_t>) {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; ++i) p[i] = to_f16(in[i]);
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    for (int64_t i = 0; i < n; ++i) {  // to_bf16 without the branch, so it vectorises
      uint32_t u = std::bit_cast<uint32_t>(in[i]);
      uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
      uint32_t quiet = (u >> 16) | 0x40u;
      p[i].bits = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] = T(in[i]);
  }
}

// --- inner loops --------------------------------------------------------------------
// f maps compute-type operands to the output's compute type (or bool for predicates).

// y = f(x) over n contiguous values; a functor may bring a whole-run version (`run`).
template <class F, class X, class Y>
inline void apply_n(const F& f, const X* x, Y* y, int64_t n) {
  if constexpr (requires { f.run(x, y, n); })
    f.run(x, y, n);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = Y(f(x[i]));
}

template <class T, class U, class F>
void unary_run(const T* x, int64_t sx, U* y, int64_t n, const F& f) {
  if constexpr (!is_half_v<T> && !is_half_v<U>) {
    if (sx == 1) return apply_n(f, x, y, n);
  }
  compute_t<T> xb[kBlock];
  compute_t<U> yb[kBlock];
  for (int64_t j = 0; j < n; j += kBlock) {
    int64_t m = std::min(kBlock, n - j);
    load_block(x + j * sx, sx, xb, m);
    apply_n(f, xb, yb, m);
    store_block(yb, y + j, m);
  }
}

template <class T, class U, class F>
void binary_run(const T* a, int64_t sa, const T* b, int64_t sb, U* y, int64_t n, const F& f) {
  using C = compute_t<T>;
  if constexpr (!is_half_v<T> && !is_half_v<U>) {
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) y[i] = U(f(a[i], b[i]));
      return;
    }
    if (sa == 1 && sb == 0) {
      C bv = b[0];
      for (int64_t i = 0; i < n; ++i) y[i] = U(f(a[i], bv));
      return;
    }
    if (sa == 0 && sb == 1) {
      C av = a[0];
      for (int64_t i = 0; i < n; ++i) y[i] = U(f(av, b[i]));
      return;
    }
  }
  C ab[kBlock], bb[kBlock];
  compute_t<U> yb[kBlock];
  for (int64_t j = 0; j < n; j += kBlock) {
    int64_t m = std::min(kBlock, n - j);
    load_block(a + j * sa, sa, ab, m);
    load_block(b + j * sb, sb, bb, m);
    for (int64_t i = 0; i < m; ++i) yb[i] = compute_t<U>(f(ab[i], bb[i]));
    store_block(yb, y + j, m);
  }
}

template <class T0, class T1, class T2, class U, class F>
void ternary_run(const T0* a, const T1* b, const T2* c, const std::array<int64_t, 3>& st, U* y,
                 int64_t n, const F& f) {
  if constexpr (!is_half_v<T0> && !is_half_v<T1> && !is_half_v<T2> && !is_half_v<U>) {
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) y[i] = U(f(a[i], b[i], c[i]));
      return;
    }
  }
  compute_t<T0> ab[kBlock];
  compute_t<T1> bb[kBlock];
  compute_t<T2> cb[kBlock];
  compute_t<U> yb[kBlock];
  for (int64_t j = 0; j < n; j += kBlock) {
    int64_t m = std::min(kBlock, n - j);
    load_block(a + j * st[0], st[0], ab, m);
    load_block(b + j * st[1], st[1], bb, m);
    load_block(c + j * st[2], st[2], cb, m);
    for (int64_t i = 0; i < m; ++i) yb[i] = compute_t<U>(f(ab[i], bb[i], cb[i]));
    store_block(yb, y + j, m);
  }
}

// --- whole tensors ------------------------------------------------------------------

template <class T, class U, class F>
void unary_loop(const Tensor& in, Tensor& out, const F& f) {
  const auto* x = static_cast<const T*>(in.data());
  auto* y = static_cast<U*>(out.data());
  Space<1> s = make_space<1>({&in}, out.shape());
  for_each_run(s, [&](int64_t o, const std::array<int64_t, 1>& off, int64_t n) {
    unary_run(x + off[0], s.inner()[0], y + o, n, f);
  });
}

template <class T, class U, class F>
void binary_loop(const Tensor& in0, const Tensor& in1, Tensor& out, const F& f) {
  const auto* a = static_cast<const T*>(in0.data());
  const auto* b = static_cast<const T*>(in1.data());
  auto* y = static_cast<U*>(out.data());
  Space<2> s = make_space<2>({&in0, &in1}, out.shape());
  if (short_runs(s)) {  // e.g. a squeeze-excitation scale [C/8, 1, 1, 8] times [C/8, H, W, 8]
    const int64_t cols = s.shape.back();
    const std::array<int64_t, 2> row = s.strides[s.shape.size() - 2], in = s.inner();
    for_each_rows(s, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t rows) {
      if constexpr (!is_half_v<T> && !is_half_v<U>) {
        if (cols == 8 && in[0] == 1 && in[1] == 1) {  // 8 channels: rows of a fixed width
          for (int64_t q = 0; q < rows; ++q) {
            compute_t<T> av[8], bv[8];
            for (int c = 0; c < 8; ++c) av[c] = a[off[0] + q * row[0] + c];
            for (int c = 0; c < 8; ++c) bv[c] = b[off[1] + q * row[1] + c];
            for (int c = 0; c < 8; ++c) y[o + q * 8 + c] = U(f(av[c], bv[c]));
          }
          return;
        }
      }
      for (int64_t q = 0; q < rows; ++q)
        binary_run(a + off[0] + q * row[0], in[0], b + off[1] + q * row[1], in[1], y + o + q * cols,
                   cols, f);
    });
    return;
  }
  for_each_run(s, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n) {
    binary_run(a + off[0], s.inner()[0], b + off[1], s.inner()[1], y + o, n, f);
  });
}

template <class T0, class T1, class T2, class U, class F>
void ternary_loop(std::span<const Tensor> in, Tensor& out, const F& f) {
  const auto* a = static_cast<const T0*>(in[0].data());
  const auto* b = static_cast<const T1*>(in[1].data());
  const auto* c = static_cast<const T2*>(in[2].data());
  auto* y = static_cast<U*>(out.data());
  Space<3> s = make_space<3>({&in[0], &in[1], &in[2]}, out.shape());
  for_each_run(s, [&](int64_t o, const std::array<int64_t, 3>& off, int64_t n) {
    ternary_run(a + off[0], b + off[1], c + off[2], s.inner(), y + o, n, f);
  });
}

}  // namespace ew
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
