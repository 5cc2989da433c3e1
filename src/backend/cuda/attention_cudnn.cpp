// attention's forward through cuDNN's fused flash attention (f16 / bf16), where cuDNN takes
// the problem: on sm_90 its wgmma kernels run the GPT-2-small forward's attention in ~46 us
// per layer against ~98 for flash.cuh's mma.sync kernel. The op graph is cuDNN's SDPA
// pattern, built through the backend API (cudnn_graph.h):
//   S = Q K^T (f32) -> * scale -> causal: select(row + sk - sq >= col, S, -inf)
//     -> softmax (max, sub, exp, sum, div; stats = max + log(sum)) -> O = P V.
// Plans are made once per problem (shapes, strides, mask, scale) on its first run, which is
// eager (program_graphs.cpp), and kept; a problem cuDNN declines is remembered, said once on
// stderr, and runs flash.cuh's kernel. RLX_CUDNN_ATTENTION=0 turns the path off.
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
#endif

namespace rlx::gpu {

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

// One problem: [b, h, s, d] views of q, k, v and the output with their strides
// (elements), the mask, the scale, and whether the statistics are stored.
struct Problem {
  cudnnDataType_t type;
  std::array<int64_t, 4> q, k, v, o, qs, ks, vs, os;  // dims, then strides
  bool causal, stats;
  float scale;

