// conv and conv_transpose on [N, C, D1..Dk] (k = 1..3) with groups, dilations, strides,
// explicit or "same" padding and an optional bias. f32 and bf16 run through cached oneDNN
// primitives when oneDNN is built in (f16 through f32); f64 and builds without oneDNN use
// im2col + BLAS gemm (conv) or gemm + col2im (conv_transpose), and a direct loop where each
// output channel reads a single input channel (depthwise). bench/conv_libs.cpp measured the
// choices (see choose_path).
#include <cblas.h>

#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/fused.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/window.h"

#ifdef RLX_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

struct Conv {
  Window w;
  int64_t n = 0, c = 0, m = 0, groups = 1, cg = 0, mg = 0;  // channels in / out, per group
  bool transpose = false;

  int64_t reduce() const { return (transpose ? mg : cg) * w.ker_size; }  // taps per output
};

Conv make_conv(const KernelContext& ctx, const Tensor& x, const Tensor& wt, const Tensor& y,
               bool transpose) {
  std::vector<int64_t> kernel(wt.shape().begin() + 2, wt.shape().end());
  Conv c;
  c.w = make_window(ctx.attrs, x.shape(), y.shape(), kernel, transpose);
  c.n = x.shape()[0];
  c.c = x.shape()[1];
  c.m = y.shape()[1];
  c.groups = ctx.attrs.get_int("groups");
  c.cg = c.c / c.groups;
  c.mg = c.m / c.groups;
  c.transpose = transpose;
  return c;
}

// Per-thread buffers that keep their pages between calls: fresh multi-megabyte allocations
// fault their pages in again on every call, which costs as much as a small conv.
enum Slot { kColumns, kInput, kWeights, kOutput, kSlots };
template <class T>
T* scratch(Slot slot, int64_t n) {
  thread_local std::vector<T> buf[kSlots];
  std::vector<T>& b = buf[slot];
  if (b.size() < size_t(n)) b.resize(size_t(n));
  return b.data();
}

// ---- BLAS ----------------------------------------------------------------------------

// Row-major C[m, n] = op(A) B with op(A) [m, k] (A stored [k, m] when trans_a).
void gemm(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, int(m), int(n),
              int(k), 1.f, a, int(trans_a ? m : k), b, int(n), 0.f, c, int(n));
}
void gemm(bool trans_a, int64_t m, int64_t n, int64_t k, const double* a, const double* b,
          double* c) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, int(m), int(n),
              int(k), 1.0, a, int(trans_a ? m : k), b, int(n), 0.0, c, int(n));
}

void check_blas_size(const char* op, std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes)
    if (s > INT_MAX) fail<NotSupported>(op, "expected gemm sizes below 2^31, got ", s);
}

// ---- direct loops and im2col / col2im (T: float or double) -------------------------

// Kernel tap r (row-major over the three window dims) as (kd, kh, kw).
struct Tap {
  int64_t d, h, w;
};
Tap tap(const Window& w, int64_t r) {
  return {r / (w.ker[1] * w.ker[2]), r / w.ker[2] % w.ker[1], r % w.ker[2]};
}

// Row `r` (a kernel tap) of one channel's im2col block: dst[o] = x[o * stride - pad +
// tap * dil], 0 in the padding.
template <class T>
void im2col_row(const Window& w, const T* x, int64_t r, T* dst) {
  Tap k = tap(w, r);
  int64_t offw = k.w * w.dil[2] - w.pad[2];
  TapRange ow = out_range(offw, w.stride[2], w.in[2], w.out[2]);
  for (int64_t od = 0; od < w.out[0]; ++od) {
    int64_t id = od * w.stride[0] - w.pad[0] + k.d * w.dil[0];
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      int64_t ih = oh * w.stride[1] - w.pad[1] + k.h * w.dil[1];
      T* d = dst + w.out_off(od, oh, 0);
      if (id < 0 || id >= w.in[0] || ih < 0 || ih >= w.in[1]) {
        std::fill(d, d + w.out[2], T(0));
        continue;
      }
      const T* src = x + w.in_off(id, ih, 0);
      std::fill(d, d + ow.first, T(0));
      if (w.stride[2] == 1)
        std::copy(src + ow.first + offw, src + ow.last + offw, d + ow.first);
      else
        for (int64_t o = ow.first; o < ow.last; ++o) d[o] = src[o * w.stride[2] + offw];
      std::fill(d + ow.last, d + w.out[2], T(0));
    }
  }
}

// col[(c, tap), o] for the cg channels of one image and group.
template <class T>
void im2col(const Window& w, int64_t cg, const T* x, T* col) {
  parallel_for(
      cg * w.ker_size, std::max<int64_t>(1, 32768 / w.out_size), [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row)
          im2col_row(w, x + row / w.ker_size * w.in_size, row % w.ker_size, col + row * w.out_size);
      });
}

// The transpose of im2col_row, accumulated: y[i * stride - pad + tap * dil] += src[i].
template <class T>
void col2im_row(const Window& w, const T* src, int64_t r, T* y) {
  Tap k = tap(w, r);
  int64_t offw = k.w * w.dil[2] - w.pad[2];
  TapRange iw = out_range(offw, w.stride[2], w.out[2], w.in[2]);
  for (int64_t id = 0; id < w.in[0]; ++id) {
    int64_t od = id * w.stride[0] - w.pad[0] + k.d * w.dil[0];
    if (od < 0 || od >= w.out[0]) continue;
    for (int64_t ih = 0; ih < w.in[1]; ++ih) {
      int64_t oh = ih * w.stride[1] - w.pad[1] + k.h * w.dil[1];
      if (oh < 0 || oh >= w.out[1]) continue;
      const T* s = src + w.in_off(id, ih, 0);
      T* d = y + w.out_off(od, oh, 0);
      for (int64_t i = iw.first; i < iw.last; ++i) d[i * w.stride[2] + offw] += s[i];
    }
  }
}

// col [(m, tap), i] added into the mg output channels of one image and group; each
// channel is one thread's.
template <class T>
void col2im(const Window& w, int64_t mg, const T* col, T* y) {
  parallel_for(mg, std::max<int64_t>(1, 32768 / (w.ker_size * w.in_size)),
               [&](int64_t b, int64_t e) {
                 for (int64_t ch = b; ch < e; ++ch)
                   for (int64_t r = 0; r < w.ker_size; ++r)
                     col2im_row(w, col + (ch * w.ker_size + r) * w.in_size, r, y + ch * w.out_size);
               });
}

