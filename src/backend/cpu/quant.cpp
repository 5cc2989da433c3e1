// CPU kernels of dequantize, quant_matmul and fused_quant_matmul (the dots are in quant_dot.h).
//
// quant_matmul runs the activation rows through one of four paths:
//  - the integer dots (fewer than kGemmRows rows: decode, and every type's few-row case):
//    the rows are quantized once per call into int8 blocks (reused scratch, no allocation
//    once warm), and the weight rows, each thread its own contiguous part (owned_chunks),
//    stream once from memory through the dots, each unpacked block shared by up to four
//    activation rows (a tile). They are also the many-row path of the K-quants but q4_k,
//    whose dots stay in int32 across 256 values, and of q4_1 / q5_1 (without AMX);
//  - AMX tile products (quant_amx.cpp), where the CPU has AMX-INT8: every quantized type
//    from 32 rows (interleaved weights from 64), 2-3x the paths below (bench/RESULTS.md, "LLM
//    prefill");
//  - the int8 GEMM of 4-bit weights (q4_0, q4_k; quant_gemm_avx2.cpp): each thread repacks a
//    few groups of 8 weight rows into nibble runs and passes every activation row past them
//    in tiles of 8 x 4; faster than sgemm on decoded panels (bench/RESULTS.md, "LLM prefill");
//  - decoded panels (q5_0, q8_0 and f16 / bf16 / f32 weights): each thread decodes panels of
//    weight rows into an f32 buffer (AVX2 decoders) and multiplies them with
//    single-threaded sgemm (OpenBLAS runs one thread inside an OpenMP region). The decode is
//    a small fraction of the product, and the whole matrix is never decoded at once; q5_0 and
//    q8_0 take it from 256 rows, where it overtakes their integer dots.
// Every path rounds the activations as the integer dots quantize them (ggml's rules), so all
// compute one product up to the order of the f32 sums.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/addend.h"
#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/llm_kernels.h"
#include "backend/cpu/nn_util.h"
#include "backend/cpu/quant_dot.h"
#include "rlx/settings.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

constexpr int64_t kRowBlock = 64;    // weight rows kept hot while the row tiles pass
constexpr int64_t kGemmRows = 32;    // rows from which a many-row path serves
constexpr int64_t kPanelRows = 384;  // fewest weight rows of a decoded panel
// Activation rows from which decoded panels of q5_0 / q8_0 beat their integer dots
// (bench/RESULTS.md, "Decoded panels").
constexpr int64_t kPanelFrom = 256;

enum class Path { dots, panels, int8, amx };

// Rows from which the AMX tile products beat the integer dots: AMX unpacks every weight once
// per call and scales each 16 x 16 tile of int32 sums in f32 per block, which a few hundred
// rows amortise for 4-bit blocks of 32, fewer for q8_0 and the K-quants (bench/RESULTS.md,
// "AMX from how many rows").
int64_t amx_rows(DType wt) {
  if (dtype_block(wt) == quant::kQK_K) return 96;
  return wt == DType::q8_0 ? 160 : 256;
}

