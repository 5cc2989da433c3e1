// The `rlx` executable end to end: graphs and .npy files in a temp dir, the binary run
// through the shell, its exit code, stdout and stderr checked.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rlx/npy.h"
#include "rlx/version.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

// cond (identity branches) and scan (identity body): ops whose CPU kernels need no other.
const char* kControlGraph = R"(graph main(%p: bool[], %x: f32[2,3], param %w: i32[2]) {
  %0 = cond(%p, %x) [
    graph then(%a: f32[2,3]) {
      return out0=%a
    },
    graph else(%a: f32[2,3]) {
      return out0=%a
    }
  ] : f32[2,3]
  %1, %2 = scan(%w, %x) {length=-1, num_carry=1, reverse=false} [
    graph body(%c: i32[2], %xt: f32[3]) {
      return out0=%c, out1=%xt
    }
  ] : i32[2], f32[2,3]
  return y=%0, carry=%1, stacked=%2
}
)";

// Symbolic dims, no nodes: the args are the outputs.
const char* kPassGraph = R"(graph main(%x: f32[batch,3], param %w: i32[n]) {
  return y=%x, w=%w
}
)";

// An ONNX model y = x, z = -x on f32[n], for the checks of `rlx run --data`.
std::string identity_and_neg(int64_t n) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto io = [n](::onnx::ValueInfoProto* vi, const char* name) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(n);
  };
  io(g->add_input(), "x");
  io(g->add_output(), "y");
  io(g->add_output(), "z");
  for (auto [op, out] : {std::pair{"Identity", "y"}, std::pair{"Neg", "z"}}) {
    auto* node = g->add_node();
    node->set_op_type(op);
    node->add_input("x");
    node->add_output(out);
  }
  return m.SerializeAsString();
}

std::string tensor_proto(const std::vector<float>& v) {
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::FLOAT);
  t.add_dims(int64_t(v.size()));
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  return t.SerializeAsString();
}