// One output plane of a conv whose output channels each read one input channel: every
// tap adds a scaled, shifted input row.
template <class T>
void conv_direct_plane(const Window& w, const T* x, const T* wt, T* y) {
  std::fill(y, y + w.out_size, T(0));
  for (int64_t r = 0; r < w.ker_size; ++r) {
    Tap k = tap(w, r);
    T wv = wt[r];
    int64_t offw = k.w * w.dil[2] - w.pad[2], s = w.stride[2];
    TapRange ow = out_range(offw, s, w.in[2], w.out[2]);
    for (int64_t od = 0; od < w.out[0]; ++od) {
      int64_t id = od * w.stride[0] - w.pad[0] + k.d * w.dil[0];
      if (id < 0 || id >= w.in[0]) continue;
      for (int64_t oh = 0; oh < w.out[1]; ++oh) {
        int64_t ih = oh * w.stride[1] - w.pad[1] + k.h * w.dil[1];
        if (ih < 0 || ih >= w.in[1]) continue;
        const T* src = x + w.in_off(id, ih, 0);
        T* d = y + w.out_off(od, oh, 0);
        if (s == 1)
          for (int64_t o = ow.first; o < ow.last; ++o) d[o] += wv * src[o + offw];
        else
          for (int64_t o = ow.first; o < ow.last; ++o) d[o] += wv * src[o * s + offw];
      }
    }
  }
}

// conv with cg == 1 (depthwise), plane by plane: gemm would be a row vector per group.
template <class T>
void conv_direct(const Conv& c, const T* x, const T* wt, T* y) {
  const Window& w = c.w;
  parallel_for(c.n * c.m, std::max<int64_t>(1, 32768 / (w.out_size * w.ker_size)),
               [&](int64_t b, int64_t e) {
                 for (int64_t p = b; p < e; ++p) {
                   int64_t img = p / c.m, oc = p % c.m;
                   conv_direct_plane(w, x + (img * c.c + oc / c.mg) * w.in_size,
                                     wt + oc * w.ker_size, y + p * w.out_size);
                 }
               });
}

template <class T>
void conv_gemm(const Conv& c, const T* x, const T* wt, T* y) {
  const Window& w = c.w;
  int64_t kdim = c.cg * w.ker_size;
  check_blas_size("conv", {c.mg, w.out_size, kdim});
  bool direct = w.ker_size == 1 && w.in_size == w.out_size &&
                w.stride[0] * w.stride[1] * w.stride[2] == 1 && w.pad[0] + w.pad[1] + w.pad[2] == 0;
  T* col = direct ? nullptr : scratch<T>(kColumns, kdim * w.out_size);
  for (int64_t img = 0; img < c.n; ++img)
    for (int64_t g = 0; g < c.groups; ++g) {
      const T* xs = x + (img * c.c + g * c.cg) * w.in_size;
      if (!direct) im2col(w, c.cg, xs, col);
      gemm(false, c.mg, w.out_size, kdim, wt + g * c.mg * kdim, direct ? xs : col,
           y + (img * c.m + g * c.mg) * w.out_size);
    }
}

template <class T>
void conv_transpose_gemm(const Conv& c, const T* x, const T* wt, T* y) {
  const Window& w = c.w;
  int64_t rows = c.mg * w.ker_size;
  check_blas_size("conv_transpose", {rows, w.in_size, c.cg});
  T* col = scratch<T>(kColumns, rows * w.in_size);
  std::fill(y, y + c.n * c.m * w.out_size, T(0));
  for (int64_t img = 0; img < c.n; ++img)
    for (int64_t g = 0; g < c.groups; ++g) {
      gemm(true, rows, w.in_size, c.cg, wt + g * c.cg * rows,
           x + (img * c.c + g * c.cg) * w.in_size, col);
      col2im(w, c.mg, col, y + (img * c.m + g * c.mg) * w.out_size);
    }
}

template <class T>
void add_bias(const Conv& c, const T* bias, T* y) {
  int64_t plane = c.w.out_size;
  parallel_for(c.n * c.m, std::max<int64_t>(1, 32768 / plane), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      T v = bias[p % c.m];
      for (T *d = y + p * plane, *end = d + plane; d < end; ++d) *d += v;
    }
  });
}

// The portable path, T float or double.
template <class T>
void conv_fallback(const Conv& c, const T* x, const T* wt, const T* bias, T* y) {
  if (c.transpose)
    conv_transpose_gemm(c, x, wt, y);
  else if (c.cg == 1)
    conv_direct(c, x, wt, y);
  else
    conv_gemm(c, x, wt, y);
  if (bias) add_bias(c, bias, y);
}

// ---- taps that mostly read padding ---------------------------------------------------

// The outputs that tap r reads inside the input: a box per dim [lo, hi).
struct TapBox {
  int64_t lo[3], hi[3], size = 1;
};
TapBox tap_box(const Window& w, int64_t r) {
  const Tap k = tap(w, r);
  const int64_t t[3] = {k.d, k.h, k.w};
  TapBox b;
  for (int i = 0; i < 3; ++i) {
    TapRange o = out_range(t[i] * w.dil[i] - w.pad[i], w.stride[i], w.in[i], w.out[i]);
    b.lo[i] = o.first;
    b.hi[i] = o.last;
    b.size *= o.last - o.first;
  }
  return b;
}

// A conv_transpose whose taps never overlap (stride = kernel, no padding or dilation: the
// upsampling convs of U-Nets and DBNet / FPN heads): one GEMM then a scatter of its
// columns. oneDNN's deconvolution pads the few output channels such heads have to a
// block, ten times the GEMM's time for one (bench/RESULTS.md, "ONNX corpus against ORT").
bool upsampling(const Conv& c) {
  const Window& w = c.w;
  if (!c.transpose || c.groups != 1) return false;
  for (int64_t i = 3 - w.k; i < 3; ++i)
    if (w.stride[i] != w.ker[i] || w.pad[i] != 0 || w.dil[i] != 1 ||
        w.out[i] != w.in[i] * w.stride[i])
      return false;
  return true;
}

// Whether an im2col of this conv would be mostly padding: the taps' boxes cover under half
// of its columns (a dilated conv on a small map: DeepLabV3's ASPP at rate 12 on 14 x 14,
// whose outer taps each meet 2 of 14 rows or columns).
bool mostly_padding(const Conv& c) {
  if (c.transpose || c.groups != 1 || c.w.ker_size == 1) return false;
  int64_t live = 0;
  for (int64_t r = 0; r < c.w.ker_size; ++r) live += tap_box(c.w, r).size;
  return 2 * live < c.w.ker_size * c.w.out_size;
}

