// matmul through cuBLASLt, NumPy semantics (1-D operands, broadcast batch dims). Row-major
// C = A B is computed as the column-major C^T = B^T A^T; operands that are transposed views
// become cuBLAS transposes, not copies. A batch that an operand broadcasts over (a weight
// shared by every row of x) folds into M when x's rows are evenly spaced, so it is one
// GEMM. f16 / bf16 accumulate in f32. f32 runs as cuda::set_f32_matmul (rlx/cuda.h) says: by
// default large products go to linalg_f32.cu's tensor-core GEMM (3xTF32 summed so that its
// error stays SGEMM's), the rest to SGEMM. cuBLAS's own 3xTF32 is not used: its products
// pass through the tensor cores' truncating accumulator, and tools/gpu/f32_gemm_probe.cu
// measured (H200, GPT-2's shapes, against DGEMM) an rms error of 1.8e-6 of the result's at
// k 768 and 7.2e-6 at k 3072, where SGEMM's is 5.0e-7 at both; demo GPT AdamW steps run on
// it differed from the CPU's by 1.7% of an update, where SGEMM's stay under 1%. cuBLAS's
// BF16x9 emulation of f32 runs as plain SGEMM on sm_90 (same times, same bits).
// RLX_CUDA_TF32=1: one TF32 product instead (fastest, ~1e-3 relative error).
#include "backend/cuda/linalg.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <span>
#include <string_view>

#include "backend/cuda/copy.h"
#include "backend/cuda/cuda_util.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/families.h"
#include "rlx/axes.h"
#include "rlx/compile_cache.h"
#include "rlx/cuda.h"
#include "rlx/settings.h"