// The path of m rows of x against weights of dtype wt. settings() may move the row
// threshold (qmm_gemm_rows) or name the many-row path (qmm_path; the bench compares them).
Path path_for(DType wt, int rows, int64_t m) {
  const Settings& s = settings();
  if (m < (s.qmm_gemm_rows > 0 ? s.qmm_gemm_rows : kGemmRows)) return Path::dots;
  if (s.qmm_path == "dots") return Path::dots;
  if (s.qmm_path == "panels") return Path::panels;
  // On a CPU with AMX llama.cpp runs q5_0, q5_1 and q3_K through ggml_vec_dot at every row
  // count and q2_K through its repacked GEMV / GEMM (ggml has no AMX kernels for them): the
  // dots, in those orders, keep its bits.
  if (s.qmm_path == "auto" && qdot::amx_usable() &&
      (wt == DType::q5_0 || wt == DType::q5_1 || wt == DType::q3_k || wt == DType::q2_k))
    return Path::dots;
  // AMX where the CPU has it; interleaved weights unpack slower, and below 64 rows the int8
  // GEMM of rows8 stays ahead (bench/RESULTS.md, "AMX").
  if (s.qmm_path != "int8" && qdot::amx_supported(wt) && (rows != 8 || m >= 64))
    return s.qmm_gemm_rows > 0 || m >= amx_rows(wt) ? Path::amx : Path::dots;
  if (qdot::gemm4_supported(wt)) return Path::int8;
  // Not the K-quants (their int32 dots over 256 values beat decoding them), nor q4_1 / q5_1:
  // their minimum meets the f16 activation sums of ggml's q8_1, which a product of decoded
  // rows cannot reproduce; q5_0 / q8_0 only from kPanelFrom rows.
  const bool panels = dtype_block(wt) < quant::kQK_K && wt != DType::q4_1 && wt != DType::q5_1;
  const bool few = is_quantized(wt) && s.qmm_gemm_rows == 0 && m < kPanelFrom;
  return panels && !few ? Path::panels : Path::dots;
}

// Scratch of this thread that only grows: a fresh buffer per call would fault its pages in
// every time.
template <class T>
T* scratch(int slot, size_t n) {
  thread_local std::vector<T> kept[6];
  std::vector<T>& v = kept[slot];
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Calls f(c) for every chunk c in [0, chunks) on the threads, each taking the next chunk
// when it is done with one: a static split would wait on a thread that shares its core.
template <class F>
void for_chunks(int64_t chunks, F&& f) {
  const int64_t threads = std::min<int64_t>(threads_here(), chunks);
  std::atomic<int64_t> next{0};
  parallel_for(threads, 1, [&](int64_t, int64_t) {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) f(c);
  });
}

// Calls f(begin, end) over [0, units): each thread owns an equal contiguous range and takes
// it from the front, `step` units at a time (one unbroken stream for the prefetchers, the
// same rows on the same core every token); a thread done with its own takes steps from the
// back of the others' ranges, so one that lost its core to another process holds no one up.
template <class F>
void owned_chunks(int64_t units, int64_t step, F&& f) {
  // A range is one atomic word (begin << 32 | end), on the stack: no allocation per call.
  constexpr int64_t kMostThreads = 256;
  const int64_t threads = std::min<int64_t>({int64_t(threads_here()), units, kMostThreads});
  if (units >= (int64_t(1) << 32) || threads <= 1) return parallel_for(units, step, f);
  auto pack = [](int64_t b, int64_t e) { return uint64_t(b) << 32 | uint64_t(e); };
  std::atomic<uint64_t> range[kMostThreads];
  for (int64_t t = 0; t < threads; ++t)
    range[t].store(pack(units * t / threads, units * (t + 1) / threads), std::memory_order_relaxed);
  parallel_for(threads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t o = 0; o < threads; ++o) {  // o = 0: its own range, from the front
        const bool own = o == 0;
        std::atomic<uint64_t>& r = range[(t + o) % threads];
        uint64_t v = r.load(std::memory_order_relaxed);
        for (;;) {
          const int64_t b = int64_t(v >> 32), e = int64_t(v & 0xffffffffu);
          if (b >= e) break;
          const int64_t cut = own ? std::min(b + step, e) : std::max(e - step, b);
          if (!r.compare_exchange_weak(v, own ? pack(cut, e) : pack(b, cut),
                                       std::memory_order_relaxed))
            continue;  // v now holds the range as another thread left it
          own ? f(b, cut) : f(cut, e);
          v = r.load(std::memory_order_relaxed);
        }
      }
  });
}

