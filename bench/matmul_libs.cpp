// Stand-alone measurement of the GEMM libraries available to the CPU backend: OpenBLAS
// (cblas), oneDNN (dnnl_sgemm and the matmul primitive, incl. bf16/f16) and optionally
// BLIS. Not part of the build; compile by hand, e.g.
//
//   g++ -O3 -march=native -fopenmp -std=c++20 bench/matmul_libs.cpp -o /tmp/matmul_libs
//     -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas -ldnnl
//
// and with BLIS (its headers/libs extracted from libblis-openmp-dev / libblis4-openmp):
//
//   ... -DHAVE_BLIS -I$BLIS/usr/include/x86_64-linux-gnu/blis-openmp
//     -L$BLIS/usr/lib/x86_64-linux-gnu/blis-openmp -Wl,-rpath,... -lopenblas -lblis -ldnnl
//
// (-lopenblas before -lblis so that cblas_* resolve to OpenBLAS; BLIS is called through
// its own bli_?gemm API). Usage: matmul_libs [threads...] (default: 1 2). Prints each
// library's best GFLOP/s over rounds that take the contenders in turn.
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

#ifdef HAVE_BLIS
#include <blis.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One contender: a name, a run, and (optionally) the relative error of its last result.
struct Entry {
  Entry(std::string n, std::function<void()> r, std::function<double()> e = {})
      : name(std::move(n)), run(std::move(r)), error(std::move(e)) {}
  std::string name;
  std::function<void()> run;
  std::function<double()> error;
  double best = 1e30;
};

// Round-robin over the contenders (so that load from other processes hits them alike),
// keeping each one's best time.
void race(int n, int threads, std::vector<Entry>& entries, int rounds) {
  for (auto& e : entries) e.run();  // warm-up (and oneDNN's JIT)
  for (int r = 0; r < rounds; ++r)
    for (auto& e : entries) {
      auto t0 = Clock::now();
      e.run();
      e.best = std::min(e.best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
  for (auto& e : entries) {
    double gflops = 2.0 * double(n) * n * n / e.best * 1e-9;
    std::printf("%-34s n=%-5d threads=%d  %8.2f ms  %7.1f GFLOP/s", e.name.c_str(), n, threads,
                e.best * 1e3, gflops);
    if (e.error) std::printf("  max rel err %.2e", e.error());
    std::printf("\n");
  }
  std::fflush(stdout);
}

double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0, err = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, double(std::fabs(got[i] - want[i])));
  return err / scale;
}

// oneDNN matmul primitive [n,n] x [n,n] with the given data types (row-major).
struct DnnlMatmul {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::matmul prim;
  dnnl::memory a, b, c;
  bool ok = false;
  std::string impl;
  DnnlMatmul(int n, dnnl::memory::data_type in, dnnl::memory::data_type out, void* pa, void* pb,
             void* pc) {
    using tag = dnnl::memory::format_tag;
    dnnl::memory::dims d = {n, n};
    dnnl::memory::desc ad(d, in, tag::ab), bd(d, in, tag::ab), cd(d, out, tag::ab);
    try {
      dnnl::matmul::desc desc(ad, bd, cd);
      dnnl::matmul::primitive_desc pd(desc, eng);
      impl = pd.impl_info_str();
      prim = dnnl::matmul(pd);
      a = dnnl::memory(ad, eng, pa);
      b = dnnl::memory(bd, eng, pb);
      c = dnnl::memory(cd, eng, pc);
      ok = true;
    } catch (const dnnl::error& e) {
      impl = e.what();
    }
  }
  void run() {
    prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
  }
};

void bench_size(int n, int threads) {
  int rounds = n <= 1024 ? 7 : 3;
  size_t nn = size_t(n) * n;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(nn), b(nn), c1(nn), c2(nn), c3(nn), c4(nn), ref(nn);
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);

  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
#ifdef HAVE_BLIS
  bli_thread_set_num_threads(threads);
#endif
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n,
              0.f, ref.data(), n);

  // f32
  std::vector<Entry> f32;
  f32.emplace_back("f32 OpenBLAS cblas_sgemm", [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n,
                0.f, c1.data(), n);
  });
  f32.emplace_back(
      "f32 oneDNN dnnl_sgemm",
      [&] { dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c2.data(), n); },
      [&] { return max_rel_err(c2, ref); });
  DnnlMatmul mm32(n, dnnl::memory::data_type::f32, dnnl::memory::data_type::f32, a.data(), b.data(),
                  c3.data());
  if (mm32.ok)
    f32.emplace_back(
        "f32 oneDNN matmul (" + mm32.impl + ")", [&] { mm32.run(); },
        [&] { return max_rel_err(c3, ref); });