namespace rlx::cuda {

namespace {

void check_lt(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::string msg = str_cat("[cublasLt] expected ", call, " to succeed, got ",
                            cublasLtGetStatusName(s), ": ", cublasLtGetStatusString(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory(msg);
  throw DeviceError(msg);
}
#define RLX_LT(call) check_lt((call), #call)

constexpr size_t kWorkspace = size_t(32) << 20;

// A handle and a workspace per device, made on first use.
struct LtState {
  cublasLtHandle_t handle = nullptr;
  Tensor workspace;
  std::mutex mu;
  std::map<std::string, cublasLtMatmulAlgo_t> algos;  // by problem description
};

LtState& lt_state(Device d) {
  static std::array<std::once_flag, 64> once;
  static std::array<LtState*, 64> states{};
  std::call_once(once[size_t(d.index)], [&] {
    auto* s = new LtState;  // kept for the process: buffers may outlive static destructors
    RLX_LT(cublasLtCreate(&s->handle));
    s->workspace = Tensor::empty(DType::u8, {int64_t(kWorkspace)}, d);
    states[size_t(d.index)] = s;
  });
  return *states[size_t(d.index)];
}

// Time cuBLASLt's candidate algorithms on a problem's first call and keep the fastest
// (settings().gemm_tune off: its first choice). Its first choice can be far off for some
// shapes: a weight gradient (768 x 768, k = 8192) ran at a third of the bf16 peak.
bool tune_gemms() { return settings().gemm_tune; }

bool tf32() { return settings().cuda_tf32; }

enum class F32Mode { automatic, sgemm, tc };

F32Mode parse_f32_mode(std::string_view m) {
  if (m == "auto") return F32Mode::automatic;
  if (m == "sgemm") return F32Mode::sgemm;
  if (m == "tc") return F32Mode::tc;
  fail<ValueError>("set_f32_matmul", "expected auto, sgemm or tc, got '", m, "'");
}

F32Mode f32_mode() { return parse_f32_mode(settings().cuda_f32_gemm); }

std::atomic<int64_t> tc_runs{0};

// One operand as cuBLAS sees it: a matrix (row-major or transposed) per batch entry.
struct Operand {
  Tensor t;         // the tensor whose memory is read (a view or a copy)
  bool transposed;  // stored column-major (the last two dims' strides swapped)
  int64_t ld;       // leading dimension, in elements
  int64_t batch_stride;
};

// x viewed as [batch..., rows, cols] (already broadcast to the batch shape): a layout
// cuBLAS can read, copying only when the strides allow none.
Operand operand(Tensor x, cudaStream_t s) {
  size_t r = size_t(x.rank());
  int64_t rows = x.shape()[r - 2], cols = x.shape()[r - 1];
  auto layout = [&](const Tensor& t, Operand& o) {
    int64_t rs = t.strides()[r - 2], cs = t.strides()[r - 1];
    if ((cs == 1 || cols == 1) && (rs >= cols || rows == 1)) {
      o.transposed = false;
      o.ld = std::max<int64_t>(rows == 1 ? cols : rs, std::max<int64_t>(cols, 1));
    } else if ((rs == 1 || rows == 1) && (cs >= rows || cols == 1)) {
      o.transposed = true;
      o.ld = std::max<int64_t>(cols == 1 ? rows : cs, std::max<int64_t>(rows, 1));
    } else {
      return false;
    }
    // The batch dims must be one evenly spaced run (or all the same matrix).
    int64_t stride = 0, expect = -1;
    for (size_t d = r - 2; d-- > 0;) {
      if (t.shape()[d] == 1) continue;
      int64_t sd = t.strides()[d];
      if (expect < 0) {
        stride = sd;
        expect = sd * t.shape()[d];
      } else if (sd != expect && !(sd == 0 && stride == 0)) {
        return false;
      } else {
        expect = sd * t.shape()[d];
      }
    }
    o.batch_stride = stride;
    return true;
  };
  Operand o{x, false, 0, 0};
  if (layout(x, o)) return o;
  Tensor c = Tensor::empty(x.dtype(), x.shape(), x.device());
  copy_strided(x, c, s);
  o.t = c;
  layout(c, o);
  return o;
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::f64:
      return CUDA_R_64F;
    case DType::f16:
      return CUDA_R_16F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

// Of the heuristic's usable results, the algorithm whose launches run fastest on the
// stream (one warm-up and three timed launches each); `fallback` when none launches.
template <class Launch>
cublasLtMatmulAlgo_t fastest(std::span<const cublasLtMatmulHeuristicResult_t> results,
                             cublasLtMatmulAlgo_t fallback, Launch launch, cudaStream_t stream) {
  cudaEvent_t start, stop;
  RLX_CUDA(cudaEventCreate(&start));
  RLX_CUDA(cudaEventCreate(&stop));
  cublasLtMatmulAlgo_t best = fallback;
  float best_ms = -1;
  for (const cublasLtMatmulHeuristicResult_t& r : results) {
    if (r.state != CUBLAS_STATUS_SUCCESS || launch(r.algo) != CUBLAS_STATUS_SUCCESS) continue;
    RLX_CUDA(cudaEventRecord(start, stream));
    bool ok = true;
    for (int i = 0; i < 3 && ok; ++i) ok = launch(r.algo) == CUBLAS_STATUS_SUCCESS;
    RLX_CUDA(cudaEventRecord(stop, stream));
    RLX_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    RLX_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (ok && (best_ms < 0 || ms < best_ms)) best = r.algo, best_ms = ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

struct Gemm {
  DType dtype;
  int64_t m, n, k, batch;  // column-major m x n = (m x k) (k x n)
  const Operand* a;        // the column-major left operand (our B)
  const Operand* b;        // our A
  void* c;
  int64_t ldc, c_stride;
  const void* c_in = nullptr;  // beta 1: the term to add where it is not c itself (C != D)
  DType out = DType::f32;      // c's dtype where it differs from the operands' (f32 from 16 bits)
  bool own_out = false;
  double alpha = 1, beta = 0;  // beta 1: c holds a term to add
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // one value per row of the column-major product (our columns)
};

// One cuBLASLt GEMM.
void run_gemm_as(const Gemm& g, Device dev, cudaStream_t stream) {
  LtState& st = lt_state(dev);
  cudaDataType_t dt = data_type(g.dtype), ct = g.own_out ? data_type(g.out) : dt;
  bool f64 = g.dtype == DType::f64;
  cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F
          : (g.dtype == DType::f32 && tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;

  cublasLtMatmulDesc_t desc;
  RLX_LT(cublasLtMatmulDescCreate(&desc, compute, scale));
  cublasOperation_t ta = g.a->transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = g.b->transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  RLX_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  RLX_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    RLX_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue,
                                          sizeof g.epilogue));
    if (g.bias)
      RLX_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                            sizeof g.bias));
  }
  // Stored shapes: op(A) is m x k, op(B) is k x n.
  auto make = [&](int64_t rows, int64_t cols, int64_t ld, int64_t stride, cudaDataType_t type) {
    cublasLtMatrixLayout_t l;
    RLX_LT(cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), ld));
    if (g.batch > 1) {
      int32_t count = int32_t(g.batch);
      RLX_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                              sizeof count));
      RLX_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &stride, sizeof stride));
    }
    return l;
  };
  cublasLtMatrixLayout_t la = g.a->transposed ? make(g.k, g.m, g.a->ld, g.a->batch_stride, dt)
                                              : make(g.m, g.k, g.a->ld, g.a->batch_stride, dt);
  cublasLtMatrixLayout_t lb = g.b->transposed ? make(g.n, g.k, g.b->ld, g.b->batch_stride, dt)
                                              : make(g.k, g.n, g.b->ld, g.b->batch_stride, dt);
  cublasLtMatrixLayout_t lc = make(g.m, g.n, g.ldc, g.c_stride, ct);

  std::string key =
      str_cat(int(g.dtype), ta, tb, ':', g.m, ',', g.n, ',', g.k, ',', g.batch, ',', g.a->ld, ',',
              g.b->ld, ',', g.ldc, ',', g.a->batch_stride, ',', g.b->batch_stride, ',',
              int(compute), ',', int(ct), ',', int(g.epilogue), ',', g.beta != 0);
  double one64 = g.alpha, zero64 = g.beta;
  float one32 = float(g.alpha), zero32 = float(g.beta);
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  auto launch = [&](const cublasLtMatmulAlgo_t& a) {
    return cublasLtMatmul(st.handle, desc, alpha, g.a->t.data(), la, g.b->t.data(), lb, beta,
                          g.c_in ? g.c_in : g.c, lc, g.c, lc, &a, st.workspace.data(), kWorkspace,
                          stream);
  };
  cublasLtMatmulAlgo_t algo;
  {
    std::lock_guard lock(st.mu);
    auto it = st.algos.find(key);
    if (it != st.algos.end()) {
      algo = it->second;
    } else {
      cublasLtMatmulPreference_t pref;
      RLX_LT(cublasLtMatmulPreferenceCreate(&pref));
      size_t ws = kWorkspace;
      RLX_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws));
      constexpr int kCandidates = 16;
      std::array<cublasLtMatmulHeuristicResult_t, kCandidates> res{};
      int found = 0;
      RLX_LT(cublasLtMatmulAlgoGetHeuristic(st.handle, desc, la, lb, lc, lc, pref, kCandidates,
                                            res.data(), &found));
      cublasLtMatmulPreferenceDestroy(pref);
      if (found == 0)
        fail<NotSupported>("matmul", "expected cuBLASLt to have an algorithm for ",
                           dtype_name(g.dtype), " m=", g.m, " n=", g.n, " k=", g.k, ", got none");
      algo = res[0].algo;
      // Timing writes c: only where c holds no term of the result (beta 0, or the term read
      // from c_in), and not while the stream is being captured into a graph (no waiting
      // then). Not with an activation epilogue: the algorithms differ there (on the H200 one
      // took relu(NaN) to 0, where the first choice keeps NaN, as the CPU does).
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
      RLX_CUDA(cudaStreamIsCapturing(stream, &capturing));
      bool plain = g.epilogue == CUBLASLT_EPILOGUE_DEFAULT || g.epilogue == CUBLASLT_EPILOGUE_BIAS;
      const bool rerunnable = g.beta == 0 || (g.c_in && g.c_in != g.c);
      if (found > 1 && rerunnable && plain && tune_gemms() &&
          capturing == cudaStreamCaptureStatusNone)
        algo = fastest({res.data(), size_t(found)}, algo, launch, stream);
      st.algos.emplace(key, algo);
    }
  }
  RLX_LT(launch(algo));
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
}