// The integer (or f16 / bf16 / f32) dots: y[m, n] = x[m, k] · w[n, k]^T, with w plain or
// interleaved in groups of `rows` rows. A unit is what one call takes: a row, or a group.
void dot_rows_path(DType wt, int rows, const uint8_t* w, int64_t n, int64_t k, const float* x,
                   int64_t m, float* y) {
  const size_t ab = qdot::act_row_bytes(wt, k, rows), rb = dtype_nbytes(wt, k);
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  if (is_quantized(wt)) {
    uint8_t* buf = scratch<uint8_t>(0, ab * size_t(m));
    parallel_for(m, std::max<int64_t>(1, (1 << 16) / k), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) qdot::quantize_act(wt, x + r * k, buf + r * ab, k, rows);
    });
    act = buf;
  }
  // fns4: rows [0, m4), which llama.cpp's repacked GEMM (q2_K) takes four at a time.
  const int64_t m4 = rows == 1 ? qdot::four_rows(wt, m) : 0;
  qdot::DotFn fns[qdot::kMaxRows], fns4[qdot::kMaxRows] = {};
  for (int r = 0; r < qdot::kMaxRows; ++r) {
    fns[r] = qdot::dot_fn(wt, r + 1);
    if (m4 > 0) fns4[r] = qdot::dot_fn(wt, r + 1, true);
  }
  const int64_t units = n / rows;
  const size_t ub = rb * size_t(rows);
  // Decode (one tile) streams the weights from memory (below). Many rows: kRowBlock weight
  // rows per chunk (at least 8 chunks), which stay in cache while each tile of activations
  // passes once.
  const bool decode = m <= qdot::kMaxRows;
  const int64_t wide = qdot::tile_rows(wt, rows);  // rows16 q4_0 / q8_0: tiles of 8 rows
  auto run = [&](int64_t jb, int64_t je) {
    for (int64_t r0 = 0, nr; r0 < m; r0 += nr) {
      const int64_t end = r0 < m4 ? m4 : m;  // a tile stays on one side of m4
      nr = end - r0 >= wide ? wide : std::min<int64_t>(qdot::kMaxRows, end - r0);
      const qdot::DotFn* set = r0 < m4 ? fns4 : fns;
      const qdot::DotFn f = set[std::min<int64_t>(nr, qdot::kMaxRows) - 1];
      const uint8_t* a = act + r0 * int64_t(ab);
      if (rows > 1)
        qdot::dot_groups(wt, rows, w + jb * int64_t(ub), je - jb, a, ab, int(nr), k,
                         y + r0 * n + rows * jb, n);
      else
        for (int64_t j = jb; j < je; ++j) f(w + j * int64_t(ub), a, ab, k, y + r0 * n + j, n);
    }
  };
  // Decode: each thread streams its own part of the matrix, 256 KiB at a time (owned_chunks),
  // faster than chunks of up to 1 MiB dealt out in turn, which break the streams
  // (bench/RESULTS.md, "Decode on the Xeon").
  if (decode) return owned_chunks(units, std::max<int64_t>(1, (256 << 10) / int64_t(ub)), run);
  const int64_t chunk = std::clamp<int64_t>(units / 8, 1, kRowBlock / rows);
  for_chunks((units + chunk - 1) / chunk, [&](int64_t c) {
    const int64_t jb = c * chunk;
    run(jb, std::min(units, jb + chunk));
  });
}

// Decodes unit j (a group of `rows` rows, or row j) into dst (rows k floats apart).
void decode_unit(DType wt, int rows, const uint8_t* w, size_t rb, int64_t j, int64_t k,
                 float* dst) {
  if (rows > 1)
    qdot::decode_group(wt, rows, w + j * rows * int64_t(rb), dst, k);
  else
    qdot::decode_row(wt, w + j * int64_t(rb), dst, k);
}

