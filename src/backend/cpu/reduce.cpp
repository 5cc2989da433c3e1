// Reductions (sum … l2_norm), argmax / argmin and cumsum. Every kernel views its input
// as [outer, R, inner] blocks (R: the reduced or scanned extent); reductions over axes that
// are not one run of adjacent dims also loop over the other reduced runs (no copies).
//
// Accumulators: floats (f16 / bf16 / f32 / f64) sum, multiply and average in f64, so f32
// results carry little more than their final rounding; long rows are also summed pairwise (blocks
// of 16 lanes, halved recursively), columns in row blocks, which keeps f64 error ~log(R) ulps. max
// / min compare in the compute type (f32 for f16 / bf16) and propagate NaN. Integers sum and
// multiply in uint64 (wrapping): the result is the exact value modulo 2^bits of the output
// dtype, as if accumulated in i64 and then converted.
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "rlx/axes.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

constexpr int64_t kLanes = 16;       // independent accumulators per row (vectorised)
constexpr int64_t kPairLeaf = 1024;  // row elements summed lane-wise before halving
constexpr int64_t kColChunk = 256;   // inner columns handled at once
constexpr int64_t kRowBlock = 128;   // rows folded into a fresh partial (column accuracy)
constexpr int64_t kGrain = 1 << 15;  // elements of work per parallel chunk
#if defined(__AVX512F__)
constexpr int64_t kVectorBytes = 64;  // the widest native vector (GCC vector extensions)
#elif defined(__AVX__)
constexpr int64_t kVectorBytes = 32;
#else
constexpr int64_t kVectorBytes = 16;
#endif

// --- the view ------------------------------------------------------------------------------

// A run of adjacent dims of one kind: its element count and the stride of its last dim.
struct Group {
  int64_t size, stride;
};

// How x is read: outputs are outer × inner (inner: the kept run innermost in x, else 1);
// output o folds the innermost reduced run (r elements, stride inner) once per index of
// the reduced runs further out (`extra`). The outer index spans the kept runs before the
// innermost reduced run (`kept`).
struct Blocks {
  int64_t outer = 1, r = 1, inner = 1;
  std::vector<Group> kept, extra;
  int64_t extra_count = 1;

  static int64_t offset(const std::vector<Group>& groups, int64_t i) {
    int64_t off = 0;
    for (size_t g = groups.size(); g-- > 0;) {
      off += (i % groups[g].size) * groups[g].stride;
      i /= groups[g].size;
    }
    return off;
  }
  int64_t outer_offset(int64_t o) const { return offset(kept, o); }
  int64_t extra_offset(int64_t e) const { return offset(extra, e); }
};

// The view for one axis (argmax, cumsum).
Blocks axis_blocks(const std::vector<int64_t>& shape, int64_t axis) {
  Blocks b;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d < axis)
      b.outer *= shape[size_t(d)];
    else if (d == axis)
      b.r = shape[size_t(d)];
    else
      b.inner *= shape[size_t(d)];
  }
  return b;
}

// The view for reducing the `reduced` axes of a contiguous tensor (no copies: reduced runs
// apart from the innermost one are looped over).
Blocks reduce_blocks(const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
  Blocks b;
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 0) {  // nothing to read: every output is the fold of nothing (or there is none)
    for (size_t d = 0; d < shape.size(); ++d) (reduced[d] ? b.r : b.outer) *= shape[d];
    return b;
  }
  std::vector<Group> groups;
  std::vector<bool> kind;
  int64_t stride = numel;
  for (size_t d = 0; d < shape.size(); ++d) {
    stride /= shape[d];
    if (shape[d] == 1) continue;
    if (!kind.empty() && kind.back() == reduced[d]) {
      groups.back().size *= shape[d];
      groups.back().stride = stride;
    } else {
      groups.push_back({shape[d], stride});
      kind.push_back(reduced[d]);
    }
  }
  size_t main = groups.size();
  for (size_t g = 0; g < groups.size(); ++g)
    if (kind[g]) main = g;
  if (main == groups.size()) {  // nothing (of size > 1) reduced: fold single elements
    b.inner = numel;
    return b;
  }
  b.r = groups[main].size;
  if (main + 1 < groups.size()) b.inner = groups.back().size;
  for (size_t g = 0; g < main; ++g) {
    (kind[g] ? b.extra : b.kept).push_back(groups[g]);
    (kind[g] ? b.extra_count : b.outer) *= groups[g].size;
  }
  return b;
}

