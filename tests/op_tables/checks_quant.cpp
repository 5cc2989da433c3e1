// dequantize and quant_matmul against references written for the test from the block
// layouts (rlx/quant.h, ggml's format description): each block decoded in double by the
// plain formula of its type, then (quant_matmul) the product in long double.
//
// Weights are random bytes (every bit pattern of the packed values and scales occurs)
// with the f16 scale fields set to modest values, so no kernel meets a NaN or overflow.
//
// quant_matmul quantizes the activations exactly as ggml does (so that its products are
// llama.cpp's, to the f32 rounding of the sums): the reference rounds them by ggml's rules,
// written here from its quantizers' definitions (blocks of 32: quantize_row_q8_0 / q8_1 on
// x86; blocks of 256: quantize_row_q8_K), takes the product in long double and allows
// 1e-5 Σ|w x̂| for the f32 sums and block scales, plus the rounding of a 16-bit output. A
// quantizer that rounded differently (another scale, f32 instead of f16 scales) misses
// this bound by orders of magnitude.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <tuple>

#include "backend/cuda/matvec_rows.h"
#include "op_tables/consistency.h"
#include "rlx/quant.h"

namespace rlx::test {

namespace {

using namespace quant;

double h(uint16_t v) { return double(f16_to_f32(v)); }

// One block of type t at p decoded into y (dtype_block(t) values).
void decode_block(DType t, const uint8_t* p, double* y) {
  switch (t) {
    case DType::q4_0:
    case DType::q4_1: {
      bool one = t == DType::q4_1;
      const uint8_t* qs = p + (one ? 4 : 2);
      uint16_t d, m = 0;
      std::memcpy(&d, p, 2);
      if (one) std::memcpy(&m, p + 2, 2);
      for (int j = 0; j < 16; ++j) {
        int q0 = qs[j] & 15, q1 = qs[j] >> 4;
        y[j] = one ? h(d) * q0 + h(m) : h(d) * (q0 - 8);
        y[j + 16] = one ? h(d) * q1 + h(m) : h(d) * (q1 - 8);
      }
      break;
    }
    case DType::q5_0:
    case DType::q5_1: {
      bool one = t == DType::q5_1;
      uint16_t d, m = 0;
      std::memcpy(&d, p, 2);
      if (one) std::memcpy(&m, p + 2, 2);
      const uint8_t *qh = p + (one ? 4 : 2), *qs = qh + 4;
      uint32_t hb =
          uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
      for (int j = 0; j < 16; ++j) {
        int q0 = (qs[j] & 15) | int((hb >> j) & 1) << 4;
        int q1 = (qs[j] >> 4) | int((hb >> (j + 16)) & 1) << 4;
        y[j] = one ? h(d) * q0 + h(m) : h(d) * (q0 - 16);
        y[j + 16] = one ? h(d) * q1 + h(m) : h(d) * (q1 - 16);
      }
      break;
    }
    case DType::q8_0: {
      uint16_t d;
      std::memcpy(&d, p, 2);
      for (int j = 0; j < 32; ++j) y[j] = h(d) * double(int8_t(p[2 + j]));
      break;
    }
    case DType::q2_k:
    case DType::q3_k: {
      // Value i: 128-value half i/128, bit pair (i%128)/32 of byte i%32 of that half's 32
      // bytes; scale group i/16.
      bool three = t == DType::q3_k;
      BlockQ2_K b2;
      BlockQ3_K b3;
      if (three)
        std::memcpy(&b3, p, sizeof b3);
      else
        std::memcpy(&b2, p, sizeof b2);
      for (int i = 0; i < 256; ++i) {
        int half = i / 128, pair = (i % 128) / 32, l = i % 32, g = i / 16;
        const uint8_t* qs = three ? b3.qs : b2.qs;
        int q = (qs[32 * half + l] >> (2 * pair)) & 3;
        if (!three) {
          y[i] = h(b2.d) * (b2.scales[g] & 15) * q - h(b2.dmin) * (b2.scales[g] >> 4);
          continue;
        }
        int hbit = (b3.hmask[l] >> (4 * half + pair)) & 1;
        int lo = g < 8 ? b3.scales[g] & 15 : b3.scales[g - 8] >> 4;
        int hi = (b3.scales[8 + g % 4] >> (2 * (g / 4))) & 3;
        y[i] = h(b3.d) * ((lo | hi << 4) - 32) * (q - (hbit ? 0 : 4));
      }
      break;
    }
    case DType::q4_k:
    case DType::q5_k: {
      bool five = t == DType::q5_k;
      BlockQ4_K b4;
      BlockQ5_K b5;
      if (five)
        std::memcpy(&b5, p, sizeof b5);
      else
        std::memcpy(&b4, p, sizeof b4);
      const uint8_t* sc = five ? b5.scales : b4.scales;
      const uint8_t* qs = five ? b5.qs : b4.qs;
      double d = h(five ? b5.d : b4.d), dmin = h(five ? b5.dmin : b4.dmin);
      for (int i = 0; i < 256; ++i) {
        int g = i / 32, l = i % 32, byte = qs[32 * (g / 2) + l];
        int q = g % 2 ? byte >> 4 : byte & 15;
        if (five) q += ((b5.qh[l] >> g) & 1) * 16;
        int s, m;
        if (g < 4) {
          s = sc[g] & 63;
          m = sc[g + 4] & 63;
        } else {
          s = (sc[g + 4] & 15) | ((sc[g - 4] >> 6) << 4);
          m = (sc[g + 4] >> 4) | ((sc[g] >> 6) << 4);
        }
        y[i] = d * s * q - dmin * m;
      }
      break;
    }
    default: {  // q6_k
      BlockQ6_K b;
      std::memcpy(&b, p, sizeof b);
      for (int i = 0; i < 256; ++i) {
        int half = i / 128, part = (i % 128) / 32, l = i % 32;
        int lo = b.ql[64 * half + l + 32 * (part & 1)];
        lo = part < 2 ? lo & 15 : lo >> 4;
        int hi = (b.qh[32 * half + l] >> (2 * part)) & 3;
        y[i] = h(b.d) * b.scales[i / 16] * ((lo | hi << 4) - 32);
      }
    }
  }
}

// The values of a weight tensor of any storage dtype, row-major.
std::vector<double> decoded(const Tensor& w) {
  if (!is_quantized(w.dtype())) return values(w);
  Tensor c = w.contiguous();
  const int64_t blk = dtype_block(w.dtype());
  std::vector<double> y(size_t(c.numel()));
  const auto* p = static_cast<const uint8_t*>(c.data());
  for (int64_t b = 0; b < c.numel() / blk; ++b)
    decode_block(w.dtype(), p + size_t(b) * dtype_size(w.dtype()), y.data() + b * blk);
  return y;
}

Tensors dequantize_ref(const Tensors& in, const Attrs& attrs) {
  std::vector<double> v = decoded(in[0]);
  DType out = attrs.get_dtype("dtype");
  // The kernels decode in f32, as ggml does (every product of a block's parts is exact in
  // f32, the last sum rounds once): an f64 output holds those f32 values.
  if (out == DType::f64)
    for (double& x : v) x = double(float(x));
  if (in.size() == 1) return {tensor_of(out, in[0].shape(), v)};
  const int64_t k = in[0].shape().back();
  std::vector<double> rows = values(in[1]), y;
  for (double r : rows)
    y.insert(y.end(), v.begin() + int64_t(r) * k, v.begin() + int64_t(r + 1) * k);
  std::vector<int64_t> shape = in[1].shape();
  shape.push_back(k);
  return {tensor_of(out, shape, y)};
}

// One activation row x (k values) as the integer dots see it for weights of dtype t: x̂ =
// d q per block. For blocks of 32, s[b] = f16(d Σq) with the unrounded d: the offset
// term of q4_1 / q5_1, which meets the weights' minimum apart from the products.
std::vector<double> ggml_rounded(DType t, const double* x, int64_t k, std::vector<double>& s) {
  const int64_t blk = dtype_block(t);
  std::vector<double> y(static_cast<size_t>(k), 0.0);
  s.assign(size_t(k / blk), 0.0);
  for (int64_t b = 0; b < k / blk; ++b) {
    const double* xb = x + b * blk;
    float amax = 0, max = 0;  // the first value of largest magnitude, with its sign
    for (int64_t i = 0; i < blk; ++i)
      if (std::fabs(float(xb[i])) > amax) amax = std::fabs(float(xb[i])), max = float(xb[i]);
    if (amax == 0) continue;
    if (blk == 32) {
      const float d = amax / 127.f, id = 127.f / amax;
      const double dh = double(f16_to_f32(f32_to_f16(d)));
      int sum = 0;
      for (int64_t i = 0; i < blk; ++i) {
        const int q = int(std::nearbyint(float(xb[i]) * id));
        y[size_t(b * blk + i)] = dh * q;
        sum += q;
      }
      s[size_t(b)] = double(f16_to_f32(f32_to_f16(d * float(sum))));
    } else {
      const float iscale = -127.f / max, d = 1 / iscale;
      for (int64_t i = 0; i < blk; ++i)
        y[size_t(b * blk + i)] = double(d) * std::min(127.f, std::nearbyint(iscale * float(xb[i])));
    }
  }
  return y;
}

// The minimum of q4_1 / q5_1 block b of row j (its f16 at bytes 2-3 of the block).
double block_min(const Tensor& w, int64_t j, int64_t b) {
  const auto* p = static_cast<const uint8_t*>(w.data()) +
                  size_t(j) * dtype_nbytes(w.dtype(), w.shape()[1]) +
                  size_t(b) * dtype_size(w.dtype());
  uint16_t m;
  std::memcpy(&m, p + 2, 2);
  return h(m);
}

// The addend c (input 2, if any) broadcast (NumPy rules) onto the output's shape, flat; zeros
// without one.
std::vector<double> addend_values(const Tensors& in, const std::vector<int64_t>& shape) {
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  std::vector<double> out(size_t(total), 0.0);
  if (in.size() < 3) return out;
  const std::vector<double> c = values(in[2]);
  for (int64_t i = 0; i < total; ++i)
    out[size_t(i)] = c[size_t(broadcast_index(unravel(i, shape), in[2].shape()))];
  return out;
}

// x @ w^T as quant_matmul_verify's reference takes it (with `ggml`, x rounded by ggml's
// rules for quantized weights): per output, the long double sum and the sum of |terms|.
struct Products {
  std::vector<double> s, mag;
};
Products exact_products(const Tensor& x, const Tensor& w, bool ggml) {
  const int64_t n = w.shape()[0], k = w.shape()[1], m = k ? x.numel() / k : 0;
  std::vector<double> xv = values(x), wv = decoded(w), sb;
  const bool q = ggml && is_quantized(w.dtype()) && x.dtype() != DType::f64;
  const bool has_min = q && (w.dtype() == DType::q4_1 || w.dtype() == DType::q5_1);
  const int64_t blk = q ? dtype_block(w.dtype()) : 1;
  const Tensor wc = w.contiguous();
  Products p{std::vector<double>(size_t(m * n)), std::vector<double>(size_t(m * n))};
  for (int64_t r = 0; r < m; ++r) {
    const std::vector<double> xr =
        q ? ggml_rounded(w.dtype(), xv.data() + r * k, k, sb)
          : std::vector<double>(xv.begin() + r * k, xv.begin() + (r + 1) * k);
    for (int64_t j = 0; j < n; ++j) {
      long double sum = 0, mag = 0;
      for (int64_t b = 0; b < k / blk; ++b) {
        long double xsum = 0;
        for (int64_t i = b * blk; i < (b + 1) * blk; ++i) {
          const double xi = xr[size_t(i)], wi = wv[size_t(j * k + i)];
          sum += (long double)xi * wi;
          mag += std::fabs(xi * wi);
          xsum += xi;
        }
        if (has_min) sum += block_min(wc, j, b) * (sb[size_t(b)] - xsum);
      }
      p.s[size_t(r * n + j)] = double(sum);
      p.mag[size_t(r * n + j)] = double(mag);
    }
  }
  return p;
}

// out against act(x @ w^T) + c: each product within rel Σ|terms| (through swiglu's
// derivatives), plus the rounding of a 16-bit output (twice: the product's, then its sum
// with c, the unfused add's way).
std::string verify_products(const Tensor& x, const Tensor& w, const Tensor* c, bool swiglu,
                            double rel, const Tensor& y, bool ggml = true) {
  const int64_t n = w.shape()[0], width = swiglu ? n / 2 : n;
  std::vector<int64_t> shape = x.shape();
  shape.back() = width;
  if (y.dtype() != x.dtype() || y.shape() != shape)
    return str_cat("expected ", TensorType{x.dtype(), to_shape(shape)}.str(), ", got ",
                   y.type().str());
  const Products p = exact_products(x, w, ggml);
  const std::vector<double> got = values(y);
  Tensors with_c{x, w};
  if (c) with_c.push_back(*c);
  const std::vector<double> cv = addend_values(with_c, shape);
  const double out_rel = x.dtype() == DType::f16 ? 0x1p-11 : x.dtype() == DType::bf16 ? 0x1p-8 : 0;
  const double out_abs = x.dtype() == DType::f16 ? 0x1p-24 : 0;  // f16's underflow
  int bad = 0;
  std::string first;
  for (int64_t i = 0; i < int64_t(got.size()); ++i) {
    const int64_t r = i / width, j = i % width;
    const size_t a = size_t(r * n + j);
    double want = p.s[a], err = rel * p.mag[a];
    if (swiglu) {  // silu(g) u, the errors of g and u (their sums', a 16-bit rounding of each
                   // where the decomposition stores them) through d/dg and d/du
      const double g = p.s[a], u = p.s[a + size_t(width)], sg = 1 / (1 + std::exp(-g));
      const double eg = rel * p.mag[a] + out_rel * std::fabs(g),
                   eu = rel * p.mag[a + size_t(width)] + out_rel * std::fabs(u);
      want = g * sg * u;
      // (+ silu's own 16-bit output, which may underflow)
      err = std::fabs(sg * (1 + g * (1 - sg)) * u) * eg + std::fabs(g * sg) * eu +
            (out_rel * std::fabs(g * sg) + out_abs) * std::fabs(u) + out_abs;
    }
    want += cv[size_t(i)];
    const double bound =
        err + (out_rel + 1e-6) * (2 * std::fabs(want) + std::fabs(cv[size_t(i)])) + 1e-30;
    if (!(std::fabs(got[size_t(i)] - want) <= bound) && bad++ == 0)
      first = str_cat("at [", r, ", ", j, "]: expected ", want, " within ", bound, ", got ",
                      got[size_t(i)]);
  }
  return bad ? str_cat(bad, " outside the bound; first ", first) : "";
}

// quant_matmul within the bound described at the top of the file, plus the addend's.
std::string quant_matmul_verify(const Tensors& in, const Tensors& out, const Attrs&) {
  const double rel = in[0].dtype() == DType::f64 ? 3e-7 : 1e-5;  // f64: the f32-decoded weights
  return verify_products(in[0], in[1], in.size() == 3 ? &in[2] : nullptr, false, rel, out[0]);
}

// fused_quant_matmul: rms_norm in double (stored in x's dtype, as the unfused op stores
// it), then the product, swiglu and the addend as above. Rows normalised on the device
// may round to other 8-bit values than the reference's where the weights are quantized:
// one step of a block here and there, within 1e-3 Σ|w x|. On the GPU, more rows than its
// matvec takes multiply in bf16 (quant_matmul_gpu_verify's bound).
std::string fused_verify(const Tensors& in, const Tensors& out, const Attrs& a, bool gpu) {
  const bool norm = a.get_string("norm") == "rms_norm";
  const size_t wi = norm ? 2 : 1;
  const Tensor& w = in[wi];
  Tensor x = in[0];
  const int64_t k = w.shape()[1], m = k ? x.numel() / k : 0;
  if (norm && k > 0) {
    std::vector<double> xv = values(x);
    const std::vector<double> g = values(in[1]);
    for (int64_t r = 0; r < m; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < k; ++i) ss += xv[size_t(r * k + i)] * xv[size_t(r * k + i)];
      const double inv = 1 / std::sqrt(ss / double(k) + a.get_float("epsilon"));
      for (int64_t i = 0; i < k; ++i) xv[size_t(r * k + i)] *= inv * g[size_t(i)];
    }
    x = tensor_of(x.dtype(), x.shape(), xv);
  }
  const bool f64 = x.dtype() == DType::f64;
  double rel = f64 ? 3e-7 : norm && is_quantized(w.dtype()) ? 1e-3 : 1e-5;
  const bool bf16_gemm = gpu && m > cuda::matvec_rows(w.dtype()) && !f64 && w.dtype() != DType::f32;
  // A 16-bit x: the device normalises in f32, the reference rounds the norm to x's dtype.
  if (norm) rel += x.dtype() == DType::f16 ? 0x1p-11 : x.dtype() == DType::bf16 ? 0x1p-8 : 0;
  if (bf16_gemm) rel = 0x1p-7;
  return verify_products(x, w, in.size() > wi + 1 ? &in[wi + 1] : nullptr,
                         a.get_string("activation") == "swiglu", rel, out[0], !bf16_gemm);
}

// The GPU's product of many rows (more than its matvec takes: backend/cuda/matvec_rows.h) runs on
// the tensor cores in bf16, as PyTorch runs such models: the decoded weights and x each
// rounded to 8 significant bits, f32 sums. Within 2^-7 Σ|w x| of the exact product of x
// and the decoded weights (plus a 16-bit output's rounding); fewer rows, the integer dots
// and quant_matmul_verify's bound.
std::string quant_matmul_gpu_verify(const Tensors& in, const Tensors& out, const Attrs& a) {
  const Tensor &x = in[0], &w = in[1];
  const int64_t k = w.shape()[1], m = k ? x.numel() / k : 0;
  if (m <= cuda::matvec_rows(w.dtype()) || x.dtype() == DType::f64 || w.dtype() == DType::f32)
    return quant_matmul_verify(in, out, a);
  return verify_products(x, w, in.size() == 3 ? &in[2] : nullptr, false, 0x1p-7, out[0], false);
}

}  // namespace

