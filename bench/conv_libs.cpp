// Stand-alone timing of the ways the CPU conv kernels can compute a convolution, on a few
// realistic layers: im2col + OpenBLAS sgemm, a direct loop (depthwise only), and oneDNN
// convolution / deconvolution primitives with plain layouts, with plain activations and
// library-chosen ("any") weights, and with "any" everywhere (reorders included). Not built
// by CMake; compile by hand (one line):
//   g++ -std=c++20 -O3 -march=native -fopenmp bench/conv_libs.cpp -o /tmp/conv_libs
//       -I/usr/include/x86_64-linux-gnu/openblas-pthread -ldnnl -lopenblas
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /tmp/conv_libs [reps] [layer name part]
// (one thread gives repeatable numbers on a shared machine; the choice in conv.cpp's
// choose_path came from such runs).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using dnnl::memory;
using Dims = std::vector<int64_t>;

struct Layer {
  const char* name;
  int64_t n, c, m, groups;
  Dims in, kernel;  // spatial
  int64_t stride, pad;
  bool transpose = false;

  int64_t k() const { return int64_t(in.size()); }
  Dims out() const {
    Dims o;
    for (size_t i = 0; i < in.size(); ++i)
      o.push_back(transpose ? (in[i] - 1) * stride + kernel[i] - 2 * pad
                            : (in[i] + 2 * pad - kernel[i]) / stride + 1);
    return o;
  }
};

int64_t prod(const Dims& d) {
  int64_t p = 1;
  for (int64_t x : d) p *= x;
  return p;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Best of `reps` runs after one warm-up (the machine is shared: the minimum is the signal),
// after a pause that lets the previous method's spinning threads (OpenMP, OpenBLAS) sleep.
double time_ms(const std::function<void()>& f, int reps) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t = now_ms();
    f();
    best = std::min(best, now_ms() - t);
  }
  return best;
}

// ---- im2col + sgemm ----------------------------------------------------------------

// col[(c, kpos), opos] for one image and group (any spatial rank up to 3, padded to 3).
void im2col(const float* x, int64_t cg, const int64_t* in, const int64_t* ker, const int64_t* out,
            int64_t stride, int64_t pad, float* col) {
  int64_t kprod = ker[0] * ker[1] * ker[2], oprod = out[0] * out[1] * out[2];
#pragma omp parallel for
  for (int64_t row = 0; row < cg * kprod; ++row) {
    int64_t c = row / kprod, r = row % kprod;
    int64_t kd = r / (ker[1] * ker[2]), kh = r / ker[2] % ker[1], kw = r % ker[2];
    float* dst = col + row * oprod;
    const float* src = x + c * in[0] * in[1] * in[2];
    for (int64_t od = 0; od < out[0]; ++od) {
      int64_t id = od * stride - (in[0] > 1 || ker[0] > 1 ? pad : 0) + kd;
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        int64_t ih = oh * stride - (in[1] > 1 || ker[1] > 1 ? pad : 0) + kh;
        float* d = dst + (od * out[1] + oh) * out[2];
        bool row_ok = id >= 0 && id < in[0] && ih >= 0 && ih < in[1];
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          int64_t iw = ow * stride - pad + kw;
          d[ow] = row_ok && iw >= 0 && iw < in[2] ? src[(id * in[1] + ih) * in[2] + iw] : 0.f;
        }
      }
    }
  }
}

Dims pad3(const Dims& d) {
  Dims r(3 - d.size(), 1);
  r.insert(r.end(), d.begin(), d.end());
  return r;
}

void conv_gemm(const Layer& L, const float* x, const float* w, float* y, std::vector<float>& col) {
  Dims in = pad3(L.in), ker = pad3(L.kernel), out = pad3(L.out());
  int64_t cg = L.c / L.groups, mg = L.m / L.groups, kprod = prod(ker), oprod = prod(out),
          iprod = prod(in);
  bool direct = kprod == 1 && L.stride == 1 && L.pad == 0;
  col.resize(size_t(direct ? 0 : cg * kprod * oprod));
  for (int64_t n = 0; n < L.n; ++n)
    for (int64_t g = 0; g < L.groups; ++g) {
      const float* xs = x + (n * L.c + g * cg) * iprod;
      if (!direct) im2col(xs, cg, in.data(), ker.data(), out.data(), L.stride, L.pad, col.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(mg), int(oprod), int(cg * kprod),
                  1.f, w + g * mg * cg * kprod, int(cg * kprod), direct ? xs : col.data(),
                  int(oprod), 0.f, y + (n * L.m + g * mg) * oprod, int(oprod));
    }
}

