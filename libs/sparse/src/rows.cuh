// The CSR row loop the sparse CUDA kernels share (spmv, CG's step, BiCGSTAB's products,
// the residual), and how their grids are sized.
#pragma once

#include <cstdlib>
#include <initializer_list>

#include "cuda_common.h"
#include "rlx/cuda_check.cuh"
#include "rlx/settings.h"

namespace rlx::sparse::cuda {

constexpr int kBlock = 256;

template <class T, class I>
struct Csr {
  const I* rp;
  const I* col;
  const T* val;
  int64_t n;
};

// A pattern checked before the kernel reads it: no tests.
struct Trusted {
  __device__ bool row(int64_t, int64_t) const { return true; }
  __device__ bool col(int64_t) const { return true; }
};

// The checks of a kernel that is the first to read a pattern: a row whose bounds decrease
// or leave [0, nnz] is read as empty, an entry whose column lies outside [0, cols) as
// zero, so that no load leaves the arrays; the first one found is reported in `slot`
// (rlx::cuda::deferred_check, flag / value / axis: axis 0 a row, 1 a column).
struct Guarded {
  unsigned long long* slot;
  int64_t nnz, cols;
  __device__ void report(int64_t value, int64_t axis) const {
    rlx::cuda::report_bad(slot, value, axis);
  }
  __device__ bool row(int64_t b, int64_t e) const {
    if (0 <= b && b <= e && e <= nnz) return true;
    report(b, 0);
    return false;
  }
  __device__ bool col(int64_t c) const {
    if (0 <= c && c < cols) return true;
    report(c, 1);
    return false;
  }
};

// y_i = (A x)_i for the rows of this thread's warp, TPR lanes a row, x_j read as xat(j);
// calls f(i, y_i) on the row's first lane. The loop bound is the warp's, so every lane
// reaches the shuffles. With one lane a row, a thread takes two rows at once, their
// entries interleaved: twice the loads in flight for the same number of threads (each row
// still sums its entries in order). (Issuing a row's loads in chunks before adding was
// slower on the H200: the 5-point rows then take two chunks.) `g` tests the pattern as it
// is read (Trusted: not at all).
template <int TPR, class T, class I, class X, class F, class G = Trusted>
__device__ void rows_of(const Csr<T, I>& a, X xat, F f, G g = {}) {
  const int64_t total = int64_t(gridDim.x) * blockDim.x;
  auto entry = [&](int64_t e) {
    const int64_t c = __ldg(&a.col[e]);
    return g.col(c) ? __ldg(&a.val[e]) * xat(c) : T(0);
  };
  auto bounds = [&](int64_t i, int64_t& b, int64_t& e) {
    b = __ldg(&a.rp[i]);
    e = __ldg(&a.rp[i + 1]);
    if (!g.row(b, e)) b = e = 0;
  };
  if constexpr (TPR == 1) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += 2 * total) {
      const int64_t j = i + total;
      const bool two = j < a.n;
      int64_t e0, end0, e1 = 0, end1 = 0;
      bounds(i, e0, end0);
      if (two) bounds(j, e1, end1);
      T acc0 = 0, acc1 = 0;
      for (; e0 < end0 && e1 < end1; ++e0, ++e1) {
        acc0 += entry(e0);
        acc1 += entry(e1);
      }
      for (; e0 < end0; ++e0) acc0 += entry(e0);
      for (; e1 < end1; ++e1) acc1 += entry(e1);
      f(i, acc0);
      if (two) f(j, acc1);
    }
    return;
  }
  const int lane = threadIdx.x % TPR;
  const int64_t warp0 = int64_t(blockIdx.x) * blockDim.x + (threadIdx.x & ~31);
  for (int64_t t0 = warp0; t0 / TPR < a.n; t0 += total) {
    const int64_t i = (t0 + (threadIdx.x & 31)) / TPR;
    const bool ok = i < a.n;
    T acc = 0;
    if (ok) {
      int64_t b, end;
      bounds(i, b, end);
      for (int64_t e = b + lane; e < end; e += TPR) acc += entry(e);
    }
    for (int o = TPR / 2; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o, TPR);
    if (ok && lane == 0) f(i, acc);
  }
}

// Reads x_j of a vector.
template <class T>
struct At {
  const T* x;
  __device__ T operator()(int64_t j) const { return x[j]; }
};

#define RLX_GRID_LOOP(i, n)                                                 \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// The lanes a CSR row is given: one a `per` entries, up to a warp. CG's kernel reads the
// step before's vectors (two pairs) at each entry's column, BiCGSTAB's products one vector:
// CG wants fewer lanes (bench/RESULTS.md, "Sparse rows"). RLX_SPARSE_LANES overrides it.
inline int lanes_for(int64_t n, int64_t nnz, int per) {
  const int64_t avg = n > 0 ? nnz / n : 0;
  if (int64_t lanes = settings().sparse_lanes; lanes > 0) return int(lanes);
  int t = 1;
  while (t < 32 && per * t < avg) t *= 2;
  return t;
}

// Launches K<TPR> for the chosen lane count.
#define RLX_LANES(tpr, launch) \
  switch (tpr) {               \
    case 1:                    \
      launch(1);               \
      break;                   \
    case 2:                    \
      launch(2);               \
      break;                   \
    case 4:                    \
      launch(4);               \
      break;                   \
    case 8:                    \
      launch(8);               \
      break;                   \
    case 16:                   \
      launch(16);              \
      break;                   \
    default:                   \
      launch(32);              \
      break;                   \
  }

// The blocks a multiprocessor holds at once of the fewest-resident of these kernels.
inline int blocks_per_sm(std::initializer_list<const void*> kernels) {
  int fewest = 8;
  for (const void* fn : kernels) {
    int b = 0;
    RLX_SP_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, fn, kBlock, 0));
    fewest = std::min(fewest, std::max(b, 1));
  }
  return fewest;
}

// That many on every multiprocessor of the device: a grid of this many runs in one wave,
// its grid-stride loops with no tail of late blocks.
inline int resident_blocks(Device dev, std::initializer_list<const void*> kernels) {
  return blocks_per_sm(kernels) * sm_count(dev);
}

// A grid for `need` blocks of work in grid-stride loops: at most `resident` blocks (one
// wave), each taking the same number of rounds. (The plain one-wave grid leaves the slots of
// the blocks a shorter last round skips idle while the others finish: balanced, CG's
// iteration on the 5-point Poisson matrix ran 2.5-4% faster on the H200.)
inline int balanced_grid(int64_t need, int resident) {
  need = std::max<int64_t>(need, 1);
  const int64_t rounds = (need + resident - 1) / resident;
  return int((need + rounds - 1) / rounds);
}

// Blocks of a launch over n rows with tpr lanes a row (one lane a row: a thread takes two).
inline int64_t row_blocks(int64_t n, int tpr) {
  return (n * tpr / (tpr == 1 ? 2 : 1) + kBlock - 1) / kBlock;
}

}  // namespace rlx::sparse::cuda
