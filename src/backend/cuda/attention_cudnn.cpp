// attention's forward and backward through cuDNN's fused flash attention (f16 / bf16), where
// cuDNN takes the problem: on sm_90 its wgmma kernels run attention about twice as fast as
// flash.cuh's mma.sync kernel (bench/RESULTS.md, "Attention on the GPU"). The op graphs
// are cuDNN's SDPA patterns, built through the backend API (cudnn_graph.h):
//   forward:  S = Q K^T (f32) -> * scale -> + bias -> causal: select(row + sk - sq >= col,
//             S, -inf) -> window: select(col + window > row, S, -2^30) -> softmax (max,
//             sub, exp, sum, div; stats = max + log(sum)) -> O = P V;
//   backward: from the forward's O and statistics, P = exp(S - stats) (S as above),
//             dV = P^T dO, dS = P (dO V^T - rowsum(dO O)) * scale, dK = dS^T Q, dQ = dS K,
//             dQ written directly (no f32 accumulator with atomic adds): cuDNN's
//             deterministic variant, so a step repeats bit for bit as flash_grad.cuh's does.
// Plans are made once per problem (shapes, strides, mask, scale) on its first run, which is
// eager (program_graphs.cpp), and kept; a problem cuDNN declines is remembered, said once on
// stderr, and runs flash.cuh's kernels. RLX_CUDNN_ATTENTION=0 turns the path off.
#include "backend/cuda/dnn.h"

#ifdef RLX_HAVE_CUDNN
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_util.h"
#include "rlx/settings.h"
#endif

namespace rlx::cuda {

#ifdef RLX_HAVE_CUDNN

namespace {

// One backend descriptor, destroyed with the object.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    RLX_DNN(cudnnBackendCreateDescriptor(type, &d_));
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  cudnnBackendDescriptor_t get() const { return d_; }