// --- element access ------------------------------------------------------------------------

// Block conversion of 16-bit floats to f32 (F16C for f16: the scalar path does not
// vectorise).
template <class T>
void widen_block(const T* in, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  if constexpr (std::is_same_v<T, f16_t>) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(out + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
#endif
  for (; i < n; ++i) out[i] = to_f32(in[i]);
}

// NaN test that is simply false for integers.
template <class C>
inline bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>)
    return v != v;
  else
    return false;
}

// The accumulator of sums and products: f64 for floats, wrapping uint64 for integers.
template <class T>
using wide_t = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;

// --- the folds -------------------------------------------------------------------------------
// Each op: the accumulator type per storage type, init, map (element -> accumulator, with a
// per-output shift used by logsumexp), combine (associative), finish (-> storage type, given
// the shift and the count). `pre`, when not void, is a fold run first to give the shift.

struct SumOp {
  template <class T>
  using acc = wide_t<T>;
  using pre = void;
  template <class A>
  static A init() {
    return A(0);
  }
  template <class A, class C>
  static A map(C x, A) {
    return A(x);
  }
  template <class A>
  static A combine(A a, A b) {
    return a + b;
  }
  template <class T, class A>
  static T finish(A a, A, int64_t) {
    return store<T>(a);
  }
};

struct ProdOp : SumOp {
  template <class A>
  static A init() {
    return A(1);
  }
  template <class A>
  static A combine(A a, A b) {
    return a * b;
  }
};

struct MeanOp : SumOp {
  template <class T, class A>
  static T finish(A a, A, int64_t n) {
    return store<T>(double(a) / double(n));  // 0 / 0: NaN for an empty mean
  }
};

struct L1Op : SumOp {
  template <class A, class C>
  static A map(C x, A) {
    return std::fabs(A(x));
  }
};

struct L2Op : SumOp {
  template <class A, class C>
  static A map(C x, A) {
    return A(x) * A(x);
  }
  template <class T, class A>
  static T finish(A a, A, int64_t) {
    return store<T>(std::sqrt(a));
  }
};

// max / min in the compute type; a NaN, once met, stays.
template <bool kMax>
struct ExtremeOp {
  template <class T>
  using acc = compute_t<T>;
  using pre = void;
  template <class A>
  static A init() {
    if constexpr (std::is_floating_point_v<A>)
      return kMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    else
      return kMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  }
  template <class A, class C>
  static A map(C x, A) {
    return A(x);
  }
  template <class A>
  static A combine(A a, A b) {
    return ((kMax ? b > a : b < a) || is_nan(b)) ? b : a;
  }
  // The same on GCC vectors of E (fold_lanes): the scalar form does not vectorise.
  template <class E, class V>
  static V combine_vec(V a, V b) {
    if constexpr (std::is_floating_point_v<E>)
      return ((kMax ? b > a : b < a) | (b != b)) ? b : a;
    else
      return (kMax ? b > a : b < a) ? b : a;
  }
  template <class T, class A>
  static T finish(A a, A, int64_t) {
    return store<T>(a);
  }
};
using MaxOp = ExtremeOp<true>;
using MinOp = ExtremeOp<false>;

// log(sum(exp(x - m))) + m with m the row maximum: exp never overflows. A maximum of
// +-inf or NaN is the result itself (all -inf, an empty row, any +inf or NaN).
struct LogSumExpOp : SumOp {
  using pre = MaxOp;
  template <class A, class C>
  static A map(C x, A shift) {
    if constexpr (std::is_same_v<C, float>)
      return A(fm::exp(x - C(shift)));
    else
      return A(std::exp(x - C(shift)));
  }
  template <class T, class A>
  static T finish(A a, A shift, int64_t) {
    if (!std::isfinite(shift)) return store<T>(shift);
    return store<T>(shift + std::log(a));
  }
};

