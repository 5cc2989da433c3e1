// Every core op on cuda against the same references as the CPU (the family check tables),
// and which ops resolve to native CUDA kernels. The runs need a GPU and skip, saying so,
// where there is none; the dispatch checks need none and run everywhere.
#include "op_tables/consistency.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "backend/addend.h"
#include "backend/cuda/families.h"
#include "rlx/cuda.h"
#include "rlx/quant.h"
#include "rlx/settings.h"

namespace rlx::test {
namespace {

const CheckTable& table() {
  static const CheckTable t = all_checks();
  return t;
}

class CudaConsistency : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaConsistency, MatchesReference) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
  int n = 0;
  for (const OpCheck& c : table().checks) {
    if (c.op != GetParam()) continue;
    ++n;
    for (const auto& f : run_op_check(c, Device::cuda()))
      ADD_FAILURE() << check_label(c) << " " << dtype_name(c.dtype) << ": " << f;
  }
  EXPECT_GT(n, 0) << "no consistency checks for op '" << GetParam() << "'";
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaConsistency, ::testing::ValuesIn(registered_op_names()),
                         [](const auto& info) { return test_name_of(info.param); });

// The path each check's node takes on cuda, from the kernels alone (no GPU needed).
DispatchPath path_on_cuda(const OpCheck& c) {
  register_cpu_kernels();
  register_cuda_kernels();
  Graph g("check");
  std::vector<Value> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    ins.push_back(g.input(str_cat("x", i), c.inputs[i].type()));
  for (Value v : g.apply(c.op, ins, c.attrs, c.subgraphs)) g.output(v);
  LoweredGraph l = lower_for_device(g, Device::cuda());
  const DispatchReport& r = l.report;
  for (DispatchPath p : {DispatchPath::host, DispatchPath::decomposed})
    if (r.count(c.op, p) > 0) return p;
  return DispatchPath::native;
}

// Every elementwise op (Trait::elementwise: elementwise.cu, cast.cu, one row each in
// elementwise_table.h) and these ops must run every check natively on cuda (a kernel that
// silently fell back to the host would fail here); the families they come from.
std::vector<std::string> elementwise_ops() {
  std::vector<std::string> ops;
  for (const OpDef* d : OpRegistry::global().all())
    if (d->has(Trait::elementwise)) ops.push_back(d->name);
  return ops;
}
const char* const kNative[] = {
    // shape.cpp, shape_index.cu and the views every device shares
    "transpose", "broadcast_to", "slice", "concat", "split", "tile", "flip", "reshape",
    "expand_dims", "squeeze", "constant", "gather", "gather_elements", "gather_nd",
    "scatter_elements", "scatter_nd", "one_hot", "iota",
    // reduce.cu
    "sum", "prod", "reduce_max", "reduce_min", "mean", "logsumexp", "l1_norm", "l2_norm", "argmax",
    "argmin", "cumsum", "sum_squares",
    // nn.cu, attention.cu
    "softmax", "log_softmax", "layer_norm", "rms_norm", "embedding", "attention", "cross_entropy",
    // pool.cu, resize.cu, window_grad.cu
    "max_pool", "avg_pool", "global_max_pool", "global_avg_pool", "resize", "max_pool_grad",
    "avg_pool_grad", "max_pool_gather", "resize_grad"};

// A check with string or complex operands (inputs, or a cast to strings), which run on the
// host (the CPU kernels, through the host delegate).
// Whether a check has inputs of dtype t (or casts to it).
bool has_dtype(const OpCheck& c, bool (*is)(DType)) {
  for (const Tensor& t : c.inputs)
    if (is(t.dtype())) return true;
  const AttrValue* to = c.attrs.find("dtype");
  return to && to->get_if<DType>() && is(*to->get_if<DType>());
}
bool has_strings(const OpCheck& c) { return has_dtype(c, is_string); }
bool has_complex(const OpCheck& c) { return has_dtype(c, is_complex); }

template <class Names>
void expect_native(const Names& ops) {
  for (const auto& op : ops) {
    int n = 0;
    for (const OpCheck& c : table().checks) {
      if (c.op != op || !c.error.empty() || has_strings(c) || has_complex(c)) continue;
      ++n;
      EXPECT_EQ(dispatch_path_name(path_on_cuda(c)), "native")
          << check_label(c) << " " << dtype_name(c.dtype);
    }
    EXPECT_GT(n, 0) << "no checks for " << op;
  }
}