// Random weights of dtype t, [rows, k]: random bytes with the f16 scales (d, dmin, m) set to
// modest values; floats uniform in [-1, 1]. (Also used by grads_quant.cpp.)
Tensor random_quantized(DType t, int64_t rows, int64_t k, uint64_t seed) {
  if (!is_quantized(t)) return random_tensor(t, {rows, k}, seed, -1, 1);
  std::vector<uint8_t> v(dtype_nbytes(t, rows * k));
  Tensor bytes = random_tensor(DType::u8, {int64_t(v.size())}, seed, 0, 255);
  std::memcpy(v.data(), bytes.data(), v.size());
  std::vector<double> u = values(random_tensor(DType::f64, {int64_t(v.size())}, seed + 1, 0, 1));
  size_t next = 0;
  auto scale = [&](uint8_t* at, double lo, double hi) {
    uint16_t x = f32_to_f16(float(lo + (hi - lo) * u[next++ % u.size()]));
    std::memcpy(at, &x, 2);
  };
  const size_t bs = dtype_size(t);
  for (size_t off = 0; off < v.size(); off += bs) {
    uint8_t* b = &v[off];
    switch (t) {
      case DType::q4_1:
      case DType::q5_1:
        scale(b, 0, 0.05);
        scale(b + 2, -0.5, 0.1);
        break;
      case DType::q2_k:
        scale(b + offsetof(BlockQ2_K, d), 0, 0.05);
        scale(b + offsetof(BlockQ2_K, dmin), 0, 0.02);
        break;
      case DType::q3_k:
        scale(b + offsetof(BlockQ3_K, d), -0.01, 0.01);
        break;
      case DType::q4_k:
      case DType::q5_k:
        scale(b, 0, 0.005);
        scale(b + 2, 0, 0.005);
        break;
      case DType::q6_k:
        scale(b + offsetof(BlockQ6_K, d), -0.002, 0.002);
        break;
      default:  // q4_0, q5_0, q8_0: d first
        scale(b, -0.05, 0.05);
    }
  }
  return Tensor::from_data(t, {rows, k}, v.data());
}