// Folds n contiguous elements (already in the compute type or storage type) lane-wise.
template <class Op, class A, class X>
A fold_lanes(const X* x, int64_t n, A shift) {
  if constexpr (requires { Op::template combine_vec<A>(A(), A()); } && std::is_same_v<X, A>) {
    // Native-width GCC vectors (wider ones are scalarised), four of them for parallelism.
    constexpr int64_t kBytes = kVectorBytes, kN = kBytes / int64_t(sizeof(A)), kU = 4;
    typedef A V __attribute__((vector_size(kBytes)));
    V acc[kU];
    for (auto& v : acc)
      for (int64_t j = 0; j < kN; ++j) v[j] = Op::template init<A>();
    int64_t i = 0;
    for (; i + kU * kN <= n; i += kU * kN)
      for (int64_t u = 0; u < kU; ++u) {
        V v;
        std::memcpy(&v, x + i + u * kN, sizeof v);
        acc[u] = Op::template combine_vec<A>(acc[u], v);
      }
    A r = Op::template init<A>();
    for (const auto& v : acc)
      for (int64_t j = 0; j < kN; ++j) r = Op::combine(r, A(v[j]));
    for (; i < n; ++i) r = Op::combine(r, A(x[i]));
    return r;
  }
  A lanes[kLanes];
  for (auto& l : lanes) l = Op::template init<A>();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j)
      lanes[j] = Op::combine(lanes[j], Op::map(load(x[i + j]), shift));
  A acc = Op::template init<A>();
  for (; i < n; ++i) acc = Op::combine(acc, Op::map(load(x[i]), shift));
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t j = 0; j < w; ++j) lanes[j] = Op::combine(lanes[j], lanes[j + w]);
  return Op::combine(lanes[0], acc);
}

// A contiguous row: halves recursively down to kPairLeaf elements (pairwise summation).
template <class Op, class A, class T>
A fold_row(const T* x, int64_t n, A shift) {
  if (n > kPairLeaf) {
    int64_t h = (n / 2 + kLanes - 1) / kLanes * kLanes;
    // In memory order (as call arguments the halves may run last-first, which defeats the
    // prefetcher).
    A lo = fold_row<Op, A>(x, h, shift);
    A hi = fold_row<Op, A>(x + h, n - h, shift);
    return Op::combine(lo, hi);
  }
  if constexpr (is_half_v<T>) {
    float buf[kPairLeaf];
    widen_block(x, buf, n);
    return fold_lanes<Op, A>(buf, n, shift);
  } else {
    return fold_lanes<Op, A>(x, n, shift);
  }
}

// Folds `rows` rows of w columns (row stride `stride`) into acc[w], kRowBlock rows at a
// time into a fresh partial so that long columns keep their accuracy. kW: w known at
// compile time (0: not), so that a blocked layout's 8 or 16 channels fold as whole vectors.
template <int kW, class Op, class A, class T>
void fold_cols_of(const T* x, int64_t rows, int64_t stride, int64_t w_any, const A* shift, A* acc) {
  const int64_t w = kW ? kW : w_any;
  A part[kColChunk];
  [[maybe_unused]] float buf[kColChunk];
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    for (int64_t c = 0; c < w; ++c) part[c] = Op::template init<A>();
    for (int64_t r = r0; r < std::min(rows, r0 + kRowBlock); ++r) {
      const T* row = x + r * stride;
      auto step = [&](const auto* v) {
        if (shift)
          for (int64_t c = 0; c < w; ++c)
            part[c] = Op::combine(part[c], Op::map(load(v[c]), shift[c]));
        else
          for (int64_t c = 0; c < w; ++c) part[c] = Op::combine(part[c], Op::map(load(v[c]), A()));
      };
      if constexpr (is_half_v<T>) {
        widen_block(row, buf, w);
        step(buf);
      } else {
        step(row);
      }
    }
    for (int64_t c = 0; c < w; ++c) acc[c] = Op::combine(acc[c], part[c]);
  }
}

template <class Op, class A, class T>
void fold_cols(const T* x, int64_t rows, int64_t stride, int64_t w, const A* shift, A* acc) {
  if (w == 8) return fold_cols_of<8, Op, A>(x, rows, stride, w, shift, acc);
  if (w == 16) return fold_cols_of<16, Op, A>(x, rows, stride, w, shift, acc);
  fold_cols_of<0, Op, A>(x, rows, stride, w, shift, acc);
}