// Where "auto" takes the tensor-core GEMM: at least 2^33 multiply-adds over k >= 256. On
// the H200 (rlx-bench-gpu --only gemm_f32) it ran 1.10x SGEMM's speed at 2048^3 and
// 1.14-1.25x on GPT-2's products, but 0.68x at 1024^3 and 0.86x at 8192 x 64 x 8192 (the
// two splits and 128 x 128 tiles do not pay there).
bool tc_pays(const Gemm& g) {
  return g.k >= 256 && double(g.m) * double(g.n) * double(g.k) * double(g.batch) >= 0x1p33;
}

// The column-major product C = op(A) op(B) as the tensor-core GEMM's row-major y = x w^T,
// where its epilogue is one the kernel has.
bool run_tc(const Gemm& g, Device dev, cudaStream_t stream) {
  TcGemm::Act act = TcGemm::Act::none;
  switch (g.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_BIAS:
      break;
    case CUBLASLT_EPILOGUE_RELU:
    case CUBLASLT_EPILOGUE_RELU_BIAS:
      act = TcGemm::Act::relu;
      break;
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
      act = TcGemm::Act::gelu_tanh;
      break;
    default:
      return false;
  }
  // x = op(B)^T (rows n), w = op(A) (rows m), both over k.
  // (op(A) is A stored column-major, or its transpose; likewise B.)
  auto as_rows = [&](const Operand& o, int64_t rows, bool k_contiguous) {
    int64_t batch = g.batch == 1 ? 0 : o.batch_stride;
    auto data = static_cast<const float*>(o.t.data());
    return k_contiguous ? TcOperand{data, rows, o.ld, 1, batch}
                        : TcOperand{data, rows, 1, o.ld, batch};
  };
  TcOperand x = as_rows(*g.b, g.n, !g.b->transposed);
  TcOperand w = as_rows(*g.a, g.m, g.a->transposed);
  TcGemm t{x, w, g.n, g.m, g.k, g.batch, static_cast<float*>(g.c), g.ldc, g.c_stride};
  t.alpha = float(g.alpha);
  t.beta = float(g.beta);
  t.bias = static_cast<const float*>(g.bias);
  t.act = act;
  tc_f32_gemm(t, dev, stream);
  tc_runs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void run_gemm(const Gemm& g, Device dev, cudaStream_t stream) {
  F32Mode mode = f32_mode();
  bool tc = g.dtype == DType::f32 && !g.own_out && !g.c_in && !tf32() && mode != F32Mode::sgemm &&
            tc_f32_gemm_fits(g.n, g.m, g.k, g.batch) && (mode == F32Mode::tc || tc_pays(g));
  if (!(tc && run_tc(g, dev, stream))) run_gemm_as(g, dev, stream);
}

}  // namespace

