// `rlx generate`, `rlx bench-llm` and `rlx quantize` end to end: the binary run through
// the shell on a generated model, its exit code and output checked against the library.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "rlx/npy.h"
#include "rlx_llm/llm.h"
#include "test_models.h"

namespace rlx::llm {
namespace {

using namespace test;

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result rlx(const std::string& args) {
  fs::path out = temp_dir() / "cli.out", err = temp_dir() / "cli.err";
  std::string cmd =
      std::string(RLX_CLI_PATH) + " " + args + " >" + out.string() + " 2>" + err.string();
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

TEST(Cli, GenerateGreedyPrintsTheLibrarysTokens) {
  std::string model = write_model(Spec{}, "cli_generate");
  std::vector<int32_t> prompt = some_ids(6, 320);
  Result r = rlx("generate " + model + " --prompt-tokens " + ids_str(prompt) +
                 " -n 7 --temp 0 --print-tokens --threads 1 --dump-logits " +
                 (temp_dir() / "logits.npy").string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto m = Model::load(model);
  std::vector<int32_t> want = generate(*m, prompt, 7, {.temperature = 0});
  EXPECT_NE(r.out.find(ids_str(want) + "\n"), std::string::npos) << r.out;
  for (const char* s : {"prefill: 6 tokens", "decode:  6 tokens", "tok/s", "peak memory"})
    EXPECT_NE(r.err.find(s), std::string::npos) << s << " in " << r.err;
  Tensor dumped = load_npy((temp_dir() / "logits.npy").string());
  std::vector<float> got = dumped.to_vector<float>(),
                     l = m->logits(prompt, false).to_vector<float>();
  ASSERT_EQ(got.size(), 320u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], l[i], 1e-4) << i;
}

TEST(Cli, GenerateFromTextSamplesReproducibly) {
  std::string model = write_model(Spec{}, "cli_text");
  std::string args = "generate " + model +
                     " -p 'ab cd' -n 6 --temp 1.0 --top-k 20 --top-p 0.9 --min-p 0.01 "
                     "--repeat-penalty 1.1 --seed 5 --print-tokens";
  Result a = rlx(args), b = rlx(args);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(Cli, BenchPrintsLlamaBenchLines) {
  std::string model = write_model(Spec{}, "cli_bench");
  Result r = rlx("bench-llm " + model + " -p 8 -n 4 -r 1 -t 1");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"\npp8 ", "\ntg4 ", "of the read bandwidth", "peak memory"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " in " << r.out;
}

TEST(Cli, QuantizeReencodesWeights) {
  std::string model = write_model(Spec{}, "cli_quantize");
  std::string out = (temp_dir() / "cli_q8.gguf").string();
  Result r = rlx("quantize " + model + " " + out + " Q8_0");
  ASSERT_EQ(r.code, 0) << r.err;
  gguf::File f = gguf::File::open(out);
  EXPECT_EQ(f.find("blk.0.attn_q.weight")->dtype, DType::q8_0);
  EXPECT_EQ(f.find("blk.0.attn_norm.weight")->dtype, DType::f32);  // norms stay f32
  // --output-type: the output projection in its own type (as llama-quantize's
  // --output-tensor-type), the rest in the target.
  std::string mixed = (temp_dir() / "cli_q4_out_q8.gguf").string();
  Result m = rlx("quantize " + model + " " + mixed + " Q4_0 --output-type q8_0 -t 1");
  ASSERT_EQ(m.code, 0) << m.err;
  gguf::File g = gguf::File::open(mixed);
  const char* out_name = g.find("output.weight") ? "output.weight" : "token_embd.weight";
  EXPECT_EQ(g.find(out_name)->dtype, DType::q8_0);
  EXPECT_EQ(g.find("blk.0.ffn_up.weight")->dtype, DType::q4_0);
  Result bad = rlx("quantize " + model + " " + out + " Q7_X");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("expected a type Q8_0"), std::string::npos) << bad.err;
}

TEST(Cli, BadInputIsAnErrorNotACrash) {
  std::string model = write_model(Spec{}, "cli_bad");
  Result none = rlx("generate " + model + " -n 3");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("expected a prompt"), std::string::npos) << none.err;
  Result id = rlx("generate " + model + " --prompt-tokens 1,99999 -n 3");
  EXPECT_EQ(id.code, 1);
  EXPECT_NE(id.err.find("expected token ids in [0, 320)"), std::string::npos) << id.err;
  std::ofstream((temp_dir() / "junk.gguf").string()) << "not a gguf file at all";
  Result junk = rlx("generate " + (temp_dir() / "junk.gguf").string() + " -p hi");
  EXPECT_EQ(junk.code, 1);
  EXPECT_NE(junk.err.find("[gguf]"), std::string::npos) << junk.err;
}

}  // namespace
}  // namespace rlx::llm