// Transposed: col = w_g^T x_g (gemm), then scattered (col2im) into y.
void deconv_gemm(const Layer& L, const float* x, const float* w, float* y,
                 std::vector<float>& col) {
  Dims in = pad3(L.in), ker = pad3(L.kernel), out = pad3(L.out());
  int64_t cg = L.c / L.groups, mg = L.m / L.groups, kprod = prod(ker), oprod = prod(out),
          iprod = prod(in);
  col.resize(size_t(mg * kprod * iprod));
  std::memset(y, 0, sizeof(float) * size_t(L.n * L.m * oprod));
  for (int64_t n = 0; n < L.n; ++n)
    for (int64_t g = 0; g < L.groups; ++g) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(mg * kprod), int(iprod), int(cg),
                  1.f, w + g * cg * mg * kprod, int(mg * kprod), x + (n * L.c + g * cg) * iprod,
                  int(iprod), 0.f, col.data(), int(iprod));
      float* yg = y + (n * L.m + g * mg) * oprod;
#pragma omp parallel for
      for (int64_t m = 0; m < mg; ++m)
        for (int64_t r = 0; r < kprod; ++r) {
          int64_t kh = r / ker[2] % ker[1], kw = r % ker[2];
          const float* src = col.data() + (m * kprod + r) * iprod;
          for (int64_t ih = 0; ih < in[1]; ++ih) {
            int64_t oh = ih * L.stride - (L.k() >= 2 ? L.pad : 0) + kh;
            if (oh < 0 || oh >= out[1]) continue;
            for (int64_t iw = 0; iw < in[2]; ++iw) {
              int64_t ow = iw * L.stride - L.pad + kw;
              if (ow >= 0 && ow < out[2])
                yg[(m * out[1] + oh) * out[2] + ow] += src[ih * in[2] + iw];
            }
          }
        }
    }
}

// Depthwise 2-D (groups == c == m) as a direct loop.
void depthwise_direct(const Layer& L, const float* x, const float* w, float* y) {
  Dims out = L.out();
  int64_t ih_n = L.in[0], iw_n = L.in[1], kh_n = L.kernel[0], kw_n = L.kernel[1];
#pragma omp parallel for
  for (int64_t nc = 0; nc < L.n * L.c; ++nc) {
    const float* xs = x + nc * ih_n * iw_n;
    const float* ws = w + (nc % L.c) * kh_n * kw_n;
    float* ys = y + nc * out[0] * out[1];
    for (int64_t i = 0; i < out[0] * out[1]; ++i) ys[i] = 0.f;
    for (int64_t kh = 0; kh < kh_n; ++kh)
      for (int64_t oh = 0; oh < out[0]; ++oh) {
        int64_t ih = oh * L.stride - L.pad + kh;
        if (ih < 0 || ih >= ih_n) continue;
        for (int64_t kw = 0; kw < kw_n; ++kw) {
          float wv = ws[kh * kw_n + kw];
          int64_t lo = std::max<int64_t>(0, (L.pad - kw + L.stride - 1) / L.stride);
          int64_t hi = std::min<int64_t>(out[1], (iw_n - 1 + L.pad - kw) / L.stride + 1);
          const float* xr = xs + ih * iw_n - L.pad + kw;
          float* yr = ys + oh * out[1];
          for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * L.stride];
        }
      }
  }
}

// ---- oneDNN -------------------------------------------------------------------------

enum class Layout { plain, any_weights, any_all };
const char* layout_name(Layout l) {
  return l == Layout::plain ? "dnnl plain" : l == Layout::any_weights ? "dnnl any-w" : "dnnl any";
}

memory::dims to_dims(const Dims& d) { return memory::dims(d.begin(), d.end()); }

memory::desc plain_md(const memory::dims& dims, const memory::dims& strides) {
  return memory::desc(dims, memory::data_type::f32, strides);
}