void batched_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& y, double alpha,
                  cudaStream_t s, const Tensor* addend) {
  auto view = [](const Tensor& t, bool trans) {
    int64_t r = t.shape()[1], c = t.shape()[2];
    return Operand{t, trans, c, r * c};  // stored row-major: transposed reads it as c x r
  };
  int64_t batch = a.shape()[0];
  int64_t m = a.shape()[ta ? 2 : 1], k = a.shape()[ta ? 1 : 2], n = b.shape()[tb ? 1 : 2];
  Operand oa = view(a, ta), ob = view(b, tb);
  Gemm g{a.dtype(), n, m, k, batch, &ob, &oa, y.data(), n, m * n};
  g.own_out = y.dtype() != a.dtype();
  g.out = y.dtype();
  g.alpha = alpha;
  if (addend) g.beta = 1, g.c_in = addend->data();
  run_gemm(g, y.device(), s);
}

namespace {

// y = a @ b (NumPy matmul), through `g`'s epilogue fields when set.
void matmul_into(Tensor a, Tensor b, const Tensor& y, cudaStream_t s, Gemm g = {}) {
  if (a.rank() == 1) a = a.reshape({1, a.shape()[0]});
  if (b.rank() == 1) b = b.reshape({b.shape()[0], 1});
  size_t ra = size_t(a.rank()), rb = size_t(b.rank());
  int64_t m = a.shape()[ra - 2], k = a.shape()[ra - 1], n = b.shape()[rb - 1];
  std::vector<int64_t> batch;
  for (size_t i = 0, nb = std::max(ra, rb) - 2; i < nb; ++i) {
    auto dim = [&](const Tensor& t, size_t r) {
      return i + r - 2 >= nb ? t.shape()[i + r - 2 - nb] : int64_t(1);
    };
    batch.push_back(std::max(dim(a, ra), dim(b, rb)));
  }
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  if (y.numel() == 0) return;
  std::vector<int64_t> ashape = batch, bshape = batch;
  ashape.insert(ashape.end(), {m, k});
  bshape.insert(bshape.end(), {k, n});
  if (k == 0 && g.epilogue == CUBLASLT_EPILOGUE_DEFAULT && g.beta == 0) return fill(y, 0, s);
  Tensor av = a.broadcast_to(ashape), bv = b.broadcast_to(bshape);
  // A weight shared across the batch, over rows of x spaced evenly: one GEMM of
  // count * m rows.
  Operand oa = operand(av, s), ob = operand(bv, s);
  if (count > 1 && ob.batch_stride == 0 && !oa.transposed && oa.batch_stride == m * oa.ld) {
    m *= count;
    count = 1;
  }
  g.dtype = a.dtype();
  g.own_out = y.dtype() != a.dtype();  // f32 from 16-bit operands
  g.out = y.dtype();
  g.m = n;
  g.n = m;
  g.k = k;
  g.batch = count;
  g.a = &ob;
  g.b = &oa;
  g.c = y.data();
  g.ldc = n;
  g.c_stride = m * n;
  run_gemm(g, y.device(), s);
}

void matmul_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  matmul_into(in[0], in[1], out[0], stream_of(ctx));
}