  std::vector<int64_t> key() const {
    std::vector<int64_t> key{int64_t(type), causal, stats, int64_t(std::bit_cast<uint32_t>(scale))};
    for (const auto* a : {&q, &k, &v, &o, &qs, &ks, &vs, &os})
      key.insert(key.end(), a->begin(), a->end());
    return key;
  }
};

// The graph's tensors with data: unique ids (the variant pack's too).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kSk, kSq, kFirstVirtual = 100 };

// The descriptors of one op graph, kept alive until its plan is made.
struct Builder {
  const Problem& p;
  cudnnDataType_t index_type;  // GEN_INDEX's output: INT32 (newer graphs) or FLOAT
  std::deque<Desc> keep;       // the descriptors handed out by reference stay put
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
    int64_t b = p.q[0], h = p.q[1], sq = p.q[2], sk = p.k[2];
    return tensor(t, {b, h, sq, sk}, {h * sq * sk, sq * sk, sk, 1}, next_uid++, true);
  }
  const Desc& rows(bool is_virtual = true, int64_t uid = 0) {
    int64_t b = p.q[0], h = p.q[1], sq = p.q[2];
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

  // cuDNN's SDPA forward pattern (as its frontend emits it for cuDNN 9 before the
  // single-node SDPA): the statistics are computed even when not stored.
  void build() {
    auto v4 = [](const std::array<int64_t, 4>& a) {
      return std::vector<int64_t>(a.begin(), a.end());
    };
    const Desc& q = tensor(p.type, v4(p.q), v4(p.qs), kQ, false);
    // K^T: [b, h, d, sk], the last two strides swapped.
    const Desc& kt = tensor(p.type, {p.k[0], p.k[1], p.k[3], p.k[2]},
                            {p.ks[0], p.ks[1], p.ks[3], p.ks[2]}, kK, false);
    const Desc& v = tensor(p.type, v4(p.v), v4(p.vs), kV, false);
    const Desc& o = tensor(p.type, v4(p.o), v4(p.os), kO, false);
    const Desc& scale = tensor(CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, kScale, false, true);
    const Desc& s0 = scores();
    matmul(q, kt, s0);
    const Desc& s1 = scores();
    pointwise(CUDNN_POINTWISE_MUL, s0, &scale, s1);
    const Desc* s = &s1;
    if (p.causal) {
      const Desc* row = &scores(index_type);
      pointwise(CUDNN_POINTWISE_GEN_INDEX, s1, nullptr, *row, nullptr, CUDNN_DATA_FLOAT, 2);
      if (p.q[2] != p.k[2]) {  // aligned bottom-right: query i sits at key i + sk - sq
        for (auto [mode, uid] : {std::pair{CUDNN_POINTWISE_ADD, kSk}, {CUDNN_POINTWISE_SUB, kSq}}) {
          const Desc& n = tensor(index_type, {1, 1, 1, 1}, {1, 1, 1, 1}, uid, false, true);
          const Desc& shifted = scores(index_type);
          pointwise(mode, *row, &n, shifted, nullptr, index_type);
          row = &shifted;
        }
      }
      const Desc& col = scores(index_type);
      pointwise(CUDNN_POINTWISE_GEN_INDEX, s1, nullptr, col, nullptr, CUDNN_DATA_FLOAT, 3);
      const Desc& seen = scores(CUDNN_DATA_BOOLEAN);
      pointwise(CUDNN_POINTWISE_CMP_GE, *row, &col, seen, nullptr, CUDNN_DATA_BOOLEAN);
      const Desc& neg = tensor(CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, kNegInf, false, true);
      const Desc& masked = scores();
      pointwise(CUDNN_POINTWISE_BINARY_SELECT, s1, &neg, masked, &seen);
      s = &masked;
    }
    const Desc& m = rows();
    reduce(CUDNN_REDUCE_TENSOR_MAX, *s, m);
    const Desc& shifted = scores();
    pointwise(CUDNN_POINTWISE_SUB, *s, &m, shifted);
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
};

struct Plan {
  std::unique_ptr<Desc> plan;  // null: cuDNN declined the problem
  int64_t workspace = 0;
  cudnnDataType_t index_type = CUDNN_DATA_INT32;  // of the graph's row and column indices
};

// The first of cuDNN's ranked engine configurations for the graph that makes a plan.
Plan make_plan(const Problem& p, cudnnHandle_t handle, std::string& why) {
  Plan out;
  for (cudnnDataType_t index_type : {CUDNN_DATA_INT32, CUDNN_DATA_FLOAT}) {
    Builder b{p, index_type};
    b.build();
    Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(b.ops.size()),
             b.ops.data());
    if (cudnnStatus_t st = cudnnBackendFinalize(graph.get()); st != CUDNN_STATUS_SUCCESS) {
      why = cat("the op graph: ", cudnnGetErrorString(st));
      continue;
    }
    // Heuristics A, then B (its finer model) where A lists nothing.
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B}) {
      Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      heur.desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
      if (cudnnStatus_t st = cudnnBackendFinalize(heur.get()); st != CUDNN_STATUS_SUCCESS) {
        why = cat("the heuristics: ", cudnnGetErrorString(st));
        continue;
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
      why = cat("none of cuDNN's ", count, " engine configurations");
      for (int64_t i = 0; i < count; ++i) {
        auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
            .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                 &raw[size_t(i)]);
        if (cudnnBackendFinalize(plan->get()) != CUDNN_STATUS_SUCCESS) continue;
        int64_t n = 0;
        RLX_DNN(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                         CUDNN_TYPE_INT64, 1, &n, &out.workspace));
        out.plan = std::move(plan);
        out.index_type = index_type;
        return out;
      }
    }
  }
  return out;
}

std::atomic<int64_t>& runs() {
  static std::atomic<int64_t> n{0};
  return n;
}

bool enabled() {
  static const bool on = [] {
    const char* e = std::getenv("RLX_CUDNN_ATTENTION");
    return !(e && std::string_view(e) == "0");
  }();
  return on;
}

// [b, h, s, d] dims and strides of a rank-3 ([n, s, d]: h = 1) or rank-4 view; false for
// other ranks and broadcast batch dims.
bool dims4(const Tensor& t, std::array<int64_t, 4>& dims, std::array<int64_t, 4>& strides) {
  const auto &sh = t.shape(), &st = t.strides();
  if (sh.size() == 4) {
    std::copy(sh.begin(), sh.end(), dims.begin());
    std::copy(st.begin(), st.end(), strides.begin());
  } else if (sh.size() == 3) {
    dims = {sh[0], 1, sh[1], sh[2]};
    strides = {st[0], sh[1] * sh[2], st[1], st[2]};
  } else {
    return false;
  }
  for (int i = 0; i < 4; ++i)
    if (strides[size_t(i)] == 0 && dims[size_t(i)] > 1) return false;
  return strides[3] == 1;
}

}  // namespace