memory::dims row_major(const memory::dims& shape) {
  memory::dims s(shape.size(), 1);
  for (size_t i = shape.size() - 1; i-- > 0;) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

struct DnnlConv {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::primitive prim;
  memory::desc src_md, wei_md, dst_md, src_plain, wei_plain, dst_plain;
  std::string impl;
  double create_ms = 0;

  DnnlConv(const Layer& L, Layout lay) {
    double t0 = now_ms();
    int64_t g = L.groups, cg = L.c / g, mg = L.m / g;
    memory::dims src = {L.n, L.c}, dst = {L.n, L.m}, kd = to_dims(L.kernel);
    for (int64_t d : L.in) src.push_back(d);
    for (int64_t d : L.out()) dst.push_back(d);
    // Weights as oneDNN sees them: [g,] OC, IC, K; their memory in ONNX order.
    memory::dims wd = g > 1 ? memory::dims{g, mg, cg} : memory::dims{mg, cg};
    memory::dims wmem = g > 1 ? (L.transpose ? memory::dims{g, cg, mg} : memory::dims{g, mg, cg})
                              : (L.transpose ? memory::dims{cg, mg} : memory::dims{mg, cg});
    wd.insert(wd.end(), kd.begin(), kd.end());
    wmem.insert(wmem.end(), kd.begin(), kd.end());
    memory::dims wstr_mem = row_major(wmem), wstr = wstr_mem;
    if (L.transpose) std::swap(wstr[wd.size() - kd.size() - 1], wstr[wd.size() - kd.size() - 2]);
    src_plain = plain_md(src, row_major(src));
    dst_plain = plain_md(dst, row_major(dst));
    wei_plain = plain_md(wd, wstr);
    auto any = [](const memory::dims& d) {
      return memory::desc(d, memory::data_type::f32, memory::format_tag::any);
    };
    memory::desc s = lay == Layout::any_all ? any(src) : src_plain;
    memory::desc d = lay == Layout::any_all ? any(dst) : dst_plain;
    memory::desc w = lay == Layout::plain ? wei_plain : any(wd);
    memory::dims strides(size_t(L.k()), L.stride), dil(size_t(L.k()), 0), pad(size_t(L.k()), L.pad);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::library);
    if (L.transpose) {
      dnnl::deconvolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::deconvolution_direct, s, w, d,
                                             strides, dil, pad, pad);
      dnnl::deconvolution_forward::primitive_desc pd(desc, attr, eng);
      set(pd);
      prim = dnnl::deconvolution_forward(pd);
    } else {
      dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                           dnnl::algorithm::convolution_direct, s, w, d, strides,
                                           dil, pad, pad);
      dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
      set(pd);
      prim = dnnl::convolution_forward(pd);
    }
    create_ms = now_ms() - t0;
  }
  template <class PD>
  void set(const PD& pd) {
    src_md = pd.src_desc();
    wei_md = pd.weights_desc();
    dst_md = pd.dst_desc();
    impl = pd.impl_info_str();
  }

  // Reorders where the primitive's layout differs from the plain one (part of the time;
  // their buffers and primitives are made once, as the kernel caches them).
  memory xi, wi, yo;
  dnnl::primitive rx, rw, ry;
  void run(const float* x, const float* w, float* y) {
    dnnl::stream st(eng);
    auto wrap = [&](const memory::desc& md, const float* p) {
      return memory(md, eng, const_cast<float*>(p));
    };
    memory xs = wrap(src_plain, x), ws = wrap(wei_plain, w), yd = wrap(dst_plain, y);
    if (!xi) {
      xi = src_md != src_plain ? memory(src_md, eng) : xs;
      wi = wei_md != wei_plain ? memory(wei_md, eng) : ws;
      yo = dst_md != dst_plain ? memory(dst_md, eng) : yd;
      if (src_md != src_plain) rx = dnnl::reorder(xs, xi);
      if (wei_md != wei_plain) rw = dnnl::reorder(ws, wi);
      if (dst_md != dst_plain) ry = dnnl::reorder(yo, yd);
    }
    if (rx) rx.execute(st, {{DNNL_ARG_FROM, xs}, {DNNL_ARG_TO, xi}});
    if (rw) rw.execute(st, {{DNNL_ARG_FROM, ws}, {DNNL_ARG_TO, wi}});
    prim.execute(st, {{DNNL_ARG_SRC, rx ? xi : xs},
                      {DNNL_ARG_WEIGHTS, rw ? wi : ws},
                      {DNNL_ARG_DST, ry ? yo : yd}});
    if (ry) ry.execute(st, {{DNNL_ARG_FROM, yo}, {DNNL_ARG_TO, yd}});
    st.wait();
  }
};