// The many-row path: decoded panels of w through sgemm, one panel per thread at a time.
void panel_gemm_path(DType wt, int rows, const uint8_t* w, int64_t n, int64_t k, const float* x,
                     int64_t m, float* y) {
  if (wt == DType::f32) {  // nothing to decode
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.f, x, int(k),
                reinterpret_cast<const float*>(w), int(k), 0.f, y, int(n));
    return;
  }
  const size_t rb = dtype_nbytes(wt, k);
  if (is_quantized(wt)) {  // the activations as the integer dots see them
    float* xr = scratch<float>(3, size_t(m * k));
    parallel_for(m, std::max<int64_t>(1, (1 << 16) / k), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) qdot::round_act(wt, x + r * k, xr + r * k, k);
    });
    x = xr;
  }
  // Panels of a thread's share of the rows, from 384 (OpenBLAS's sgemm runs 3x slower on
  // 320 rows or fewer than on 384 or more: bench/RESULTS.md, "Decoded panels") up to 8 MiB of
  // f32: sgemm packs x again for every panel, which costs as much as ~10 panel rows.
  const int64_t share = (n / threads_here() + 15) / 16 * 16;
  const int64_t panel =
      std::min(std::clamp<int64_t>(share, kPanelRows,
                                   std::max(kPanelRows, (int64_t(1) << 21) / k / 16 * 16)),
               (n + 15) / 16 * 16);  // (no bigger than the product: its buffer is kept per thread)
  for_chunks((n + panel - 1) / panel, [&](int64_t p) {
    float* buf = scratch<float>(1, size_t(panel * k));
    const int64_t j0 = p * panel, pn = std::min(panel, n - j0);
    // Panels are whole groups (multiples of 16 rows).
    for (int64_t j = 0; j < pn; j += rows)
      decode_unit(wt, rows, w, rb, (j0 + j) / rows, k, buf + j * k);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(pn), int(k), 1.f, x, int(k),
                buf, int(k), 0.f, y + j0, int(n));
  });
}

// The many-row path of 4-bit weights: the integer GEMM of quant_gemm_avx2.cpp. Each thread
// packs a chunk of weight groups (up to ~256 KiB, kept in its L2) and runs every tile of
// activation rows past it.
void int8_gemm_path(DType wt, int rows, const uint8_t* w, int64_t n, int64_t k, const float* x,
                    int64_t m, float* y) {
  const size_t ab = qdot::gemm4_act_bytes(wt, k), gb = qdot::gemm4_group_bytes(wt, k);
  uint8_t* act = scratch<uint8_t>(0, ab * size_t(m));
  parallel_for(m, std::max<int64_t>(1, (1 << 16) / k), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) qdot::gemm4_act(wt, x + r * k, act + r * ab, k);
  });
  const int64_t groups = (n + 7) / 8, threads = threads_here();
  const int64_t per = std::clamp<int64_t>(
      std::min<int64_t>(int64_t(256 << 10) / int64_t(gb), groups / (4 * threads)), 1, 8);
  for_chunks((groups + per - 1) / per, [&](int64_t c) {
    const int64_t g0 = c * per, g1 = std::min(groups, g0 + per);
    uint8_t* packed = scratch<uint8_t>(1, size_t(per) * gb);
    for (int64_t g = g0; g < g1; ++g)
      qdot::gemm4_pack(wt, rows, w, n, k, g, packed + (g - g0) * int64_t(gb));
    float tile[4 * 8];
    for (int64_t r0 = 0; r0 < m; r0 += 4) {
      const int nr = int(std::min<int64_t>(4, m - r0));
      for (int64_t g = g0; g < g1; ++g) {
        qdot::gemm4_tile(wt, packed + (g - g0) * int64_t(gb), k, act + r0 * int64_t(ab), ab, nr,
                         tile);
        const int64_t cols = std::min<int64_t>(8, n - 8 * g);
        for (int r = 0; r < nr; ++r)
          std::memcpy(y + (r0 + r) * n + 8 * g, tile + 8 * r, size_t(cols) * sizeof(float));
      }
    }
  });
}

