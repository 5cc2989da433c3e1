// rlx::llm on CUDA against the CPU: the logits of every position (decode-sized and
// prefill-sized steps), greedy tokens, decode under CUDA Graphs against eager runs, a batch
// of sequences against one at a time, seeded sampling, and the device memory the weights
// and caches take. Needs a GPU; skips, saying so, without one.
#include "rlx/cuda.h"

#include <gtest/gtest.h>

#include "decode_check.h"
#include "rlx_llm/llm.h"
#include "test_models.h"

namespace rlx::llm {
namespace {

using namespace test;

#define REQUIRE_GPU() \
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one"

// rel_l2 of the logits, GPU against CPU. Few rows (matvec): the integer dots of both round
// the activations alike (per block of 32: equal to float rounding; the K-quants' blocks of
// 256 flip a rounding now and then, which random-weight layers amplify). Many rows: the
// GPU multiplies in bf16 (as PyTorch runs such models), within the CPU's own tolerance
// against the NumPy reference (model_test: 2e-2 for 8-bit, 3e-2 for 4-bit weights).
struct Case {
  const char* name;
  DType type;
  double tol_matvec, tol_gemm;
  bool same_tokens;  // greedy tokens equal (the K-quants: within the tolerance only)
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// K-quants need rows of 256 values.
Spec spec_of(DType t) {
  Spec s;
  s.type = t;
  if (dtype_block(t) == 256) s.dim = 256, s.ffn = 512;
  return s;
}

class CudaModel : public ::testing::TestWithParam<Case> {};

TEST_P(CudaModel, LogitsAndGreedyTokensMatchTheCpu) {
  REQUIRE_GPU();
  const Case& c = GetParam();
  std::string path = write_model(spec_of(c.type), std::string("cuda_") + c.name);
  auto cpu = Model::load(path, {.kv_dtype = DType::f32});
  auto gpu = Model::load(path, {.device = Device::cuda(), .kv_dtype = DType::f32});
  // 6 rows: the matvec kernels; 40 rows: the GEMM.
  for (int64_t n : {6, 40}) {
    std::vector<int32_t> ids = some_ids(n, 320);
    EXPECT_LT(rel_l2(gpu->logits(ids), cpu->logits(ids)), n == 6 ? c.tol_matvec : c.tol_gemm)
        << c.name << ", " << n << " tokens";
  }
  if (!c.same_tokens) return;
  std::vector<int32_t> prompt = some_ids(5, 320);
  EXPECT_EQ(generate(*gpu, prompt, 16, {.temperature = 0}),
            generate(*cpu, prompt, 16, {.temperature = 0}))
      << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Types, CudaModel,
    ::testing::Values(
        Case{"f32", DType::f32, 1e-5, 1e-5, true}, Case{"f16", DType::f16, 1e-5, 1e-2, true},
        Case{"bf16", DType::bf16, 1e-5, 1e-2, true}, Case{"q8_0", DType::q8_0, 1e-4, 2e-2, true},
        Case{"q4_0", DType::q4_0, 1e-4, 3e-2, true}, Case{"q4_1", DType::q4_1, 1e-4, 3e-2, false},
        Case{"q5_0", DType::q5_0, 1e-4, 3e-2, false}, Case{"q5_1", DType::q5_1, 1e-4, 3e-2, false},
        Case{"q2_k", DType::q2_k, 2e-2, 3e-2, false}, Case{"q3_k", DType::q3_k, 2e-2, 3e-2, false},
        Case{"q4_k", DType::q4_k, 2e-2, 3e-2, false}, Case{"q5_k", DType::q5_k, 2e-2, 3e-2, false},
        Case{"q6_k", DType::q6_k, 2e-2, 3e-2, false}),
    [](const auto& info) { return std::string(info.param.name); });

// Greedy decode of several steps: replays of the captured step against eager runs, with
// the f16 cache users get by default.
TEST(CudaDecode, GraphReplaysEqualEagerRuns) {
  REQUIRE_GPU();
  std::string path = write_model(spec_of(DType::q8_0), "cuda_graphs");
  auto graphs = Model::load(path, {.device = Device::cuda()});
  auto eager = Model::load(path, {.device = Device::cuda(), .cuda_graphs = false});
  std::vector<int32_t> prompt = some_ids(7, 320);
  std::vector<int32_t> a = generate(*graphs, prompt, 24, {.temperature = 0});
  EXPECT_EQ(a, generate(*eager, prompt, 24, {.temperature = 0}));
  // generate() decodes through the chained step (Generator::decode).
  SamplerOptions greedy{.temperature = 0};
  EXPECT_GT(graphs->compiled(1, 1, greedy, "none", true).graph_launches(), 0)
      << "the decode step never replayed a CUDA Graph";
  EXPECT_EQ(eager->compiled(1, 1, greedy, "none", true).graph_launches(), 0);
}

// Eight sequences decoded as a batch give the tokens each gives alone.
void batch_equals_one_at_a_time(const std::string& path) {
  auto one = Model::load(path, {.device = Device::cuda(), .kv_dtype = DType::f32});
  auto eight = Model::load(path, {.device = Device::cuda(), .batch = 8, .kv_dtype = DType::f32});
  Generator batched(*eight, {.temperature = 0});
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> last;
  for (int32_t b = 0; b < 8; ++b) {
    prompts.push_back(some_ids(2 + b, 320, b));
    last.push_back(batched.prefill(prompts.back(), b));
  }
  std::vector<std::vector<int32_t>> got(8);
  for (int s = 0; s < 6; ++s) {
    for (size_t b = 0; b < 8; ++b) got[b].push_back(last[b]);
    last = batched.step(last);
  }
  for (size_t b = 0; b < 8; ++b)
    EXPECT_EQ(got[b], generate(*one, prompts[b], 6, {.temperature = 0})) << "sequence " << b;
}

// f32 and q8_0 weights (q8_0 in tensor-core tiles: batch 1 quantizes its activations in the
// products, batch 8 through the quantizer kernel).
TEST(CudaDecode, BatchOfSequencesEqualsOneAtATime) {
  REQUIRE_GPU();
  for (DType type : {DType::f32, DType::q8_0}) {
    SCOPED_TRACE(dtype_name(type));
    batch_equals_one_at_a_time(write_model(Spec{.type = type}, "cuda_batch"));
  }
}

// decode() on the device: steps queued back to back, each reading the inputs the one
// before wrote, its tokens read back while the next runs; the same tokens as step().
TEST(CudaDecode, ChainedStepsEqualStepAfterStep) {
  REQUIRE_GPU();
  std::string path = write_model(Spec{}, "cuda_chained");
  for (int64_t batch : {1, 8}) {
    auto m = Model::load(path, {.device = Device::cuda(), .batch = batch, .kv_dtype = DType::f32});
    expect_decode_equals_steps(*m, {.temperature = 0});
    expect_decode_equals_steps(
        *m, {.temperature = 1.5, .repeat_penalty = 1.3, .repeat_last_n = 4, .seed = 9});
    SamplerOptions greedy{.temperature = 0};
    EXPECT_GT(m->compiled(batch, 1, greedy, "none", true).graph_launches(), 0)
        << "the chained step never replayed a CUDA Graph";
  }
}

// A seed reproduces a run; llama.cpp's default chain (top-k 40, top-p, min-p) on the device.
TEST(CudaSampling, SeedReproducesARunAndTheCpusTokens) {
  REQUIRE_GPU();
  std::string path = write_model(Spec{}, "cuda_sampling");
  auto gpu = Model::load(path, {.device = Device::cuda(), .kv_dtype = DType::f32});
  auto cpu = Model::load(path, {.kv_dtype = DType::f32});
  std::vector<int32_t> ids = some_ids(4, 320);
  for (SamplerOptions s :
       {SamplerOptions{.temperature = 1.5, .seed = 11},
        SamplerOptions{.temperature = 1.5, .top_k = 0, .top_p = 1.0, .min_p = 0, .seed = 5}}) {
    std::vector<int32_t> a = generate(*gpu, ids, 12, s);
    EXPECT_EQ(a, generate(*gpu, ids, 12, s));
    // The same logits to ~1e-6 draw the same tokens unless a draw sits on a boundary.
    EXPECT_EQ(a, generate(*cpu, ids, 12, s));
  }
}

TEST(CudaMemory, WeightsAndCachesAreOnTheDevice) {
  REQUIRE_GPU();
  std::string path = write_model(Spec{}, "cuda_memory");
  size_t before = cuda::memory_info().used;
  auto m = Model::load(path, {.device = Device::cuda(), .batch = 2});
  size_t weights = cuda::memory_info().used - before;
  EXPECT_GE(weights, m->weight_bytes());
  Generator gen(*m, {.temperature = 0});
  EXPECT_GE(cuda::memory_info().used - before, m->weight_bytes() + 2 * m->kv_bytes_per_seq());
}

}  // namespace
}  // namespace rlx::llm