bool cudnn_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, float* lse,
                     double scale, bool causal, cudaStream_t stream) {
  if (!enabled() || (q.dtype() != DType::bf16 && q.dtype() != DType::f16)) return false;
  Problem p{};
  p.type = q.dtype() == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  if (!dims4(q, p.q, p.qs) || !dims4(k, p.k, p.ks) || !dims4(v, p.v, p.vs) || !dims4(y, p.o, p.os))
    return false;
  // cuDNN's flash kernels: head dims multiples of 8 up to 128, 16-byte aligned rows. A
  // causal row that sees no key (sq > sk) would get cuDNN's uniform softmax, not the op's 0.
  int64_t d = p.q[3], dv = p.v[3];
  if (d % 8 || dv % 8 || d > 128 || dv > 128 || (causal && p.q[2] > p.k[2])) return false;
  for (const Tensor* t : {&q, &k, &v, &y})
    if (reinterpret_cast<uintptr_t>(t->data()) % 16) return false;
  for (const auto* s : {&p.qs, &p.ks, &p.vs, &p.os})
    for (int i = 0; i < 3; ++i)
      if ((*s)[size_t(i)] % 8) return false;
  p.causal = causal;
  p.stats = lse != nullptr;
  p.scale = float(scale);

  Device dev = y.device();
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
    if (!plan.plan)  // said once per problem: the op still runs, on flash.cuh's kernel
      std::fprintf(stderr, "rlx: cuDNN declined attention [%lld, %lld, %lld, %lld]: %s\n",
                   (long long)p.q[0], (long long)p.q[1], (long long)p.q[2], (long long)p.q[3],
                   why.c_str());
    it = made.emplace(key, std::move(plan)).first;
  }
  const Plan& plan = it->second;
  if (!plan.plan) return false;
  RLX_DNN(cudnnSetStream(h.handle, stream));
  // From the device's pool, in stream order (as conv's workspaces).
  Tensor ws = Tensor::empty(DType::u8, {std::max<int64_t>(plan.workspace, 1)}, dev);
  float scale32 = p.scale, neg = std::numeric_limits<float>::lowest();
  std::vector<int64_t> uids{kQ, kK, kV, kO, kScale};
  std::vector<void*> ptrs{const_cast<void*>(q.data()), const_cast<void*>(k.data()),
                          const_cast<void*>(v.data()), const_cast<void*>(y.data()), &scale32};
  // The bottom-right shift's sizes, in the indices' type.
  int32_t sk32 = int32_t(p.k[2]), sq32 = int32_t(p.q[2]);
  float sk_f = float(p.k[2]), sq_f = float(p.q[2]);
  bool ints = plan.index_type == CUDNN_DATA_INT32;
  if (causal) {
    uids.push_back(kNegInf);
    ptrs.push_back(&neg);
    if (p.q[2] != p.k[2]) {
      uids.insert(uids.end(), {kSk, kSq});
      ptrs.insert(ptrs.end(), {ints ? static_cast<void*>(&sk32) : &sk_f,
                               ints ? static_cast<void*>(&sq32) : &sq_f});
    }
  }
  if (lse) {
    uids.push_back(kStats);
    ptrs.push_back(lse);
  }
  void* wsp = ws.data();
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()),
           ptrs.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp)
      .finalize();
  RLX_DNN(cudnnBackendExecute(h.handle, plan.plan->get(), pack.get()));
  runs().fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t cudnn_attention_runs() { return runs().load(); }

#else

bool cudnn_attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float*, double,
                     bool, cudaStream_t) {
  return false;
}
int64_t cudnn_attention_runs() { return 0; }

#endif

}  // namespace rlx::gpu