// w [n, k] (q4_0, q8_0) interleaved in groups of `rows` rows (layouts rows8, rows16).
Tensor interleaved(const Tensor& w, int rows) {
  Tensor t = Tensor::empty(w.dtype(), w.shape());
  quant::interleave(w.dtype(), rows, w.data(), t.data(), w.shape()[0], w.shape()[1]);
  return t;
}

// The interleaved product against the plain weights' reference: the weights brought back
// with deinterleave, which the interleaving must invert.
std::string quant_matmul_grouped_verify(const Tensors& in, const Tensors& out, const Attrs& a) {
  const Tensor& w = in[1];
  const int rows = quant::layout_rows(a.get_string("layout"));
  const int64_t n = w.shape()[0], k = w.shape()[1];
  const size_t group = rows * dtype_nbytes(w.dtype(), k);
  Tensor plain = Tensor::empty(w.dtype(), w.shape());
  for (int64_t g = 0; g < n / rows; ++g)
    quant::deinterleave(w.dtype(), rows, static_cast<const uint8_t*>(w.data()) + g * group,
                        static_cast<uint8_t*>(plain.data()) + g * group, k);
  return quant_matmul_verify({in[0], plain}, out, a);
}

// fused_quant_matmul (an LLM block's norm -> product -> swiglu -> residual add as one op):
// each matvec kind with the norm and / or the paired rows (fmatvec with its rows shared by
// 2 warps, the integer dots, the bf16 tensor-core tiles), the many-row path, odd output
// counts (a block's last pair idle), f16 / f64 activations.
static void fused_quant_checks(CheckTable& t) {
  uint64_t seed = 7300;
  auto fq = [&](DType xt, std::vector<int64_t> xs, DType wt, int64_t n, bool norm, bool swiglu,
                std::vector<int64_t> c, std::string note) {
    const int64_t k = xs.back();
    OpCheck ch;
    ch.op = "fused_quant_matmul";
    ch.dtype = is_quantized(wt) ? xt : wt;
    ch.inputs = {random_tensor(xt, xs, ++seed, -2, 2)};
    if (norm) ch.inputs.push_back(random_tensor(xt, {k}, ++seed, 0.5, 1.5));
    ch.inputs.push_back(random_quantized(wt, n, k, ++seed));
    if (!c.empty()) ch.inputs.push_back(random_tensor(xt, c, ++seed, -1, 1));
    ch.attrs = {{"norm", std::string(norm ? "rms_norm" : "none")},
                {"epsilon", 1e-5},
                {"activation", std::string(swiglu ? "swiglu" : "none")}};
    ch.verify = [](const Tensors& in, const Tensors& out, const Attrs& a) {
      return fused_verify(in, out, a, false);
    };
    ch.verify_gpu = [](const Tensors& in, const Tensors& out, const Attrs& a) {
      return fused_verify(in, out, a, true);
    };
    ch.note = std::move(note);
    ch.strided = !is_quantized(wt);
    return ch;
  };
  using D = DType;
  t.add(fq(D::f32, {1, 2048}, D::bf16, 74, true, true, {}, "bf16 gate / up: norm + swiglu"));
  t.add(fq(D::f32, {1, 2048}, D::bf16, 37, true, false, {}, "bf16 q / k / v: norm"));
  t.add(fq(D::f32, {1, 1, 2048}, D::bf16, 40, false, true, {1, 1, 20}, "bf16 swiglu + residual"));
  t.add(fq(D::f32, {3, 96}, D::bf16, 40, true, true, {}, "bf16, 3 rows: tensor-core tiles"));
  t.add(fq(D::f32, {6, 96}, D::bf16, 37, true, false, {6, 37}, "bf16, 6 rows, norm + residual"));
  t.add(fq(D::f32, {1, 256}, D::q8_0, 26, true, true, {}, "q8_0: norm + swiglu"));
  t.add(fq(D::f32, {2, 256}, D::q4_k, 18, false, true, {2, 9}, "q4_k, 2 rows: swiglu + residual"));
  t.add(fq(D::f32, {1, 45}, D::f16, 10, true, true, {}, "f16, k = 45 (no 16-byte loads)"));
  t.add(fq(D::f32, {12, 64}, D::q4_0, 20, true, true, {10}, "q4_0, 12 rows: the GEMM path"));
  t.add(fq(D::f32, {12, 64}, D::f32, 14, true, false, {14}, "f32 weights, 12 rows"));
  t.add(fq(D::f64, {2, 32}, D::f32, 8, true, true, {}, "f64 activations (decomposed)"));
  t.add(fq(D::f16, {2, 64}, D::q8_0, 14, false, true, {}, "f16 activations, swiglu"));
  t.add(fq(D::f16, {1, 64}, D::f16, 10, true, false, {}, "f16 activations, norm"));
  // The norm in the activations' quantizer (a block per row: rows of several blocks).
  t.add(fq(D::f32, {3, 512}, D::q4_k, 16, true, false, {3, 16}, "q4_k, 3 rows: norm + residual"));
  t.add(fq(D::f32, {1, 256}, D::q6_k, 12, true, true, {}, "q6_k: norm + swiglu"));
  t.add(fq(D::f32, {4, 1024}, D::q5_k, 22, true, true, {4, 11}, "q5_k, 4 rows: all of it"));
  t.add(fq(D::f32, {8, 2048}, D::q8_0, 34, true, true, {}, "q8_0, 8 rows: norm + swiglu"));
  t.add(fq(D::f16, {2, 96}, D::q4_0, 8, true, false, {}, "f16 activations, q4_0, norm"));
}