// The many-row path on AMX (quant_amx.cpp): the activations quantized and packed in blocks
// of 16 rows; each thread unpacks a few strips of 16 weight rows (up to ~256 KiB, kept in its
// L2) and passes every block of activations past them.
void amx_gemm_path(DType wt, int rows, const uint8_t* w, int64_t n, int64_t k, const float* x,
                   int64_t m, float* y) {
  const size_t ab = qdot::act_row_bytes(wt, k), pb = qdot::amx_bytes(wt, k), sb = pb;
  const int64_t blocks = (m + 15) / 16, strips = (n + 15) / 16, threads = threads_here();
  uint8_t* act = scratch<uint8_t>(0, ab * size_t(m));
  uint8_t* packed = scratch<uint8_t>(3, pb * size_t(blocks));
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int rows = int(std::min<int64_t>(16, m - 16 * b));
      for (int r = 0; r < rows; ++r)
        qdot::quantize_act(wt, x + (16 * b + r) * k, act + (16 * b + r) * ab, k);
      qdot::amx_pack_act(wt, act + 16 * b * ab, ab, rows, k, packed + b * pb);
    }
  });
  const int64_t per = std::clamp<int64_t>(
      std::min<int64_t>(int64_t(256 << 10) / int64_t(sb), strips / (4 * threads)), 1, 8);
  for_chunks((strips + per - 1) / per, [&](int64_t c) {
    const int64_t s0 = c * per, s1 = std::min(strips, s0 + per);
    uint8_t* mine = scratch<uint8_t>(1, size_t(per) * sb);
    for (int64_t s = s0; s < s1; ++s) qdot::amx_unpack(wt, rows, w, n, k, s, mine + (s - s0) * sb);
    for (int64_t b = 0; b < blocks; ++b) {
      const int rows = int(std::min<int64_t>(16, m - 16 * b));
      for (int64_t s = s0; s < s1; ++s)
        qdot::amx_tile(wt, mine + (s - s0) * sb, k, packed + b * pb, rows,
                       int(std::min<int64_t>(16, n - 16 * s)), y + 16 * b * n + 16 * s, n);
    }
    qdot::amx_release();
  });
}

// f64 activations (gradient checks, references): decoded rows, products in double.
void f64_path(DType wt, int rows, const uint8_t* w, int64_t n, int64_t k, const double* x,
              int64_t m, double* y) {
  const size_t rb = dtype_nbytes(wt, k);
  parallel_for(n / rows, 1, [&](int64_t u0, int64_t u1) {
    std::vector<float> decoded(static_cast<size_t>(rows * k));
    for (int64_t u = u0; u < u1; ++u) {
      decode_unit(wt, rows, w, rb, u, k, decoded.data());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t r = 0; r < m; ++r) {
          double s = 0;
          for (int64_t e = 0; e < k; ++e) s += double(decoded[size_t(i * k + e)]) * x[r * k + e];
          y[r * n + u * rows + i] = s;
        }
    }
  });
}

template <class T>
void widen_into(const Tensor& t, float* dst) {
  const T* p = t.data_as<T>();
  parallel_for(t.numel(), 1 << 15, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dst[i] = to_f32(p[i]);
  });
}