// Per tap, one GEMM over the outputs it reads inside the input: y[:, box] += W_tap [M, C]
// x[:, the box's inputs], the tap's weights and inputs gathered into contiguous blocks.
// Skips the products with padding that im2col + one GEMM (oneDNN's, ORT's) computes: the
// ASPP conv above does 1.65 instead of 9 times the work of its center tap.
void conv_by_taps(const Conv& c, const float* x, const float* wt, const float* bias, float* y) {
  const Window& w = c.w;
  const int64_t K = w.ker_size, M = c.m, C = c.c;
  check_blas_size("conv", {M, w.out_size, C});
  // The weights tap-major, [K][M][C], from w [M][C][K]: an output channel's C * K weights
  // stay in cache while its K rows are written.
  float* taps = scratch<float>(kWeights, K * M * C);
  parallel_for(M, std::max<int64_t>(1, 32768 / (C * K)), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t r = 0; r < K; ++r) {
        const float* src = wt + m * C * K + r;
        float* dst = taps + (r * M + m) * C;
        for (int64_t ci = 0; ci < C; ++ci) dst[ci] = src[ci * K];
      }
  });
  float* col = scratch<float>(kColumns, C * w.out_size);
  float* part = scratch<float>(kOutput, M * w.out_size);
  for (int64_t p = 0; p < c.n * M; ++p)
    std::fill(y + p * w.out_size, y + (p + 1) * w.out_size, bias ? bias[p % M] : 0.f);
  for (int64_t r = 0; r < K; ++r) {
    const TapBox b = tap_box(w, r);
    if (b.size == 0) continue;
    const Tap k = tap(w, r);
    const float* wtap = taps + r * M * C;
    const int64_t rows = b.hi[0] - b.lo[0], cols = b.hi[1] - b.lo[1], len = b.hi[2] - b.lo[2];
    // The box's output (od, oh, ow) reads input (od s0 - p0 + kd d0, ...).
    auto in_at = [&](int64_t od, int64_t oh, int64_t ow) {
      return w.in_off(od * w.stride[0] - w.pad[0] + k.d * w.dil[0],
                      oh * w.stride[1] - w.pad[1] + k.h * w.dil[1],
                      ow * w.stride[2] - w.pad[2] + k.w * w.dil[2]);
    };
    for (int64_t img = 0; img < c.n; ++img) {
      const float* xi = x + img * C * w.in_size;
      float* yi = y + img * M * w.out_size;
      parallel_for(C, std::max<int64_t>(1, 32768 / b.size), [&](int64_t c0, int64_t c1) {
        for (int64_t ci = c0; ci < c1; ++ci) {
          float* d = col + ci * b.size;
          for (int64_t od = b.lo[0]; od < b.hi[0]; ++od)
            for (int64_t oh = b.lo[1]; oh < b.hi[1]; ++oh)
              for (int64_t ow = b.lo[2]; ow < b.hi[2]; ++ow)
                *d++ = xi[ci * w.in_size + in_at(od, oh, ow)];
        }
      });
      gemm(false, M, b.size, C, wtap, col, part);
      parallel_for(M, std::max<int64_t>(1, 32768 / b.size), [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          const float* s = part + m * b.size;
          for (int64_t od = 0; od < rows; ++od)
            for (int64_t oh = 0; oh < cols; ++oh) {
              float* d = yi + m * w.out_size + w.out_off(b.lo[0] + od, b.lo[1] + oh, b.lo[2]);
              for (int64_t ow = 0; ow < len; ++ow) d[ow] += *s++;
            }
        }
      });
    }
  }
}

// ---- oneDNN --------------------------------------------------------------------------

#ifdef RLX_HAVE_DNNL
using dnnl::memory;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A primitive and the reorders between our plain tensors and the layouts it chose.
struct DnnlConv {
  dnnl::primitive prim;
  memory::desc src, wei, dst, src_user, wei_user, dst_user, bias;
  dnnl::primitive src_in, wei_in, dst_out;  // empty where the layouts agree
  size_t scratch = 0;  // the largest scratchpad of the four (they run one after another)
};

memory::dims row_major(const memory::dims& shape) {
  memory::dims s(shape.size(), 1);
  for (size_t i = shape.size() - 1; i-- > 0;) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

// oneDNN's padding_r: conv's own end padding (its output-size formula floors like ours);
// for conv_transpose, what gives exactly our output (output_padding included; negative
// where it exceeds the end padding, which not every oneDNN kernel takes).
memory::dims pad_right(const Conv& c) {
  const Window& w = c.w;
  memory::dims r;
  for (int64_t i = 3 - w.k; i < 3; ++i) {
    int64_t eff = w.dil[i] * (w.ker[i] - 1) + 1;
    r.push_back(c.transpose ? (w.in[i] - 1) * w.stride[i] + eff - w.pad[i] - w.out[i]
                            : w.pad_end[i]);
  }
  return r;
}

// Plain src/dst (as our tensors are) run oneDNN's gemm-based kernels; its fast direct
// kernels want blocked layouts, worth the reorders on the layers measured (choose_path).
std::shared_ptr<const DnnlConv> make_dnnl(const Conv& c, memory::data_type dt, bool has_bias,
                                          bool blocked, Act act) {
  const Window& w = c.w;
  memory::dims src{c.n, c.c}, dst{c.n, c.m}, kern, strides, dil, pad_l;
  for (int64_t i = 3 - w.k; i < 3; ++i) {
    src.push_back(w.in[i]);
    dst.push_back(w.out[i]);
    kern.push_back(w.ker[i]);
    strides.push_back(w.stride[i]);
    dil.push_back(w.dil[i] - 1);
    pad_l.push_back(w.pad[i]);
  }
  // Weights as oneDNN sees them: [g,] OC, IC, K...; ours are [g * OC, IC, K...] for conv
  // and [g * IC, OC, K...] for conv_transpose.
  memory::dims wd = c.groups > 1 ? memory::dims{c.groups, c.mg, c.cg} : memory::dims{c.mg, c.cg};
  memory::dims wmem = wd;
  size_t o_at = wd.size() - 2;  // where OC sits
  if (c.transpose) std::swap(wmem[o_at], wmem[o_at + 1]);
  wd.insert(wd.end(), kern.begin(), kern.end());
  wmem.insert(wmem.end(), kern.begin(), kern.end());
  memory::dims wstr = row_major(wmem);
  if (c.transpose) std::swap(wstr[o_at], wstr[o_at + 1]);

  auto d = std::make_shared<DnnlConv>();
  d->src_user = memory::desc(src, dt, row_major(src));
  d->dst_user = memory::desc(dst, dt, row_major(dst));
  d->wei_user = memory::desc(wd, dt, wstr);
  if (has_bias) d->bias = memory::desc({c.m}, memory::data_type::f32, memory::format_tag::a);
  auto any = [&](const memory::dims& dims) {
    return memory::desc(dims, dt, memory::format_tag::any);
  };
  memory::desc s = blocked ? any(src) : d->src_user, o = blocked ? any(dst) : d->dst_user;
  memory::desc wt = blocked ? any(wd) : d->wei_user;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours, per thread: thread-safe
  dnnl::primitive_attr conv_attr;  // a handle copy would share attr: the reorders take none
  conv_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (act != Act::none) {
    dnnl::post_ops po;
    append_eltwise(po, act);
    conv_attr.set_post_ops(po);
  }
  memory::dims pad_r = pad_right(c);
  auto finish = [&](const auto& pd) {
    d->src = pd.src_desc();
    d->wei = pd.weights_desc();
    d->dst = pd.dst_desc();
    d->scratch = pd.scratchpad_desc().get_size();
  };
  auto prop = dnnl::prop_kind::forward_inference;
  if (c.transpose) {
    dnnl::deconvolution_forward::desc desc(prop, dnnl::algorithm::deconvolution_direct, s, wt,
                                           d->bias, o, strides, dil, pad_l, pad_r);
    dnnl::deconvolution_forward::primitive_desc pd(desc, conv_attr, engine());
    finish(pd);
    d->prim = dnnl::deconvolution_forward(pd);
  } else {
    dnnl::convolution_forward::desc desc(prop, dnnl::algorithm::convolution_direct, s, wt, d->bias,
                                         o, strides, dil, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(desc, conv_attr, engine());
    finish(pd);
    d->prim = dnnl::convolution_forward(pd);
  }
  auto reorder = [&](const memory::desc& from, const memory::desc& to) {
    dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, attr);
    d->scratch = std::max(d->scratch, pd.scratchpad_desc().get_size());
    return dnnl::reorder(pd);
  };
  if (d->src != d->src_user) d->src_in = reorder(d->src_user, d->src);
  if (d->wei != d->wei_user) d->wei_in = reorder(d->wei_user, d->wei);
  if (d->dst != d->dst_user) d->dst_out = reorder(d->dst, d->dst_user);
  return d;
}

// Primitives per (shape, attributes, dtype, layout); null where oneDNN has no
// implementation (the caller falls back).
std::shared_ptr<const DnnlConv> cached_dnnl(const Conv& c, memory::data_type dt, bool has_bias,
                                            bool blocked, Act act) {
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::shared_ptr<const DnnlConv>> cache;
  const Window& w = c.w;
  std::vector<int64_t> key{c.transpose, int64_t(dt), has_bias, blocked, int64_t(act),
                           c.n,         c.c,         c.m,      c.groups};
  for (int i = 0; i < 3; ++i)
    key.insert(key.end(), {w.in[i], w.ker[i], w.out[i], w.stride[i], w.dil[i], w.pad[i]});
  std::lock_guard lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= 512) cache.clear();  // shapes that change on every call
  std::shared_ptr<const DnnlConv> d;
  try {
    d = make_dnnl(c, dt, has_bias, blocked, act);
  } catch (const dnnl::error&) {
  }
  return cache.emplace(key, d).first->second;
}