// w [n, k] (q8_0, q4_k) in tiles16, CUDA's decode form, and a check's verification run on the
// plain weights untile gives back (which the tiling must invert).
Tensor tiled(const Tensor& w) {
  Tensor t = Tensor::empty(w.dtype(), w.shape());
  quant::tile(w.dtype(), w.data(), t.data(), w.shape()[0], w.shape()[1]);
  return t;
}

VerifyFn on_untiled(VerifyFn f, size_t wi) {
  return [f = std::move(f), wi](const Tensors& in, const Tensors& out, const Attrs& a) {
    Tensors plain = in;
    const Tensor& w = in[wi];
    plain[wi] = Tensor::empty(w.dtype(), w.shape());
    quant::untile(w.dtype(), w.data(), plain[wi].data(), w.shape()[0], w.shape()[1]);
    return f(plain, out, a);
  };
}

// q8_0 and q4_k in tiles16 (the CPU decodes it back per call): 1 to 8 rows (CUDA's tile products: a
// warp's blocks in one round and in several, k = 4608; one row quantized inside the product), many
// rows (the GEMM of the decoded tiles), f16 / f64 activations (f64: the CPU kernel, a host delegate
// on CUDA), and fused with the norm, swiglu's pairs of gate / up tiles and an addend.
static void tiled_checks(CheckTable& t) {
  uint64_t seed = 4400;
  DType wt = DType::q8_0;
  auto check = [&](DType xt, std::vector<int64_t> xs, int64_t n, bool norm, bool swiglu,
                   std::vector<int64_t> c, std::string note) {
    const int64_t k = xs.back();
    const bool fused = norm || swiglu;
    OpCheck ch;
    ch.op = fused ? "fused_quant_matmul" : "quant_matmul";
    ch.dtype = xt;
    ch.inputs = {random_tensor(xt, xs, ++seed, -2, 2)};
    if (norm) ch.inputs.push_back(random_tensor(xt, {k}, ++seed, 0.5, 1.5));
    const size_t wi = ch.inputs.size();
    ch.inputs.push_back(tiled(random_quantized(wt, n, k, ++seed)));
    if (!c.empty()) ch.inputs.push_back(random_tensor(xt, c, ++seed, -1, 1));
    ch.attrs = {{"layout", std::string(quant::kTiles16)}};
    if (fused) {
      ch.attrs.set("norm", std::string(norm ? "rms_norm" : "none"));
      ch.attrs.set("epsilon", 1e-5);
      ch.attrs.set("activation", std::string(swiglu ? "swiglu" : "none"));
      ch.verify = on_untiled([](const Tensors& in, const Tensors& out,
                                const Attrs& a) { return fused_verify(in, out, a, false); },
                             wi);
      ch.verify_gpu = on_untiled([](const Tensors& in, const Tensors& out,
                                    const Attrs& a) { return fused_verify(in, out, a, true); },
                                 wi);
    } else {
      ch.verify = on_untiled(quant_matmul_verify, wi);
      ch.verify_gpu = on_untiled(quant_matmul_gpu_verify, wi);
    }
    ch.note = str_cat(dtype_name(wt), " tiles16, ", note);
    ch.strided = false;
    t.add(std::move(ch));
  };
  using D = DType;
  check(D::f32, {1, 64}, 16, false, false, {}, "1 row");
  check(D::f32, {3, 96}, 48, false, false, {3, 48}, "3 rows + addend");
  check(D::f32, {8, 4608}, 32, false, false, {}, "8 rows, several rounds a warp");
  check(D::f32, {40, 64}, 48, false, false, {}, "40 rows: the GEMM");
  check(D::f16, {2, 64}, 16, false, false, {}, "f16 activations");
  check(D::f64, {3, 64}, 16, false, false, {}, "f64 activations");
  check(D::f32, {1, 2048}, 64, true, true, {}, "norm + swiglu");
  check(D::f32, {8, 2048}, 64, true, true, {8, 32}, "8 rows: norm + swiglu + residual");
  check(D::f32, {5, 4608}, 32, true, false, {5, 32}, "5 rows: norm + residual");
  check(D::f32, {12, 256}, 64, false, true, {32}, "12 rows: the GEMM, swiglu");
  check(D::f32, {2, 64}, 48, false, true, {}, "swiglu's halves not whole groups (CUDA: host)");
  check(D::f32, {1, 4608}, 32, true, false, {1, 32}, "1 row: norm + residual, several rounds");
  check(D::f32, {1, 2048}, 64, false, true, {32}, "1 row: swiglu + residual");
  wt = DType::q4_k;
  check(D::f32, {1, 256}, 16, false, false, {}, "1 row");
  check(D::f32, {3, 768}, 48, false, false, {3, 48}, "3 rows + addend");
  check(D::f32, {8, 5632}, 32, false, false, {}, "8 rows, several rounds a warp");
  check(D::f32, {40, 512}, 32, false, false, {}, "40 rows: the GEMM");
  check(D::f16, {2, 256}, 16, false, false, {}, "f16 activations");
  check(D::f64, {3, 256}, 16, false, false, {}, "f64 activations");
  check(D::f32, {8, 2048}, 64, true, true, {8, 32}, "8 rows: norm + swiglu + residual");
  check(D::f32, {2, 4608}, 32, true, false, {2, 32}, "2 rows: norm + residual");
  check(D::f32, {12, 512}, 64, false, true, {32}, "12 rows: the GEMM, swiglu");
  check(D::f32, {1, 2048}, 64, true, true, {}, "1 row: norm + swiglu");
  check(D::f32, {1, 5632}, 32, false, false, {1, 32}, "1 row + addend, several rounds");
  check(D::f16, {1, 512}, 16, true, false, {}, "1 row of f16: norm");
}

