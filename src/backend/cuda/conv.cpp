// conv and conv_transpose through cuDNN's convolution API: cudnnConvolutionForward, and for
// conv_transpose cudnnConvolutionBackwardData (the data gradient of the conv that maps
// conv_transpose's output back to its input). f32, f64, f16 and bf16, 1-D to 3-D, groups and
// dilations; f16 / bf16 accumulate in f32 (tensor cores), f32 is exact f32 unless
// RLX_CUDA_TF32=1 (as matmul).
//
// cuDNN pads symmetrically. A conv whose padding is not becomes a conv of a zero-padded copy
// of the input carrying the difference. conv_transpose crops its output by its padding, and
// output_padding may reach back into the cropped end, so it runs with the padding cuDNN can
// take into a scratch output, from which the window we want is copied.
//
// The bias is broadcast into the output first and the conv added to it (beta = 1): f16 and
// bf16 outputs are rounded once, as on the CPU. Algorithms come from cuDNN's heuristics,
// cached per problem with their descriptors. FFT and Winograd are left out: their transforms
// spread a NaN or an infinity to outputs whose windows do not hold it, and they round
// unlike the direct sum the CPU computes. A problem cuDNN does not take (no algorithm, or
// sizes past its 32-bit limits) runs the CPU kernel on host copies.
#include "backend/cuda/cuda_util.h"
#include "backend/cuda/dnn.h"
#include "backend/cuda/families.h"

#ifdef RLX_HAVE_CUDNN

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <type_traits>

#include "backend/cpu/window.h"
#include "rlx/session.h"
#include "rlx/settings.h"
#endif

namespace rlx::cuda {

#ifdef RLX_HAVE_CUDNN

namespace {

using dnn::not_supported;

// The largest workspace an algorithm may ask for; the heuristics list others too.
constexpr size_t kMaxWorkspace = size_t(1) << 30;

bool tf32() { return settings().cuda_tf32; }

// One problem as cuDNN sees it: the forward conv from `in` to `out` ([N, C, spatial...] with
// at least two spatial dims) through `filter`. For conv_transpose, `in` is its output and
// `out` its input.
struct Problem {
  bool transpose = false;
  DType dtype = DType::f32;
  int64_t groups = 1;
  std::vector<int64_t> in, out, filter, pad, stride, dil;