// Per-thread scratch for the reordered tensors and the primitive's scratchpad.
char* arena(size_t bytes) {
  thread_local std::unique_ptr<char[]> buf;
  thread_local size_t size = 0;
  if (bytes + 64 > size) {
    size = bytes + 64;
    buf.reset(new char[size]);
  }
  auto p = reinterpret_cast<uintptr_t>(buf.get());
  return buf.get() + ((64 - p % 64) % 64);
}

void run_dnnl(const DnnlConv& d, const void* x, const void* wt, const float* bias, void* y) {
  thread_local dnnl::stream stream(engine());
  auto round = [](size_t b) { return (b + 63) / 64 * 64; };
  size_t sx = d.src_in ? round(d.src.get_size()) : 0, sw = d.wei_in ? round(d.wei.get_size()) : 0,
         sy = d.dst_out ? round(d.dst.get_size()) : 0;
  char* base = arena(sx + sw + sy + d.scratch);
  auto mem = [&](const memory::desc& md, const void* p) {
    return memory(md, engine(), const_cast<void*>(p));
  };
  memory::desc scratch_md({int64_t(d.scratch)}, memory::data_type::u8, memory::format_tag::a);
  memory scratch = mem(scratch_md, base + sx + sw + sy);
  auto exec = [&](const dnnl::primitive& p, std::unordered_map<int, memory> args) {
    if (d.scratch) args.emplace(DNNL_ARG_SCRATCHPAD, scratch);
    p.execute(stream, args);
  };
  memory xu = mem(d.src_user, x), wu = mem(d.wei_user, wt), yu = mem(d.dst_user, y);
  memory xi = d.src_in ? mem(d.src, base) : xu, wi = d.wei_in ? mem(d.wei, base + sx) : wu;
  memory yo = d.dst_out ? mem(d.dst, base + sx + sw) : yu;
  if (d.src_in) exec(d.src_in, {{DNNL_ARG_FROM, xu}, {DNNL_ARG_TO, xi}});
  if (d.wei_in) exec(d.wei_in, {{DNNL_ARG_FROM, wu}, {DNNL_ARG_TO, wi}});
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, xi}, {DNNL_ARG_WEIGHTS, wi}, {DNNL_ARG_DST, yo}};
  if (bias) args.emplace(DNNL_ARG_BIAS, mem(d.bias, bias));
  exec(d.prim, args);
  if (d.dst_out) exec(d.dst_out, {{DNNL_ARG_FROM, yo}, {DNNL_ARG_TO, yu}});
  stream.wait();
}
#endif

// ---- dispatch ------------------------------------------------------------------------

// t in f32, in the per-thread buffer `slot`.
float* widened(const Tensor& t, Slot slot) {
  float* v = scratch<float>(slot, t.numel());
  visit(t.dtype(), kFloat, "conv", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data_as<T>();
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = float(load(p[i]));
  });
  return v;
}