// fused_matmul: a bias of one value per output column and relu / gelu_tanh go into
// cuBLASLt's epilogue; another bias is copied into y and added by the GEMM (beta 1); the
// other activations run over y afterwards.
void fused_matmul_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                         std::span<Tensor> out) {
  cudaStream_t s = stream_of(ctx);
  Tensor a = in[0], b = in[1];
  const Tensor& y = out[0];
  if (ctx.attrs.get_bool("transpose_a")) a = a.swap_last2();
  if (ctx.attrs.get_bool("transpose_b")) b = b.swap_last2();
  std::string act = ctx.attrs.get_string("activation");
  if (y.numel() == 0) return;
  const Tensor* bias = in.size() > 2 ? &in[2] : nullptr;
  if (a.rank() == 0 || a.shape().back() == 0) {  // no products: act(bias), or act(0)
    if (bias)
      cast_into(bias->broadcast_to(y.shape()), y, s);
    else
      fill(y, 0, s);
    return activation_inplace(y, act, s);
  }
  Gemm g{};
  Tensor wide;  // a bias widened to the product's dtype, alive until the GEMM is queued
  int64_t n = y.rank() > 0 ? y.shape().back() : 1;  // a product of two vectors is a scalar
  bool vec = bias && bias->numel() == n && (bias->rank() == 0 || bias->shape().back() == n) &&
             bias->is_contiguous();
  if (vec && bias->dtype() != y.dtype()) {  // the epilogue's bias has the product's dtype
    wide = Tensor::empty(y.dtype(), {n}, y.device());
    cast_into(bias->reshape({n}), wide, s);
    g.bias = wide.data();
  } else if (vec) {
    g.bias = bias->data();
  } else if (bias) {
    cast_into(bias->broadcast_to(y.shape()), y, s);
    g.beta = 1;
  }
  g.epilogue = vec ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  // cuBLASLt's activations in f64 are not computed in f64: there they run afterwards.
  if (y.dtype() != DType::f64) {
    if (act == "relu") g.epilogue = vec ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    if (act == "gelu_tanh")  // cuBLASLt's GELU is the tanh form
      g.epilogue = vec ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    if (act == "relu" || act == "gelu_tanh") act = "none";
  }
  matmul_into(a, b, y, s, g);
  activation_inplace(y, act, s);
}

bool fused_fits(const KernelQuery& q) {
  DType t = q.inputs[0].dtype;
  bool widen = q.outputs[0].dtype != t;  // an f32 product of 16-bit operands
  return (t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16) &&
         (!widen || t == DType::f16 || t == DType::bf16) &&
         activation_inplace_supported(q.attrs.get_string("activation"));
}

