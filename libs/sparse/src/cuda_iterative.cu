// Iterative solves on the GPU: Jacobi-preconditioned CG and BiCGSTAB, entirely on the
// device. CG is one kernel an iteration (the step, the new direction and q = A p, below);
// BiCGSTAB is a few fused kernels with the recurrences of cpu_iterative.cpp. The scalars
// (alpha, beta, ...) never leave the device: every dot product is reduced by the grid's last
// block to finish (a fixed order, so runs repeat bit for bit), which also updates the
// solver's state and sets `done` on convergence or breakdown; later kernels of a finished
// solve return at once. The host queues iterations in chunks and reads the state a chunk
// behind (below): no round trip per iteration, and no wait for the host between chunks.
// gmres_solve keeps the host delegate (its small least-squares problem per step is host
// work anyway).
#include <cfloat>

#include "cuda_common.h"
#include "rows.cuh"

namespace rlx::sparse::cuda {

namespace {

enum Status : int { kRunning = 0, kNotSpd = 1 };

// The solver's scalars, in device memory.
struct State {
  double rz, rr, stop, alpha, beta, pq, pp;  // CG
  double rho, omega, ss;                     // BiCGSTAB (alpha, beta shared)
  unsigned long long norm_inf_bits;          // max row sum of |a_ij| (a non-negative double)
  int iter, done, status, s_conv;
  int bad;  // the pattern is unsound (setup_kernel): every later kernel returns at once
  unsigned ticket;
};

// ---- reductions ----------------------------------------------------------------------

constexpr int kMaxSums = 6;  // the most sums one grid_sum takes

// Sums v over the block in a fixed order; the result is in thread 0's v.
template <int NV>
__device__ void block_sum(double (&v)[NV]) {
  __shared__ double sh[kBlock / 32][NV];
  for (int j = 0; j < NV; ++j)
    for (int o = 16; o > 0; o /= 2) v[j] += __shfl_down_sync(0xffffffffu, v[j], o);
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0)
    for (int j = 0; j < NV; ++j) sh[w][j] = v[j];
  __syncthreads();
  if (threadIdx.x == 0)
    for (int j = 0; j < NV; ++j) {
      double s = 0;
      for (int k = 0; k < kBlock / 32; ++k) s += sh[k][j];
      v[j] = s;
    }
  __syncthreads();
}

// The grid's sums of v: each block leaves its partial, the last block to arrive adds them
// (in block order) and calls fin(sums) on one thread. Every thread of every block calls it.
template <int NV, class Fin>
__device__ void grid_sum(double (&v)[NV], double* partials, State* st, Fin fin) {
  static_assert(NV <= kMaxSums);
  __shared__ bool last;
  block_sum<NV>(v);
  if (threadIdx.x == 0) {
    for (int j = 0; j < NV; ++j) partials[blockIdx.x * NV + j] = v[j];
    __threadfence();
    last = atomicAdd(&st->ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  double s[NV] = {};
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x)
    for (int j = 0; j < NV; ++j) s[j] += __ldcg(&partials[b * NV + j]);
  block_sum<NV>(s);
  if (threadIdx.x == 0) {
    fin(s);
    st->ticket = 0;
  }
}

// ---- setup and the true residual -----------------------------------------------------

// dinv = 1 / diag(A) (1 where 0, or everywhere without the preconditioner); the max row sum.
// It also checks the pattern, in stream order instead of with a wait for the host: row_ptr
// starts at 0, ends at nnz and does not decrease, and columns lie in [0, n). A row is read
// only within [0, nnz); an unsound pattern sets st->bad, which the host finds with the
// first state it reads (and every later kernel sees, returning at once).
template <class T, class I>
__global__ void setup_kernel(Csr<T, I> a, int64_t nnz, bool jacobi, T* dinv, State* st) {
  double m = 0;
  bool bad = blockIdx.x == 0 && threadIdx.x == 0 && (a.rp[0] != 0 || int64_t(a.rp[a.n]) != nnz);
  RLX_GRID_LOOP(i, a.n) {
    T d = 0;
    double row = 0;
    const int64_t b = a.rp[i], e1 = a.rp[i + 1];
    if (!(0 <= b && b <= e1 && e1 <= nnz)) {
      bad = true;
      continue;
    }
    for (int64_t e = b; e < e1; ++e) {
      const int64_t c = int64_t(a.col[e]);
      bad |= c < 0 || c >= a.n;
      row += ::fabs(double(a.val[e]));
      if (c == i) d += a.val[e];
    }
    dinv[i] = jacobi && d != T(0) ? T(1) / d : T(1);
    m = ::fmax(m, row);
  }
  for (int o = 16; o > 0; o /= 2) m = ::fmax(m, __shfl_down_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0 && m > 0)  // one atomic a warp; non-negative doubles order as bits
    atomicMax(&st->norm_inf_bits, (unsigned long long)__double_as_longlong(m));
  if (bad) st->bad = 1;
}

// column c of b [..., n, k] <-> a contiguous vector.
template <class T>
__global__ void gather_kernel(const T* b, T* v, int64_t n, int64_t k, int64_t c) {
  const int64_t bi = c / k, j = c % k;
  RLX_GRID_LOOP(i, n) v[i] = b[(bi * n + i) * k + j];
}
template <class T>
__global__ void scatter_kernel(const T* v, T* x, int64_t n, int64_t k, int64_t c) {
  const int64_t bi = c / k, j = c % k;
  RLX_GRID_LOOP(i, n) x[(bi * n + i) * k + j] = v[i];
}

// ||b - A x|| / ||b||, and the iteration count, into the outputs.
template <int TPR, class T, class I>
__global__ void residual_kernel(Csr<T, I> a, const T* x, const T* b, double* part, State* st,
                                int32_t* iters, T* resid) {
  if (st->bad) return;  // the host throws the pattern's error
  double v[2] = {0, 0};
  rows_of<TPR>(a, At<T>{x}, [&](int64_t i, T y) {
    double d = double(b[i]) - double(y);
    v[0] += d * d;
    v[1] += double(b[i]) * double(b[i]);
  });
  grid_sum<2>(v, part, st, [&](double* s) {
    *iters = st->iter;
    *resid = T(s[1] > 0 ? ::sqrt(s[0]) / ::sqrt(s[1]) : 0);
  });
}

// ---- CG: one kernel an iteration -------------------------------------------------------
// Kernel k applies step k-1 (x += alpha p, r -= alpha q), makes the direction
// p = M r + beta p and q = A p. A's rows read the new p at the columns they name, so each
// kernel computes it there from the step before's r, q, p (double-buffered: read old, write
// new), through one function that gives the same bits wherever it runs. beta needs the new
// r.z before any block has it: the identity r'.Mr' = r.Mr - 2 alpha q.Mr + alpha^2 q.Mq
// (r' = r - alpha q) gives it from sums over the old vectors that the kernel before took;
// the exact r.z and r.r of every new r are summed too, and anchor each step, so no rounding
// accumulates. One grid-wide sum an iteration, and the vectors pass DRAM once.

// r and q of a row side by side, and p with the Jacobi diagonal: the reads at A's columns
// take two loads, not four.
template <class T>
using Pair = std::conditional_t<sizeof(T) == 4, float2, double2>;

template <class T>
struct CgVecs {
  T* x;
  const Pair<T>*rq0, *pd0;  // the step before, read at any row
  Pair<T>*rq1, *pd1;        // this step's, written at the block's rows
  const T *b, *dinv;
  double* part;
  State* st;
};

template <class T>
__device__ __forceinline__ T fma_rn(T a, T b, T c) {
  if constexpr (sizeof(T) == 4)
    return __fmaf_rn(a, b, c);
  else
    return __fma_rn(a, b, c);
}
template <class T>
__device__ __forceinline__ T mul_rn(T a, T b) {
  if constexpr (sizeof(T) == 4)
    return __fmul_rn(a, b);
  else
    return __dmul_rn(a, b);
}

// A row's new residual and direction from its old (r, q) and (p, d), with rounding fixed
// by the intrinsics (no contraction a compiler may choose differently at two call sites).
template <class T>
__device__ __forceinline__ T next_r(Pair<T> rq, T alpha) {
  return fma_rn(-alpha, rq.y, rq.x);
}
template <class T>
__device__ __forceinline__ T next_p(Pair<T> pd, T r, T beta) {
  return fma_rn(beta, pd.x, mul_rn(pd.y, r));
}

// x = 0; the old r = b, q = p = 0 (next to the diagonal), so the first kernel makes r = b,
// p = M b, q = A p.
template <class T>
__global__ void cg_init(CgVecs<T> v, int64_t n, double tol) {
  double s[1] = {0};
  auto* rq = const_cast<Pair<T>*>(v.rq0);
  auto* pd = const_cast<Pair<T>*>(v.pd0);
  RLX_GRID_LOOP(i, n) {
    T bi = v.b[i];
    v.x[i] = 0;
    rq[i] = {bi, T(0)};
    pd[i] = {T(0), v.dinv[i]};
    s[0] += double(bi) * double(bi);
  }
  grid_sum<1>(s, v.part, v.st, [&](double* t) {
    State* st = v.st;
    st->rr = t[0];
    st->stop = tol * ::sqrt(t[0]);
    st->alpha = st->beta = 0;
    st->status = kRunning;
    st->done = st->bad || !(::sqrt(t[0]) > st->stop);
    st->iter = st->done ? 0 : -1;  // the first kernel applies no step
  });
}

// One iteration (above). Sums r.z, r.r, p.q, p.p, q.z, q.Mq of the new vectors (z = M r);
// the last block sets alpha, the next beta, the iteration count and `done` (converged,
// max_iter, or p.q <= 0: not SPD, or a breakdown). The kernel of step max_iter only moves
// x: no direction follows it, so its A p (a pass over A) would go unused.
template <int TPR, class T, class I>
__global__ void cg_step(Csr<T, I> a, CgVecs<T> v, int64_t max_iter) {
  State* st = v.st;
  if (st->done) return;
  const T alpha = T(st->alpha), beta = T(st->beta);
  if (st->iter + 1 >= max_iter && st->iter >= 0) {  // iter only grows: every block agrees
    RLX_GRID_LOOP(i, a.n) v.x[i] += alpha * __ldg(&v.pd0[i]).x;
    if (blockIdx.x == 0 && threadIdx.x == 0) st->iter = int(max_iter);
    return;
  }
  double s[6] = {0, 0, 0, 0, 0, 0};
  auto p_at = [&](int64_t j) {
    return next_p(__ldg(&v.pd0[j]), next_r(__ldg(&v.rq0[j]), alpha), beta);
  };
  rows_of<TPR>(a, p_at, [&](int64_t i, T q) {
    const Pair<T> rq = __ldg(&v.rq0[i]), pd = __ldg(&v.pd0[i]);
    const T r = next_r(rq, alpha), p = next_p(pd, r, beta), d = pd.y;
    v.x[i] += alpha * pd.x;
    v.rq1[i] = {r, q};
    v.pd1[i] = {p, d};
    const double z = double(d * r), qd = double(q);
    s[0] += double(r) * z;
    s[1] += double(r) * double(r);
    s[2] += double(p) * qd;
    s[3] += double(p) * double(p);
    s[4] += qd * z;
    s[5] += qd * double(d * q);
  });
  grid_sum<6>(s, v.part, st, [&](double* t) {
    st->iter += 1;
    st->rz = t[0];
    st->rr = t[1];
    st->pq = t[2];
    st->pp = t[3];
    if (!(::sqrt(t[1]) > st->stop) || st->iter >= max_iter) {
      st->done = 1;
    } else if (t[2] <= 0) {
      double eps = sizeof(T) == 4 ? double(FLT_EPSILON) : DBL_EPSILON;
      if (t[2] < -64 * eps * __longlong_as_double(st->norm_inf_bits) * t[3]) st->status = kNotSpd;
      st->done = 1;
    } else {
      const double al = double(T(t[0] / t[2]));
      const double rz_next = t[0] - 2 * al * t[4] + al * al * t[5];
      st->alpha = al;
      st->beta = rz_next > 0 ? rz_next / t[0] : 0;
    }
  });
}

// ---- BiCGSTAB (right preconditioned) -------------------------------------------------

template <class T>
struct BiVecs {
  T *x, *r, *rhat, *p, *v, *t, *phat, *shat;
  const T *b, *dinv;
  double* part;
  State* st;
};

// x = 0, r = rhat = b, p = v = 0; rho = alpha = omega = 1; beta for the first p.
template <class T>
__global__ void bi_init(BiVecs<T> v, int64_t n, double tol) {
  double s[1] = {0};
  RLX_GRID_LOOP(i, n) {
    T bi = v.b[i];
    v.x[i] = 0;
    v.r[i] = bi;
    v.rhat[i] = bi;
    v.p[i] = 0;
    v.v[i] = 0;
    s[0] += double(bi) * double(bi);
  }
  grid_sum<1>(s, v.part, v.st, [&](double* t) {
    State* st = v.st;
    st->rr = t[0];
    st->stop = tol * ::sqrt(t[0]);
    st->iter = 0;
    st->s_conv = 0;
    st->status = kRunning;
    st->alpha = st->omega = 1;
    st->rho = t[0];  // rho_new = rhat . r = b . b; beta = (rho_new / 1) * (1 / 1)
    st->beta = t[0];
    st->done = st->bad || !(::sqrt(t[0]) > st->stop) || t[0] == 0;
  });
}

// p = r + beta (p - omega v); phat = M p.
template <class T>
__global__ void bi_direction(BiVecs<T> v, int64_t n) {
  if (v.st->done) return;
  const T beta = T(v.st->beta), om = T(v.st->omega);
  RLX_GRID_LOOP(i, n) {
    T pi = v.r[i] + beta * (v.p[i] - om * v.v[i]);
    v.p[i] = pi;
    v.phat[i] = v.dinv[i] * pi;
  }
}

// v = A phat; rhat.v; alpha = rho / rhat.v (done on a zero).
template <int TPR, class T, class I>
__global__ void bi_spmv_v(Csr<T, I> a, BiVecs<T> v) {
  if (v.st->done) return;
  double s[1] = {0};
  rows_of<TPR>(a, At<T>{v.phat}, [&](int64_t i, T y) {
    v.v[i] = y;
    s[0] += double(v.rhat[i]) * double(y);
  });
  grid_sum<1>(s, v.part, v.st, [&](double* t) {
    if (t[0] == 0)
      v.st->done = 1;
    else
      v.st->alpha = v.st->rho / t[0];
  });
}

// s = r - alpha v (kept in r), shat = M s; s.s: converged already?
template <class T>
__global__ void bi_s(BiVecs<T> v, int64_t n) {
  State* st = v.st;
  if (st->done) return;
  const T al = T(st->alpha);
  double s[1] = {0};
  RLX_GRID_LOOP(i, n) {
    T si = v.r[i] - al * v.v[i];
    v.r[i] = si;
    v.shat[i] = v.dinv[i] * si;
    s[0] += double(si) * double(si);
  }
  grid_sum<1>(s, v.part, st, [&](double* t) {
    st->ss = t[0];
    st->iter += 1;
    st->s_conv = !(::sqrt(t[0]) > st->stop);
  });
}

// t = A shat; t.t, t.s; omega. When s converged: x += alpha phat instead, and done.
template <int TPR, class T, class I>
__global__ void bi_spmv_t(Csr<T, I> a, BiVecs<T> v) {
  State* st = v.st;
  if (st->done) return;
  double s[2] = {0, 0};
  const bool conv = st->s_conv;
  if (conv) {
    const T al = T(st->alpha);
    RLX_GRID_LOOP(i, a.n) v.x[i] += al * v.phat[i];
  } else {
    rows_of<TPR>(a, At<T>{v.shat}, [&](int64_t i, T y) {
      v.t[i] = y;
      s[0] += double(y) * double(y);
      s[1] += double(y) * double(v.r[i]);
    });
  }
  grid_sum<2>(s, v.part, st, [&](double* t) {
    if (conv) {
      st->rr = st->ss;
      st->done = 1;
    } else {
      st->omega = t[0] > 0 ? t[1] / t[0] : 0;
    }
  });
}

// x += alpha phat + omega shat; r = s - omega t; r.r, rhat.r; the next beta.
template <class T>
__global__ void bi_update(BiVecs<T> v, int64_t n) {
  State* st = v.st;
  if (st->done) return;
  const T al = T(st->alpha), w = T(st->omega);
  double s[2] = {0, 0};
  RLX_GRID_LOOP(i, n) {
    v.x[i] += al * v.phat[i] + w * v.shat[i];
    T ri = v.r[i] - w * v.t[i];
    v.r[i] = ri;
    s[0] += double(ri) * double(ri);
    s[1] += double(v.rhat[i]) * double(ri);
  }
  grid_sum<2>(s, v.part, st, [&](double* t) {
    st->rr = t[0];
    if (st->omega == 0 || !(::sqrt(t[0]) > st->stop) || t[1] == 0) {
      st->done = 1;
      return;
    }
    st->beta = double(T((t[1] / st->rho) * (st->alpha / st->omega)));
    st->rho = t[1];
  });
}

// ---- the host side ---------------------------------------------------------------------

enum class Method { cg, bicgstab };

struct Matrix {
  Tensor val, col, rp;  // A, or A^T for transpose
};

// A^T as CSR (cusparseCsr2cscEx2: 32-bit indices, which supports() asks for).
template <class T>
Matrix transposed(const KernelContext& ctx, std::span<const Tensor> in, int64_t n, cudaStream_t s) {
  const int64_t nnz = in[1].numel();
  Matrix m{scratch(in[0].dtype(), nnz, ctx.device), scratch(DType::i32, nnz, ctx.device),
           scratch(DType::i32, n + 1, ctx.device)};
  Handle h = cusparse(ctx.device, s);
  size_t bytes = 0;
  auto call = [&](void* buf, bool size_only) {
    if (size_only)
      return cusparseCsr2cscEx2_bufferSize(
          h.h, int(n), int(n), int(nnz), in[0].data(), in[2].data_as<int>(), in[1].data_as<int>(),
          m.val.data(), m.rp.data_as<int>(), m.col.data_as<int>(), value_type<T>(),
          CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1, &bytes);
    return cusparseCsr2cscEx2(h.h, int(n), int(n), int(nnz), in[0].data(), in[2].data_as<int>(),
                              in[1].data_as<int>(), m.val.data(), m.rp.data_as<int>(),
                              m.col.data_as<int>(), value_type<T>(), CUSPARSE_ACTION_NUMERIC,
                              CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1, buf);
  };
  RLX_SP_CHECK(call(nullptr, true));
  Tensor buf = scratch(DType::u8, int64_t(bytes), ctx.device);
  RLX_SP_CHECK(call(buf.data(), false));
  return m;
}

// Two solver states in pinned host memory (the device copies into them asynchronously),
// one pair per host thread, kept for the thread's life.
State* pinned_states() {
  thread_local State* p = [] {
    void* q = nullptr;
    RLX_SP_CHECK(cudaMallocHost(&q, 2 * sizeof(State)));
    return static_cast<State*>(q);
  }();
  return p;
}

struct Events {
  cudaEvent_t e[2] = {};
  Events() {
    for (cudaEvent_t& x : e) RLX_SP_CHECK(cudaEventCreateWithFlags(&x, cudaEventDisableTiming));
  }
  ~Events() {
    for (cudaEvent_t x : e)
      if (x) cudaEventDestroy(x);
  }
};

template <class T, class I>
void iterative_k(Method method, const KernelContext& ctx, std::span<const Tensor> in,
                 std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  const Attrs& at = ctx.attrs;
  cudaStream_t s = stream_of(ctx);
  const Device dev = ctx.device;
  const Tensor& B = in[3];
  const int64_t n = in[2].numel() - 1;
  const bool transpose = at.has("transpose") && at.get_bool("transpose");
  // cuSPARSE's transpose reads the pattern first: it is checked before, waiting for the
  // verdict; otherwise setup_kernel checks it in stream order.
  if (transpose || n == 0) check_pattern(op, in[1], in[2], n, s);
  const int64_t k = B.rank() >= 2 ? B.shape().back() : 1;
  const int64_t cols = n == 0 ? out[1].numel() : B.numel() / n;
  if (cols == 0) return;
  int32_t* iters = out[1].data_as<int32_t>();
  T* resid = out[2].data_as<T>();
  if (n == 0) {  // nothing to solve: 0 iterations, residual 0
    RLX_SP_CHECK(cudaMemsetAsync(iters, 0, out[1].nbytes(), s));
    RLX_SP_CHECK(cudaMemsetAsync(resid, 0, out[2].nbytes(), s));
    return;
  }
  Matrix m{in[0], in[1], in[2]};
  if (transpose) m = transposed<T>(ctx, in, n, s);
  const Csr<T, I> a{m.rp.data_as<I>(), m.col.data_as<I>(), m.val.data_as<T>(), n};
  const double tol = at.get_float("tol");
  int64_t max_iter = at.get_int("max_iter");
  if (max_iter < 0) max_iter = 10 * n;
  const int tpr = lanes_for(n, m.col.numel(), method == Method::cg ? 8 : 2);
  // CG's step has a grid of its own: it holds a different number of blocks a multiprocessor
  // than BiCGSTAB's kernels (its registers), and each grid is sized by its own occupancy.
  const int64_t need = row_blocks(n, tpr);
  const int grid = balanced_grid(
      need,
      resident_blocks(dev, {(const void*)bi_spmv_t<1, T, I>, (const void*)bi_spmv_t<32, T, I>,
                            (const void*)bi_update<T>, (const void*)residual_kernel<32, T, I>}));
  const int step_grid = balanced_grid(
      need, resident_blocks(dev, {(const void*)cg_step<1, T, I>, (const void*)cg_step<32, T, I>}));

  // Device memory: the state, the block partials (kMaxSums a block), and the vectors.
  Tensor state = scratch(DType::u8, sizeof(State), dev);
  Tensor part = scratch(DType::f64, kMaxSums * std::max(grid, step_grid), dev);
  State* st = static_cast<State*>(state.data());
  RLX_SP_CHECK(cudaMemsetAsync(st, 0, sizeof(State), s));
  // dinv, x, b, then the solver's (BiCGSTAB: 8 vectors; CG: 4 pairs at an even offset).
  Tensor vecs = scratch(B.dtype(), 11 * n + 2, dev);
  auto vec = [&](int i) { return vecs.data_as<T>() + i * n; };
  T *dinv = vec(0), *x = vec(1), *b = vec(2);
  setup_kernel<<<grid, kBlock, 0, s>>>(a, m.col.numel(),
                                       at.get_string("preconditioner") == "jacobi", dinv, st);
  RLX_SP_LAUNCHED("sparse iterative setup");
  // CG's (r, q) and (p, d) pairs in two buffers each: kernel k reads cv[k % 2] and writes
  // the other.
  auto pair = [&](int i) {
    return reinterpret_cast<Pair<T>*>(vecs.data_as<T>() + ((3 * n + 1) & ~int64_t(1)) + 2 * i * n);
  };
  const CgVecs<T> cv[2] = {
      {x, pair(0), pair(1), pair(2), pair(3), b, dinv, part.data_as<double>(), st},
      {x, pair(2), pair(3), pair(0), pair(1), b, dinv, part.data_as<double>(), st}};
  BiVecs<T> bv{
      x, vec(3), vec(4), vec(5), vec(6), vec(7), vec(8), vec(9), b, dinv, part.data_as<double>(),
      st};

  for (int64_t c = 0; c < cols; ++c) {
    gather_kernel<<<grid, kBlock, 0, s>>>(B.data_as<T>(), b, n, k, c);
    if (method == Method::cg)
      cg_init<<<grid, kBlock, 0, s>>>(cv[0], n, tol);
    else
      bi_init<<<grid, kBlock, 0, s>>>(bv, n, tol);
    RLX_SP_LAUNCHED("sparse iterative init");
    // Kernels in chunks (8, 16, 32, 32, ...), the state copied back after each. The host
    // looks at a chunk's state only once the next chunk is queued: the device never waits
    // for the host, and a finished solve costs at most one chunk of kernels that return
    // at once (and cannot change the state).
    State* seen = pinned_states();
    Events ev;
    // CG runs one kernel more than its steps: the first makes the first direction.
    const int64_t kernels = method == Method::cg ? max_iter + 1 : max_iter;
    auto finished = [&](int64_t chunk_index) {
      RLX_SP_CHECK(cudaEventSynchronize(ev.e[chunk_index % 2]));
      const State& h = seen[chunk_index % 2];
      if (h.bad) throw_pattern_error(op, in[1], in[2], n);
      if (h.status == kNotSpd)
        fail<ValueError>(op, "expected a symmetric positive definite matrix, got p^T A p = ", h.pq,
                         " < 0 at iteration ", h.iter);
      return h.done != 0;
    };
    int64_t queued = 0, chunks = 0;
    bool done = false;
    for (int64_t chunk = 8; queued < kernels; chunk = std::min<int64_t>(2 * chunk, 32)) {
      chunk = std::min(chunk, kernels - queued);
      for (int64_t j = queued; j < queued + chunk; ++j) {
        if (method == Method::cg) {
#define RLX_CG_STEP(L) cg_step<L><<<step_grid, kBlock, 0, s>>>(a, cv[j % 2], max_iter)
          RLX_LANES(tpr, RLX_CG_STEP);
        } else {
#define RLX_BI_V(L) bi_spmv_v<L><<<grid, kBlock, 0, s>>>(a, bv)
#define RLX_BI_T(L) bi_spmv_t<L><<<grid, kBlock, 0, s>>>(a, bv)
          bi_direction<<<grid, kBlock, 0, s>>>(bv, n);
          RLX_LANES(tpr, RLX_BI_V);
          bi_s<<<grid, kBlock, 0, s>>>(bv, n);
          RLX_LANES(tpr, RLX_BI_T);
          bi_update<<<grid, kBlock, 0, s>>>(bv, n);
        }
      }
      RLX_SP_LAUNCHED("sparse iterative step");
      queued += chunk;
      RLX_SP_CHECK(
          cudaMemcpyAsync(&seen[chunks % 2], st, sizeof(State), cudaMemcpyDeviceToHost, s));
      RLX_SP_CHECK(cudaEventRecord(ev.e[chunks % 2], s));
      if (++chunks >= 2 && (done = finished(chunks - 2))) break;
    }
#define RLX_RESID(L) \
  residual_kernel<L> \
      <<<grid, kBlock, 0, s>>>(a, x, b, part.data_as<double>(), st, iters + c, resid + c)
    RLX_LANES(tpr, RLX_RESID);
    scatter_kernel<<<grid, kBlock, 0, s>>>(x, out[0].data_as<T>(), n, k, c);
    RLX_SP_LAUNCHED("sparse iterative residual");
    // A breakdown in the last chunk throws too (looked at once the residual is queued).
    if (!done && chunks > 0) finished(chunks - 1);
  }
  // The scratch above is freed stream-ordered; nothing here waits for the last column.
}

template <Method method>
void add(const char* op) {
  KernelRegistry::global().add(
      op, DeviceKind::cuda,
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        dispatch(in[0].dtype(), in[1].dtype(), [&](auto t, auto i) {
          iterative_k<decltype(t), decltype(i)>(method, ctx, in, out);
        });
      },
      [](const KernelQuery& q) {
        // A^T is made by cusparseCsr2cscEx2, which takes 32-bit indices only.
        bool t = q.attrs.has("transpose") && q.attrs.get_bool("transpose");
        return !t || q.inputs[1].dtype == DType::i32;
      });
}

}  // namespace

void register_iterative_cuda_kernels() {
  add<Method::cg>("sparse.cg_solve");
  add<Method::bicgstab>("sparse.bicgstab_solve");
}

}  // namespace rlx::sparse::cuda
