// Host side of the f32 tensor-core GEMM (gemm_f32.cuh has the kernels and the method):
// split both operands, then one launch over every tile and batch entry.
#include <mutex>

#include "backend/cuda/gemm_f32.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/linalg.h"

namespace rlx::cuda {

namespace {

using namespace tc;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The operand's head and tail, k-contiguous and padded: a [2][batch][rows_p][kp] buffer.
Tensor split(const TcOperand& o, int64_t k, int64_t batch, int64_t rows_p, int64_t kp, int* flag,
             Device dev, cudaStream_t s) {
  int64_t count = o.batch_stride == 0 ? 1 : batch;
  Tensor buf = Tensor::empty(DType::f32, {2, count, rows_p, kp}, dev);
  float* hi = static_cast<float*>(buf.data());
  dim3 grid(unsigned(kp / 32), unsigned(rows_p / 32), unsigned(count));
  split_k_major<<<grid, dim3(32, 8), 0, s>>>(o.data, o.rows, k, o.row_stride, o.k_stride,
                                             o.batch_stride, hi, hi + count * rows_p * kp, rows_p,
                                             kp, flag);
  RLX_CUDA_LAUNCHED("split_k_major");
  return buf;
}

template <int kAct>
void launch(const TcParams& p, int64_t batch, Device dev, cudaStream_t s) {
  static std::array<std::once_flag, 64> once;
  std::call_once(once[size_t(dev.index)], [] {
    RLX_CUDA(cudaFuncSetAttribute(gemm_3xtf32<kAct>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(kSmem)));
  });
  dim3 grid(unsigned(p.tiles_m * p.tiles_n), unsigned(batch));
  gemm_3xtf32<kAct><<<grid, kGemmThreads, kSmem, s>>>(p);
  RLX_CUDA_LAUNCHED("gemm_3xtf32");
}

}  // namespace

bool tc_f32_gemm_fits(int64_t m, int64_t n, int64_t k, int64_t batch) {
  int64_t tiles = round_up(m, kBM) / kBM * (round_up(n, kBN) / kBN);
  return m > 0 && n > 0 && k > 0 && batch >= 1 && batch <= 65535 && tiles < (int64_t(1) << 30) &&
         round_up(std::max(m, n), kRowPad) / 32 <= 65535 && round_up(k, kKPad) / 32 <= (1 << 30);
}

void tc_f32_gemm(const TcGemm& g, Device dev, cudaStream_t s) {
  const int64_t mp = round_up(g.m, kRowPad), np = round_up(g.n, kRowPad), kp = round_up(g.k, kKPad);
  Tensor flag = Tensor::empty(DType::i32, {1}, dev);
  int* nonfinite = static_cast<int*>(flag.data());
  RLX_CUDA(cudaMemsetAsync(nonfinite, 0, sizeof(int), s));
  Tensor a = split(g.x, g.k, g.batch, mp, kp, nonfinite, dev, s);
  Tensor b = split(g.w, g.k, g.batch, np, kp, nonfinite, dev, s);
  const float* ap = static_cast<const float*>(a.data());
  const float* bp = static_cast<const float*>(b.data());
  int64_t a_count = g.x.batch_stride == 0 ? 1 : g.batch;
  int64_t b_count = g.w.batch_stride == 0 ? 1 : g.batch;
  TcParams p{ap,
             ap + a_count * mp * kp,
             bp,
             bp + b_count * np * kp,
             g.x.batch_stride == 0 ? 0 : mp * kp,
             g.w.batch_stride == 0 ? 0 : np * kp,
             kp,
             int(mp / kBM),
             int(np / kBN),
             g.y,
             g.y_row,
             g.y_batch,
             g.m,
             g.n,
             g.alpha,
             g.beta,
             g.bias,
             nonfinite};
  switch (g.act) {
    case TcGemm::Act::relu:
      return launch<1>(p, g.batch, dev, s);
    case TcGemm::Act::gelu_tanh:
      return launch<2>(p, g.batch, dev, s);
    default:
      return launch<0>(p, g.batch, dev, s);
  }
}

}  // namespace rlx::cuda
