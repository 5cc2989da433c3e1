// Inference cases of the LLM ops: rope, kv_cache_write, attention_cached, sample.
#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {

const auto V = Expect::value_error;
const auto T = Expect::type_error;
using Cases = std::vector<InferCase>;

void rope_cases(Cases& c) {
  c.push_back(ok("rope", {"f32[2,5,4,8]", "i32[5]"}, {}, {"f32[2,5,4,8]"}));
  c.push_back(ok("rope", {"f16[2,5,4,8]", "i64[2,5]"}, {{"mode", "neox"}}, {"f16[2,5,4,8]"}));
  c.push_back(
      ok("rope", {"bf16[b,s,4,64]", "i32[b,s]", "f32[16]"}, {{"n_rot", 32}}, {"bf16[b,s,4,64]"}));
  c.push_back(ok("rope", {"f64[6,2,4]", "i32[6]"}, {{"inverse", true}}, {"f64[6,2,4]"}));
  c.push_back(ok("rope", {"f32[3,2,5,4,8]", "i32[1,5]"}, {}, {"f32[3,2,5,4,8]"}));
  c.push_back(ok("rope", {"f32[1,s,2,d]", "i64[s]"}, {{"n_rot", 4}}, {"f32[1,s,2,d]"}));
  c.push_back(bad("rope", {"i32[2,5,4,8]", "i32[5]"}, {}, T, "float dtype"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "f32[5]"}, {}, T, "pos (input 1) of dtype i32 or i64"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i16[5]"}, {}, T, "i32 or i64"));
  c.push_back(bad("rope", {"f32[5,8]", "i32[5]"}, {}, V, "rank >= 3"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i32[6]"}, {}, V, "positions of pos"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i32[3,5]"}, {}, V, "batch dims of pos"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i32[]"}, {}, V, "pos of rank 1 to 2"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i32[5]"}, {{"n_rot", 3}}, V, "even n_rot"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i32[5]"}, {{"n_rot", 16}}, V, "n_rot <= D = 8"));
  c.push_back(bad("rope", {"f32[2,5,4,7]", "i32[5]"}, {}, V, "even head dim"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i32[5]", "f32[3]"}, {}, V, "freq_factors"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i32[5]", "i32[4]"}, {}, T, "float dtype"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i32[5]"}, {{"base", 0.0}}, V, "base > 0"));
  c.push_back(bad("rope", {"f32[2,5,4,8]", "i32[5]"}, {{"mode", "gptj"}}, V));
}

void kv_cache_cases(Cases& c) {
  c.push_back(
      ok("kv_cache_write", {"f16[2,4,16,8]", "f32[2,3,4,8]", "i32[2]"}, {}, {"f16[2,4,16,8]"}));
  c.push_back(
      ok("kv_cache_write", {"f32[1,2,32,4]", "f32[1,s,2,4]", "i64[1]"}, {}, {"f32[1,2,32,4]"}));
  c.push_back(
      ok("kv_cache_write", {"bf16[b,2,c,4]", "f16[b,s,2,4]", "i32[b]"}, {}, {"bf16[b,2,c,4]"}));
  c.push_back(
      bad("kv_cache_write", {"i32[2,4,16,8]", "f32[2,3,4,8]", "i32[2]"}, {}, T, "float dtype"));
  c.push_back(
      bad("kv_cache_write", {"f16[2,4,16,8]", "f32[2,3,4,8]", "f32[2]"}, {}, T, "i32 or i64"));
  c.push_back(bad("kv_cache_write", {"f16[2,4,16,8]", "f32[2,3,4,8]", "i32[3]"}, {}, V,
                  "batch of cache and pos"));
  c.push_back(
      bad("kv_cache_write", {"f16[2,4,16,8]", "f32[2,3,5,8]", "i32[2]"}, {}, V, "KV heads"));
  c.push_back(
      bad("kv_cache_write", {"f16[2,4,16,8]", "f32[2,3,4,6]", "i32[2]"}, {}, V, "head dims"));
  c.push_back(
      bad("kv_cache_write", {"f16[2,4,16,8]", "f32[2,20,4,8]", "i32[2]"}, {}, V, "at most C = 16"));
  c.push_back(bad("kv_cache_write", {"f16[2,4,16]", "f32[2,3,4,8]", "i32[2]"}, {}, V, "rank 4"));
  c.push_back(
      bad("kv_cache_write", {"f16[2,4,16,8]", "f32[2,3,4,8]", "i32[2,1]"}, {}, V, "pos [B]"));
}

void attention_cached_cases(Cases& c) {
  c.push_back(ok("attention_cached",
                 {"f32[1,1,8,16]", "f16[1,2,32,16]", "f16[1,2,32,16]", "i32[1]"}, {},
                 {"f32[1,1,8,16]"}));
  c.push_back(ok("attention_cached",
                 {"bf16[2,s,4,64]", "f32[2,4,128,64]", "f32[2,4,128,64]", "i64[2]"},
                 {{"scale", 0.125}}, {"bf16[2,s,4,64]"}));
  c.push_back(ok("attention_cached", {"f64[b,s,h,d]", "f64[b,k,c,d]", "f64[b,k,c,d]", "i32[b]"}, {},
                 {"f64[b,s,h,d]"}));
  c.push_back(bad("attention_cached",
                  {"f32[1,1,6,16]", "f32[1,4,32,16]", "f32[1,4,32,16]", "i32[1]"}, {}, V,
                  "multiple of KV heads KVH = 4"));
  c.push_back(bad("attention_cached",
                  {"f32[1,1,8,16]", "f16[1,2,32,16]", "f32[1,2,32,16]", "i32[1]"}, {}, T));
  c.push_back(bad("attention_cached",
                  {"i32[1,1,8,16]", "f16[1,2,32,16]", "f16[1,2,32,16]", "i32[1]"}, {}, T,
                  "float dtype"));
  c.push_back(bad("attention_cached",
                  {"f32[1,1,8,16]", "f16[1,2,32,16]", "f16[1,2,32,16]", "f32[1]"}, {}, T,
                  "i32 or i64"));
  c.push_back(bad("attention_cached", {"f32[1,1,8,16]", "f16[1,2,32,8]", "f16[1,2,32,8]", "i32[1]"},
                  {}, V, "head dims of q and k_cache"));
  c.push_back(bad("attention_cached",
                  {"f32[1,1,8,16]", "f16[1,2,32,16]", "f16[1,2,30,16]", "i32[1]"}, {}, V,
                  "dims of k_cache and v_cache"));
  c.push_back(bad("attention_cached",
                  {"f32[1,40,8,16]", "f16[1,2,32,16]", "f16[1,2,32,16]", "i32[1]"}, {}, V,
                  "at most C = 32"));
  c.push_back(bad("attention_cached",
                  {"f32[2,1,8,16]", "f16[1,2,32,16]", "f16[1,2,32,16]", "i32[2]"}, {}, V,
                  "batch of q and k_cache"));
  c.push_back(bad("attention_cached", {"f32[1,8,16]", "f16[1,2,32,16]", "f16[1,2,32,16]", "i32[1]"},
                  {}, V, "rank 4"));
  c.push_back(bad("attention_cached",
                  {"f32[1,1,8,16]", "f16[1,2,32,16]", "f16[1,2,32,16]", "i32[1]"},
                  {{"scale", -1.0}}, V, "'scale' >= 0"));
}

void rope_attention_cached_cases(Cases& c) {
  const std::string op = "rope_attention_cached";
  auto in = [](std::string q, std::string k, std::string v, std::string cache, std::string ps,
               std::string pos) {
    return std::vector<std::string>{q, k, v, cache, cache, ps, pos};
  };
  c.push_back(ok(
      op,
      in("f32[1,1,8,16]", "f32[1,1,2,16]", "f32[1,1,2,16]", "f16[1,2,32,16]", "i32[1,1]", "i32[1]"),
      {}, {"f32[1,1,8,16]", "f16[1,2,32,16]", "f16[1,2,32,16]"}));
  std::vector<std::string> ff = in("bf16[2,s,4,64]", "bf16[2,s,2,64]", "bf16[2,s,2,64]",
                                   "f32[2,2,128,64]", "i64[2,s]", "i64[2]");
  ff.push_back("f32[16]");
  c.push_back(ok(op, ff, {{"mode", "neox"}, {"n_rot", 32}},
                 {"bf16[2,s,4,64]", "f32[2,2,128,64]", "f32[2,2,128,64]"}));
  c.push_back(bad(
      op,
      in("f32[1,2,8,16]", "f32[1,2,2,16]", "f32[1,1,2,16]", "f16[1,2,32,16]", "i32[1,2]", "i32[1]"),
      {}, V, "S of k and v"));
  c.push_back(bad(
      op,
      in("f32[1,2,8,16]", "f32[1,1,2,16]", "f32[1,1,2,16]", "f16[1,2,32,16]", "i32[1,1]", "i32[1]"),
      {}, V, "positions of pos and S"));
  c.push_back(bad(
      op,
      in("f32[1,1,6,16]", "f32[1,1,4,16]", "f32[1,1,4,16]", "f16[1,4,32,16]", "i32[1,1]", "i32[1]"),
      {}, V, "multiple of KV heads KVH = 4"));
  c.push_back(bad(
      op,
      in("f32[1,1,8,16]", "f32[1,1,2,16]", "f32[1,1,2,16]", "f16[1,2,32,16]", "f32[1,1]", "i32[1]"),
      {}, T, "i32 or i64"));
  c.push_back(bad(
      op,
      in("f32[1,1,8,16]", "f32[1,1,3,16]", "f32[1,1,3,16]", "f16[1,2,32,16]", "i32[1,1]", "i32[1]"),
      {}, V, "KV heads of cache"));
  c.push_back(bad(
      op,
      in("f32[1,1,8,16]", "f32[1,1,2,16]", "f32[1,1,2,16]", "f16[1,2,32,16]", "i32[1,1]", "i32[1]"),
      {{"n_rot", 3}}, V, "even n_rot"));
}

void sample_cases(Cases& c) {
  c.push_back(ok("sample", {"f32[2,100]", "i64[2,2]"}, {}, {"i32[2]"}));
  c.push_back(ok("sample", {"f32[3,50]", "i64[3,2]", "i32[3,8]"},
                 {{"temperature", 0.7}, {"top_k", 40}, {"top_p", 0.9}, {"repeat_penalty", 1.1}},
                 {"i32[3]"}));
  c.push_back(ok("sample", {"f16[10]", "i64[2]"}, {{"temperature", 0.0}}, {"i32[]"}));
  c.push_back(ok("sample", {"bf16[b,v]", "i64[b,2]"}, {{"min_p", 0.05}}, {"i32[b]"}));
  c.push_back(bad("sample", {"f32[2,100]", "i32[2,2]"}, {}, T, "rng (input 1) of dtype i64"));
  c.push_back(bad("sample", {"f32[2,100]", "i64[2,3]"}, {}, V, "seed, counter"));
  c.push_back(bad("sample", {"f32[2,100]", "i64[3,2]"}, {}, V, "leading dims"));
  c.push_back(bad("sample", {"f32[2,100]", "i64[2,2]", "i64[2,4]"}, {}, T, "history"));
  c.push_back(bad("sample", {"f32[2,100]", "i64[2,2]", "i32[4]"}, {}, V, "history of rank 2"));
  c.push_back(bad("sample", {"i32[2,100]", "i64[2,2]"}, {}, T, "float dtype"));
  c.push_back(bad("sample", {"f32[2,0]", "i64[2,2]"}, {}, V, "V >= 1"));
  c.push_back(bad("sample", {"f32[2,9]", "i64[2,2]"}, {{"temperature", -1.0}}, V, "temperature"));
  c.push_back(bad("sample", {"f32[2,9]", "i64[2,2]"}, {{"top_k", -1}}, V, "top_k >= 0"));
  c.push_back(bad("sample", {"f32[2,9]", "i64[2,2]"}, {{"top_p", 0.0}}, V, "top_p in (0, 1]"));
  c.push_back(bad("sample", {"f32[2,9]", "i64[2,2]"}, {{"min_p", 1.5}}, V, "min_p in [0, 1]"));
  c.push_back(
      bad("sample", {"f32[2,9]", "i64[2,2]"}, {{"repeat_penalty", 0.0}}, V, "repeat_penalty > 0"));
}

void swiglu_cases(Cases& c) {
  c.push_back(ok("swiglu", {"f32[1,1,11264]"}, {}, {"f32[1,1,5632]"}));
  c.push_back(ok("swiglu", {"bf16[b,s,?]"}, {}, {"bf16[b,s,?]"}));
  c.push_back(ok("swiglu", {"f16[8,6]"}, {{"axis", 0}}, {"f16[4,6]"}));
  c.push_back(bad("swiglu", {"f32[2,7]"}, {}, V, "even size along axis 1"));
  c.push_back(bad("swiglu", {"i32[2,8]"}, {}, T, "float dtype"));
  c.push_back(bad("swiglu", {"f32[2,8]"}, {{"axis", 2}}, V, "axis"));
  c.push_back(bad("swiglu", {"f32[]"}, {}, V, "rank"));
}

}  // namespace

std::vector<InferCase> llm_cases() {
  Cases c;
  rope_cases(c);
  kv_cache_cases(c);
  attention_cached_cases(c);
  rope_attention_cached_cases(c);
  sample_cases(c);
  swiglu_cases(c);
  return c;
}

}  // namespace rlx::testing
