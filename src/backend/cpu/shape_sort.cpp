// sort and top_k along an axis. NaN sorts as the largest value (NumPy); equal keys keep
// the lower index first, so the result is unique whatever `stable` says. top_k always
// returns its k values sorted (a valid answer for sorted=false too).
#include <algorithm>
#include <cstring>
#include <utility>

#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/shape_util.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

// An unsigned key in sort order: NaN above everything (NumPy), -0 equal to +0. 32 bits
// for types of up to 4 bytes, 64 for f64 / i64; plain integer compares sort fast.
template <class T>
auto order_key(T v) {
  using C = compute_t<T>;
  C c = load(v);
  if constexpr (std::is_floating_point_v<C>) {
    using U = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
    constexpr U sign = U(1) << (sizeof(U) * 8 - 1);
    if (c != c) return ~U(0);
    if (c == 0) c = 0;  // -0
    U u;
    std::memcpy(&u, &c, sizeof(U));
    return u & sign ? ~u : u | sign;
  } else if constexpr (sizeof(C) == 8) {
    return uint64_t(c) ^ (uint64_t(1) << 63);
  } else if constexpr (std::is_signed_v<C>) {
    return uint32_t(int32_t(c)) ^ (uint32_t(1) << 31);
  } else {
    return uint32_t(c);
  }
}

// A (key, index) item: one uint64 when the key has 32 bits and the index fits the other
// 32, else a pair. Either way `<` orders by key, then by index (ties: lower index first).
template <class Key, bool kPacked>
struct Items {
  using Item = std::conditional_t<kPacked, uint64_t, std::pair<Key, int64_t>>;
  static Item make(Key k, int64_t i) {
    if constexpr (kPacked)
      return uint64_t(k) << 32 | uint64_t(i);
    else
      return {k, i};
  }
  static int64_t index(const Item& it) {
    if constexpr (kPacked)
      return int64_t(it & 0xffffffffu);
    else
      return it.second;
  }
};

// The first k of each line of x along `axis`, in order, into vals / idxs (k along axis).
template <class T, bool kPacked>
void sort_lines(const Tensor& x, Tensor& vals, Tensor& idxs, int64_t axis, bool descending) {
  using Key = decltype(order_key(T{}));
  using It = Items<Key, kPacked>;
  AxisSplit s = split_at(x.shape(), axis);
  int64_t k = vals.shape()[size_t(axis)];
  if (k == 0 || s.outer * s.inner == 0) return;
  const T* px = x.data_as<T>();
  T* pv = vals.data_as<T>();
  int64_t* pi = idxs.data_as<int64_t>();
  int64_t grain = std::max<int64_t>(1, 4096 / s.n);
  parallel_for(s.outer * s.inner, grain, [&](int64_t l0, int64_t l1) {
    std::vector<typename It::Item> buf(size_t(s.n));
    for (int64_t l = l0; l < l1; ++l) {
      int64_t o = l / s.inner, i = l % s.inner;
      const T* line = px + o * s.n * s.inner + i;
      for (int64_t j = 0; j < s.n; ++j) {
        Key key = order_key(line[j * s.inner]);
        buf[size_t(j)] = It::make(descending ? Key(~key) : key, j);
      }
      if (k < s.n) std::nth_element(buf.begin(), buf.begin() + k, buf.end());
      std::sort(buf.begin(), buf.begin() + k);
      int64_t base = o * k * s.inner + i;
      for (int64_t j = 0; j < k; ++j) {
        int64_t src = It::index(buf[size_t(j)]);
        pv[base + j * s.inner] = line[src * s.inner];  // the stored bits, not the key
        pi[base + j * s.inner] = src;
      }
    }
  });
}

void run_sort(const KernelContext& ctx, const Tensor& x, Outs out, bool descending) {
  int64_t axis = norm_axis(ctx.attrs.get_int("axis"), x.rank());
  visit(x.dtype(), kAll, ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    bool fits = x.shape()[size_t(axis)] <= (int64_t(1) << 32);
    if constexpr (sizeof(order_key(T{})) == 4)
      if (fits) return sort_lines<T, true>(x, out[0], out[1], axis, descending);
    sort_lines<T, false>(x, out[0], out[1], axis, descending);
  });
}

void sort_kernel(const KernelContext& ctx, Ins in, Outs out) {
  run_sort(ctx, in[0], out, ctx.attrs.get_bool("descending"));
}

void top_k_kernel(const KernelContext& ctx, Ins in, Outs out) {
  run_sort(ctx, in[0], out, ctx.attrs.get_bool("largest"));
}

}  // namespace

void register_shape_sort(KernelRegistry& r) {
  add_kernel(r, "sort", sort_kernel);
  add_kernel(r, "top_k", top_k_kernel, dtype_in(kNumeric));
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