// Folds main-run rows [r0, r1) of output block `o` (columns [c0, c0 + w)), for every index
// of the extra reduced runs, into acc[w].
template <class Op, class A, class T>
void fold_output(const T* x, const Blocks& b, int64_t o, int64_t r0, int64_t r1, int64_t c0,
                 int64_t w, const A* shift, A* acc) {
  if (r1 <= r0) return;
  int64_t base = b.outer_offset(o) + r0 * b.inner + c0;
  for (int64_t e = 0; e < b.extra_count; ++e) {
    const T* p = x + base + b.extra_offset(e);
    if (b.inner == 1)
      acc[0] = Op::combine(acc[0], fold_row<Op, A>(p, r1 - r0, shift ? shift[0] : A()));
    else
      fold_cols<Op, A>(p, r1 - r0, b.inner, w, shift, acc);
  }
}

template <class Op, class T>
void reduce_run(const T* x, T* y, const Blocks& b) {
  using A = typename Op::template acc<T>;
  constexpr bool kShifted = !std::is_void_v<typename Op::pre>;
  int64_t outs = b.outer * b.inner, count = b.r * b.extra_count;
  if (outs == 0) return;
  int64_t chunks = (b.inner + kColChunk - 1) / kColChunk;
  int64_t items = b.outer * chunks;
  int64_t threads = threads_here();

  // Few outputs over long extents (a full reduction, a few long rows): split R across
  // threads into partials, then combine.
  if (items < threads && b.r * b.inner >= 4 * kGrain) {
    int64_t parts = threads;
    auto split = [&](auto op, auto init, auto* partial, const auto* shift) {
      using Fold = decltype(op);
      parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p)
          for (int64_t i = 0; i < items; ++i) {
            int64_t o = i / chunks, c0 = (i % chunks) * kColChunk;
            int64_t w = std::min(kColChunk, b.inner - c0);
            auto* acc = partial + p * outs + o * b.inner + c0;
            fold_output<Fold>(x, b, o, b.r * p / parts, b.r * (p + 1) / parts, c0, w,
                              shift ? shift + o * b.inner + c0 : nullptr, acc);
          }
      });
      std::vector<decltype(init)> total(partial, partial + outs);
      for (int64_t p = 1; p < parts; ++p)
        for (int64_t k = 0; k < outs; ++k)
          total[size_t(k)] = Fold::combine(total[size_t(k)], partial[p * outs + k]);
      return total;
    };
    std::vector<A> shift;
    if constexpr (kShifted) {
      using Pre = typename Op::pre;
      using M = typename Pre::template acc<T>;
      std::vector<M> pm(size_t(parts * outs), Pre::template init<M>());
      auto m = split(Pre{}, M{}, pm.data(), static_cast<const M*>(nullptr));
      shift.assign(m.begin(), m.end());
    }
    std::vector<A> pa(size_t(parts * outs), Op::template init<A>());
    auto total = split(Op{}, A{}, pa.data(), kShifted ? shift.data() : nullptr);
    for (int64_t k = 0; k < outs; ++k)
      y[k] = Op::template finish<T>(total[size_t(k)], kShifted ? shift[size_t(k)] : A(), count);
    return;
  }

  int64_t per_item = std::max<int64_t>(1, b.r * std::min(b.inner, kColChunk));
  parallel_for(items, std::max<int64_t>(1, kGrain / per_item), [&](int64_t i0, int64_t i1) {
    A acc[kColChunk], shift[kColChunk];
    for (int64_t i = i0; i < i1; ++i) {
      int64_t o = i / chunks, c0 = (i % chunks) * kColChunk;
      int64_t w = std::min(kColChunk, b.inner - c0);
      if constexpr (kShifted) {
        using Pre = typename Op::pre;
        using M = typename Pre::template acc<T>;
        M m[kColChunk];
        for (int64_t c = 0; c < w; ++c) m[c] = Pre::template init<M>();
        fold_output<Pre, M>(x, b, o, 0, b.r, c0, w, nullptr, m);
        for (int64_t c = 0; c < w; ++c) shift[c] = A(m[c]);
      }
      for (int64_t c = 0; c < w; ++c) acc[c] = Op::template init<A>();
      fold_output<Op, A>(x, b, o, 0, b.r, c0, w, kShifted ? shift : nullptr, acc);
      T* out = y + o * b.inner + c0;
      for (int64_t c = 0; c < w; ++c)
        out[c] = Op::template finish<T>(acc[c], kShifted ? shift[c] : A(), count);
    }
  });
}

// The reduced-axes mask from `axes` (empty: all).
std::vector<bool> reduced_mask(const KernelContext& ctx, int64_t rank) {
  const IntList& axes = ctx.attrs.get_ints("axes");
  std::vector<bool> reduced(size_t(rank), axes.empty());
  for (int64_t a : axes) reduced[size_t(norm_axis(a, rank))] = true;
  return reduced;
}