  Desc& set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n,
            const void* v) {
    RLX_DNN(cudnnBackendSetAttribute(d_, a, t, n, v));
    return *this;
  }
  Desc& i64(cudnnBackendAttributeName_t a, int64_t v) { return set(a, CUDNN_TYPE_INT64, 1, &v); }
  Desc& i64s(cudnnBackendAttributeName_t a, const std::vector<int64_t>& v) {
    return set(a, CUDNN_TYPE_INT64, int64_t(v.size()), v.data());
  }
  Desc& dtype(cudnnBackendAttributeName_t a, cudnnDataType_t v) {
    return set(a, CUDNN_TYPE_DATA_TYPE, 1, &v);
  }
  Desc& flag(cudnnBackendAttributeName_t a, bool v) { return set(a, CUDNN_TYPE_BOOLEAN, 1, &v); }
  Desc& desc(cudnnBackendAttributeName_t a, const Desc& v) {
    cudnnBackendDescriptor_t p = v.get();
    return set(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
  }
  Desc& finalize() {
    RLX_DNN(cudnnBackendFinalize(d_));
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A [b, h, s, d] view: dims and strides (elements).
struct View {
  std::array<int64_t, 4> dims, strides;
  std::vector<int64_t> d() const { return {dims.begin(), dims.end()}; }
  std::vector<int64_t> s() const { return {strides.begin(), strides.end()}; }
  // The last two dims swapped (K^T, V^T read in place).
  View t() const {
    return {{dims[0], dims[1], dims[3], dims[2]}, {strides[0], strides[1], strides[3], strides[2]}};
  }
};

// One problem: the views of q, k, v and the forward's output, the backward's dO and
// gradients, the forward's additive bias (dims 1 where it broadcasts), the mask (causal,
// window: keys fewer than `window` before the query's, 0 for no limit), the scale, and
// whether the statistics are stored (forward).
struct Problem {
  cudnnDataType_t type;
  bool backward = false, causal = false, stats = false, bias = false;
  int64_t window = 0;
  float scale = 1;
  View q, k, v, o, d_o, dq, dk, dv, b;

  std::vector<int64_t> key() const {
    std::vector<int64_t> key{int64_t(type),
                             backward,
                             causal,
                             stats,
                             bias,
                             window,
                             int64_t(std::bit_cast<uint32_t>(scale))};
    for (const View* a : {&q, &k, &v, &o, &d_o, &dq, &dk, &dv, &b}) {
      key.insert(key.end(), a->dims.begin(), a->dims.end());
      key.insert(key.end(), a->strides.begin(), a->strides.end());
    }
    return key;
  }
};

// The graph's tensors with data: unique ids (the variant pack's too).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kNegInf,
  kWindow,
  kFar,
  kBias,
  kSk,
  kSq,
  kDO,
  kDQ,
  kDK,
  kDV,
  kOne,
  kFirstVirtual = 100
};

// The descriptors of one op graph, kept alive until its plan is made.
struct Builder {
  const Problem& p;
  std::deque<Desc> keep;  // the descriptors handed out by reference stay put
  std::vector<cudnnBackendDescriptor_t> ops;
  int64_t next_uid = kFirstVirtual;

  const Desc& tensor(cudnnDataType_t t, std::vector<int64_t> dims, std::vector<int64_t> strides,
                     int64_t uid, bool is_virtual, bool by_value = false) {
    Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    d.dtype(CUDNN_ATTR_TENSOR_DATA_TYPE, t)
        .i64s(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
        .i64s(CUDNN_ATTR_TENSOR_STRIDES, strides)
        .i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
        .i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
        .flag(CUDNN_ATTR_TENSOR_IS_VIRTUAL, is_virtual);
    if (by_value) d.flag(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
    d.finalize();
    keep.push_back(std::move(d));
    return keep.back();
  }
  // An f32 (or `t`) intermediate of the scores' shape [b, h, sq, sk] or a row's [b, h, sq, 1].
  const Desc& scores(cudnnDataType_t t = CUDNN_DATA_FLOAT) {
    int64_t b = p.q.dims[0], h = p.q.dims[1], sq = p.q.dims[2], sk = p.k.dims[2];
    return tensor(t, {b, h, sq, sk}, {h * sq * sk, sq * sk, sk, 1}, next_uid++, true);
  }
  // A by-value scalar input (scale, -inf, 1, the mask's sizes): one descriptor per uid.
  std::map<int64_t, const Desc*> scalars;
  const Desc& scalar(cudnnDataType_t t, int64_t uid) {
    const Desc*& d = scalars[uid];
    if (!d) d = &tensor(t, {1, 1, 1, 1}, {1, 1, 1, 1}, uid, false, true);
    return *d;
  }
  const Desc& rows(bool is_virtual = true, int64_t uid = 0) {
    int64_t b = p.q.dims[0], h = p.q.dims[1], sq = p.q.dims[2];
    return tensor(CUDNN_DATA_FLOAT, {b, h, sq, 1}, {h * sq, sq, 1, 1}, uid ? uid : next_uid++,
                  is_virtual);
  }
  void add(Desc op) {
    op.finalize();
    ops.push_back(op.get());
    keep.push_back(std::move(op));
  }
  // y = mode(x, [b, [t]]); math in `prec`.
  void pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y,
                 const Desc* t = nullptr, cudnnDataType_t prec = CUDNN_DATA_FLOAT,
                 int64_t axis = -1) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, prec);
    if (axis >= 0) pw.i64(CUDNN_ATTR_POINTWISE_AXIS, axis);
    pw.finalize();
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
        .desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (b) op.desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op.desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    keep.push_back(std::move(pw));
    add(std::move(op));
  }
  void reduce(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
    Desc r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode)
        .dtype(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT)
        .finalize();
    Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r)
        .desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    keep.push_back(std::move(r));
    add(std::move(op));
  }
  void matmul(const Desc& a, const Desc& b, const Desc& c) {
    Desc m(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    m.dtype(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT).finalize();
    Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, m);
    keep.push_back(std::move(m));
    add(std::move(op));
  }

  void reshape(const Desc& x, const Desc& y) {
    Desc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x).desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    add(std::move(op));
  }
  // An operand of the problem with data.
  const Desc& operand(const View& v, int64_t uid) {
    return tensor(p.type, v.d(), v.s(), uid, false);
  }

  // Scaled scores, biased, masked where the causal mask hides a key: S = Q K^T * scale
  // (+ bias), the mask aligned bottom-right (query i sits at key i + sk - sq).
  const Desc& masked_scores(const Desc& q, const Desc& kt) {
    const Desc& s0 = scores();
    matmul(q, kt, s0);
    const Desc& s1 = scores();
    pointwise(CUDNN_POINTWISE_MUL, s0, &scalar(CUDNN_DATA_FLOAT, kScale), s1);
    if (p.bias) {
      const Desc& biased = scores();
      pointwise(CUDNN_POINTWISE_ADD, s1, &operand(p.b, kBias), biased);
      return masked(biased);
    }
    return masked(s1);
  }
  const Desc& masked(const Desc& s1) {
    if (!p.causal) return s1;
    const cudnnDataType_t index_type = CUDNN_DATA_INT32;  // GEN_INDEX's, as cuDNN 9's frontend
    const Desc* row = &scores(index_type);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s1, nullptr, *row, nullptr, CUDNN_DATA_FLOAT, 2);
    if (p.q.dims[2] != p.k.dims[2]) {
      for (auto [mode, uid] : {std::pair{CUDNN_POINTWISE_ADD, kSk}, {CUDNN_POINTWISE_SUB, kSq}}) {
        const Desc& shifted = scores(index_type);
        pointwise(mode, *row, &scalar(index_type, uid), shifted, nullptr, index_type);
        row = &shifted;
      }
    }
    const Desc& col = scores(index_type);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s1, nullptr, col, nullptr, CUDNN_DATA_FLOAT, 3);
    const Desc& seen = scores(CUDNN_DATA_BOOLEAN);
    pointwise(CUDNN_POINTWISE_CMP_GE, *row, &col, seen, nullptr, CUDNN_DATA_BOOLEAN);
    const Desc& out = scores();
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, s1, &scalar(CUDNN_DATA_FLOAT, kNegInf), out, &seen);
    return out;
  }
  // The sliding window's lower limit, as cuDNN's frontend builds it (queries and keys
  // aligned, sq == sk): s where col + window > row, else `fill`.
  const Desc& windowed(const Desc& s, int64_t fill) {
    if (p.window == 0) return s;
    const Desc& row = scores();
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, row, nullptr, CUDNN_DATA_FLOAT, 2);
    const Desc& col = scores();
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, col, nullptr, CUDNN_DATA_FLOAT, 3);
    const Desc& reach = scores();
    pointwise(CUDNN_POINTWISE_ADD, col, &scalar(CUDNN_DATA_FLOAT, kWindow), reach, nullptr,
              CUDNN_DATA_FLOAT, 3);
    const Desc& near = scores(CUDNN_DATA_BOOLEAN);
    pointwise(CUDNN_POINTWISE_CMP_GT, reach, &row, near, nullptr, CUDNN_DATA_BOOLEAN);
    const Desc& out = scores();
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, &scalar(CUDNN_DATA_FLOAT, fill), out, &near);
    return out;
  }

  // cuDNN's SDPA forward pattern (as its frontend emits it for cuDNN 9 before the
  // single-node SDPA): the statistics are computed even when not stored.
  void build() {
    if (p.backward) return build_backward();
    const Desc& q = operand(p.q, kQ);
    const Desc& kt = tensor(p.type, p.k.t().d(), p.k.t().s(), kK, false);
    const Desc& v = operand(p.v, kV);
    const Desc& o = operand(p.o, kO);
    const Desc& s = windowed(masked_scores(q, kt), kFar);
    const Desc& m = rows();
    reduce(CUDNN_REDUCE_TENSOR_MAX, s, m);
    const Desc& shifted = scores();
    pointwise(CUDNN_POINTWISE_SUB, s, &m, shifted);
    const Desc& e = scores();
    pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, e);
    const Desc& z = rows();
    reduce(CUDNN_REDUCE_TENSOR_ADD, e, z);
    const Desc& logz = rows();
    pointwise(CUDNN_POINTWISE_LOG, z, nullptr, logz);
    const Desc& stats = rows(!p.stats, p.stats ? int64_t(kStats) : 0);
    pointwise(CUDNN_POINTWISE_ADD, m, &logz, stats);
    // P in the inputs' type: bmm2's A operand must be (as the frontend notes).
    const Desc& prob = scores(p.type);
    pointwise(CUDNN_POINTWISE_DIV, e, &z, prob);
    matmul(prob, v, o);
  }

  // cuDNN's SDPA backward pattern (its frontend's, deterministic: dQ without an
  // accumulator).
  void build_backward() {
    int64_t b = p.q.dims[0], h = p.q.dims[1], sq = p.q.dims[2], sk = p.k.dims[2];
    int64_t dv = p.v.dims[3];
    const Desc& q = operand(p.q, kQ);
    const Desc& kt = tensor(p.type, p.k.t().d(), p.k.t().s(), kK, false);
    const Desc& vt = tensor(p.type, p.v.t().d(), p.v.t().s(), kV, false);
    const Desc& o = operand(p.o, kO);
    const Desc& d_o = operand(p.d_o, kDO);
    const Desc& one = scalar(CUDNN_DATA_FLOAT, kOne);
    // rowsum(dO * O): the softmax's backward term.
    const Desc& prod = tensor(CUDNN_DATA_FLOAT, {b, h, sq, dv}, {h * sq * dv, sq * dv, h * dv, 1},
                              next_uid++, true);
    pointwise(CUDNN_POINTWISE_MUL, d_o, &o, prod);
    const Desc& dot = rows();
    reduce(CUDNN_REDUCE_TENSOR_ADD, prod, dot);
    const Desc& delta = rows();
    pointwise(CUDNN_POINTWISE_MUL, dot, &one, delta);
    // P = exp(S - stats), then dV = P^T dO.
    const Desc& s = masked_scores(q, kt);
    const Desc& shifted = scores();
    pointwise(CUDNN_POINTWISE_SUB, s, &rows(false, kStats), shifted);
    const Desc& prob = scores();
    pointwise(CUDNN_POINTWISE_EXP, windowed(shifted, kNegInf), nullptr, prob);
    auto transposed = [&](const Desc& x) -> const Desc& {  // [b, h, sk, sq] in the io type
      const Desc& t =
          tensor(p.type, {b, h, sk, sq}, {h * sq * sk, sq * sk, 1, sk}, next_uid++, true);
      reshape(x, t);
      return t;
    };
    matmul(transposed(prob), d_o, operand(p.dv, kDV));
    // dS = P (dO V^T - delta) * scale, then dK = dS^T Q and dQ = dS K.
    const Desc& dp = scores();
    matmul(d_o, vt, dp);
    const Desc& dp1 = scores();  // times 1: the frontend's dropout-mask slot, kept as it emits it
    pointwise(CUDNN_POINTWISE_MUL, dp, &one, dp1);
    const Desc& dp2 = scores();
    pointwise(CUDNN_POINTWISE_SUB, dp1, &delta, dp2);
    const Desc& ds0 = scores();
    pointwise(CUDNN_POINTWISE_MUL, dp2, &prob, ds0);
    const Desc& ds = scores();
    pointwise(CUDNN_POINTWISE_MUL, ds0, &scalar(CUDNN_DATA_FLOAT, kScale), ds);
    matmul(transposed(ds), q, operand(p.dk, kDK));
    const Desc& k = tensor(p.type, p.k.d(), p.k.s(), next_uid++, true);
    reshape(kt, k);
    matmul(ds, k, operand(p.dq, kDQ));
  }
};