// dot_general: each operand permuted to [batch, free, contracting] (lhs) / [batch,
// contracting, free] (rhs) and seen as 3-D, a view where its dims merge, else a copy; the
// output [batch, lhs free, rhs free] is contiguous.
void dot_general_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                        std::span<Tensor> out) {
  cudaStream_t s = stream_of(ctx);
  auto axes = [&](const char* key, int64_t rank) {
    std::vector<int64_t> v;
    for (int64_t a : ctx.attrs.get_ints(key)) v.push_back(norm_axis(a, rank));
    return v;
  };
  auto free_axes = [](int64_t rank, const std::vector<int64_t>& b, const std::vector<int64_t>& c) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < rank; ++d)
      if (std::find(b.begin(), b.end(), d) == b.end() &&
          std::find(c.begin(), c.end(), d) == c.end())
        f.push_back(d);
    return f;
  };
  // t's dims in groups g0, g1, g2 as [size g0, size g1, size g2]: a view where t is
  // contiguous and each group is a run of t's axes in order (a weight gradient's [b, s, d]
  // contracted over b and s is [d, b*s] with strides [1, d], which cuBLAS reads
  // transposed), else a copy.
  auto as3 = [&](const Tensor& t, const std::vector<int64_t>& g0, const std::vector<int64_t>& g1,
                 const std::vector<int64_t>& g2) {
    std::array<const std::vector<int64_t>*, 3> groups{&g0, &g1, &g2};
    std::vector<int64_t> perm, shape;
    for (const auto* g : groups) {
      perm.insert(perm.end(), g->begin(), g->end());
      int64_t n = 1;
      for (int64_t d : *g) n *= t.shape()[size_t(d)];
      shape.push_back(n);
    }
    Tensor p = t.permute(perm);
    if (p.is_contiguous()) return p.reshape(shape);
    auto runs = [&] {
      for (const auto* g : groups)
        for (size_t i = 1; i < g->size(); ++i)
          if ((*g)[i] != (*g)[i - 1] + 1) return false;
      return true;
    };
    if (t.is_contiguous() && runs()) {
      // The groups in t's memory order (an empty one first), then permuted back.
      std::array<int64_t, 3> order{0, 1, 2};
      auto first = [&](int64_t k) {
        return groups[size_t(k)]->empty() ? -1 : groups[size_t(k)]->front();
      };
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t b) { return first(a) < first(b); });
      std::vector<int64_t> stored, back(3);
      for (size_t i = 0; i < 3; ++i) {
        stored.push_back(shape[size_t(order[i])]);
        back[size_t(order[i])] = int64_t(i);
      }
      return t.reshape(stored).permute(back);
    }
    Tensor c = Tensor::empty(p.dtype(), p.shape(), p.device());
    copy_strided(p, c, s);
    return c.reshape(shape);
  };
  const Tensor &lhs = in[0], &rhs = in[1];
  auto lb = axes("lhs_batch", lhs.rank()), lc = axes("lhs_contracting", lhs.rank());
  auto rb = axes("rhs_batch", rhs.rank()), rc = axes("rhs_contracting", rhs.rank());
  Tensor a = as3(lhs, lb, free_axes(lhs.rank(), lb, lc), lc);
  Tensor b = as3(rhs, rb, rc, free_axes(rhs.rank(), rb, rc));
  Tensor y = out[0];
  int64_t batch = a.shape()[0], m = a.shape()[1], k = a.shape()[2], n = b.shape()[2];
  if (y.numel() == 0) return;
  if (k == 0) return fill(y, 0, s);
  Operand oa = operand(a, s), ob = operand(b, s);
  Gemm g{a.dtype(), n, m, k, batch, &ob, &oa, y.data(), n, m * n};
  run_gemm(g, y.device(), s);
}

}  // namespace

int64_t tc_f32_gemm_runs() { return tc_runs.load(); }

void register_linalg(KernelRegistry& r) {
  add_kernel(r, "matmul", matmul_kernel, dtype_in(kFloat), {.strided_inputs = true});
  add_kernel(r, "dot_general", dot_general_kernel, dtype_in(kFloat), {.strided_inputs = true});
  add_kernel(r, "fused_matmul", fused_matmul_kernel, fused_fits, {.strided_inputs = true});
}

}  // namespace rlx::cuda

// Programs compiled before keep what they captured (a CUDA Graph replays its kernels), so
// the compile cache is emptied: a graph compiled from now on runs the new mode.
void rlx::cuda::set_f32_matmul(std::string_view mode) {
  F32Mode m = parse_f32_mode(mode);
  if (f32_mode() == m) return;
  settings().cuda_f32_gemm = std::string(mode);
  clear_compile_cache();
}
