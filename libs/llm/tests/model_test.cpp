// rlx::llm models against an independent float64 NumPy forward (tests/reference.py, its
// own GGUF reader), decode with the cache against recomputing the whole sequence, batched
// decode against one sequence at a time, seeded sampling, and typed errors for bad files.
// The GGUF files are written here with random weights (rlx::gguf::Writer).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "decode_check.h"
#include "rlx/npy.h"
#include "rlx/settings.h"
#include "rlx/text.h"
#include "rlx_llm/llm.h"
#include "test_models.h"

namespace rlx::llm {
namespace {

using namespace test;

// The reference's logits of every position, [n, vocab] f64.
Tensor reference_logits(const std::string& model, const std::vector<int32_t>& ids) {
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  std::string out = model + ".ref.npy";
  // Debian's python3 with NumPy, or RLX_PYTHON's (as tests/frontend/quant_test.cpp).
  const char* py = std::getenv("RLX_PYTHON");
  std::string cmd = std::string(py ? py : "/usr/bin/python3") +
                    " " RLX_LLM_TEST_DIR "/reference.py " + model + " " + list + " " + out;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return load_npy(out);
}

Tensor row(const Tensor& t, int64_t i) {
  return t.slice(0, i, i + 1).contiguous().reshape({t.shape()[1]});
}

struct Case {
  const char* name;
  Spec spec;
  double tol;
};

class ModelVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(ModelVsReference, LogitsOfEveryPosition) {
  const Case& c = GetParam();
  std::string path = write_model(c.spec, c.name);
  auto m = Model::load(path, {.kv_dtype = DType::f32});
  std::vector<int32_t> ids = some_ids(12, c.spec.vocab);
  Tensor got = m->logits(ids);
  Tensor want = reference_logits(path, ids);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(rel_l2(got, want), c.tol) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Archs, ModelVsReference,
    ::testing::Values(
        Case{"llama_gqa_f32", Spec{}, 1e-4},
        Case{"llama_mha_tied_f32", Spec{.kv_heads = 4, .tied = true}, 1e-4},
        Case{"qwen2_bias_neox_f32", Spec{.arch = "qwen2", .n_rot = 8, .tied = true, .bias = true},
             1e-4},
        Case{"llama_scaled_rope_f32", Spec{.freq_factors = true, .scale_factor = 4}, 1e-4},
        // q8_0 weights: the reference decodes the same blocks; rlx also rounds the
        // activations to 8 bits per block of 32 (as llama.cpp does).
        Case{"llama_q8_0", Spec{.type = DType::q8_0}, 2e-2},
        Case{"qwen2_q4_0", Spec{.arch = "qwen2", .bias = true, .type = DType::q4_0}, 3e-2}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Decode, WithTheCacheEqualsRecomputing) {
  for (DType kv : {DType::f32, DType::f16}) {
    std::string path = write_model(Spec{.arch = "qwen2", .bias = true}, "decode");
    auto m = Model::load(path, {.kv_dtype = kv});
    std::vector<int32_t> ids = some_ids(10, 320);
    Tensor full = m->logits(ids);
    Generator gen(*m, {.temperature = 0});
    gen.keep_logits = true;
    gen.prefill(std::span(ids).first(4));
    EXPECT_LT(rel_l2(gen.last_logits(), row(full, 3)), kv == DType::f32 ? 1e-5 : 2e-3);
    for (size_t i = 4; i < ids.size(); ++i) {
      gen.step(ids[i]);
      Tensor l = gen.last_logits().reshape({320});
      EXPECT_LT(rel_l2(l, row(full, int64_t(i))), kv == DType::f32 ? 1e-5 : 2e-3)
          << "position " << i << " kv " << dtype_name(kv);
    }
    EXPECT_EQ(gen.position(), 10);
  }
}

// decode() feeds each step the tokens, positions and sampler state the step before worked
// out (the chained step graph): greedy, and sampling with a repeat penalty, on batches of 1
// and 3 sequences.
TEST(Decode, ChainedStepsEqualStepAfterStep) {
  std::string path = write_model(Spec{}, "chained");
  for (int64_t batch : {1, 3}) {
    auto m = Model::load(path, {.batch = batch, .kv_dtype = DType::f32});
    expect_decode_equals_steps(*m, {.temperature = 0});
    expect_decode_equals_steps(
        *m, {.temperature = 1.5, .repeat_penalty = 1.3, .repeat_last_n = 4, .seed = 9});
  }
  auto m = Model::load(path, {.ctx = 8, .kv_dtype = DType::f32});
  Generator gen(*m, {.temperature = 0});
  int32_t t = gen.prefill(some_ids(3, 320));
  EXPECT_THROW(gen.decode(std::span(&t, 1), 6, {}), ValueError);  // 3 + 6 > 8 rows
  EXPECT_EQ(gen.position(), 3);
  EXPECT_EQ(gen.decode(std::span(&t, 1), 5, {}), 5);
}

// settings().decode_fusions: the model's attention as one rope_attention_cached op (the
// CPU's kernel for it runs the parts' kernels in turn) computes what the parts the model emits
// otherwise compute: prefill logits and greedy decode, llama with freq_factors and qwen2 (biases,
// NeoX), f16 caches.
TEST(Decode, FusedAttentionOpEqualsItsParts) {
  const Spec specs[] = {Spec{.freq_factors = true}, Spec{.arch = "qwen2", .bias = true}};
  for (const Spec& spec : specs) {
    std::string path = write_model(spec, "fused_attention_" + spec.arch);
    std::vector<int32_t> ids = some_ids(9, 320);
    auto run = [&](bool fusions) {
      const bool before = settings().decode_fusions;
      settings().decode_fusions = fusions;
      auto m = Model::load(path);
      std::string text = print_graph(*m->build_graph(1, 1, {.temperature = 0}));
      EXPECT_EQ(text.find("rope_attention_cached") != std::string::npos, fusions);
      Tensor logits = m->logits(ids);
      std::vector<int32_t> tokens = generate(*m, ids, 6, {.temperature = 0});
      settings().decode_fusions = before;
      return std::make_pair(logits, tokens);
    };
    auto [fused_logits, fused_tokens] = run(true);
    auto [parts_logits, parts_tokens] = run(false);
    EXPECT_LT(rel_l2(fused_logits, parts_logits), 1e-6) << spec.arch;
    EXPECT_EQ(fused_tokens, parts_tokens) << spec.arch;
  }
}

// A prompt prefilled in steps (LoadOptions::prefill_chunk), each attending to the cache the
// earlier ones wrote, ends where one step over the whole prompt does, and decodes on alike.
TEST(Decode, ChunkedPrefillEqualsOneStep) {
  std::string path = write_model(Spec{}, "chunked");
  auto whole = Model::load(path, {.kv_dtype = DType::f32, .prefill_chunk = 0});
  auto chunked = Model::load(path, {.kv_dtype = DType::f32, .prefill_chunk = 3});
  std::vector<int32_t> ids = some_ids(11, 320);  // steps of 3, 3, 3 and 2
  Generator a(*whole, {.temperature = 0}), b(*chunked, {.temperature = 0});
  a.keep_logits = b.keep_logits = true;
  int32_t ta = a.prefill(ids), tb = b.prefill(ids);
  EXPECT_EQ(ta, tb);
  EXPECT_LT(rel_l2(b.last_logits(), a.last_logits()), 1e-5);
  EXPECT_EQ(b.position(), 11);
  for (int i = 0; i < 4; ++i) {
    ta = a.step(ta), tb = b.step(tb);
    EXPECT_EQ(ta, tb) << "step " << i;
  }
  EXPECT_LT(rel_l2(b.last_logits(), a.last_logits()), 1e-5);
}

// q/k/v and gate/up fused into one product each (LoadOptions::fuse) compute what the
// separate products do: plain and interleaved (q4_0) weights, q/k/v biases (qwen2),
// decode and prefill.
TEST(Fuse, StackedProjectionsMatchSeparateOnes) {
  const Spec specs[] = {Spec{}, Spec{.type = DType::q4_0}, Spec{.arch = "qwen2", .bias = true}};
  for (const Spec& spec : specs) {
    const DType t = spec.type;
    std::string path = write_model(spec, "fuse_" + spec.arch + "_" + std::string(dtype_name(t)));
    auto apart = Model::load(path, {.kv_dtype = DType::f32});
    auto fused = Model::load(path, {.kv_dtype = DType::f32, .fuse = true});
    for (int64_t n : {1, 5, 40}) {
      std::vector<int32_t> ids = some_ids(n, 320);
      EXPECT_LT(rel_l2(fused->logits(ids), apart->logits(ids)), 1e-5)
          << dtype_name(t) << ", " << n << " tokens";
    }
    EXPECT_EQ(fused->weight_bytes(), apart->weight_bytes());
    auto g = fused->build_graph(1, 1, {});
    EXPECT_NE(g->find_arg("blk.0.attn_qkv.weight"), nullptr);
    EXPECT_NE(g->find_arg("blk.1.ffn_gate_up.weight"), nullptr);
    EXPECT_EQ(g->find_arg("blk.0.attn_q.weight"), nullptr);
  }
}

// q4_0 weights held interleaved (the CPU default: rows16 with AVX-512, rows8 else; rows8
// where a matrix's rows are no whole number of 16s: the second model's 24 k / v rows)
// compute what the file's layout does, in decode (the interleaved dots) and in a long
// prefill (the many-row paths); the pages the copies replaced are released, so the model is
// not held twice.
TEST(Interleave, Q4_0GroupsMatchTheFileLayout) {
  for (const Spec& spec : {Spec{.type = DType::q4_0},
                           Spec{.dim = 96, .heads = 12, .kv_heads = 3, .type = DType::q4_0}}) {
    std::string path = write_model(spec, "grouped" + std::to_string(spec.dim));
    auto plain = Model::load(path, {.kv_dtype = DType::f32, .interleave = false});
    auto packed = Model::load(path, {.kv_dtype = DType::f32});
    for (int64_t n : {1, 5, 40}) {
      std::vector<int32_t> ids = some_ids(n, 320);
      EXPECT_LT(rel_l2(packed->logits(ids), plain->logits(ids)), 1e-5)
          << spec.dim << " dims, " << n << " tokens";
    }
    EXPECT_EQ(packed->weight_bytes(), plain->weight_bytes());
  }
}

// Weights copied into the huge-page arena are the same bytes.
TEST(Interleave, HugePageCopiesAreTheSameWeights) {
  std::string path = write_model(Spec{.dim = 512, .heads = 8, .kv_heads = 2, .ffn = 1024}, "huge");
  auto mapped = Model::load(path, {.kv_dtype = DType::f32, .huge_pages = false});
  auto copied = Model::load(path, {.kv_dtype = DType::f32});
  std::vector<int32_t> ids = some_ids(6, 320);
  EXPECT_EQ(rel_l2(copied->logits(ids), mapped->logits(ids)), 0.0);
}

TEST(Decode, GreedyTokensAreArgmaxOfRecomputedLogits) {
  std::string path = write_model(Spec{}, "greedy");
  auto m = Model::load(path, {.kv_dtype = DType::f32});
  std::vector<int32_t> ids = some_ids(5, 320);
  std::vector<int32_t> gen = generate(*m, ids, 8, {.temperature = 0});
  ASSERT_EQ(gen.size(), 8u);
  std::vector<int32_t> seq = ids;
  for (int32_t t : gen) {
    std::vector<float> l = m->logits(seq, false).to_vector<float>();
    auto best = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_EQ(t, best) << "after " << seq.size() << " tokens";
    seq.push_back(t);
  }
}

TEST(Decode, BatchOfSequencesEqualsOneAtATime) {
  std::string path = write_model(Spec{}, "batch");
  auto one = Model::load(path, {.kv_dtype = DType::f32});
  auto three = Model::load(path, {.batch = 3, .kv_dtype = DType::f32});
  std::vector<std::vector<int32_t>> prompts{some_ids(3, 320, 1), some_ids(7, 320, 2),
                                            some_ids(5, 320, 3)};
  Generator batched(*three, {.temperature = 0});
  std::vector<int32_t> last;
  for (size_t b = 0; b < prompts.size(); ++b)
    last.push_back(batched.prefill(prompts[b], int64_t(b)));
  std::vector<std::vector<int32_t>> got(3);
  for (int s = 0; s < 6; ++s) {
    for (size_t b = 0; b < 3; ++b) got[b].push_back(last[b]);
    last = batched.step(last);
  }
  for (size_t b = 0; b < 3; ++b) {
    std::vector<int32_t> want = generate(*one, prompts[b], 6, {.temperature = 0});
    EXPECT_EQ(got[b], want) << "sequence " << b;
    EXPECT_EQ(batched.position(int64_t(b)), int64_t(prompts[b].size()) + 6);
  }
}

TEST(Sampling, SeedReproducesARun) {
  std::string path = write_model(Spec{}, "sampling");
  auto m = Model::load(path);
  std::vector<int32_t> ids = some_ids(4, 320);
  SamplerOptions s{.temperature = 1.5, .top_k = 0, .top_p = 1.0, .min_p = 0, .seed = 11};
  std::vector<int32_t> a = generate(*m, ids, 12, s), b = generate(*m, ids, 12, s);
  EXPECT_EQ(a, b);
  int differing = 0;
  for (uint64_t seed = 12; seed < 16; ++seed) {
    s.seed = seed;
    differing += generate(*m, ids, 12, s) != a;
  }
  EXPECT_GT(differing, 0) << "other seeds should give other text at temperature 1.5";
}

TEST(Errors, BadFilesAreTypedErrors) {
  std::string path = (temp_dir() / "not_a_model.gguf").string();
  gguf::Writer w;
  w.set("general.architecture", "mamba");
  w.write(path);
  EXPECT_THROW(Model::load(path), NotSupported);
  gguf::Writer w2;
  w2.set("general.architecture", "llama");
  w2.write(path);
  try {
    Model::load(path);
    ADD_FAILURE() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("llama.embedding_length"), std::string::npos) << e.what();
  }
  std::string good = write_model(Spec{}, "errors");
  auto m = Model::load(good, {.ctx = 8});
  std::vector<int32_t> too_long = some_ids(9, 320);
  EXPECT_THROW(m->logits(too_long), ValueError);
  std::vector<int32_t> bad_id{1, 5000};
  EXPECT_THROW(m->logits(bad_id), ValueError);
  EXPECT_THROW(Model::load((temp_dir() / "missing.gguf").string()), IoError);
}

}  // namespace
}  // namespace rlx::llm