  std::vector<int64_t> key() const {
    std::vector<int64_t> k{transpose, int64_t(dtype), groups, tf32(), int64_t(in.size())};
    for (const auto* v : {&in, &out, &filter, &pad, &stride, &dil})
      k.insert(k.end(), v->begin(), v->end());
    return k;
  }
  // Whether every size fits cuDNN's int dims and strides.
  bool fits() const {
    for (const auto* v : {&in, &out, &filter}) {
      int64_t n = 1;
      for (int64_t d : *v) n *= d;
      if (n > INT_MAX) return false;
    }
    return true;
  }
};

// The descriptors of a problem and the algorithms to try, best first.
struct Plan {
  cudnnTensorDescriptor_t in = nullptr, out = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  struct Algo {
    int algo;
    cudnnMathType_t math;
    size_t workspace;
    bool exact;  // deterministic: no atomics
  };
  std::vector<Algo> algos;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (in) cudnnDestroyTensorDescriptor(in);
    if (out) cudnnDestroyTensorDescriptor(out);
    if (filter) cudnnDestroyFilterDescriptor(filter);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// The plans made on a device's handle (guarded by the handle's mutex), kept for the process
// as the handle is: no descriptor is destroyed after the CUDA runtime at exit.
std::map<std::vector<int64_t>, std::unique_ptr<Plan>>& plans(Device d) {
  static auto* all = new std::array<std::map<std::vector<int64_t>, std::unique_ptr<Plan>>, 64>;
  return (*all)[size_t(d.index)];
}

cudnnDataType_t dnn_type(DType t) {
  switch (t) {
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

std::vector<int> ints(const std::vector<int64_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

cudnnTensorDescriptor_t tensor_desc(cudnnDataType_t dt, const std::vector<int64_t>& dims) {
  std::vector<int> d = ints(dims), s(d.size(), 1);
  for (size_t i = d.size() - 1; i-- > 0;) s[i] = s[i + 1] * d[i + 1];
  cudnnTensorDescriptor_t t;
  RLX_DNN(cudnnCreateTensorDescriptor(&t));
  RLX_DNN(cudnnSetTensorNdDescriptor(t, dt, int(d.size()), d.data(), s.data()));
  return t;
}

// The algorithms cuDNN's heuristics rank for a problem whose descriptors are set, keeping
// those that compute the direct sum (no FFT, no Winograd), fit kMaxWorkspace and, for exact
// f32, use no tensor cores; deterministic ones first.
template <class Perf>
std::vector<Plan::Algo> rank_algos(const Problem& p, const Plan& plan, cudnnHandle_t h) {
  constexpr bool kFwd = std::is_same_v<Perf, cudnnConvolutionFwdAlgoPerf_t>;
  constexpr int kCount =
      kFwd ? int(CUDNN_CONVOLUTION_FWD_ALGO_COUNT) : int(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  std::array<Perf, kCount> perf{};
  int found = 0;
  cudnnStatus_t status;
  if constexpr (kFwd)
    status = cudnnGetConvolutionForwardAlgorithm_v7(h, plan.in, plan.filter, plan.conv, plan.out,
                                                    kCount, &found, perf.data());
  else
    status = cudnnGetConvolutionBackwardDataAlgorithm_v7(h, plan.filter, plan.out, plan.conv,
                                                         plan.in, kCount, &found, perf.data());
  if (not_supported(status)) return {};
  dnn::check(status, kFwd ? "cudnnGetConvolutionForwardAlgorithm_v7"
                          : "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  bool exact_f32 = p.dtype == DType::f32 && !tf32();
  std::vector<Plan::Algo> algos;
  for (int i = 0; i < found; ++i) {
    const Perf& r = perf[size_t(i)];
    if (r.status != CUDNN_STATUS_SUCCESS) continue;
    bool transform;
    if constexpr (kFwd)
      transform = r.algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
                  r.algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
                  r.algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
                  r.algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    else
      transform = r.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
                  r.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
                  r.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
                  r.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    bool tensor_op =
        r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (transform || (exact_f32 && tensor_op)) continue;
    // Exact f32 keeps FMA math: cuDNN's default math may take TF32 on sm_80 and later.
    cudnnMathType_t math = exact_f32 ? CUDNN_FMA_MATH : r.mathType;
    if (cudnnSetConvolutionMathType(plan.conv, math) != CUDNN_STATUS_SUCCESS) continue;
    size_t ws = 0;
    cudnnStatus_t s;
    if constexpr (kFwd)
      s = cudnnGetConvolutionForwardWorkspaceSize(h, plan.in, plan.filter, plan.conv, plan.out,
                                                  r.algo, &ws);
    else
      s = cudnnGetConvolutionBackwardDataWorkspaceSize(h, plan.filter, plan.out, plan.conv, plan.in,
                                                       r.algo, &ws);
    if (s != CUDNN_STATUS_SUCCESS || ws > kMaxWorkspace) continue;
    algos.push_back({int(r.algo), math, ws, r.determinism == CUDNN_DETERMINISTIC});
  }
  // Reproducible results first: the same inputs give the same bits on every run.
  std::stable_partition(algos.begin(), algos.end(), [](const Plan::Algo& a) { return a.exact; });
  return algos;
}

std::unique_ptr<Plan> make_plan(const Problem& p, cudnnHandle_t h) {
  auto plan = std::make_unique<Plan>();
  cudnnDataType_t dt = dnn_type(p.dtype);
  plan->in = tensor_desc(dt, p.in);
  plan->out = tensor_desc(dt, p.out);
  std::vector<int> f = ints(p.filter);
  RLX_DNN(cudnnCreateFilterDescriptor(&plan->filter));
  RLX_DNN(cudnnSetFilterNdDescriptor(plan->filter, dt, CUDNN_TENSOR_NCHW, int(f.size()), f.data()));
  std::vector<int> pad = ints(p.pad), stride = ints(p.stride), dil = ints(p.dil);
  RLX_DNN(cudnnCreateConvolutionDescriptor(&plan->conv));
  RLX_DNN(cudnnSetConvolutionNdDescriptor(
      plan->conv, int(pad.size()), pad.data(), stride.data(), dil.data(), CUDNN_CROSS_CORRELATION,
      p.dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
  RLX_DNN(cudnnSetConvolutionGroupCount(plan->conv, int(p.groups)));
  cudnnMathType_t math = p.dtype == DType::f16 || p.dtype == DType::bf16 ? CUDNN_TENSOR_OP_MATH
                         : p.dtype == DType::f32 && !tf32()              ? CUDNN_FMA_MATH
                                                                         : CUDNN_DEFAULT_MATH;
  RLX_DNN(cudnnSetConvolutionMathType(plan->conv, math));
  // The sizes worked out here must be the ones cuDNN derives from them.
  std::vector<int> got(p.out.size());
  RLX_DNN(cudnnGetConvolutionNdForwardOutputDim(plan->conv, plan->in, plan->filter, int(got.size()),
                                                got.data()));
  std::vector<int64_t> got64(got.begin(), got.end());
  if (got64 != p.out)
    fail<DeviceError>(p.transpose ? "conv_transpose" : "conv", "expected cuDNN's output dims ",
                      ints_str(p.out), ", got ", ints_str(got64));
  plan->algos = p.transpose ? rank_algos<cudnnConvolutionBwdDataAlgoPerf_t>(p, *plan, h)
                            : rank_algos<cudnnConvolutionFwdAlgoPerf_t>(p, *plan, h);
  return plan;
}

// Runs the problem: out = alpha * conv(in) + beta * out (conv_transpose: in = alpha *
// conv_transpose(out) + beta * in). False when cuDNN takes none of its algorithms.
bool run_problem(const Problem& p, const void* in, const void* w, void* out, bool accumulate,
                 Device dev, cudaStream_t stream) {
  dnn::Handle& st = dnn::handle(dev);
  std::lock_guard lock(st.mu);
  auto& made = plans(dev);
  auto it = made.find(p.key());
  if (it == made.end()) {
    if (made.size() >= 1024) made.clear();
    it = made.emplace(p.key(), make_plan(p, st.handle)).first;
  }
  Plan& plan = *it->second;
  RLX_DNN(cudnnSetStream(st.handle, stream));
  double one64 = 1, zero64 = 0;
  float one32 = 1, zero32 = 0;
  bool f64 = p.dtype == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = accumulate ? alpha : f64 ? static_cast<const void*>(&zero64) : &zero32;
  while (!plan.algos.empty()) {
    const Plan::Algo& a = plan.algos.front();
    RLX_DNN(cudnnSetConvolutionMathType(plan.conv, a.math));
    // From the device's pool, in stream order: freed when this call returns, after the
    // launch that uses it.
    Tensor ws = Tensor::empty(DType::u8, {int64_t(a.workspace)}, dev);
    cudnnStatus_t s =
        p.transpose ? cudnnConvolutionBackwardData(st.handle, alpha, plan.filter, w, plan.out, in,
                                                   plan.conv, cudnnConvolutionBwdDataAlgo_t(a.algo),
                                                   ws.data(), a.workspace, beta, plan.in, out)
                    : cudnnConvolutionForward(st.handle, alpha, plan.in, in, plan.filter, w,
                                              plan.conv, cudnnConvolutionFwdAlgo_t(a.algo),
                                              ws.data(), a.workspace, beta, plan.out, out);
    if (not_supported(s)) {  // listed but declined: the next one
      plan.algos.erase(plan.algos.begin());
      continue;
    }
    dnn::check(s, p.transpose ? "cudnnConvolutionBackwardData" : "cudnnConvolutionForward");
    return true;
  }
  return false;
}

// t itself when cuDNN may read it with vector loads, else an aligned copy (a contiguous view
// at an odd offset).
Tensor aligned(const Tensor& t, cudaStream_t s) {
  if (reinterpret_cast<uintptr_t>(t.data()) % 16 == 0) return t;
  Tensor c = Tensor::empty(t.dtype(), t.shape(), t.device());
  copy_strided(t, c, s);
  return c;
}

// t = the bias broadcast over t's [N, M, O...] (then the conv is added to it), or nothing.
bool seed_bias(const Tensor* bias, const Tensor& t, cudaStream_t s) {
  if (!bias) return false;
  std::vector<int64_t> shape(t.shape().size(), 1);
  shape[1] = bias->numel();
  copy_strided(bias->reshape(shape).broadcast_to(t.shape()), t, s);
  return true;
}

// The CPU kernel on host copies: for a problem cuDNN does not take (found only when the
// node runs, so the dispatch report counts it as native). Said on stderr, once per op and
// input type, so that it never passes unseen.
void run_on_host(const KernelContext& ctx, std::span<const Tensor> in, Tensor& y) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::string what = str_cat(ctx.op.name, " ", in[0].type().str());
  {
    std::lock_guard lock(mu);
    if (said.insert(what).second)
      std::fprintf(stderr, "rlx: %s: cuDNN takes no algorithm for it; running on the host\n",
                   what.c_str());
  }
  register_cpu_kernels();
  std::vector<TensorType> types, out_types{y.type()};
  std::vector<Tensor> hin;
  for (const Tensor& t : in) {
    types.push_back(t.type());
    hin.push_back(t.to(Device::cpu()));
  }
  KernelQuery q{ctx.op, ctx.attrs, types, out_types};
  const Kernel* k = KernelRegistry::global().find(q, DeviceKind::cpu);
  if (!k)
    fail<NotSupported>(ctx.op.name, "expected a cuDNN algorithm or a CPU kernel for ",
                       y.type().str(), ", got neither");
  std::vector<Tensor> hout{Tensor::empty(y.dtype(), y.shape())};
  KernelContext hctx{ctx.op, ctx.attrs, Device::cpu()};
  k->fn(hctx, hin, hout);
  copy_strided(hout[0].to(y.device()), y, stream_of(ctx));
}

// conv: x [N, C, D...], w [M, C / groups, K...], optional bias [M] -> y [N, M, O...].
void conv_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &x = in[0], &w = in[1];
  const Tensor* bias = in.size() > 2 ? &in[2] : nullptr;
  Tensor& y = out[0];
  cudaStream_t s = stream_of(ctx);
  if (y.numel() == 0) return;
  if (x.numel() == 0) {  // no input channels: the bias alone
    if (!seed_bias(bias, y, s)) fill(y, 0, s);
    return;
  }
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  cpu::Window win = cpu::make_window(ctx.attrs, x.shape(), y.shape(), kernel);
  size_t k = size_t(win.k), nd = std::max<size_t>(k, 2);
  Problem p;
  p.dtype = x.dtype();
  p.groups = ctx.attrs.get_int("groups");
  p.in = {x.shape()[0], x.shape()[1]};
  p.out = {y.shape()[0], y.shape()[1]};
  p.filter = {w.shape()[0], w.shape()[1]};
  // Where the padding is not symmetric, the difference goes into a padded copy of x.
  std::vector<int64_t> padded = x.shape();
  bool pad_copy = false;
  for (size_t i = 3 - nd; i < 3; ++i) {
    int64_t pb = win.pad[i], pe = win.pad_end[i], sym = std::min(pb, pe);
    p.in.push_back(win.in[i] + pb + pe - 2 * sym);
    p.out.push_back(win.out[i]);
    p.filter.push_back(win.ker[i]);
    p.pad.push_back(sym);
    p.stride.push_back(win.stride[i]);
    p.dil.push_back(win.dil[i]);
    if (i >= 3 - k) padded[2 + i - (3 - k)] = p.in.back();
    pad_copy |= pb != pe;
  }
  if (!p.fits()) return run_on_host(ctx, in, y);
  Tensor xin = aligned(x, s), wa = aligned(w, s);
  if (pad_copy) {
    xin = Tensor::empty(x.dtype(), padded, x.device());
    fill(xin, 0, s);
    Tensor inner = xin;
    for (size_t j = 0; j < k; ++j) {
      size_t i = 3 - k + j;
      int64_t front = win.pad[i] - std::min(win.pad[i], win.pad_end[i]);
      inner = inner.slice(int64_t(j + 2), front, front + win.in[i]);
    }
    copy_strided(x, inner, s);
  }
  bool acc = seed_bias(bias, y, s);
  if (!run_problem(p, xin.data(), wa.data(), y.data(), acc, y.device(), s)) run_on_host(ctx, in, y);
}

// conv_transpose: x [N, C, D...], w [C, M / groups, K...], optional bias [M] -> y [N, M,
// O...], y[o] = full[o + pad_begin] where full is the uncropped transposed conv, of
// length X = s * (D - 1) + dilated kernel (0 past it). cuDNN computes full[j + p] for j < O'
// with a symmetric p and O' in [X - 2p, X - 2p + s): per dim the largest p <= both pads
// that still reaches every full position y needs, and O' as close to y's window as allowed.
void conv_transpose_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                           std::span<Tensor> out) {
  const Tensor &x = in[0], &w = in[1];
  const Tensor* bias = in.size() > 2 ? &in[2] : nullptr;
  Tensor& y = out[0];
  cudaStream_t s = stream_of(ctx);
  if (y.numel() == 0) return;
  if (x.numel() == 0) {
    if (!seed_bias(bias, y, s)) fill(y, 0, s);
    return;
  }
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  cpu::Window win = cpu::make_window(ctx.attrs, x.shape(), y.shape(), kernel, true);
  size_t k = size_t(win.k), nd = std::max<size_t>(k, 2);
  Problem p;
  p.transpose = true;
  p.dtype = x.dtype();
  p.groups = ctx.attrs.get_int("groups");
  p.in = {y.shape()[0], y.shape()[1]};
  p.out = {x.shape()[0], x.shape()[1]};
  p.filter = {w.shape()[0], w.shape()[1]};
  std::vector<int64_t> scratch_shape = y.shape(), offset(k), length(k);
  bool direct = true;
  for (size_t i = 3 - nd; i < 3; ++i) {
    int64_t st = win.stride[i], d = win.in[i], o = win.out[i], pb = win.pad[i];
    int64_t full = st * (d - 1) + win.dil[i] * (win.ker[i] - 1) + 1;
    int64_t need = std::min(pb + o, full);  // y reads full[pb, need)
    int64_t sym = std::min({pb, win.pad_end[i], full + st - 1 - need, (full - 1) / 2});
    int64_t len = std::clamp(o + pb - sym, full - 2 * sym, full - 2 * sym + st - 1);
    p.in.push_back(len);
    p.out.push_back(d);
    p.filter.push_back(win.ker[i]);
    p.pad.push_back(sym);
    p.stride.push_back(st);
    p.dil.push_back(win.dil[i]);
    direct &= pb == sym && len == o;
    if (i >= 3 - k) {
      size_t j = i - (3 - k);
      scratch_shape[j + 2] = len;
      offset[j] = pb - sym;
      length[j] = std::min(o, len - offset[j]);
    }
  }
  if (!p.fits()) return run_on_host(ctx, in, y);
  Tensor target = direct ? y : Tensor::empty(y.dtype(), scratch_shape, y.device());
  bool acc = seed_bias(bias, target, s);
  Tensor xa = aligned(x, s), wa = aligned(w, s);
  if (!run_problem(p, xa.data(), wa.data(), target.data(), acc, y.device(), s))
    return run_on_host(ctx, in, y);
  if (direct) return;
  // y: the bias (or 0) where full has nothing, the scratch's window elsewhere.
  if (!seed_bias(bias, y, s)) fill(y, 0, s);
  Tensor from = target, to = y;
  for (size_t j = 0; j < k; ++j) {
    if (length[j] <= 0) return;
    from = from.slice(int64_t(j + 2), offset[j], offset[j] + length[j]);
    to = to.slice(int64_t(j + 2), 0, length[j]);
  }
  copy_strided(from, to, s);
}

bool supported(const KernelQuery& q) {
  DType t = q.inputs[0].dtype;
  int64_t r = q.inputs[0].rank();
  return is_float(t) && r >= 3 && r <= 5;
}

}  // namespace

void register_conv(KernelRegistry& r) {
  add_kernel(r, "conv", conv_kernel, supported);
  add_kernel(r, "conv_transpose", conv_transpose_kernel, supported);
}

#else

void register_conv(KernelRegistry&) {}  // no cuDNN: conv runs on the host path

#endif

}  // namespace rlx::cuda