template <class Op, bool kFloatOnly, bool kNeedsNonEmpty>
void reduce_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  Blocks b = reduce_blocks(x.shape(), reduced_mask(ctx, x.rank()));
  if (kNeedsNonEmpty && b.r == 0 && out[0].numel() > 0)
    fail<ValueError>(ctx.op.name, "expected a non-empty reduced extent, got ", x.type().str());
  visit(x.dtype(), kFloatOnly ? kFloat : kNumeric, ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kFloatOnly && std::is_integral_v<T>)
      fail<NotSupported>(ctx.op.name, "expected a float dtype, got ", x.dtype());
    else
      reduce_run<Op>(x.data_as<const T>(), out[0].data_as<T>(), b);
  });
}

// --- argmax / argmin ---------------------------------------------------------------------
// NaN counts as the extreme (NumPy): the first NaN wins, or the last one under
// select_last_index, which likewise picks the last of equal extremes.

// Whether v replaces the running extreme `best` met at an earlier index (bitwise, not
// short-circuit, so that the column loop vectorises).
template <bool kMax, bool kLast, class C>
inline bool better(C v, C best) {
  if constexpr (kLast)
    return (kMax ? v >= best : v <= best) | is_nan(v);
  else
    return (kMax ? v > best : v < best) | (is_nan(v) & !is_nan(best));
}

// The first (or last) i in [lo, hi) with hit(i), scanning blocks of 16 with a vectorised
// "any" before looking at single elements; -1 when there is none.
template <bool kLast, class Hit>
int64_t find_index(int64_t lo, int64_t hi, Hit hit) {
  constexpr int64_t kB = 16;
  auto any = [&](int64_t i0) {
    bool a = false;
    for (int64_t j = i0; j < i0 + kB; ++j) a |= hit(j);
    return a;
  };
  if constexpr (kLast) {
    for (; hi - lo >= kB && !any(hi - kB); hi -= kB) {
    }
    for (int64_t i = hi - 1; i >= lo; --i)
      if (hit(i)) return i;
  } else {
    for (; hi - lo >= kB && !any(lo); lo += kB) {
    }
    for (int64_t i = lo; i < hi; ++i)
      if (hit(i)) return i;
  }
  return -1;
}

// A contiguous row in two vectorised passes: the extreme (NaN if any), then its first (or
// last) position.
template <bool kMax, bool kLast, class T>
int64_t arg_row(const T* x, int64_t n) {
  using C = compute_t<T>;
  C m = fold_row<ExtremeOp<kMax>, C>(x, n, C());
  int64_t at = is_nan(m) ? find_index<kLast>(0, n, [&](int64_t i) { return is_nan(load(x[i])); })
                         : find_index<kLast>(0, n, [&](int64_t i) { return load(x[i]) == m; });
  return std::max<int64_t>(at, 0);  // m is one of the elements: always found
}

// Columns [c0, c0 + w) of one block: a running extreme and its row per column.
template <bool kMax, bool kLast, class T>
void arg_cols(const T* x, int64_t rows, int64_t stride, int64_t w, int64_t* out) {
  using C = compute_t<T>;
  C best[kColChunk];
  for (int64_t c = 0; c < w; ++c) {
    best[c] = load(x[c]);
    out[c] = 0;
  }
  for (int64_t r = 1; r < rows; ++r) {
    const T* row = x + r * stride;
    for (int64_t c = 0; c < w; ++c) {
      C v = load(row[c]);
      bool t = better<kMax, kLast>(v, best[c]);
      best[c] = t ? v : best[c];
      out[c] = t ? r : out[c];
    }
  }
}

template <bool kMax, bool kLast, class T>
void arg_run(const T* x, int64_t* y, const Blocks& b) {
  int64_t chunks = (b.inner + kColChunk - 1) / kColChunk;
  int64_t grain =
      std::max<int64_t>(1, kGrain / std::max<int64_t>(1, b.r * std::min(b.inner, kColChunk)));
  parallel_for(b.outer * chunks, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      int64_t o = i / chunks, c0 = (i % chunks) * kColChunk;
      const T* base = x + o * b.r * b.inner + c0;
      int64_t* out = y + o * b.inner + c0;
      if (b.inner == 1)
        out[0] = arg_row<kMax, kLast>(base, b.r);
      else
        arg_cols<kMax, kLast>(base, b.r, b.inner, std::min(kColChunk, b.inner - c0), out);
    }
  });
}