TEST(CudaDispatch, CoreOpsResolveToNativeKernels) {
  EXPECT_GT(elementwise_ops().size(), 50u);
  expect_native(elementwise_ops());
  expect_native(kNative);
}

// String tensors hold host pointers: their nodes run on the CPU kernels (host delegate).
TEST(CudaDispatch, StringsRunOnTheHost) {
  int n = 0;
  for (const OpCheck& c : table().checks) {
    if (!has_strings(c) || !c.error.empty()) continue;
    ++n;
    EXPECT_EQ(dispatch_path_name(path_on_cuda(c)), "host") << check_label(c);
  }
  EXPECT_GT(n, 0);
}

// Complex values: the FFTs (cuFFT), the stft of a real signal, the complex family on
// operands of one shape, abs (the modulus), casts into complex and the elementwise rows with
// kComplex are native; sum / mean / products / other stfts decompose into real ops; the rest
// (a broadcasting complex(re, im), scatters) run on the host.
TEST(CudaDispatch, ComplexValuesRunNativeDecomposedOrOnTheHost) {
  const std::set<std::string> native{
      "fft",  "ifft",  "rfft", "irfft", "real", "imag", "conj",       "angle", "neg",
      "add",  "sub",   "mul",  "div",   "eq",   "ne",   "square",     "exp",   "log",
      "sqrt", "rsqrt", "sin",  "cos",   "tan",  "tanh", "reciprocal", "abs",   "cast"};
  const std::set<std::string> decomposed{"sum", "mean", "matmul", "dot_general", "stft", "istft"};
  int n = 0;
  for (const OpCheck& c : table().checks) {
    if (!has_complex(c) || !c.error.empty()) continue;
    ++n;
    bool same = (c.op == "complex" && c.inputs[0].shape() == c.inputs[1].shape()) ||
                (c.op == "stft" && !is_complex(c.inputs[0].dtype()) &&
                 c.attrs.get_bool("onesided"));  // fft.cu's stft_kernel (the rows set it)
    DispatchPath want = native.count(c.op) || same ? DispatchPath::native
                        : decomposed.count(c.op)   ? DispatchPath::decomposed
                                                   : DispatchPath::host;
    EXPECT_EQ(dispatch_path_name(path_on_cuda(c)), dispatch_path_name(want)) << check_label(c);
  }
  EXPECT_GT(n, 0);
}

// conv.cpp: through cuDNN, where the build found it (else the host path).
#ifdef RLX_HAVE_CUDNN
TEST(CudaDispatch, ConvsResolveToCudnn) {
  const char* const ops[] = {"conv", "conv_transpose"};
  expect_native(ops);
}
#endif

// The LLM path (quant.cu, llm*.cu): every op native, but f64 products (quant_matmul's
// activations, attention_cached: decomposed, dequantize to f64 and dot_general), an addend
// that does not repeat over the product (backend/addend.h: decomposed) and the CPU's
// interleaved weights (rows8, rows16: host).
TEST(CudaDispatch, LlmOpsResolveToNativeKernels) {
  const char* const ops[] = {"dequantize", "rope", "kv_cache_write", "sample"};
  expect_native(ops);
  int n = 0;
  for (const OpCheck& c : table().checks) {
    if ((c.op != "quant_matmul" && c.op != "attention_cached") || !c.error.empty()) continue;
    ++n;
    const AttrValue* layout = c.attrs.find("layout");
    const bool grouped = layout && quant::layout_rows(*layout->get_if<std::string>()) > 1;
    bool odd_addend = false;
    if (c.op == "quant_matmul" && c.inputs.size() == 3) {
      std::vector<int64_t> y = c.inputs[0].shape();
      y.back() = c.inputs[1].shape()[0];
      odd_addend = !addend_repeats(c.inputs[2].type(), {c.inputs[0].dtype(), to_shape(y)});
    }
    // tiles16 (CUDA's form): native but for f64 activations, which the CPU's kernel takes.
    const bool tiles = layout && *layout->get_if<std::string>() == quant::kTiles16;
    DispatchPath want = grouped || (tiles && c.inputs[0].dtype() == DType::f64) ? DispatchPath::host
                        : c.inputs[0].dtype() == DType::f64 || odd_addend ? DispatchPath::decomposed
                                                                          : DispatchPath::native;
    EXPECT_EQ(dispatch_path_name(path_on_cuda(c)), dispatch_path_name(want)) << check_label(c);
  }
  EXPECT_GT(n, 0);
  // rope_attention_cached: native in f32 / f16 / bf16 (with settings().decode_fusions:
  // RLX_DECODE_FUSIONS=1), one new row or many; the parts otherwise.
  int fused = 0;
  for (const OpCheck& c : table().checks) {
    if (c.op != "rope_attention_cached" || !c.error.empty()) continue;
    const bool one = settings().decode_fusions && c.inputs[0].dtype() != DType::f64;
    fused += one;
    EXPECT_EQ(dispatch_path_name(path_on_cuda(c)),
              dispatch_path_name(one ? DispatchPath::native : DispatchPath::decomposed))
        << check_label(c);
  }
  EXPECT_EQ(fused > 0, settings().decode_fusions);
}