struct Plan {
  std::unique_ptr<Desc> plan;  // null: cuDNN declined the problem
  int64_t workspace = 0;
};

// The first of cuDNN's ranked engine configurations (heuristics mode A) for the problem's
// graph that makes a plan. (On the H200's cuDNN 9.14 the first one does, forward and
// backward.)
Plan make_plan(const Problem& p, cudnnHandle_t handle, std::string& why) {
  Plan out;
  Builder b{p};
  b.build();
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(b.ops.size()),
           b.ops.data());
  if (cudnnStatus_t st = cudnnBackendFinalize(graph.get()); st != CUDNN_STATUS_SUCCESS) {
    why = str_cat("the op graph: ", cudnnGetErrorString(st));
    return out;
  }
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (cudnnStatus_t st = cudnnBackendFinalize(heur.get()); st != CUDNN_STATUS_SUCCESS) {
    why = str_cat("the heuristics: ", cudnnGetErrorString(st));
    return out;
  }
  int64_t count = 0;
  RLX_DNN(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Desc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  if (count > 0)
    RLX_DNN(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data()));
  why = str_cat("none of cuDNN's ", count, " engine configurations");
  for (cudnnBackendDescriptor_t config : raw) {
    auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
        .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config);
    if (cudnnBackendFinalize(plan->get()) != CUDNN_STATUS_SUCCESS) continue;
    int64_t n = 0;
    RLX_DNN(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &n, &out.workspace));
    out.plan = std::move(plan);
    return out;
  }
  return out;
}

