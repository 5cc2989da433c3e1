// The pools' backward ops (src/ops/window_grad.cpp), as the CPU computes them
// (backend/cpu/window_grad.cpp):
//   max_pool_gather(x, u): u at each window's first maximum of x (NaN counts as the
//     largest, the first NaN wins), 0 for a window that holds no input;
//   max_pool_grad(x, ct): ct added at each window's first maximum;
//   avg_pool_grad(x, ct): ct / divisor added to every tap of each window.
// The grads gather rather than scatter: one thread per input element sums, in the compute
// type, the outputs whose windows reach it, in output order as the CPU adds them. No
// atomics, so results are deterministic. max_pool_grad first finds each window's argmax.
#include "backend/cuda/families.h"
#include "backend/cuda/window.cuh"

namespace rlx::cuda {

namespace {

// The plane offset of the first maximum of x in the window with these taps, or -1 when the
// window holds no input.
template <class T>
__device__ int64_t window_argmax(const Win& w, const T* xp, const Taps (&t)[3]) {
  using C = compute_t<T>;
  int64_t best = -1;
  C m = 0;
  each_tap(w, t, [&](int64_t at) {
    C v = load(xp[at]);
    if (best < 0 || (v > m && m == m) || (v != v && m == m)) {
      best = at;
      m = v;
    }
  });
  return best;
}

__device__ __forceinline__ void output_taps(const Win& w, int64_t r, Taps (&t)[3]) {
  int64_t o[3];
  out_index(w, r, o);
  for (int d = 0; d < 3; ++d) t[d] = taps_of(w, d, o[d]);
}

// Per output of max_pool(x): the plane offset of its window's argmax (-1: none).
template <class T>
__global__ void argmax_kernel(const T* x, int64_t* arg, int64_t n, Win w) {
  RLX_GRID_STRIDE(i, n) {
    int64_t p = i / w.out_size;
    Taps t[3];
    output_taps(w, i - p * w.out_size, t);
    arg[i] = window_argmax(w, x + p * w.in_size, t);
  }
}

template <class T>
__global__ void gather_kernel(const T* x, const T* u, T* y, int64_t n, Win w) {
  RLX_GRID_STRIDE(i, n) {
    int64_t p = i / w.out_size;
    Taps t[3];
    output_taps(w, i - p * w.out_size, t);
    int64_t at = window_argmax(w, x + p * w.in_size, t);
    y[i] = at >= 0 ? u[p * w.in_size + at] : store<T>(0.0f);
  }
}

// The outputs along dim d whose windows may reach input position pos: [lo, hi].
__device__ __forceinline__ void outputs_reaching(const Win& w, int d, int64_t pos, int64_t& lo,
                                                 int64_t& hi) {
  int64_t s = w.stride[d], top = pos + w.pad[d];  // o * s = top - tap * dil
  int64_t bottom = top - (w.ker[d] - 1) * w.dil[d];
  lo = bottom <= 0 ? 0 : (bottom + s - 1) / s;
  hi = min(top / s, w.out[d] - 1);
}

// dx[j] = sum over the outputs o whose windows reach input j (in output order) of
// ct[o] (max: where o's argmax is j; avg: over o's divisor).
template <class T, bool kMax>
__global__ void pool_grad_kernel(const T* ct, const int64_t* arg, T* dx, int64_t n, Win w,
                                 bool include_pad) {
  using C = compute_t<T>;
  RLX_GRID_STRIDE(i, n) {
    int64_t p = i / w.in_size, j = i - p * w.in_size;
    int64_t pos[3] = {j / (w.in[1] * w.in[2]), j / w.in[2] % w.in[1], j % w.in[2]};
    int64_t lo[3], hi[3];
    for (int d = 0; d < 3; ++d) outputs_reaching(w, d, pos[d], lo[d], hi[d]);
    const T* cp = ct + p * w.out_size;
    C acc = 0;
    for (int64_t od = lo[0]; od <= hi[0]; ++od)
      for (int64_t oh = lo[1]; oh <= hi[1]; ++oh)
        for (int64_t ow = lo[2]; ow <= hi[2]; ++ow) {
          int64_t o = (od * w.out[1] + oh) * w.out[2] + ow;
          if constexpr (kMax) {
            if (arg[p * w.out_size + o] == j) acc += C(load(cp[o]));
          } else {
            // Only outputs with a tap exactly on pos: (pos + pad - o * s) a multiple of dil.
            int64_t oo[3] = {od, oh, ow};
            bool reach = true;
            int64_t div = 1;
            for (int d = 0; d < 3; ++d) {
              reach &= (pos[d] + w.pad[d] - oo[d] * w.stride[d]) % w.dil[d] == 0;
              Taps t = taps_of(w, d, oo[d]);
              div *= include_pad ? t.padded : t.last - t.first;
            }
            if (reach) acc += C(load(cp[o])) / C(div > 1 ? div : 1);
          }
        }
    dx[i] = store<T>(acc);
  }
}

template <bool kMax>
void pool_grad(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &x = in[0], &ct = in[1];
  Tensor& dx = out[0];
  int64_t n = dx.numel();
  if (n == 0) return;
  Win w = to_win(
      cpu::make_window(ctx.attrs, x.shape(), ct.shape(), ctx.attrs.get_ints("kernel_shape")));
  bool include_pad = !kMax && ctx.attrs.get_bool("count_include_pad");
  cudaStream_t s = stream_of(ctx);
  int64_t m = ct.numel();
  Tensor arg = kMax ? Tensor::empty(DType::i64, {m}, x.device()) : Tensor();
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      auto* ap = kMax ? static_cast<int64_t*>(arg.data()) : nullptr;
      if (kMax && m > 0)
        argmax_kernel<T>
            <<<blocks_for(m), kThreads, 0, s>>>(static_cast<const T*>(x.data()), ap, m, w);
      pool_grad_kernel<T, kMax><<<blocks_for(n), kThreads, 0, s>>>(
          static_cast<const T*>(ct.data()), ap, static_cast<T*>(dx.data()), n, w, include_pad);
    }
  });
  RLX_CUDA_LAUNCHED(ctx.op.name.c_str());
}

void max_pool_gather(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &x = in[0], &u = in[1];
  Tensor& y = out[0];
  int64_t n = y.numel();
  if (n == 0) return;
  Win w =
      to_win(cpu::make_window(ctx.attrs, x.shape(), y.shape(), ctx.attrs.get_ints("kernel_shape")));
  cudaStream_t s = stream_of(ctx);
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>)
      gather_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x.data()),
                                                          static_cast<const T*>(u.data()),
                                                          static_cast<T*>(y.data()), n, w);
  });
  RLX_CUDA_LAUNCHED("max_pool_gather");
}

}  // namespace

void register_window_grad(KernelRegistry& r) {
  add_kernel(r, "max_pool_grad", pool_grad<true>, dtype_in(kFloat));
  add_kernel(r, "avg_pool_grad", pool_grad<false>, dtype_in(kFloat));
  add_kernel(r, "max_pool_gather", max_pool_gather, dtype_in(kFloat));
}

}  // namespace rlx::cuda