#ifdef RLX_HAVE_DNNL
// Which oneDNN layouts to use for f32 / bf16, as measured by bench/conv_libs.cpp (one
// thread, ms, blocked / plain / im2col + OpenBLAS): oneDNN's direct kernels on blocked
// layouts, reorders included, win on 2-D / 3-D windows whose weights are reused enough
// (3x3 64->64 at 56x56: 1.2 / 1.6 / 2.9; 3x3x3 32->32 at 16^3: 1.1 / 3.1 / 4.0; depthwise
// 3x3 144ch at 56x56: 0.44 / 1.5 / 1.6) and lose where the reorders dominate: 1x1
// (256->64 at 56x56: 1.1 / 0.50 / 1.1), 1-D (k3 80->384 at t=3000: 4.3 / 3.0 / 6.0) and
// weights used at few positions (3x3 512->512 at 7x7: 2.6 / 1.5 / 3.4). im2col + OpenBLAS
// lost everywhere, so it only serves f64 and builds without oneDNN. Small f32 weights go
// blocked too, whatever their reuse: there the plain path's fixed cost dominates and the
// reorders are cheap (an Intel Xeon, one thread: 3x3/2 16->32 in 2 groups at 16x16, b2:
// 0.009 / 0.021; 3x3 64->64 at 7x7: 0.032 / 0.055; 3x3 64->64 in 4 groups at 14x14:
// 0.027 / 0.092). Not bf16: on that Xeon (AMX) the blocked bf16 kernel let a NaN input
// reach outputs whose windows do not hold it (MixedPrecision's conv "nan, inf" case).
enum class Path { blocked, plain };
Path choose_path(const Conv& c, bool f32) {
  const Window& w = c.w;
  if (w.k == 1 || w.ker_size == 1) return Path::plain;
  int64_t reuse = c.n * (c.transpose ? w.in_size : w.out_size);  // positions per weight
  int64_t weights = (c.transpose ? c.c * c.mg : c.m * c.cg) * w.ker_size;
  bool small = f32 && weights <= 65536;
  return c.cg == 1 || reuse >= 256 || small ? Path::blocked : Path::plain;
}

// Runs the OpenMP regions started in its scope (oneDNN's) on the calling thread alone.
class SerialScope {
 public:
  explicit SerialScope(bool serial) : saved_(serial ? omp_get_max_threads() : 1) {
    if (saved_ > 1) omp_set_num_threads(1);
  }
  ~SerialScope() {
    if (saved_ > 1) omp_set_num_threads(saved_);
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int saved_;
};

// Runs the f32 or bf16 (dt) conv, then the activation, through oneDNN; false where it has
// no implementation.
bool try_dnnl(const Conv& c, memory::data_type dt, const void* x, const void* wt, const float* bias,
              void* y, Act act) {
  bool blocked = choose_path(c, dt == memory::data_type::f32) == Path::blocked;
  // oneDNN's gemm-based kernels (plain layouts) apply eltwise post-ops one element at a
  // time, many times slower than the conv (bench/RESULTS.md, "Conv post-ops"): there the
  // activation runs afterwards, vectorised.
  Act post = blocked ? act : Act::none;
  auto d = cached_dnnl(c, dt, bias != nullptr, blocked, post);
  if (!d) return false;
  // Below ~1 MFLOP (tens of microseconds) waking the other threads costs more than it
  // saves.
  double macs = double(c.n * c.groups * c.cg * c.mg * c.w.ker_size) *
                double(c.transpose ? c.w.in_size : c.w.out_size);
  SerialScope serial(2 * macs < 1e6);
  run_dnnl(*d, x, wt, bias, y);
  if (post != act) {
    Tensor yt = Tensor::wrap(dt == memory::data_type::f32 ? DType::f32 : DType::bf16,
                             {c.n * c.m * c.w.out_size}, y);
    epilogue(yt, nullptr, act);
  }
  return true;
}
#endif

// Depthwise 2-D conv (one input and one output channel per group), f32, straight on the
// NCHW planes: each plane is copied into a zero-padded scratch plane, then every output
// is its taps summed in registers (the 3x3 case unrolled), plus the bias and the
// activation, in one pass over the output. oneDNN's direct kernels want blocked layouts
// (two reorders per call) and its plain path is gemm-based.
bool is_depthwise_2d(const Conv& c) {
  return !c.transpose && c.w.k == 2 && c.cg == 1 && c.mg == 1 && c.groups == c.c;
}

// Narrow planes (under ~56 columns) have rows too short to vectorise: there a block of
// channels is transposed to channel-last (padded), each output sums its taps with the
// channels in the vector lanes, and the block is transposed back. MobileNetV2, 2 threads,
// against oneDNN's blocked kernels with their reorders: 384x14x14 and 960x7x7 layers.
constexpr int64_t kChannelBlock = 32;

// p[i] = a(p[i]) over n floats (the input activation a fused_conv applies as it reads).
void activate(float* p, int64_t n, Act a) {
  if (a == Act::none || n <= 0) return;
  act::visit(a, [&](auto f) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) p[i] = f(p[i]);
  });
}

template <class F>
void depthwise_channel_last(const Conv& c, const float* x, const float* wt, const float* bias,
                            float* y, const F& f, int64_t n, int64_t c0, int64_t cb, Act in_act) {
  const Window& w = c.w;
  const int64_t H = w.in[1], W = w.in[2], OH = w.out[1], OW = w.out[2];
  const int64_t KH = w.ker[1], KW = w.ker[2], ph = w.pad[1], pw = w.pad[2];
  const int64_t PH = H + ph + w.pad_end[1] + w.stride[1], PW = W + pw + w.pad_end[2] + w.stride[2];
  thread_local std::vector<float> in_buf, out_buf, k_buf;
  in_buf.assign(size_t(PH * PW * kChannelBlock), 0.f);
  out_buf.resize(size_t(OH * OW * kChannelBlock));
  k_buf.resize(size_t(KH * KW * kChannelBlock));
  // Channel-inner loops: contiguous writes here, contiguous reads in the transpose back.
  const float* xb = x + (n * c.c + c0) * H * W;
  for (int64_t r = 0; r < H; ++r)
    for (int64_t q = 0; q < W; ++q) {
      float* dst = in_buf.data() + ((r + ph) * PW + q + pw) * kChannelBlock;
      for (int64_t j = 0; j < cb; ++j) dst[j] = xb[j * H * W + r * W + q];
    }
  for (int64_t r = 0; r < H; ++r)  // the interior only: the padding stays zero
    activate(in_buf.data() + ((r + ph) * PW + pw) * kChannelBlock, W * kChannelBlock, in_act);
  for (int64_t t = 0; t < KH * KW; ++t)
    for (int64_t j = 0; j < cb; ++j)
      k_buf[size_t(t * kChannelBlock + j)] = wt[(c0 + j) * KH * KW + t];
  float b[kChannelBlock] = {};
  for (int64_t j = 0; j < cb; ++j) b[j] = bias ? bias[c0 + j] : 0.f;
  for (int64_t oy = 0; oy < OH; ++oy)
    for (int64_t ox = 0; ox < OW; ++ox) {
      float acc[kChannelBlock];
#pragma omp simd
      for (int64_t j = 0; j < kChannelBlock; ++j) acc[j] = b[j];
      for (int64_t ky = 0; ky < KH; ++ky)
        for (int64_t kx = 0; kx < KW; ++kx) {
          const float* in = in_buf.data() + ((oy * w.stride[1] + ky * w.dil[1]) * PW +
                                             ox * w.stride[2] + kx * w.dil[2]) *
                                                kChannelBlock;
          const float* k = k_buf.data() + (ky * KW + kx) * kChannelBlock;
#pragma omp simd
          for (int64_t j = 0; j < kChannelBlock; ++j) acc[j] += k[j] * in[j];
        }
      float* o = out_buf.data() + (oy * OW + ox) * kChannelBlock;
#pragma omp simd
      for (int64_t j = 0; j < kChannelBlock; ++j) o[j] = f(acc[j]);
    }
  for (int64_t j = 0; j < cb; ++j) {
    float* yp = y + (n * c.c + c0 + j) * OH * OW;
    for (int64_t i = 0; i < OH * OW; ++i) yp[i] = out_buf[size_t(i * kChannelBlock + j)];
  }
}