std::atomic<int64_t>& runs(bool backward) {
  static std::atomic<int64_t> n[2]{0, 0};
  return n[backward];
}

bool enabled() { return settings().cudnn_attention; }

// A [b, h, s, d] view of a rank-3 ([n, s, d]: h = 1) or rank-4 tensor that cuDNN reads in
// place: nothing broadcast (or, with `broadcast`, b and h as dims 1), unit last stride, rows
// 16-byte aligned.
bool view_of(const Tensor& t, View& v, bool broadcast = false) {
  const auto &sh = t.shape(), &st = t.strides();
  if (sh.size() == 4) {
    std::copy(sh.begin(), sh.end(), v.dims.begin());
    std::copy(st.begin(), st.end(), v.strides.begin());
  } else if (sh.size() == 3) {
    v.dims = {sh[0], 1, sh[1], sh[2]};
    v.strides = {st[0], sh[1] * sh[2], st[1], st[2]};
  } else {
    return false;
  }
  for (int i = 0; i < 4; ++i)
    if (v.strides[size_t(i)] == 0 && v.dims[size_t(i)] > 1) {
      if (!broadcast || i >= 2) return false;
      v.dims[size_t(i)] = 1;
    }
  for (int i = 0; i < 3; ++i)
    if (v.strides[size_t(i)] % 8) return false;
  return v.strides[3] == 1 && reinterpret_cast<uintptr_t>(t.data()) % 16 == 0;
}