void product_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& layout = ctx.attrs.get_string("layout");
  const bool tiled = layout == quant::kTiles16;
  const int rows = tiled ? 1 : quant::layout_rows(layout);
  const Tensor &x = in[0], &w = in[1];
  Tensor& y = out[0];
  const DType wt = w.dtype(), xt = x.dtype();
  const int64_t n = w.shape()[0], k = w.shape()[1];
  const int64_t m = k > 0 ? x.numel() / k : y.numel() / std::max<int64_t>(n, 1);
  if (y.numel() == 0) return;
  const auto* wp = static_cast<const uint8_t*>(w.data());
  // CUDA's form (tiles16) back in the plain layout for every call: the CPU runs it only as the
  // reference or a host delegate's fallback.
  if (tiled) {
    auto* plain = scratch<uint8_t>(2, w.nbytes());
    quant::untile(wt, wp, plain, n, k);
    wp = plain;
  }
  if (k == 0) {
    std::memset(y.data(), 0, y.nbytes());
    return;
  }
  if (xt == DType::f64)
    return f64_path(wt, rows, wp, n, k, x.data_as<double>(), m, y.data_as<double>());
  const float* xf = xt == DType::f32 ? x.data_as<float>() : scratch<float>(2, size_t(m * k));
  if (xt == DType::f16) widen_into<f16_t>(x, const_cast<float*>(xf));
  if (xt == DType::bf16) widen_into<bf16_t>(x, const_cast<float*>(xf));
  float* yf = xt == DType::f32 ? y.data_as<float>() : scratch<float>(0, size_t(m * n));
  switch (path_for(wt, rows, m)) {
    case Path::int8:
      int8_gemm_path(wt, rows, wp, n, k, xf, m, yf);
      break;
    case Path::amx:
      amx_gemm_path(wt, rows, wp, n, k, xf, m, yf);
      break;
    case Path::panels:
      panel_gemm_path(wt, rows, wp, n, k, xf, m, yf);
      break;
    default:
      dot_rows_path(wt, rows, wp, n, k, xf, m, yf);
  }
  if (xt == DType::f16) narrow(yf, y.data_as<f16_t>(), m * n);
  if (xt == DType::bf16) narrow(yf, y.data_as<bf16_t>(), m * n);
}

// y[i] += c[i % c.numel()] (backend/addend.h), in y's dtype as the add it replaces rounds.
template <class T>
void add_repeating(const Tensor& c, Tensor& y) {
  const T* cp = c.data_as<T>();
  T* yp = y.data_as<T>();
  const int64_t period = c.numel();
  // Whole periods split over the threads; no division per element.
  parallel_for(y.numel() / period, std::max<int64_t>(1, (1 << 14) / period),
               [&](int64_t p0, int64_t p1) {
                 for (int64_t p = p0; p < p1; ++p) {
                   T* row = yp + p * period;
                   for (int64_t i = 0; i < period; ++i)
                     row[i] = store<T>(load(row[i]) + load(cp[i]));
                 }
               });
}

void quant_matmul_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                         std::span<Tensor> out) {
  product_kernel(ctx, in.subspan(0, 2), out);
  if (in.size() < 3 || out[0].numel() == 0) return;
  visit_float(out[0].dtype(), "quant_matmul", [&](auto tag) {
    add_repeating<typename decltype(tag)::type>(in[2].contiguous(), out[0]);
  });
}

bool quant_matmul_supported(const KernelQuery& q) {
  return q.inputs.size() < 3 || addend_repeats(q.inputs[2], q.outputs[0]);
}

// fused_quant_matmul (matmul_fusion's rms_norm -> quant_matmul -> swiglu -> add) as its parts'
// kernels compute them, in one op: a decode step dispatches one op where it had three.
void fused_quant_matmul_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                               std::span<Tensor> out) {
  const Attrs& a = ctx.attrs;
  const bool norm = a.get_string("norm") == "rms_norm";
  const bool swiglu = a.get_string("activation") == "swiglu";
  const size_t wi = norm ? 2 : 1;
  const Tensor &x = in[0], &w = in[wi];
  const int64_t k = w.shape()[1], n = w.shape()[0], m = k > 0 ? x.numel() / k : 0;
  Tensor xs = x, prod = out[0];
  if (norm && m * k > 0) {
    float* xn = scratch<float>(4, size_t(m * k));
    const float *xp = x.data_as<float>(), *g = in[1].data_as<float>();
    const float eps = float(a.get_float("epsilon"));
    parallel_for(m, std::max<int64_t>(1, (1 << 14) / k), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) rms_norm_row(xp + r * k, g, eps, k, xn + r * k);
    });
    xs = Tensor::wrap(DType::f32, {m, k}, xn, [](void*) {});
  }
  if (swiglu)
    prod = Tensor::wrap(DType::f32, {m, n}, scratch<float>(5, size_t(m * n)), [](void*) {});
  const Tensor pin[2] = {xs, w};
  product_kernel(ctx, pin, std::span<Tensor>(&prod, 1));
  if (swiglu && m * n > 0) {
    const float* p = prod.data_as<float>();
    float* y = out[0].data_as<float>();
    const int64_t f = n / 2;
    parallel_for(m, std::max<int64_t>(1, (1 << 14) / f), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) swiglu_row(p + r * n, y + r * f, f);
    });
  }
  if (in.size() > wi + 1 && out[0].numel() > 0)
    add_repeating<float>(in[wi + 1].contiguous(), out[0]);
}