// One plane. `pad` holds the zero-padded input, rows RS floats apart. With S2 (stride 2
// along the row, no dilation) each padded row is stored split: its even columns, then
// its odd ones (`half` floats on), so every tap reads contiguous columns.
// S2: 1 for stride 1 (contiguous taps), 2 for the split stride-2 rows, 0 for any other.
template <int64_t K, int S2, class F>  // K: a fixed square kernel size, or 0 for any
void depthwise_plane(const Window& w, const float* pad, int64_t RS, int64_t half, const float* k,
                     float b, float* y, const F& f) {
  const int64_t OH = w.out[1], OW = w.out[2], sh = w.stride[1], sw = w.stride[2];
  const int64_t dh = w.dil[1], dw = w.dil[2];
  const int64_t KH = K ? K : w.ker[1], KW = K ? K : w.ker[2];
  for (int64_t oy = 0; oy < OH; ++oy) {
    const float* top = pad + oy * sh * RS;
    float* o = y + oy * OW;
#pragma omp simd
    for (int64_t ox = 0; ox < OW; ++ox) {
      float acc = b;
      for (int64_t ky = 0; ky < KH; ++ky) {
        const float* r = top + ky * dh * RS;
        for (int64_t kx = 0; kx < KW; ++kx) {
          float v = S2 == 2   ? r[(kx & 1) * half + ox + kx / 2]
                    : S2 == 1 ? r[ox + kx * dw]
                              : r[ox * sw + kx * dw];
          acc += k[ky * KW + kx] * v;
        }
      }
      o[ox] = f(acc);
    }
  }
}

void depthwise_2d(const Conv& c, const float* x, const float* wt, const float* bias, float* y,
                  Act act, Act in_act) {
  const Window& w = c.w;
  const int64_t H = w.in[1], W = w.in[2], ph = w.pad[1], pw = w.pad[2];
  const int64_t PH = H + ph + w.pad_end[1] + w.stride[1], PW = W + pw + w.pad_end[2] + w.stride[2];
  const int64_t plane = w.out[1] * w.out[2];
  if (W < 56) {
    int64_t blocks = (c.c + kChannelBlock - 1) / kChannelBlock;
    parallel_for(c.n * blocks, 1, [&](int64_t begin, int64_t end) {
      act::visit(act, [&](auto f) {
        for (int64_t i = begin; i < end; ++i) {
          int64_t c0 = (i % blocks) * kChannelBlock;
          depthwise_channel_last(c, x, wt, bias, y, f, i / blocks, c0,
                                 std::min(kChannelBlock, c.c - c0), in_act);
        }
      });
    });
    return;
  }
  const bool s2 = w.stride[2] == 2 && w.dil[2] == 1;
  const int64_t half = (PW + 1) / 2, RS = s2 ? 2 * half : PW;
  parallel_for(c.n * c.c, std::max<int64_t>(1, 8192 / std::max<int64_t>(plane, 1)),
               [&](int64_t begin, int64_t end) {
                 thread_local std::vector<float> buf;
                 if (buf.size() < size_t(PH * RS)) buf.resize(size_t(PH * RS));
                 std::fill(buf.begin(), buf.begin() + PH * RS, 0.f);  // borders stay zero below
                 act::visit(act, [&](auto f) {
                   for (int64_t p = begin; p < end; ++p) {
                     int64_t ch = p % c.c;
                     const float* xp = x + p * H * W;
                     for (int64_t r = 0; r < H; ++r) {
                       float* row = buf.data() + (r + ph) * RS;
                       if (!s2) {
                         std::copy_n(xp + r * W, W, row + pw);
                         activate(row + pw, W, in_act);
                         continue;
                       }
                       // Padded column q + pw goes to half (q + pw) & 1, at (q + pw) / 2.
                       const float* src = xp + r * W;
                       for (int64_t parity = 0; parity < 2; ++parity) {
                         int64_t q0 = (parity - pw % 2 + 2) % 2;
                         float* dst = row + parity * half + (q0 + pw) / 2;
                         int64_t i = 0;
                         for (int64_t q = q0; q < W; ++i, q += 2) dst[i] = src[q];
                         activate(dst, i, in_act);
                       }
                     }
                     const float* k = wt + ch * w.ker[1] * w.ker[2];
                     float b = bias ? bias[ch] : 0.f;
                     float* yp = y + p * plane;
                     bool k3 = w.ker[1] == 3 && w.ker[2] == 3;
                     int mode = s2 ? 2 : w.stride[2] == 1 ? 1 : 0;
                     auto run = [&](auto kk, auto mm) {
                       depthwise_plane<decltype(kk)::value, decltype(mm)::value>(w, buf.data(), RS,
                                                                                 half, k, b, yp, f);
                     };
                     using I3 = std::integral_constant<int64_t, 3>;
                     using I0 = std::integral_constant<int64_t, 0>;
                     if (mode == 2)
                       k3 ? run(I3{}, std::integral_constant<int, 2>{})
                          : run(I0{}, std::integral_constant<int, 2>{});
                     else if (mode == 1)
                       k3 ? run(I3{}, std::integral_constant<int, 1>{})
                          : run(I0{}, std::integral_constant<int, 1>{});
                     else
                       k3 ? run(I3{}, std::integral_constant<int, 0>{})
                          : run(I0{}, std::integral_constant<int, 0>{});
                   }
                 });
               });
}

#ifdef RLX_HAVE_DNNL
// ---- conv_blocked --------------------------------------------------------------------

// conv_blocked: oneDNN's direct conv on src nChw16c / nChw8c (or plain nchw for a 4-D input,
// the first conv of a chain) and dst the same, which are exactly our [N, Cb, H, W, 16 or 8]
// tensors (oneDNN's padded channels are our zero lanes); the weights in the layout oneDNN
// picks.
struct BlockedConv {
  dnnl::primitive prim;
  memory::desc src, wei, dst, wei_user, bias;
  size_t scratch = 0;
  bool reorder_weights = false;
};