TEST(CudaDispatch, FloatMatmulIsNativeIntegerMatmulRunsOnTheHost) {
  for (const OpCheck& c : table().checks) {
    if (c.op != "matmul" && c.op != "dot_general") continue;
    DispatchPath want = is_float(c.dtype)     ? DispatchPath::native
                        : is_complex(c.dtype) ? DispatchPath::decomposed
                                              : DispatchPath::host;
    EXPECT_EQ(dispatch_path_name(path_on_cuda(c)), dispatch_path_name(want))
        << check_label(c) << " " << dtype_name(c.dtype);
  }
}

// layer_norm_grad's kernel holds a row in registers: rows up to 1024 values are native,
// longer ones decompose.
TEST(CudaDispatch, LayerNormGradIsNativeUpTo1024) {
  int native = 0, decomposed = 0;
  for (const OpCheck& c : table().checks) {
    if (c.op != "layer_norm_grad") continue;
    const auto& shape = c.inputs[0].shape();
    int64_t a = c.attrs.get_int("axis"), n = 1;
    for (size_t i = size_t(a < 0 ? a + int64_t(shape.size()) : a); i < shape.size(); ++i)
      n *= shape[i];
    DispatchPath p = path_on_cuda(c);
    EXPECT_EQ(dispatch_path_name(p),
              dispatch_path_name(n <= 1024 ? DispatchPath::native : DispatchPath::decomposed))
        << check_label(c);
    (p == DispatchPath::native ? native : decomposed)++;
  }
  EXPECT_GT(native, 0);
  EXPECT_GT(decomposed, 0);
}

// Regions of float and bool values compile to one NVRTC kernel; the others (integer
// values, reductions) decompose and run op by op.
TEST(CudaDispatch, FloatRegionsAreGeneratedOthersDecompose) {
  int native = 0, decomposed = 0;
  for (const OpCheck& c : table().checks) {
    if (c.op != "fused_elementwise") continue;
    DispatchPath p = path_on_cuda(c);
    bool generated = true;
    for (const Node& n : c.subgraphs[0]->nodes()) {
      generated &= !n.op->has(Trait::reduction);
      for (Value v : n.outputs) generated &= is_float(v.dtype()) || is_bool(v.dtype());
      for (Value v : n.inputs) generated &= is_float(v.dtype()) || is_bool(v.dtype());
    }
    EXPECT_EQ(dispatch_path_name(p),
              dispatch_path_name(generated ? DispatchPath::native : DispatchPath::decomposed))
        << check_label(c) << " " << dtype_name(c.dtype);
    (p == DispatchPath::native ? native : decomposed)++;
  }
  EXPECT_GT(native, 0);
  std::printf("fused_elementwise checks: %d generated, %d decomposed\n", native, decomposed);
}