// f32 activations (and norm scale, addend): the others run the parts.
bool fused_quant_matmul_supported(const KernelQuery& q) {
  const size_t wi = q.attrs.get_string("norm") == "rms_norm" ? 2 : 1;
  if (q.inputs.size() <= wi || q.inputs[0].dtype != DType::f32) return false;
  if (wi == 2 && q.inputs[1].dtype != DType::f32) return false;
  return q.inputs.size() == wi + 1 ||
         (q.inputs[wi + 1].dtype == DType::f32 && addend_repeats(q.inputs[wi + 1], q.outputs[0]));
}

// ---- dequantize ---------------------------------------------------------------------------

template <class T>
void store_row(const float* src, T* dst, int64_t k) {
  for (int64_t i = 0; i < k; ++i) dst[i] = store<T>(src[i]);
}

void dequantize_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& w = in[0];
  Tensor& y = out[0];
  const DType wt = w.dtype(), ot = y.dtype();
  const int64_t k = w.shape().back();
  if (y.numel() == 0 || k == 0) return;
  const int64_t table = w.numel() / k;  // rows of w
  const size_t rb = dtype_nbytes(wt, k);
  const auto* wp = static_cast<const uint8_t*>(w.data());
  const int64_t nout = y.numel() / k;
  const Tensor* idx = in.size() == 2 ? &in[1] : nullptr;
  auto row_of = [&](int64_t r) -> int64_t {  // the source row of output row r
    if (!idx) return r;
    return idx->dtype() == DType::i32 ? idx->data_as<int32_t>()[r] : idx->data_as<int64_t>()[r];
  };
  for (int64_t r = 0; idx && r < nout; ++r)
    if (int64_t j = row_of(r); j < 0 || j >= table)
      fail<ValueError>("dequantize", "expected row indices in [0, ", table, "), got ", j);
  parallel_for(nout, std::max<int64_t>(1, (1 << 15) / k), [&](int64_t r0, int64_t r1) {
    float* tmp = ot == DType::f32 ? nullptr : scratch<float>(0, size_t(k));
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = wp + row_of(r) * int64_t(rb);
      float* dst = ot == DType::f32 ? y.data_as<float>() + r * k : tmp;
      qdot::decode_row(wt, src, dst, k);
      if (ot == DType::f64) store_row(tmp, y.data_as<double>() + r * k, k);
      if (ot == DType::f16) store_row(tmp, y.data_as<f16_t>() + r * k, k);
      if (ot == DType::bf16) store_row(tmp, y.data_as<bf16_t>() + r * k, k);
    }
  });
}

}  // namespace

void register_quant(KernelRegistry& r) {
  add_kernel(r, "quant_matmul", quant_matmul_kernel, quant_matmul_supported);
  add_kernel(r, "fused_quant_matmul", fused_quant_matmul_kernel, fused_quant_matmul_supported);
  add_kernel(r, "dequantize", dequantize_kernel);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