std::shared_ptr<const BlockedConv> make_blocked(const Conv& c, int64_t lanes, bool blocked_src,
                                                bool has_bias, Act act) {
  const Window& w = c.w;
  auto dt = memory::data_type::f32;
  memory::dims src{c.n, c.c, w.in[1], w.in[2]}, dst{c.n, c.m, w.out[1], w.out[2]};
  memory::dims strides{w.stride[1], w.stride[2]}, dil{w.dil[1] - 1, w.dil[2] - 1};
  memory::dims pad_l{w.pad[1], w.pad[2]}, pad_r{w.pad_end[1], w.pad_end[2]};
  memory::dims wd = c.groups > 1 ? memory::dims{c.groups, c.mg, c.cg} : memory::dims{c.mg, c.cg};
  wd.insert(wd.end(), {w.ker[1], w.ker[2]});
  auto d = std::make_shared<BlockedConv>();
  auto tag = lanes == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
  d->src = memory::desc(src, dt, blocked_src ? tag : memory::format_tag::nchw);
  d->dst = memory::desc(dst, dt, tag);
  d->wei_user = memory::desc(wd, dt, row_major(wd));
  if (has_bias) d->bias = memory::desc({c.m}, dt, memory::format_tag::a);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (act != Act::none) {
    dnnl::post_ops po;
    append_eltwise(po, act);
    attr.set_post_ops(po);
  }
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, d->src,
      memory::desc(wd, dt, memory::format_tag::any), d->bias, d->dst, strides, dil, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, attr, engine());
  if (pd.src_desc() != d->src || pd.dst_desc() != d->dst) return nullptr;
  // oneDNN's reference kernel is no direct kernel: on an AVX2 CPU a dilated 3x3 conv of 960
  // channels took 5 s a call in it (DeepLabV3's ASPP); conv's own path runs it instead.
  if (std::string_view(pd.impl_info_str()).substr(0, 3) == "ref") return nullptr;
  d->wei = pd.weights_desc();
  d->scratch = pd.scratchpad_desc().get_size();
  d->prim = dnnl::convolution_forward(pd);
  d->reorder_weights = d->wei != d->wei_user;  // done once per weight tensor
  return d;
}

// Weights reordered once: keyed by (the weight's address, the primitive's key). Sound
// only for weights whose bytes never change, which is why nchwc_layout makes conv_blocked
// solely for weights of `constant` nodes (their tensors view the literal's immutable
// bytes). Each entry holds the weight tensor itself, so its bytes stay alive and their
// address cannot be reused by other data while the entry exists.
struct ReorderedWeights {
  Tensor source;
  std::unique_ptr<char[]> bytes;
  void* data = nullptr;
};

// One conv_blocked node as oneDNN sees it: the problem, its key and its primitive (null
// where oneDNN has no direct kernel for it), made once per key.
struct BlockedProblem {
  Conv c;
  int64_t lanes = 16;
  std::vector<int64_t> key;
  std::shared_ptr<const BlockedConv> prim;
};

// x: [N, C, H, W] or [N, Cb, H, W, L]; w: [M, C / groups, KH, KW]; y: [N, Mb, OH, OW, L].
BlockedProblem blocked_problem(const Attrs& attrs, std::span<const int64_t> xs,
                               std::span<const int64_t> ws, std::span<const int64_t> ys,
                               bool has_bias) {
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::shared_ptr<const BlockedConv>> prims;
  BlockedProblem p;
  const bool blocked_src = xs.size() == 5;
  const int64_t groups = attrs.get_int("groups");
  std::vector<int64_t> xl{xs[0], blocked_src ? ws[1] * groups : xs[1], xs[2], xs[3]};
  std::vector<int64_t> yl{ys[0], ws[0], ys[2], ys[3]};
  std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  Conv& c = p.c;
  c.w = make_window(attrs, xl, yl, kernel, false);
  c.n = xl[0];
  c.c = xl[1];
  c.m = yl[1];
  c.groups = groups;
  c.cg = c.c / groups;
  c.mg = c.m / groups;
  Act act = parse_act(attrs.get_string("activation"));
  p.lanes = ys[4];
  // oneDNN plans a primitive's threading for the threads of the moment: one made while a
  // compile asks (one thread, under constant folding) must not serve 2-thread runs.
  const int64_t threads = omp_get_max_threads();
  p.key = {threads, p.lanes, blocked_src, has_bias, int64_t(act), c.n, c.c, c.m, c.groups};
  for (int i = 1; i < 3; ++i)
    p.key.insert(p.key.end(), {c.w.in[i], c.w.ker[i], c.w.out[i], c.w.stride[i], c.w.dil[i],
                               c.w.pad[i], c.w.pad_end[i]});
  std::lock_guard lock(mu);
  auto it = prims.find(p.key);
  if (it == prims.end()) {
    if (prims.size() >= 512) prims.clear();
    std::shared_ptr<const BlockedConv> made;
    try {
      made = make_blocked(c, p.lanes, blocked_src, has_bias, act);
    } catch (const dnnl::error&) {
    }
    it = prims.emplace(p.key, made).first;
  }
  p.prim = it->second;
  return p;
}

// Whether oneDNN has a direct kernel for the node (static shapes: the pass asks first).
bool blocked_fits(const KernelQuery& q) {
  if (!f32_in(q) || q.inputs[1].dtype != DType::f32 ||
      (q.inputs.size() > 2 && q.inputs[2].dtype != DType::f32) || q.outputs.size() != 1)
    return false;
  if (!q.inputs[0].is_static() || !q.inputs[1].is_static() || !q.outputs[0].is_static())
    return true;  // decided at run time
  std::vector<int64_t> xs = static_sizes(q.inputs[0].shape), ws = static_sizes(q.inputs[1].shape),
                       ys = static_sizes(q.outputs[0].shape);
  if (ws.size() != 4 || ys.size() != 5) return false;
  return blocked_problem(q.attrs, xs, ws, ys, q.inputs.size() > 2).prim != nullptr;
}