struct Result {
  int code = -1;
  std::string out, err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           str_cat("rlx_cli_test_", getpid(), "_",
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  static std::string slurp(const std::string& p) {
    std::ostringstream s;
    s << std::ifstream(p).rdbuf();
    return s.str();
  }

  Result rlx(const std::string& args) const {
    std::string cmd =
        str_cat("'", RLX_CLI_PATH, "' ", args, " >'", path("stdout"), "' 2>'", path("stderr"), "'");
    int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(path("stdout"));
    r.err = slurp(path("stderr"));
    return r;
  }

  // DIR/model.onnx (identity_and_neg) and DIR/test_data_set_0 with the input x and the
  // expected outputs y and z; returns DIR.
  std::string onnx_case(const std::vector<float>& x, const std::vector<float>& y,
                        const std::vector<float>& z) const {
    fs::create_directories(dir_ / "case" / "test_data_set_0");
    std::ofstream(path("case/model.onnx"), std::ios::binary) << identity_and_neg(int64_t(x.size()));
    std::ofstream(path("case/test_data_set_0/input_0.pb"), std::ios::binary) << tensor_proto(x);
    std::ofstream(path("case/test_data_set_0/output_0.pb"), std::ios::binary) << tensor_proto(y);
    std::ofstream(path("case/test_data_set_0/output_1.pb"), std::ios::binary) << tensor_proto(z);
    return path("case");
  }
  // `rlx run` of onnx_case's model on its data, with `flags`.
  Result run_case(const std::string& dir, const std::string& flags) const {
    return rlx(
        str_cat("run ", dir, "/model.onnx --data ", dir, "/test_data_set_0 --runs 0 ", flags));
  }

  // An error: exit 1 and one "rlx: error: …" on stderr mentioning `needle`.
  void expect_error(const std::string& args, const std::string& needle) const {
    SCOPED_TRACE(args);
    Result r = rlx(args);
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_TRUE(r.err.starts_with("rlx: error: ")) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in\n" << r.err;
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  }

  fs::path dir_;
};

TEST_F(Cli, PrintsTheVersionAndHelp) {
  Result v = rlx("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out, std::string("rlx ") + RLX_VERSION + "\n");
  EXPECT_STREQ(rlx::version(), RLX_VERSION);  // the library's is the headers' (CMake's)
  Result h = rlx("--help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("run"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("report"), std::string::npos) << h.out;
  Result rh = rlx("run --help");
  EXPECT_EQ(rh.code, 0);
  EXPECT_NE(rh.out.find("--save-outputs"), std::string::npos) << rh.out;
}

TEST_F(Cli, ReportsTheDispatchOfControlOps) {
  Result r = rlx("report " + write("g.rlx", kControlGraph));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("dispatch report (cpu)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cond"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("scan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 native, 0 decomposed, 0 host, 0 missing"), std::string::npos) << r.out;
}

TEST_F(Cli, ReportListsMissingKernels) {
  // Whether add has a CPU kernel depends on the build: either the report shows it
  // resolved, or the command fails naming it.
  std::string g = write("add.rlx",
                        "graph main(%a: f32[2], %b: f32[2]) {\n"
                        "  %0 = add(%a, %b) : f32[2]\n"
                        "  return out=%0\n"
                        "}\n");
  Result r = rlx("report " + g);
  if (r.code == 0)
    EXPECT_NE(r.out.find("add"), std::string::npos) << r.out;
  else
    expect_error("report " + g, "(add, f32,f32, cpu)");
}

TEST_F(Cli, RunsWithRandomValues) {
  Result r = rlx("run " + write("g.rlx", kControlGraph) + " --random --runs 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("random"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("outputs:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stacked"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("f32[2,3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("time: first run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("over 3 runs"), std::string::npos) << r.out;

  // Symbolic dims: 1 by default, or --dim.
  std::string g = write("pass.rlx", kPassGraph);
  Result d = rlx("run " + g + " --random --dim n=4 --seed 3 --runs 0");
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("dims: batch=1, n=4"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("f32[1,3]"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("i32[4]"), std::string::npos) << d.out;
  EXPECT_EQ(d.out.find("over"), std::string::npos) << d.out;
}

TEST_F(Cli, RunsWithInputsFromNpyAndSavesOutputs) {
  std::string g = write("g.rlx", kControlGraph);
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4.5, 5, 6}, {2, 3});
  save_npy(path("x.npy"), x);
  save_npy(path("p.npy"), Tensor::from_vector<bool>({true}, {}));
  save_npy(path("w.npy"), Tensor::from_vector<int32_t>({7, -8}, {2}));
  Result r = rlx(str_cat("run ", g, " --input x=", path("x.npy"), " -i p=", path("p.npy"),
                         " --param w=", path("w.npy"), " --save-outputs ", path("out")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(path("x.npy")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1, 2, 3, 4.5, 5, 6]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[7, -8]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("saved 3 outputs"), std::string::npos) << r.out;
  EXPECT_EQ(load_npy(path("out/y.npy")).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(load_npy(path("out/stacked.npy")).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(load_npy(path("out/carry.npy")).to_vector<int32_t>(), (std::vector<int32_t>{7, -8}));

  // Dims bound by the .npy inputs; the rest random; --show limits the values printed.
  Result s = rlx(str_cat("run ", write("pass.rlx", kPassGraph), " --input x=", path("x.npy"),
                         " --random --show 2"));
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("dims: batch=2, n=1"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("[1, 2, ...]"), std::string::npos) << s.out;
}

TEST_F(Cli, ReportsErrorsWithoutCrashing) {
  std::string g = write("g.rlx", kControlGraph);
  expect_error("run " + path("missing.rlx") + " --random", "missing.rlx");
  expect_error("report " + path("missing.rlx"), "missing.rlx");
  std::string bad = write("bad.rlx", "graph main(%x: f32[2]) {\n  %0 = relu(%x : f32[2]\n}\n");
  expect_error("report " + bad, "bad.rlx:2:");
  std::string unknown = write("unknown.rlx",
                              "graph main(%x: f32[2]) {\n  %0 = nosuchop(%x) : f32[2]\n"
                              "  return out=%0\n}\n");
  expect_error("run " + unknown + " --random", "nosuchop");
  expect_error("run " + g + " --random --input nope=x.npy", "unknown input 'nope'");
  expect_error("run " + g + " --random --input w=x.npy", "'w' is a param");
  std::string pass = write("pass.rlx", kPassGraph);
  expect_error("run " + pass + " --random --dim nope=2", "unknown dim 'nope'");
  expect_error("run " + pass + " --random --dim batch=-2", "--dim batch");
  expect_error("run " + pass + " --random --dim batch=x", "--dim batch");
  expect_error("run " + g + " --random --input x", "NAME=VALUE");
  expect_error("run " + pass, "input 'x' (f32[batch,3])");
  expect_error("run " + g + " --random --input x=" + path("nofile.npy"), "nofile.npy");
  std::string junk = write("junk.npy", "not an npy file");
  expect_error("run " + g + " --random --input x=" + junk, "magic");
  save_npy(path("i.npy"), Tensor::zeros(DType::i64, {2, 3}));
  expect_error("run " + g + " --random --input x=" + path("i.npy"), "i64[2,3]");
  expect_error("", "subcommand");
  expect_error("run " + g + " --runs -1", "--runs");
  expect_error("frobnicate", "frobnicate");
}

TEST_F(Cli, ReportsThePeakMemoryForTheGivenDims) {
  // a and b (4 floats per row each) are live together; c is the output. Running sums,
  // which no pass fuses away.
  std::string g = write("mem.rlx",
                        "graph main(%x: f32[rows,4]) {\n"
                        "  %a = cumsum(%x) {axis=0} : f32[rows,4]\n"
                        "  %b = cumsum(%x) {axis=1} : f32[rows,4]\n"
                        "  %c = add(%a, %b) : f32[rows,4]\n"
                        "  return c=%c\n"
                        "}\n");
  Result r = rlx("report " + g + " --dim rows=1024");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("memory (rows=1024): peak 32.0 KiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("intermediates 32.0 KiB summed"), std::string::npos) << r.out;
  Result d = rlx("report " + g);  // rows = 1
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("memory (rows=1): peak 128 B"), std::string::npos) << d.out;
  expect_error("report " + g + " --dim nope=2", "unknown dim 'nope'");
  expect_error("report " + g + " --dim rows=-1", "--dim rows");
}

// scale * (0, 1, …, 999), element `flip` plus 1 (as a mask flipped by a one-ulp
// difference would be).
std::vector<float> iota_values(float scale, int64_t flip = -1) {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * float(i);
  if (flip >= 0) v[size_t(flip)] += 1;
  return v;
}

TEST_F(Cli, ChecksOnnxOutputsPerOutput) {
  // Only --max-mismatch lets z pass.
  std::string dir = onnx_case(iota_values(1), iota_values(1), iota_values(-1, 7));
  Result r = run_case(dir, "");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("(rtol 0.001, atol 1e-07, range tol 1e-05, max mismatch 0)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("y            max abs err 0 (0 of range 999), 0 of 1000 out of "
                       "tolerance (0%): PASS\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("z            max abs err 1 (0.001 of range 999), 1 of 1000 out of "
                       "tolerance (0.1%): FAIL; first at element 7: expected -6, got -7\n"),
            std::string::npos)
      << r.out;

  Result m = run_case(dir, "--max-mismatch 0.001");
  EXPECT_EQ(m.code, 0) << m.out << m.err;
  EXPECT_NE(m.out.find("1 of 1000 out of tolerance (0.1%): PASS (within --max-mismatch 0.001)"),
            std::string::npos)
      << m.out;
  EXPECT_EQ(run_case(dir, "--max-mismatch 0.0009").code, 1);
}

TEST_F(Cli, ChecksOnnxOutputsWithinRtolAndAtol) {
  // z's element 999 is off by 0.5: within 1e-3 of 999, not within 1e-4.
  std::vector<float> z = iota_values(-1);
  z[999] += 0.5f;
  std::string dir = onnx_case(iota_values(1), iota_values(1), z);
  EXPECT_EQ(run_case(dir, "").code, 0);
  Result r = run_case(dir, "--rtol 1e-4");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("first at element 999: expected -998.5, got -999"), std::string::npos)
      << r.out;
  EXPECT_EQ(run_case(dir, "--rtol 0 --atol 0.5").code, 0);

  // An error near 0: within 1e-5 of z's range (999), not within atol + rtol * 3.
  z = iota_values(-1);
  z[3] += 0.005f;
  dir = onnx_case(iota_values(1), iota_values(1), z);
  EXPECT_EQ(run_case(dir, "").code, 0);
  Result near0 = run_case(dir, "--range-tol 0");
  EXPECT_EQ(near0.code, 1) << near0.out;
  EXPECT_NE(near0.out.find("first at element 3"), std::string::npos) << near0.out;

  // onnx-test reads the same case layout and flags (and has no range term: ONNX's own).
  z[3] -= 0.005f;
  z[999] += 0.5f;
  dir = onnx_case(iota_values(1), iota_values(1), z);
  Result t = rlx(str_cat("onnx-test ", dir, " --rtol 1e-4"));
  EXPECT_EQ(t.code, 1) << t.out;
  EXPECT_NE(t.out.find("output 1 ('z'): max abs err 0.5"), std::string::npos) << t.out;
  EXPECT_EQ(rlx(str_cat("onnx-test ", dir)).code, 0);
}

TEST_F(Cli, SaysWhenAnOutputIsWithinAtolOfZero) {
  // Outputs below 1e-7 (a random-weight net's logits): zeros pass ONNX's atol 1e-7.
  std::vector<float> x = iota_values(1e-10f), zeros(x.size(), 0.0f);
  std::string dir = onnx_case(x, zeros, zeros);
  Result r = run_case(dir, "");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("within the tolerance of 0 (try --atol 0)"), std::string::npos) << r.out;
  EXPECT_EQ(run_case(dir, "--atol 0").code, 1);
  EXPECT_EQ(run_case(onnx_case(x, x, iota_values(-1e-10f)), "--atol 0").code, 0);
}

TEST_F(Cli, RejectsBadTolerances) {
  std::string dir = onnx_case(iota_values(1), iota_values(1), iota_values(-1));
  std::string model = dir + "/model.onnx";
  expect_error(str_cat("run ", model, " --data ", dir, "/test_data_set_0 --rtol -1"),
               "expected --rtol to be a finite number >= 0, got -1");
  expect_error(str_cat("run ", model, " --data ", dir, "/test_data_set_0 --atol nan"),
               "expected --atol to be a finite number >= 0, got nan");
  expect_error(str_cat("run ", model, " --data ", dir, "/test_data_set_0 --range-tol -1e-3"),
               "expected --range-tol to be a finite number >= 0, got -0.001");
  expect_error(str_cat("run ", model, " --data ", dir, "/test_data_set_0 --max-mismatch 2"),
               "expected --max-mismatch to be a fraction in [0, 1], got 2");
  expect_error(str_cat("run ", model, " --data ", dir, "/test_data_set_0 --rtol x"), "--rtol");
  expect_error(str_cat("run ", model, " --random --atol 1e-3"),
               "--atol applies to the check of --data DIR; got no --data");
  expect_error(str_cat("onnx-test ", dir, " --max-mismatch -0.5"), "--max-mismatch");
}

}  // namespace
}  // namespace rlx