double gflop(const Layer& L) {
  return 2.0 * double(L.n) * double(L.m) * double(L.c / L.groups) *
         double(prod(L.kernel) * prod(L.transpose ? L.in : L.out())) * 1e-9;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  std::vector<Layer> layers = {
      {"resnet 3x3 64->64 56x56 b1", 1, 64, 64, 1, {56, 56}, {3, 3}, 1, 1},
      {"resnet 3x3 64->64 56x56 b8", 8, 64, 64, 1, {56, 56}, {3, 3}, 1, 1},
      {"resnet 1x1 256->64 56x56 b1", 1, 256, 64, 1, {56, 56}, {1, 1}, 1, 0},
      {"resnet 3x3 512->512 7x7 b1", 1, 512, 512, 1, {7, 7}, {3, 3}, 1, 1},
      {"resnet 3x3 256->256 14x14 b1", 1, 256, 256, 1, {14, 14}, {3, 3}, 1, 1},
      {"resnet 1x1/2 256->512 56x56 b1", 1, 256, 512, 1, {56, 56}, {1, 1}, 2, 0},
      {"resnet stem 7x7/2 3->64 224 b1", 1, 3, 64, 1, {224, 224}, {7, 7}, 2, 3},
      {"depthwise 3x3 144ch 56x56 b1", 1, 144, 144, 144, {56, 56}, {3, 3}, 1, 1},
      {"depthwise 3x3/2 144ch 56x56 b1", 1, 144, 144, 144, {56, 56}, {3, 3}, 2, 1},
      {"audio 1-D k3 80->384 t3000 b1", 1, 80, 384, 1, {3000}, {3}, 1, 1},
      {"audio 1-D k10/5 1->512 t16000", 1, 1, 512, 1, {16000}, {10}, 5, 0},
      {"3-D 3x3x3 32->32 16^3 b1", 1, 32, 32, 1, {16, 16, 16}, {3, 3, 3}, 1, 1},
      {"small grouped 3x3/2 16->32 g2 16x16 b2", 2, 16, 32, 2, {16, 16}, {3, 3}, 2, 1},
      {"small 3x3 32->32 8x8 b1", 1, 32, 32, 1, {8, 8}, {3, 3}, 1, 1},
      {"small 3x3 64->64 7x7 b1", 1, 64, 64, 1, {7, 7}, {3, 3}, 1, 1},
      {"small 3x3 128->128 7x7 b1", 1, 128, 128, 1, {7, 7}, {3, 3}, 1, 1},
      {"small grouped 3x3 64->64 g4 14x14 b1", 1, 64, 64, 4, {14, 14}, {3, 3}, 1, 1},
      {"deconv 4x4/2 64->32 28x28 b1", 1, 64, 32, 1, {28, 28}, {4, 4}, 2, 1, true},
      {"deconv 2x2/2 128->64 32x32 b4", 4, 128, 64, 1, {32, 32}, {2, 2}, 2, 0, true},
  };
  std::printf("threads %d, best of %d; ms (GFLOP/s)\n", omp_get_max_threads(), reps);
  const char* only = argc > 2 ? argv[2] : "";
  for (const Layer& L : layers) {
    if (!std::strstr(L.name, only)) continue;
    int64_t wn = L.m * (L.c / L.groups) * prod(L.kernel);
    std::vector<float> x(size_t(L.n * L.c * prod(L.in))), w(static_cast<size_t>(wn)),
        y(size_t(L.n * L.m * prod(L.out()))), ref, col;
    uint32_t s = 1;
    for (auto* v : {&x, &w})
      for (float& f : *v) f = float((s = s * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
    double fl = gflop(L);
    std::printf("%-32s %6.3f GFLOP\n", L.name, fl);
    auto report = [&](const char* what, double ms, const char* extra) {
      double diff = ref.empty() ? 0 : max_diff(ref, y);
      std::printf("  %-14s %8.3f ms (%6.1f)  diff %.1e %s\n", what, ms, fl / ms * 1e3, diff, extra);
      if (ref.empty()) ref = y;
    };
    auto gemm = [&] {
      L.transpose ? deconv_gemm(L, x.data(), w.data(), y.data(), col)
                  : conv_gemm(L, x.data(), w.data(), y.data(), col);
    };
    report("im2col+sgemm", time_ms(gemm, reps), "");
    if (L.groups == L.c && L.groups == L.m && L.k() == 2)
      report("direct loop",
             time_ms([&] { depthwise_direct(L, x.data(), w.data(), y.data()); }, reps), "");
    for (Layout lay : {Layout::plain, Layout::any_weights, Layout::any_all}) {
      try {
        DnnlConv d(L, lay);
        double ms = time_ms([&] { d.run(x.data(), w.data(), y.data()); }, reps);
        std::string extra = d.impl + " (create " + std::to_string(d.create_ms) + " ms)";
        report(layout_name(lay), ms, extra.c_str());
      } catch (const dnnl::error& e) {
        std::printf("  %-14s failed: %s\n", layout_name(lay), e.what());
      }
    }
  }
}