template <bool kMax>
void arg_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  int64_t axis = ctx.attrs.get_int("axis");
  if (axis < 0) axis += x.rank();
  Blocks b = axis_blocks(x.shape(), axis);
  if (b.outer * b.inner == 0) return;
  if (b.r == 0)
    fail<ValueError>(ctx.op.name, "expected a non-empty axis ", axis, ", got ", x.type().str());
  bool last = ctx.attrs.get_bool("select_last_index");
  visit(x.dtype(), kNumeric, ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_as<const T>();
    int64_t* py = out[0].data_as<int64_t>();
    if (last)
      arg_run<kMax, true>(px, py, b);
    else
      arg_run<kMax, false>(px, py, b);
  });
}

// --- cumsum ------------------------------------------------------------------------------
// A running sum in f64 (floats) or wrapping uint64 (integers), rounded per element.

// One output block: the whole row (inner == 1) or w columns of it.
template <class T>
void cumsum_block(const T* x, T* y, const Blocks& b, int64_t w, bool exclusive, bool reverse) {
  using A = wide_t<T>;
  if (b.inner == 1) {
    A s = A(0);
    for (int64_t k = 0; k < b.r; ++k) {
      int64_t r = reverse ? b.r - 1 - k : k;
      A v = A(load(x[r]));
      y[r] = store<T>(exclusive ? s : s + v);
      s += v;
    }
    return;
  }
  A acc[kColChunk];
  for (int64_t c = 0; c < w; ++c) acc[c] = A(0);
  for (int64_t k = 0; k < b.r; ++k) {
    int64_t r = reverse ? b.r - 1 - k : k;
    const T* in = x + r * b.inner;
    T* out = y + r * b.inner;
    for (int64_t c = 0; c < w; ++c) {
      A v = A(load(in[c]));
      out[c] = store<T>(exclusive ? acc[c] : acc[c] + v);
      acc[c] += v;
    }
  }
}

template <class T>
void cumsum_run(const T* x, T* y, const Blocks& b, bool exclusive, bool reverse) {
  int64_t chunks = (b.inner + kColChunk - 1) / kColChunk;
  int64_t grain =
      std::max<int64_t>(1, kGrain / std::max<int64_t>(1, b.r * std::min(b.inner, kColChunk)));
  parallel_for(b.outer * chunks, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      int64_t o = i / chunks, c0 = (i % chunks) * kColChunk;
      int64_t at = o * b.r * b.inner + c0;
      cumsum_block(x + at, y + at, b, std::min(kColChunk, b.inner - c0), exclusive, reverse);
    }
  });
}

void cumsum_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  int64_t axis = ctx.attrs.get_int("axis");
  if (axis < 0) axis += x.rank();
  Blocks b = axis_blocks(x.shape(), axis);
  bool exclusive = ctx.attrs.get_bool("exclusive"), reverse = ctx.attrs.get_bool("reverse");
  visit(x.dtype(), kNumeric, "cumsum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cumsum_run(x.data_as<const T>(), out[0].data_as<T>(), b, exclusive, reverse);
  });
}

}  // namespace

void register_reduce(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
    unsigned set;
  };
  const Entry table[] = {
      {"sum", reduce_kernel<SumOp, false, false>, kNumeric},
      {"prod", reduce_kernel<ProdOp, false, false>, kNumeric},
      {"reduce_max", reduce_kernel<MaxOp, false, true>, kNumeric},
      {"reduce_min", reduce_kernel<MinOp, false, true>, kNumeric},
      {"mean", reduce_kernel<MeanOp, true, false>, kFloat},
      {"logsumexp", reduce_kernel<LogSumExpOp, true, false>, kFloat},
      {"l1_norm", reduce_kernel<L1Op, true, false>, kFloat},
      {"l2_norm", reduce_kernel<L2Op, true, false>, kFloat},
      {"argmax", arg_kernel<true>, kNumeric},
      {"argmin", arg_kernel<false>, kNumeric},
      {"cumsum", cumsum_kernel, kNumeric},
  };
  for (const Entry& e : table) add_kernel(r, e.name, e.fn, dtype_in(e.set));
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
