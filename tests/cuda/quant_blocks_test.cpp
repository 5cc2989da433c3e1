// The CUDA kernels' block decoders (backend/cuda/quant_blocks.cuh) run on the host, so the
// bit layouts are checked on every machine, GPU or not: every group of every block type
// unpacks to the reference codec's values (rlx/quant.h) bit for bit, and the matvec's
// per-group shares, over activations rounded by ggml's rules, sum to the CPU kernel's
// product.
#include "backend/cuda/quant_blocks.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "op_tables/consistency.h"
#include "rlx/cuda.h"
#include "rlx/ops.h"
#include "rlx/quant.h"
#include "rlx/session.h"
#include "rlx/settings.h"

namespace rlx::test {
Tensor random_quantized(DType t, int64_t rows, int64_t k, uint64_t seed);  // checks_quant.cpp
}

namespace rlx::cuda {
namespace {

using test::random_quantized;
using test::random_tensor;

template <class F>
void each_type(F&& f) {
#define RLX_EACH(T) f(std::integral_constant<DType, DType::T>{});
  RLX_QUANT_DTYPES(RLX_EACH)
#undef RLX_EACH
}

TEST(CudaQuantBlocks, GroupsUnpackToTheReferenceValues) {
  each_type([](auto t) {
    constexpr DType T = decltype(t)::value;
    using B = Blocks<T>;
    ASSERT_EQ(size_t(B::kBytes), dtype_size(T));
    ASSERT_EQ(B::kValues, dtype_block(T));
    const int64_t rows = 3, k = 2 * B::kValues;
    Tensor w = random_quantized(T, rows, k, 900 + uint64_t(T));
    const auto* p = static_cast<const uint8_t*>(w.data());
    std::vector<float> want(size_t(rows * k));
    quant::dequantize_row(T, p, want.data(), rows * k);
    int bad = 0;
    for (int64_t b = 0; b < rows * k / B::kValues; ++b)
      for (int g = 0; g < B::kValues / 16; ++g) {
        float D, M;
        const Group u = B::unpack(p + b * B::kBytes, g, D, M);
        for (int j = 0; j < 16; ++j) {
          const float got = D * float(u.sc) * float(sbyte(u.v[j / 4], j % 4)) - M * float(u.mn);
          const float ref = want[size_t(b * B::kValues + 16 * g + j)];
          if (std::memcmp(&got, &ref, 4) != 0 && bad++ < 3)
            ADD_FAILURE() << dtype_name(T) << " block " << b << " value " << 16 * g + j
                          << ": expected " << ref << ", got " << got;
        }
      }
  });
}

// Activations as ggml's x86 quantizers round them (the definitions the op states):
// blocks of 32: d = amax / 127 kept as f16, q = nearest(x * 127 / amax), s = f16(d * sum q);
// blocks of 256: quant::quantize_row_q8_k.
struct Act {
  std::vector<int8_t> q;
  std::vector<float> d, s;
};
Act quantize(const float* x, int64_t k, int blk) {
  Act a;
  a.q.resize(size_t(k));
  if (blk == 256) {
    std::vector<quant::BlockQ8_K> b(size_t(k / 256));
    quant::quantize_row_q8_k(x, b.data(), k);
    for (size_t i = 0; i < b.size(); ++i) {
      std::memcpy(a.q.data() + 256 * i, b[i].qs, 256);
      a.d.push_back(b[i].d);
      a.s.push_back(0);
    }
    return a;
  }
  for (int64_t b = 0; b < k / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127.f, id = amax != 0 ? 127.f / amax : 0.f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = int(std::nearbyint(x[32 * b + i] * id));
      a.q[size_t(32 * b + i)] = int8_t(q);
      sum += q;
    }
    a.d.push_back(f16_to_f32(f32_to_f16(d)));
    a.s.push_back(f16_to_f32(f32_to_f16(d * float(sum))));
  }
  return a;
}

TEST(CudaQuantBlocks, GroupSharesSumToTheCpuProduct) {
  each_type([](auto t) {
    constexpr DType T = decltype(t)::value;
    using B = Blocks<T>;
    const int64_t m = 2, n = 5, k = 3 * B::kValues, nb = k / B::kValues;
    Tensor x = random_tensor(DType::f32, {m, k}, 40 + uint64_t(T), -1, 1);
    Tensor w = random_quantized(T, n, k, 60 + uint64_t(T));
    Graph g("qmm");
    g.output(op("quant_matmul", {g.input("x", x.type()), g.input("w", w.type())}));
    std::vector<float> want =
        Session().compile(g).run(std::vector<Tensor>{x, w})[0].to_vector<float>();
    const auto* wp = static_cast<const uint8_t*>(w.data());
    for (int64_t r = 0; r < m; ++r) {
      Act a = quantize(x.data_as<float>() + r * k, k, B::kValues == 256 ? 256 : 32);
      for (int64_t j = 0; j < n; ++j) {
        float got = 0, mag = 0;
        for (int64_t gi = 0; gi < nb * B::kValues / 16; ++gi) {
          const int64_t bi = gi / (B::kValues / 16);
          const int g16 = int(gi % (B::kValues / 16));
          float D, M;
          const Group u = B::unpack(wp + (j * nb + bi) * B::kBytes, g16, D, M);
          int xv[4];
          std::memcpy(xv, a.q.data() + gi * 16, 16);
          const size_t ab = size_t(B::kValues == 256 ? bi : gi / 2);
          const float share = group_share<B>(u, D, M, xv, a.d[ab], a.s[ab], g16);
          got += share;
          mag += std::fabs(share);
        }
        const float ref = want[size_t(r * n + j)];
        EXPECT_NEAR(got, ref, 1e-5 * mag + 1e-30) << dtype_name(T) << " [" << r << ", " << j << "]";
      }
    }
  });
}

// The decode kernels (quant.cu's qmma, weights staged into shared memory and multiplied on
// the int8 tensor cores, and qmatvec, dp4a a warp per row) against the CPU kernel: every
// block type; 1, 3 and 8 rows; a last tile of fewer weight rows; rows starting anywhere in a
// 16-byte segment (k of 58 blocks of 32, 7 of 256); stages past one round of a block's warps;
// swiglu's row pairs with the norm before, and an addend.
TEST(CudaQuantMatvec, BothKernelsMatchTheCpu) {
  if (!available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
  const std::string saved = settings().cuda_qmatvec;
  each_type([](auto t) {
    constexpr DType T = decltype(t)::value;
    for (int64_t k : {int64_t(Blocks<T>::kValues == 256 ? 1792 : 1856), int64_t(4608)})
      for (bool fused : {false, true})
        for (int64_t m : {1, 3, 8}) {
          const int64_t n = fused ? 38 : 37, width = fused ? n / 2 : n;
          Graph gr("qmv");
          Value x = gr.input("x", TensorType(DType::f32, {m, k}));
          Value w = gr.input("w", TensorType(T, {n, k}));
          Value c = gr.input("c", TensorType(DType::f32, {width}));
          if (fused) {
            Value g = gr.input("g", TensorType(DType::f32, {k}));
            gr.output(gr.apply1("fused_quant_matmul", {x, g, w, c},
                                {{"norm", std::string("rms_norm")},
                                 {"activation", std::string("swiglu")},
                                 {"epsilon", 1e-5}}));
          } else {
            gr.output(gr.apply1("quant_matmul", {x, w, c}));
          }
          const uint64_t seed = 100 * uint64_t(T) + uint64_t(k + m + fused);
          std::vector<Tensor> in{random_tensor(DType::f32, {m, k}, seed, -1, 1),
                                 random_quantized(T, n, k, seed + 1),
                                 random_tensor(DType::f32, {width}, seed + 2, -1, 1)};
          if (fused) in.push_back(random_tensor(DType::f32, {k}, seed + 3, 0.5, 1.5));
          const std::vector<float> want = Session().compile(gr).run(in)[0].to_vector<float>();
          float scale = 0;
          for (float v : want) scale = std::max(scale, std::fabs(v));
          // The same int8 activations but for the norm, which rounds in another order (an
          // activation a step apart now and then).
          const float tol = fused ? 1e-2f : 2e-4f;
          CompileOptions o;
          o.cuda_graphs = false;
          for (const char* how : {"mma", "dp4a"}) {
            settings().cuda_qmatvec = how;
            const std::vector<float> got =
                Session(Device::cuda()).compile(gr, o).run(in)[0].to_vector<float>();
            ASSERT_EQ(got.size(), want.size());
            int bad = 0;
            for (size_t i = 0; i < got.size(); ++i)
              if (!(std::fabs(got[i] - want[i]) <= tol * scale) && bad++ < 3)
                ADD_FAILURE() << how << " " << dtype_name(T) << " m " << m << " k " << k
                              << (fused ? " fused" : "") << " [" << i / width << ", " << i % width
                              << "]: expected " << want[i] << ", got " << got[i];
          }
        }
  });
  settings().cuda_qmatvec = saved;
}

}  // namespace
}  // namespace rlx::cuda