void conv_blocked_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                         std::span<Tensor> out) {
  const Tensor &x = in[0], &wt = in[1];
  Tensor& y = out[0];
  const Tensor* b = in.size() > 2 ? &in[2] : nullptr;
  BlockedProblem p = blocked_problem(ctx.attrs, x.shape(), wt.shape(), y.shape(), b != nullptr);
  const Conv& c = p.c;
  const int64_t lanes = p.lanes;
  const std::vector<int64_t>& key = p.key;
  static std::mutex mu;
  static std::map<std::pair<const void*, std::vector<int64_t>>, std::shared_ptr<ReorderedWeights>>
      weights;
  std::shared_ptr<const BlockedConv> d = p.prim;
  std::shared_ptr<ReorderedWeights> rw;
  {
    std::lock_guard lock(mu);
    if (!d) fail<NotSupported>("conv_blocked", "oneDNN has no nChw", lanes, "c conv for this node");
    auto wk = std::make_pair(static_cast<const void*>(wt.data()), key);
    auto wi = weights.find(wk);
    if (wi == weights.end()) {
      if (weights.size() >= 4096) weights.clear();
      auto r = std::make_shared<ReorderedWeights>();
      r->source = wt;
      if (d->reorder_weights) {
        thread_local dnnl::stream stream(engine());
        r->bytes.reset(new char[d->wei.get_size() + 64]);
        auto p = reinterpret_cast<uintptr_t>(r->bytes.get());
        r->data = r->bytes.get() + ((64 - p % 64) % 64);
        memory from(d->wei_user, engine(), const_cast<void*>(wt.data()));
        memory to(d->wei, engine(), r->data);
        dnnl::reorder(from, to).execute(stream, from, to);
        stream.wait();
      } else {
        r->data = const_cast<void*>(wt.data());
      }
      wi = weights.emplace(wk, r).first;
    }
    rw = wi->second;
  }
  thread_local dnnl::stream stream(engine());
  double macs = double(c.n * c.groups * c.cg * c.mg * c.w.ker_size) * double(c.w.out_size);
  SerialScope serial(2 * macs < 1e6);
  auto mem = [&](const memory::desc& md, const void* p) {
    return memory(md, engine(), const_cast<void*>(p));
  };
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(d->src, x.data())},
                                       {DNNL_ARG_WEIGHTS, mem(d->wei, rw->data)},
                                       {DNNL_ARG_DST, mem(d->dst, y.data())}};
  if (b) args.emplace(DNNL_ARG_BIAS, mem(d->bias, b->data()));
  if (d->scratch) {
    memory::desc smd({int64_t(d->scratch)}, memory::data_type::u8, memory::format_tag::a);
    args.emplace(DNNL_ARG_SCRATCHPAD, mem(smd, arena(d->scratch)));
  }
  d->prim.execute(stream, args);
  stream.wait();
  // The lanes past M stay zero for readers of the blocked tensor (an activation of 0 need
  // not be 0, and oneDNN's post-ops are not promised to skip them).
  if (int64_t tail = c.m % lanes) {
    int64_t cb = y.shape()[1], hw = c.w.out_size;
    float* yp = y.data_as<float>();
    for (int64_t img = 0; img < c.n; ++img) {
      float* blk = yp + ((img * cb) + cb - 1) * hw * lanes;
      for (int64_t i = 0; i < hw; ++i)
        std::fill(blk + i * lanes + tail, blk + i * lanes + lanes, 0.f);
    }
  }
}
#endif

}  // namespace

void conv_forward(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out,
                  bool transpose, Act act, Act in_act) {
  const Tensor& wt = in[1];
  Tensor x = in[0];
  Tensor& y = out[0];
  const Tensor* b = in.size() > 2 ? &in[2] : nullptr;
  if (y.numel() == 0) return;
  Conv c = make_conv(ctx, x, wt, y, transpose);
  DType dt = x.dtype();
  if (c.reduce() == 0) {  // no input channels: the bias alone
    visit(dt, kFloat, ctx.op.name.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* yp = y.data_as<T>();
      for (int64_t p = 0; p < c.n * c.m; ++p)
        std::fill(yp + p * c.w.out_size, yp + (p + 1) * c.w.out_size,
                  b ? b->data_as<T>()[p % c.m] : store<T>(0.0));
    });
    epilogue(y, nullptr, act);
    return;
  }
  if (dt == DType::f32 && is_depthwise_2d(c)) {
    depthwise_2d(c, x.data_as<float>(), wt.data_as<float>(), b ? b->data_as<float>() : nullptr,
                 y.data_as<float>(), act, in_act);
    return;
  }
  if (in_act != Act::none) {  // elsewhere the activated input is made first
    x = x.clone();
    epilogue(x, nullptr, in_act);
  }
  if (dt == DType::f64) {
    conv_fallback(c, x.data_as<double>(), wt.data_as<double>(), b ? b->data_as<double>() : nullptr,
                  y.data_as<double>());
    epilogue(y, nullptr, act);
    return;
  }
  if (dt == DType::f32 && upsampling(c)) {
    conv_fallback(c, x.data_as<float>(), wt.data_as<float>(), b ? b->data_as<float>() : nullptr,
                  y.data_as<float>());
    epilogue(y, nullptr, act);
    return;
  }
  if (dt == DType::f32 && mostly_padding(c)) {
    conv_by_taps(c, x.data_as<float>(), wt.data_as<float>(), b ? b->data_as<float>() : nullptr,
                 y.data_as<float>());
    epilogue(y, nullptr, act);
    return;
  }
#ifdef RLX_HAVE_DNNL
  if (dt == DType::f32 || dt == DType::bf16) {
    const float* bias = b ? widened(*b, kColumns) : nullptr;  // oneDNN takes an f32 bias
    auto ddt = dt == DType::f32 ? memory::data_type::f32 : memory::data_type::bf16;
    if (try_dnnl(c, ddt, x.data(), wt.data(), bias, y.data(), act)) return;
  }
#endif
  if (dt == DType::f32) {
    conv_fallback(c, x.data_as<float>(), wt.data_as<float>(), b ? b->data_as<float>() : nullptr,
                  y.data_as<float>());
    epilogue(y, nullptr, act);
    return;
  }
  // f16, and bf16 where oneDNN did not take it: in f32.
  const float *xf = widened(x, kInput), *wf = widened(wt, kWeights);
  std::vector<float> bf(b ? size_t(b->numel()) : 0);  // kColumns is the fallback's
  if (b) std::copy_n(widened(*b, kColumns), bf.size(), bf.begin());
  float* yf = scratch<float>(kOutput, y.numel());
  bool done = false;
#ifdef RLX_HAVE_DNNL
  done = try_dnnl(c, memory::data_type::f32, xf, wf, b ? bf.data() : nullptr, yf, act);
#endif
  if (!done) {
    conv_fallback(c, xf, wf, b ? bf.data() : nullptr, yf);
    Tensor yt = Tensor::wrap(DType::f32, y.shape(), yf);
    epilogue(yt, nullptr, act);
  }
  visit(dt, kFloat, ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    narrow(yf, y.data_as<T>(), y.numel());
  });
}

void register_conv(KernelRegistry& r) {
  add_kernel(
      r, "conv",
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        conv_forward(ctx, in, out, false, Act::none, Act::none);
      },
      dtype_in(kFloat));
  add_kernel(
      r, "conv_transpose",
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        conv_forward(ctx, in, out, true, Act::none, Act::none);
      },
      dtype_in(kFloat));
#ifdef RLX_HAVE_DNNL
  add_kernel(r, "conv_blocked", conv_blocked_kernel, blocked_fits);
#endif
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