#ifdef HAVE_BLIS
  float one = 1, zero = 0;
  f32.emplace_back(
      "f32 BLIS bli_sgemm",
      [&] {
        bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, n, n, n, &one, a.data(), n, 1, b.data(), n,
                  1, &zero, c4.data(), n, 1);
      },
      [&] { return max_rel_err(c4, ref); });
#endif
  race(n, threads, f32, rounds);

  // f64
  std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), cd(nn);
  std::vector<Entry> f64;
  f64.emplace_back("f64 OpenBLAS cblas_dgemm", [&] {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, ad.data(), n, bd.data(), n,
                0.0, cd.data(), n);
  });
#ifdef HAVE_BLIS
  double done = 1, dzero = 0;
  f64.emplace_back("f64 BLIS bli_dgemm", [&] {
    bli_dgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, n, n, n, &done, ad.data(), n, 1, bd.data(), n,
              1, &dzero, cd.data(), n, 1);
  });
#endif
  race(n, threads, f64, std::max(2, rounds / 2));

  // bf16 / f16: inputs rounded; the f32 product of the rounded values is the reference.
  std::vector<uint16_t> ah(nn), bh(nn), ch(nn), ch2(nn), fa(nn), fb(nn), fc(nn);
  std::vector<float> ar(nn), br(nn), cr(nn), got(nn), aw(nn), bw(nn), cw(nn);
  for (size_t i = 0; i < nn; ++i) {
    ah[i] = to_bf16(a[i]);
    bh[i] = to_bf16(b[i]);
    ar[i] = from_bf16(ah[i]);
    br[i] = from_bf16(bh[i]);
    fa[i] = _cvtss_sh(a[i], 0);
    fb[i] = _cvtss_sh(b[i], 0);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, ar.data(), n, br.data(), n,
              0.f, cr.data(), n);
  auto bf16_err = [&](const std::vector<uint16_t>& h) {
    for (size_t i = 0; i < nn; ++i) got[i] = from_bf16(h[i]);
    return max_rel_err(got, cr);
  };
  std::vector<Entry> half;
  // Widen both operands, f32 GEMM, narrow: what a kernel without a bf16 GEMM does.
  half.emplace_back(
      "bf16 widen + dnnl_sgemm + narrow",
      [&] {
#pragma omp parallel for num_threads(threads)
        for (size_t i = 0; i < nn; ++i) {
          aw[i] = from_bf16(ah[i]);
          bw[i] = from_bf16(bh[i]);
        }
        dnnl_sgemm('N', 'N', n, n, n, 1.f, aw.data(), n, bw.data(), n, 0.f, cw.data(), n);
#pragma omp parallel for num_threads(threads)
        for (size_t i = 0; i < nn; ++i) ch2[i] = to_bf16(cw[i]);
      },
      [&] { return bf16_err(ch2); });
  DnnlMatmul mm16(n, dnnl::memory::data_type::bf16, dnnl::memory::data_type::bf16, ah.data(),
                  bh.data(), ch.data());
  if (mm16.ok)
    half.emplace_back(
        "bf16 oneDNN matmul (" + mm16.impl + ")", [&] { mm16.run(); },
        [&] { return bf16_err(ch); });
  DnnlMatmul mmf16(n, dnnl::memory::data_type::f16, dnnl::memory::data_type::f16, fa.data(),
                   fb.data(), fc.data());
  if (mmf16.ok)
    half.emplace_back("f16 oneDNN matmul (" + mmf16.impl + ")", [&] { mmf16.run(); });
  else
    std::printf("  (f16 oneDNN matmul: %s)\n", mmf16.impl.c_str());
  race(n, threads, half, rounds);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads;
  for (int i = 1; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 2};
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  std::printf("OpenBLAS %s, OPENBLAS_CORETYPE=%s, oneDNN %d.%d.%d\n", openblas_get_config(),
              core ? core : "(unset)", dnnl_version()->major, dnnl_version()->minor,
              dnnl_version()->patch);
  for (int n : {1024, 2048})
    for (int th : threads) bench_size(n, th);
}