// Every generated region kernel compiles (NVRTC, for sm_90: no GPU needed).
TEST(CudaRegion, GeneratedKernelsCompile) {
  int compiled = 0;
  for (const OpCheck& c : table().checks) {
    if (c.op != "fused_elementwise") continue;
    const Graph& body = *c.subgraphs[0];
    std::string src = cuda::region_source(body);
    if (src.empty()) continue;
    // The run-time layout, and every input scalar / every input and output flat / every
    // one strided (coordinates over 3 dims in 32 bits, over 1 in 64) / vectorised, flat
    // and scalar inputs in turn.
    size_t n = body.args().size() + body.outputs().size() + 8;
    std::string mixed;
    for (size_t k = 0; k < n; ++k) mixed += k % 2 ? 's' : 'f';
    for (std::string layout :
         {std::string(), std::string(n, 's'), std::string(n, 'f'), std::string(n, 'x') + "|3n",
          std::string(n, 'x') + "|1w", std::string(n, 'f') + "|1nv", mixed + "|1wv"}) {
      src = cuda::region_source(body, layout);
      EXPECT_NO_THROW(EXPECT_FALSE(cuda::region_cubin(src, "sm_90").empty()))
          << check_label(c) << " layout '" << layout << "'";
    }
    ++compiled;
  }
  EXPECT_GT(compiled, 0);
}

// Each elementwise op's checks again as a region of that op alone (a null body where the
// check has values other than float and bool, which regions decline).
template <class F>
void for_each_one_op_region(F&& f) {
  for (const std::string& op : elementwise_ops())
    for (const OpCheck& c : table().checks) {
      if (c.op != op || !c.error.empty() || has_strings(c) || has_complex(c)) continue;
      auto body = std::make_shared<Graph>("body");
      std::vector<Value> args;
      bool floats = true;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        args.push_back(body->input(str_cat("x", i), c.inputs[i].type()));
        floats &= is_float(c.inputs[i].dtype()) || is_bool(c.inputs[i].dtype());
      }
      for (Value v : body->apply(c.op, args, c.attrs)) {
        body->output(v);
        floats &= is_float(v.dtype()) || is_bool(v.dtype());
      }
      f(c, floats ? body : nullptr);
    }
}

// The kernel is generated for every float and bool check and compiles (NVRTC, for sm_90:
// no GPU needed).
TEST(CudaRegion, EveryElementwiseOpIsGeneratedAndCompiles) {
  int generated = 0;
  for_each_one_op_region([&](const OpCheck& c, const SubgraphPtr& body) {
    const std::string src = body ? cuda::region_source(*body) : "";
    EXPECT_EQ(src.empty(), !body) << check_label(c) << " " << dtype_name(c.dtype);
    if (src.empty()) return;
    ++generated;
    EXPECT_NO_THROW(EXPECT_FALSE(cuda::region_cubin(src, "sm_90").empty())) << check_label(c);
  });
  EXPECT_GT(generated, 100);
}

// Whether two outputs hold the same bits, NaN for NaN: a NaN's payload is no value (an
// identity cast copies it; a region's f16 / bf16 store writes the canonical NaN).
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<uint8_t> x = bytes_of(a), y = bytes_of(b);
  if (x == y) return true;
  if (x.size() != y.size() || !is_float(a.dtype())) return false;
  const std::vector<double> u = values(a), v = values(b);
  const size_t es = dtype_size(a.dtype());
  for (size_t i = 0; i < u.size(); ++i)
    if (!(std::isnan(u[i]) && std::isnan(v[i])) &&
        !std::equal(x.begin() + long(i * es), x.begin() + long((i + 1) * es),
                    y.begin() + long(i * es)))
      return false;
  return true;
}

// On a GPU the region gives the eager kernel's bits: both are elementwise_ops.cuh's functors.
TEST(CudaRegion, EveryElementwiseOpAsARegionComputesTheEagerKernelsBits) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
  int compared = 0;
  for_each_one_op_region([&](const OpCheck& c, const SubgraphPtr& body) {
    if (!body) return;
    Graph g("region");
    std::vector<Value> ins;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      ins.push_back(g.input(str_cat("x", i), c.inputs[i].type()));
    for (Value v : g.apply("fused_elementwise", ins, {}, {body})) g.output(v);
    Tensors fused = Session(Device::cuda()).compile(g).run(std::span<const Tensor>(c.inputs));
    Tensors eager = run_graph(c.op, c.inputs, c.attrs, Device::cuda());
    ASSERT_EQ(fused.size(), eager.size());
    for (size_t j = 0; j < fused.size(); ++j)
      EXPECT_TRUE(same_bits(fused[j], eager[j]))
          << check_label(c) << " " << dtype_name(c.dtype) << " output " << j;
    ++compared;
  });
  EXPECT_GT(compared, 100);
}

}  // namespace
}  // namespace rlx::test