// What both passes need: f16 / bf16; head dims multiples of 8 up to 128; k and v one batch
// with q; a causal row that sees no key (sq > sk) stays on rlx's kernels, where it is 0
// (cuDNN's softmax would be uniform).
bool takes(const Problem& p, DType dt) {
  if (!enabled() || (dt != DType::bf16 && dt != DType::f16)) return false;
  int64_t d = p.q.dims[3], dv = p.v.dims[3];
  if (d % 8 || dv % 8 || d > 128 || dv > 128 || p.k.dims[3] != d) return false;
  for (const View* x : {&p.k, &p.v})
    if (x->dims[0] != p.q.dims[0] || x->dims[1] != p.q.dims[1] || x->dims[2] != p.k.dims[2])
      return false;
  if (p.window && p.q.dims[2] != p.k.dims[2]) return false;  // the frontend's: top-left only
  return !(p.causal && p.q.dims[2] > p.k.dims[2]);
}

// Runs the problem's plan (made on its first call) with these tensors; false where cuDNN
// declined the problem.
bool execute(const Problem& p, Device dev, cudaStream_t stream, std::vector<int64_t> uids,
             std::vector<void*> ptrs) {
  dnn::Handle& h = dnn::handle(dev);
  std::lock_guard lock(h.mu);
  // Kept for the process, as the handle is: captured CUDA Graphs run the plans' kernels, and
  // no plan is destroyed after the CUDA runtime at exit.
  static auto* plans = new std::array<std::map<std::vector<int64_t>, Plan>, 64>;
  auto& made = (*plans)[size_t(dev.index)];
  const std::vector<int64_t> key = p.key();
  auto it = made.find(key);
  if (it == made.end()) {
    std::string why;
    Plan plan;
    try {
      plan = make_plan(p, h.handle, why);
    } catch (const DeviceError& e) {
      why = e.what();
    }
    if (!plan.plan)  // said once per problem: the op still runs, on flash.cuh's kernels
      std::fprintf(stderr, "rlx: cuDNN declined attention%s [%lld, %lld, %lld, %lld]: %s\n",
                   p.backward ? "'s backward" : "", (long long)p.q.dims[0], (long long)p.q.dims[1],
                   (long long)p.q.dims[2], (long long)p.q.dims[3], why.c_str());
    it = made.emplace(key, std::move(plan)).first;
  }
  const Plan& plan = it->second;
  if (!plan.plan) return false;
  RLX_DNN(cudnnSetStream(h.handle, stream));
  // From the device's pool, in stream order (as conv's workspaces).
  Tensor ws = Tensor::empty(DType::u8, {std::max<int64_t>(plan.workspace, 1)}, dev);
  // The scalars, by value: the scale, 1, -inf and the bottom-right shift's sizes.
  float scale = p.scale, one = 1, neg = std::numeric_limits<float>::lowest();
  float window = float(p.window), far = -1024.f * 1024.f * 1024.f;  // the frontend's fill
  int32_t sk = int32_t(p.k.dims[2]), sq = int32_t(p.q.dims[2]);
  uids.push_back(kScale);
  ptrs.push_back(&scale);
  if (p.backward) {
    uids.push_back(kOne);
    ptrs.push_back(&one);
  }
  if (p.causal) {
    uids.push_back(kNegInf);
    ptrs.push_back(&neg);
    if (p.q.dims[2] != p.k.dims[2]) {
      uids.insert(uids.end(), {kSk, kSq});
      ptrs.insert(ptrs.end(), {&sk, &sq});
    }
  }
  if (p.window) {
    uids.push_back(kWindow);
    ptrs.push_back(&window);
    if (!p.backward) {
      uids.push_back(kFar);
      ptrs.push_back(&far);
    }
  }
  void* wsp = ws.data();
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()),
           ptrs.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp)
      .finalize();
  RLX_DNN(cudnnBackendExecute(h.handle, plan.plan->get(), pack.get()));
  runs(p.backward).fetch_add(1, std::memory_order_relaxed);
  return true;
}

