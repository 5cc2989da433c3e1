// Random-weight llama / qwen2 GGUF files for the libs/llm tests, written with
// rlx::gguf::Writer (SentencePiece vocab, weights in any dtype; norms and biases f32).
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "rlx/gguf.h"
#include "rlx/quant.h"
#include "rlx/tensor.h"

namespace rlx::llm::test {

namespace fs = std::filesystem;
using gguf::Value;
using gguf::ValueType;

struct Spec {
  std::string arch = "llama";
  int64_t dim = 64, layers = 2, heads = 4, kv_heads = 2, ffn = 96, vocab = 320, ctx = 64;
  int64_t n_rot = 0;  // 0: the head dim
  bool tied = false, bias = false, freq_factors = false;
  double scale_factor = 0;  // linear rope scaling
  DType type = DType::f32;
  uint32_t seed = 7;
};

inline fs::path temp_dir() {
  static fs::path d = [] {
    fs::path p = fs::temp_directory_path() / ("rlx_llm_test_" + std::to_string(getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// A random-weight model in `type` (norms and biases f32), with a SentencePiece vocab.
inline std::string write_model(const Spec& s, const std::string& name) {
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal;
  const int64_t D = s.dim / s.heads;
  auto mat = [&](int64_t out, int64_t in, double gain) {
    std::vector<float> v(static_cast<size_t>(out * in));
    for (float& x : v) x = normal(rng) * float(gain / std::sqrt(double(in)));
    Tensor f = Tensor::from_vector(v, {out, in});
    if (s.type == DType::f32) return f;
    Tensor q = Tensor::empty(s.type, {out, in});
    for (int64_t r = 0; r < out; ++r)
      quant::quantize_row(s.type, v.data() + r * in,
                          static_cast<uint8_t*>(q.data()) + dtype_nbytes(s.type, r * in), in);
    return q;
  };
  auto vec = [&](int64_t n, float mean, float sd) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = mean + sd * normal(rng);
    return Tensor::from_vector(v, {n});
  };
  gguf::Writer w;
  const std::string a = s.arch + ".";
  w.set("general.architecture", s.arch);
  w.set("general.name", name);
  w.set(a + "vocab_size", uint32_t(s.vocab));
  w.set(a + "context_length", uint32_t(s.ctx));
  w.set(a + "embedding_length", uint32_t(s.dim));
  w.set(a + "block_count", uint32_t(s.layers));
  w.set(a + "feed_forward_length", uint32_t(s.ffn));
  w.set(a + "attention.head_count", uint32_t(s.heads));
  w.set(a + "attention.head_count_kv", uint32_t(s.kv_heads));
  w.set(a + "rope.dimension_count", uint32_t(s.n_rot ? s.n_rot : D));
  w.set(a + "rope.freq_base", 10000.0f);
  w.set(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (s.scale_factor > 0) {
    w.set(a + "rope.scaling.type", "linear");
    w.set(a + "rope.scaling.factor", float(s.scale_factor));
  }
  std::vector<std::string> toks{"<unk>", "<s>", "</s>"};
  std::vector<double> scores{0, 0, 0};
  std::vector<int64_t> types{2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    toks.push_back(buf);
    scores.push_back(0);
    types.push_back(6);
  }
  for (int i = 0; int64_t(toks.size()) < s.vocab; ++i) {
    std::string piece = "\xe2\x96\x81";  // U+2581, SentencePiece's space
    for (int k = i + 1; k > 0; k /= 26) piece += char('a' + (k - 1) % 26);
    toks.push_back(piece);
    scores.push_back(-double(i));
    types.push_back(1);
  }
  w.set("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", Value::string_array(toks));
  w.set("tokenizer.ggml.scores", Value::float_array(ValueType::f32, scores));
  w.set("tokenizer.ggml.token_type", Value::int_array(ValueType::i32, types));
  w.set("tokenizer.ggml.bos_token_id", uint32_t(1));
  w.set("tokenizer.ggml.eos_token_id", uint32_t(2));
  w.set("tokenizer.ggml.add_bos_token", true);

  const int64_t nq = s.heads * D, nkv = s.kv_heads * D;
  w.add_tensor("token_embd.weight", mat(s.vocab, s.dim, std::sqrt(double(s.dim))));
  if (s.freq_factors) w.add_tensor("rope_freqs.weight", vec((s.n_rot ? s.n_rot : D) / 2, 2, 0.5));
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    w.add_tensor(p + "attn_norm.weight", vec(s.dim, 1, 0.1f));
    w.add_tensor(p + "attn_q.weight", mat(nq, s.dim, 2));
    w.add_tensor(p + "attn_k.weight", mat(nkv, s.dim, 2));
    w.add_tensor(p + "attn_v.weight", mat(nkv, s.dim, 1));
    if (s.bias) {
      w.add_tensor(p + "attn_q.bias", vec(nq, 0, 0.5));
      w.add_tensor(p + "attn_k.bias", vec(nkv, 0, 0.5));
      w.add_tensor(p + "attn_v.bias", vec(nkv, 0, 0.5));
    }
    w.add_tensor(p + "attn_output.weight", mat(s.dim, nq, 1));
    w.add_tensor(p + "ffn_norm.weight", vec(s.dim, 1, 0.1f));
    w.add_tensor(p + "ffn_gate.weight", mat(s.ffn, s.dim, 1));
    w.add_tensor(p + "ffn_up.weight", mat(s.ffn, s.dim, 1));
    w.add_tensor(p + "ffn_down.weight", mat(s.dim, s.ffn, 1));
  }
  w.add_tensor("output_norm.weight", vec(s.dim, 1, 0.1f));
  if (!s.tied) w.add_tensor("output.weight", mat(s.vocab, s.dim, 3));
  std::string path = (temp_dir() / (name + ".gguf")).string();
  w.write(path);
  return path;
}

inline std::vector<int32_t> some_ids(int64_t n, int64_t vocab, int32_t salt = 0) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(int32_t(3 + (i * 7919 + 17 + salt) % (vocab - 3)));
  return ids;
}

// ||a - b|| / ||b|| over all elements (NaN when the sizes differ).
inline double rel_l2(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  if (x.size() != y.size()) return std::nan("");
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / den);
}

}  // namespace rlx::llm::test