CheckTable checks_quant() {
  CheckTable t;
  uint64_t seed = 3100;
  auto x = [&](DType dt, std::vector<int64_t> shape) {
    return random_tensor(dt, std::move(shape), ++seed, -1, 1);
  };
  auto mm = [&](Tensor xv, Tensor w, std::string note) {
    OpCheck c;
    c.op = "quant_matmul";
    c.dtype = is_quantized(w.dtype()) ? xv.dtype() : w.dtype();
    c.inputs = {std::move(xv), std::move(w)};
    c.verify = quant_matmul_verify;
    c.verify_gpu = quant_matmul_gpu_verify;
    c.note = std::move(note);
    c.strided = !is_quantized(c.inputs[1].dtype());
    return c;
  };
  auto dq = [&](Tensors in, DType out, std::string note) {
    const DType wt = in[0].dtype();
    OpCheck c = ref_check("dequantize", wt, std::move(in), {{"dtype", out}}, dequantize_ref,
                          std::move(note));
    c.strided = !is_quantized(c.inputs[0].dtype());
    return c;
  };

  // quant_matmul: the few-row integer path (1, 3 and 6 rows: tiles of 4 and a remainder),
  // every quantized dtype, 37 weight rows (not a multiple of any row block).
  t.add(mm(x(DType::f32, {3, 64}), random_quantized(DType::q4_0, 5, 64, ++seed), "first"));
  for (DType qt : kQuantDTypes) {
    const int64_t k = 2 * dtype_block(qt);
    std::string name(dtype_name(qt));
    for (int64_t m : {1, 3, 6})
      t.add(mm(x(DType::f32, {m, k}), random_quantized(qt, 37, k, ++seed),
               str_cat(name, ", ", m, " rows")));
    t.add(mm(x(DType::f32, {2, 2, k}), random_quantized(qt, 9, k, ++seed), name + ", batch dims"));
    t.add(mm(x(DType::f32, {k}), random_quantized(qt, 7, k, ++seed), name + ", 1-D x"));
    // Many rows: decoded panels through sgemm (q4_0 … q8_0), tiles of the integer dots
    // over blocks of weight rows (K-quants).
    t.add(mm(x(DType::f32, {40, k}), random_quantized(qt, 70, k, ++seed), name + ", 40 rows"));
  }
  // An odd number of groups (the AMX tiles' last group alone), 70 rows (a partial block).
  t.add(mm(x(DType::f32, {70, 96}), random_quantized(DType::q8_0, 20, 96, ++seed),
           "q8_0, 70 rows, k = 96"));
  // Interleaved weights (rows8, rows16): x [m, k] against w [n, k] of type qt.
  using GroupedCase = std::tuple<DType, int64_t, int64_t, int64_t>;
  auto grouped_rows = [&](DType qt, int rows, std::initializer_list<GroupedCase> cases) {
    const std::string layout = quant::layout_name(rows);
    for (auto [dt, m, n, k] : cases) {
      OpCheck c = mm(x(dt, {m, k}), interleaved(random_quantized(qt, n, k, ++seed), rows),
                     str_cat(dtype_name(qt), " ", layout, ", ", m, " rows"));
      c.attrs.set("layout", layout);
      c.verify = quant_matmul_grouped_verify;
      c.verify_gpu = nullptr;  // the GPU takes the plain rows (a decomposition)
      t.add(std::move(c));
    }
  };
  // q4_0: the decode tiles (1-6 rows), the panels (40 rows), f16 / f64 activations.
  grouped_rows(DType::q4_0, 8,
               {{DType::f32, 1, 16, 64},
                {DType::f32, 3, 24, 96},
                {DType::f32, 6, 8, 32},
                {DType::f32, 40, 48, 64},
                {DType::f16, 2, 16, 64},
                {DType::f64, 3, 16, 64}});
  // rows16: odd block counts (k = 32, 96), the AMX path (70 rows), several groups (one
  // activation row: four groups side by side, then the rest one by one).
  grouped_rows(DType::q4_0, 16,
               {{DType::f32, 1, 16, 64},
                {DType::f32, 1, 144, 96},
                {DType::f32, 3, 32, 96},
                {DType::f32, 4, 48, 32},
                {DType::f32, 6, 16, 32},
                {DType::f32, 40, 48, 64},
                {DType::f32, 70, 32, 96},
                {DType::f16, 2, 16, 64},
                {DType::f64, 3, 16, 64}});
  // Longer rows: many blocks per dot (the alternating accumulators, a tail block).
  t.add(mm(x(DType::f32, {2, 32 * 37}), random_quantized(DType::q4_0, 11, 32 * 37, ++seed),
           "q4_0, 37 blocks per row"));
  t.add(mm(x(DType::f32, {1, 256 * 5}), random_quantized(DType::q6_k, 11, 256 * 5, ++seed),
           "q6_k, 5 blocks per row"));
  // f16 / bf16 / f64 activations (f16 / bf16 in and out, f32 inside; f64 exact products).
  for (DType dt : {DType::f16, DType::bf16, DType::f64}) {
    t.add(mm(x(dt, {2, 64}), random_quantized(DType::q8_0, 13, 64, ++seed), "q8_0 weights"));
    t.add(mm(x(dt, {20, 256}), random_quantized(DType::q4_k, 5, 256, ++seed), "q4_k, 20 rows"));
  }
  // Float weights: F16C / bf16 widening and f32 (any k, tails of 8).
  for (DType wt : {DType::f32, DType::f16, DType::bf16}) {
    t.add(mm(x(DType::f32, {1, 45}), random_quantized(wt, 17, 45, ++seed), "1 row, k = 45"));
    t.add(mm(x(DType::f32, {4, 80}), random_quantized(wt, 9, 80, ++seed), "4 rows"));
    t.add(mm(x(DType::f32, {33, 40}), random_quantized(wt, 70, 40, ++seed), "33 rows: sgemm"));
  }
  // bf16 weights and 2 to 8 rows, k in chunks of 32: the GPU's tensor-core matvec up to 7 (37
  // rows: a partial tile of 16; 70 chunks: uneven shares of its warps), its GEMM at 8.
  for (int64_t m : {2, 5, 7, 8})
    t.add(mm(x(DType::f32, {m, 96}), random_quantized(DType::bf16, 37, 96, ++seed),
             str_cat("bf16, ", m, " rows, k = 96")));
  t.add(mm(x(DType::f32, {7, 32 * 70}), random_quantized(DType::bf16, 20, 32 * 70, ++seed),
           "bf16, 7 rows, k = 2240"));
  t.add(mm(x(DType::bf16, {3, 64}), random_quantized(DType::bf16, 16, 64, ++seed),
           "bf16 in and out, 3 rows"));
  t.add(mm(x(DType::f32, {0, 64}), random_quantized(DType::q4_0, 3, 64, ++seed), "no rows"));
  // Long rows over few weight rows: the GPU matvec splits each row over 2 or 4 warps (an odd
  // row count leaves a block's last share idle).
  t.add(mm(x(DType::f32, {1, 2048}), random_quantized(DType::bf16, 37, 2048, ++seed),
           "bf16, 1 row, k = 2048: rows shared by 4 warps"));
  t.add(mm(x(DType::f32, {3, 2048}), random_quantized(DType::q4_k, 13, 2048, ++seed),
           "q4_k, 3 rows, k = 2048: rows shared by 4 warps"));
  t.add(mm(x(DType::f32, {2, 1536}), random_quantized(DType::f16, 21, 1536, ++seed),
           "f16, 2 rows, k = 1536: rows shared by 2 warps"));
  t.add(mm(x(DType::f32, {1, 1536}), random_quantized(DType::q8_0, 21, 1536, ++seed),
           "q8_0, 1 row, k = 1536: rows shared by 2 warps"));
  // With an addend (matmul_fusion folds a residual add into it): the matvecs (1 and 5 rows:
  // a whole residual, a bias per column), the many-row path (a residual of a suffix shape),
  // an addend that does not repeat over the output (the decomposition), f16 activations.
  auto with_addend = [&](Tensor xv, Tensor w, std::vector<int64_t> c, std::string note) {
    OpCheck ch = mm(xv, std::move(w), std::move(note));
    ch.inputs.push_back(x(xv.dtype(), std::move(c)));
    return ch;
  };
  t.add(with_addend(x(DType::f32, {1, 256}), random_quantized(DType::q4_k, 37, 256, ++seed),
                    {1, 37}, "q4_k, 1 row + a residual"));
  t.add(with_addend(x(DType::f32, {5, 64}), random_quantized(DType::q8_0, 37, 64, ++seed), {37},
                    "q8_0, 5 rows + a bias"));
  t.add(with_addend(x(DType::f32, {1, 96}), random_quantized(DType::bf16, 40, 96, ++seed), {1, 40},
                    "bf16, 1 row + a residual"));
  t.add(with_addend(x(DType::f32, {4, 96}), random_quantized(DType::bf16, 40, 96, ++seed), {4, 40},
                    "bf16, 4 rows + a residual"));
  t.add(with_addend(x(DType::f32, {2, 20, 64}), random_quantized(DType::q4_0, 24, 64, ++seed),
                    {20, 24}, "q4_0, 40 rows + a residual per position"));
  t.add(with_addend(x(DType::f32, {3, 64}), random_quantized(DType::f16, 9, 64, ++seed), {3, 1},
                    "f16 weights + a column (decomposed)"));
  t.add(with_addend(x(DType::f16, {2, 64}), random_quantized(DType::q8_0, 7, 64, ++seed), {2, 7},
                    "f16 activations + a residual"));

  // dequantize: every dtype to f32, a few to the other floats, rows of a table.
  t.add(dq({random_quantized(DType::q4_0, 3, 64, ++seed)}, DType::f32, "first"));
  for (DType qt : kQuantDTypes)
    t.add(dq({random_quantized(qt, 3, 2 * dtype_block(qt), ++seed)}, DType::f32, ""));
  for (DType out : {DType::f16, DType::bf16, DType::f64})
    t.add(dq({random_quantized(DType::q5_k, 2, 256, ++seed)}, out, "to another float"));
  Tensor table = random_quantized(DType::q4_k, 6, 256, ++seed);
  t.add(dq({table, tensor_of(DType::i64, {2, 3}, {5, 0, 2, 2, 1, 5})}, DType::f32, "rows (i64)"));
  t.add(dq({random_quantized(DType::q8_0, 9, 64, ++seed), tensor_of(DType::i32, {4}, {8, 0, 3, 8})},
           DType::bf16, "rows (i32) to bf16"));
  for (DType wt : {DType::f32, DType::f16, DType::bf16}) {
    t.add(dq({random_quantized(wt, 3, 7, ++seed)}, DType::f32, "float weights"));
    t.add(dq({random_quantized(wt, 4, 5, ++seed), tensor_of(DType::i64, {2}, {3, 1})}, DType::f16,
             "float table rows"));
  }
  OpCheck oob = dq({table, tensor_of(DType::i64, {2}, {1, 6})}, DType::f32, "row out of range");
  oob.error = "expected row indices in [0, 6), got 6";
  t.add(std::move(oob));
  // q4_k in rows16: the decode tiles (1-4 rows, several blocks), the many-row paths (40 rows;
  // 70: AMX where the CPU has it), f16 / f64 activations.
  seed = 3900;
  grouped_rows(DType::q4_k, 16,
               {{DType::f32, 1, 16, 256},
                {DType::f32, 3, 32, 768},
                {DType::f32, 4, 48, 512},
                {DType::f32, 6, 16, 256},
                {DType::f32, 40, 32, 512},
                {DType::f32, 70, 16, 256},
                {DType::f16, 2, 16, 512},
                {DType::f64, 3, 16, 256}});
  // Interleaved q8_0 (rows8, rows16): the decode tiles (1-6 rows; the VNNI dots bias the
  // signed weights), the many-row paths (40 rows; 70: AMX where the CPU has it), f16
  // activations.
  seed = 3950;
  for (int rows : {8, 16})
    grouped_rows(DType::q8_0, rows,
                 {{DType::f32, 1, 16, 64},
                  {DType::f32, 3, 32, 96},
                  {DType::f32, 4, 16, 32},
                  {DType::f32, 6, 16, 32},
                  {DType::f32, 40, 48, 64},
                  {DType::f32, 70, 16, 96},
                  {DType::f16, 2, 16, 64}});
  // A batch's decode on a GPU (2-8 rows: the int8 tensor-core tiles), k long enough that each
  // warp takes several rounds of quads, partial tiles, every kind of scale and minimum.
  seed = 4100;
  using BatchCase = std::tuple<DType, int64_t, int64_t, int64_t>;
  for (auto [qt, m, n, k] : {BatchCase{DType::q4_k, 5, 40, 2048},
                             {DType::q8_0, 8, 33, 2048},
                             {DType::q6_k, 7, 24, 1280},
                             {DType::q4_1, 4, 17, 1024},
                             {DType::q5_k, 2, 16, 1536},
                             {DType::q2_k, 3, 16, 1024},
                             {DType::q3_k, 6, 16, 768},
                             {DType::q5_0, 8, 16, 2048}})
    t.add(mm(x(DType::f32, {m, k}), random_quantized(qt, n, k, ++seed),
             str_cat(dtype_name(qt), ", ", m, " rows, k = ", k)));
  fused_quant_checks(t);
  tiled_checks(t);
  return t;
}

}  // namespace rlx::test