void* ptr(const Tensor& t) { return const_cast<void*>(t.data()); }

}  // namespace

bool cudnn_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* bias,
                     const Tensor& y, float* lse, double scale, bool causal, int64_t window,
                     cudaStream_t stream) {
  Problem p{};
  p.type = q.dtype() == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  if (!view_of(q, p.q) || !view_of(k, p.k) || !view_of(v, p.v) || !view_of(y, p.o)) return false;
  p.bias = bias != nullptr;
  if (bias && (bias->dtype() != q.dtype() || !view_of(*bias, p.b, true) ||
               p.b.dims[2] != p.q.dims[2] || p.b.dims[3] != p.k.dims[2]))
    return false;
  p.causal = causal;
  p.window = window;
  p.stats = lse != nullptr;
  p.scale = float(scale);
  if (!takes(p, q.dtype())) return false;
  std::vector<int64_t> uids{kQ, kK, kV, kO};
  std::vector<void*> ptrs{ptr(q), ptr(k), ptr(v), ptr(y)};
  if (bias) {
    uids.push_back(kBias);
    ptrs.push_back(ptr(*bias));
  }
  if (lse) {
    uids.push_back(kStats);
    ptrs.push_back(lse);
  }
  return execute(p, y.device(), stream, std::move(uids), std::move(ptrs));
}

bool cudnn_attention_grad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                          const Tensor& dy, const Tensor& lse, const Tensor& dq, const Tensor& dk,
                          const Tensor& dv, double scale, bool causal, int64_t window,
                          cudaStream_t stream) {
  Problem p{};
  p.type = q.dtype() == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  p.backward = true;
  for (auto [t, x] : {std::pair{&q, &p.q},
                      {&k, &p.k},
                      {&v, &p.v},
                      {&y, &p.o},
                      {&dy, &p.d_o},
                      {&dq, &p.dq},
                      {&dk, &p.dk},
                      {&dv, &p.dv}})
    if (!view_of(*t, *x)) return false;
  p.causal = causal;
  p.window = window;
  p.scale = float(scale);
  // The statistics as the forward stores them: [b, h, sq] f32, dense.
  if (!takes(p, q.dtype()) || p.o.dims != p.d_o.dims || p.dq.dims != p.q.dims ||
      p.dk.dims != p.k.dims || p.dv.dims != p.v.dims || lse.dtype() != DType::f32 ||
      !lse.is_contiguous() || lse.numel() != p.q.dims[0] * p.q.dims[1] * p.q.dims[2])
    return false;
  return execute(p, dq.device(), stream, {kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV},
                 {ptr(q), ptr(k), ptr(v), ptr(y), ptr(dy), ptr(lse), ptr(dq), ptr(dk), ptr(dv)});
}

int64_t cudnn_attention_runs() { return runs(false).load(); }
int64_t cudnn_attention_grad_runs() { return runs(true).load(); }

#else

bool cudnn_attention(const Tensor&, const Tensor&, const Tensor&, const Tensor*, const Tensor&,
                     float*, double, bool, int64_t, cudaStream_t) {
  return false;
}
bool cudnn_attention_grad(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, bool,
                          int64_t, cudaStream_t) {
  return false;
}
int64_t cudnn_attention_runs() { return 0; }
int64_t cudnn_attention_grad_runs() { return 0; }

#endif

}  // namespace rlx::cuda
