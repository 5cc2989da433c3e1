// matmul_fusion: matmul / dot_general (+ bias add) (+ activation) -> fused_matmul.
#include <gtest/gtest.h>

#include <chrono>

#include "backend/cpu/families.h"
#include "op_tables/pass_check.h"
#include "rlx/rlx.h"
#include "rlx/settings.h"
#include "rlx/text.h"

namespace rlx {
namespace {

using test::expect_pass;

TEST(MatmulFusion, BiasAndGelu) {
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[4,8], param %w: f32[8,16], param %b: f32[16]) {
      %0 = matmul(%x, %w) : f32[4,16]
      %1 = add(%0, %b) : f32[4,16]
      %2 = gelu(%1) : f32[4,16]
      return out=%2
    })",
              R"(
    graph main(%x: f32[4,8], param %w: f32[8,16], param %b: f32[16]) {
      %0 = fused_matmul(%x, %w, %b) {activation="gelu"} : f32[4,16]
      return out=%0
    })");
}

TEST(MatmulFusion, EveryActivation) {
  for (auto [op, act] : std::vector<std::pair<std::string, std::string>>{
           {"relu", "relu"},
           {"gelu {approximate=\"tanh\"}", "gelu_tanh"},
           {"silu", "silu"},
           {"sigmoid", "sigmoid"},
           {"tanh", "tanh"}}) {
    SCOPED_TRACE(op);
    std::string name = op.substr(0, op.find(' '));
    std::string attrs = op.find(' ') == std::string::npos ? "" : op.substr(op.find(' '));
    expect_pass("matmul_fusion",
                R"(
      graph main(%x: f32[3,5], %w: f32[5,7]) {
        %0 = matmul(%x, %w) : f32[3,7]
        %1 = )" + name +
                    "(%0)" + attrs + R"( : f32[3,7]
        return out=%1
      })",
                R"(
      graph main(%x: f32[3,5], %w: f32[5,7]) {
        %0 = fused_matmul(%x, %w) {activation=")" +
                    act + R"("} : f32[3,7]
        return out=%0
      })");
  }
}

// x * hard_sigmoid(x) after a product: MobileNetV3's classifier.
TEST(MatmulFusion, HardSwish) {
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[3,5], %w: f32[5,7], %b: f32[7]) {
      %0 = matmul(%x, %w) : f32[3,7]
      %1 = add(%0, %b) : f32[3,7]
      %2 = hard_sigmoid(%1) {alpha=0.16666666666666666, beta=0.5} : f32[3,7]
      %3 = mul(%1, %2) : f32[3,7]
      return out=%3
    })",
              R"(
    graph main(%x: f32[3,5], %w: f32[5,7], %b: f32[7]) {
      %0 = fused_matmul(%x, %w, %b) {activation="hard_swish"} : f32[3,7]
      return out=%0
    })");
}

TEST(MatmulFusion, BiasFirstOperandAndBatchedBroadcastBias) {
  // add(bias, product) as well as add(product, bias); a [S, 1] bias broadcasts over columns.
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[2,3,5], %w: f32[5,4], %b: f32[3,1]) {
      %0 = matmul(%x, %w) : f32[2,3,4]
      %1 = add(%b, %0) : f32[2,3,4]
      return out=%1
    })",
              R"(
    graph main(%x: f32[2,3,5], %w: f32[5,4], %b: f32[3,1]) {
      %0 = fused_matmul(%x, %w, %b) : f32[2,3,4]
      return out=%0
    })");
}

TEST(MatmulFusion, SymbolicBatchAndHalfDtypes) {
  test::PassCheckOptions o;
  o.compare_outputs = false;  // symbolic shapes
  expect_pass("matmul_fusion", R"(
    graph main(%x: bf16[batch,seq,8], param %w: bf16[8,16], param %b: bf16[16]) {
      %0 = matmul(%x, %w) : bf16[batch,seq,16]
      %1 = add(%0, %b) : bf16[batch,seq,16]
      %2 = relu(%1) : bf16[batch,seq,16]
      return out=%2
    })",
              R"(
    graph main(%x: bf16[batch,seq,8], param %w: bf16[8,16], param %b: bf16[16]) {
      %0 = fused_matmul(%x, %w, %b) {activation="relu"} : bf16[batch,seq,16]
      return out=%0
    })",
              o);
  test::PassCheckOptions half;
  half.rtol = 2e-2;
  half.atol = 2e-2;
  expect_pass("matmul_fusion", R"(
    graph main(%x: f16[6,40], %w: f16[40,3], %b: f16[3]) {
      %0 = matmul(%x, %w) : f16[6,3]
      %1 = add(%0, %b) : f16[6,3]
      %2 = silu(%1) : f16[6,3]
      return out=%2
    })",
              R"(
    graph main(%x: f16[6,40], %w: f16[40,3], %b: f16[3]) {
      %0 = fused_matmul(%x, %w, %b) {activation="silu"} : f16[6,3]
      return out=%0
    })",
              half);
}

TEST(MatmulFusion, DotGeneralThatIsAMatmul) {
  // Contracting dim 0 of the lhs and 1 of the rhs: a transposed matmul.
  expect_pass("matmul_fusion", R"(
    graph main(%a: f64[5,3], %b: f64[4,5], %c: f64[4]) {
      %0 = dot_general(%a, %b) {lhs_contracting=[0], rhs_contracting=[1]} : f64[3,4]
      %1 = add(%0, %c) : f64[3,4]
      return out=%1
    })",
              R"(
    graph main(%a: f64[5,3], %b: f64[4,5], %c: f64[4]) {
      %0 = fused_matmul(%a, %b, %c) {transpose_a=true, transpose_b=true} : f64[3,4]
      return out=%0
    })");
  // Batched, both operands of rank 3 with the batch dim in front.
  expect_pass("matmul_fusion", R"(
    graph main(%a: f32[2,3,5], %b: f32[2,5,4]) {
      %0 = dot_general(%a, %b) {lhs_batch=[0], lhs_contracting=[2], rhs_batch=[0], rhs_contracting=[1]} : f32[2,3,4]
      %1 = tanh(%0) : f32[2,3,4]
      return out=%1
    })",
              R"(
    graph main(%a: f32[2,3,5], %b: f32[2,5,4]) {
      %0 = fused_matmul(%a, %b) {activation="tanh"} : f32[2,3,4]
      return out=%0
    })");
}

TEST(MatmulFusion, ActivationOntoAFusedMatmulWithBias) {
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[4,8], %w: f32[16,8], %b: f32[16]) {
      %0 = fused_matmul(%x, %w, %b) {transpose_b=true} : f32[4,16]
      %1 = relu(%0) : f32[4,16]
      return out=%1
    })",
              R"(
    graph main(%x: f32[4,8], %w: f32[16,8], %b: f32[16]) {
      %0 = fused_matmul(%x, %w, %b) {activation="relu", transpose_b=true} : f32[4,16]
      return out=%0
    })");
}

TEST(MatmulFusion, IntermediatesWithOtherReadersStay) {
  // The product is read twice: nothing to fuse.
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[4,8], %w: f32[8,16], %b: f32[16]) {
      %0 = matmul(%x, %w) : f32[4,16]
      %1 = add(%0, %b) : f32[4,16]
      return out=%1, raw=%0
    })",
              "");
  // The biased sum is read twice: the add fuses, the activation stays.
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[4,8], %w: f32[8,16], %b: f32[16]) {
      %0 = matmul(%x, %w) : f32[4,16]
      %1 = add(%0, %b) : f32[4,16]
      %2 = relu(%1) : f32[4,16]
      %3 = mul(%1, %2) : f32[4,16]
      return out=%3
    })",
              R"(
    graph main(%x: f32[4,8], %w: f32[8,16], %b: f32[16]) {
      %0 = fused_matmul(%x, %w, %b) : f32[4,16]
      %1 = relu(%0) : f32[4,16]
      %2 = mul(%0, %1) : f32[4,16]
      return out=%2
    })");
}

TEST(MatmulFusion, NegativeCases) {
  // Integer products.
  expect_pass("matmul_fusion", R"(
    graph main(%x: i32[4,8], %w: i32[8,16], %b: i32[16]) {
      %0 = matmul(%x, %w) : i32[4,16]
      %1 = add(%0, %b) : i32[4,16]
      %2 = relu(%1) : i32[4,16]
      return out=%2
    })",
              "");
  // A bias that grows the product is no bias.
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[4,8], %w: f32[8,16], %b: f32[3,4,16]) {
      %0 = matmul(%x, %w) : f32[4,16]
      %1 = add(%0, %b) : f32[3,4,16]
      return out=%1
    })",
              "");
  // Not an activation the fused op knows; a dot_general that is no matmul.
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[4,8], %w: f32[8,16], %a: f32[2,3,5], %c: f32[5,3,2]) {
      %0 = matmul(%x, %w) : f32[4,16]
      %1 = exp(%0) : f32[4,16]
      %2 = dot_general(%a, %c) {lhs_contracting=[1, 2], rhs_contracting=[1, 0]} : f32[2,2]
      %3 = relu(%2) : f32[2,2]
      return out=%1, o2=%3
    })",
              "");
  // A sub is not a bias add; an activation of an already activated product stays.
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[4,8], %w: f32[8,16], %b: f32[16]) {
      %0 = matmul(%x, %w) : f32[4,16]
      %1 = sub(%0, %b) : f32[4,16]
      %2 = fused_matmul(%x, %w) {activation="relu"} : f32[4,16]
      %3 = tanh(%2) : f32[4,16]
      return out=%1, o2=%3
    })",
              "");
}

TEST(MatmulFusion, SubgraphsMultiOutputNodesAndRandomOps) {
  // The branches of a cond are left alone; split outputs fuse like any value, and a random
  // bias is read once, as before.
  std::string branches = R"([
      graph then(%a: f32[4,8], %v: f32[8,16], %c: f32[16]) {
        %0 = matmul(%a, %v) : f32[4,16]
        %1 = add(%0, %c) : f32[4,16]
        %2 = relu(%1) : f32[4,16]
        return r=%2
      },
      graph else(%a: f32[4,8], %v: f32[8,16], %c: f32[16]) {
        %0 = matmul(%a, %v) : f32[4,16]
        return r=%0
      }
    ] : f32[4,16])";
  expect_pass("matmul_fusion",
              R"(
    graph main(%p: bool[], %x: f32[4,8], %w: f32[8,16], %b: f32[16]) {
      %0 = cond(%p, %x, %w, %b) )" +
                  branches + R"(
      %1, %2 = split(%x) {axis=1, num=2} : f32[4,4], f32[4,4]
      %3 = uniform() {shape=[4], seed=7} : f32[4]
      %4 = matmul(%1, %2) : f32[4,4]
      %5 = add(%4, %3) : f32[4,4]
      return c=%0, y=%5
    })",
              R"(
    graph main(%p: bool[], %x: f32[4,8], %w: f32[8,16], %b: f32[16]) {
      %0 = cond(%p, %x, %w, %b) )" +
                  branches + R"(
      %1, %2 = split(%x) {axis=1, num=2} : f32[4,4], f32[4,4]
      %3 = uniform() {shape=[4], seed=7} : f32[4]
      %4 = fused_matmul(%1, %2, %3) : f32[4,4]
      return c=%0, y=%4
    })");
}

TEST(MatmulFusion, PipelineComputesTheSame) {
  // The whole default pipeline against no passes, on a two-layer MLP with a transposed
  // weight (layout_sinking then matmul_fusion).
  auto g = parse_graph(R"(
    graph main(%x: f32[32,64], param %w1: f32[128,64], param %b1: f32[128],
               param %w2: f32[128,10], param %b2: f32[10]) {
      %0 = transpose(%w1) {perm=[1, 0]} : f32[64,128]
      %1 = matmul(%x, %0) : f32[32,128]
      %2 = add(%1, %b1) : f32[32,128]
      %3 = gelu(%2) : f32[32,128]
      %4 = matmul(%3, %w2) : f32[32,10]
      %5 = add(%4, %b2) : f32[32,10]
      return out=%5
    })");
  CompileOptions o;
  o.opt_level = 2;
  test::expect_same_outputs(*g, o, 3, 1e-5, 1e-5);
  CompiledGraph cg = Session().compile(*g, o);
  int fused = 0, other = 0;
  for (const Node& n : cg.lowered().nodes()) (n.op_name() == "fused_matmul" ? fused : other) += 1;
  EXPECT_EQ(fused, 2) << print_graph(cg.lowered());
  EXPECT_EQ(other, 0) << print_graph(cg.lowered());
}

TEST(MatmulFusion, DecomposedWhereTheDeviceHasNoKernel) {
  // A registry with the core kernels only: fused_matmul runs as its decomposition, and
  // the pass leaves the graph alone (nothing native to fuse into).
  KernelRegistry core;
  cpu::register_elementwise(core);
  cpu::register_linalg(core);
  cpu::register_shape(core);
  auto fused = parse_graph(R"(
    graph main(%x: f32[5,8], %w: f32[16,8], %b: f32[16]) {
      %0 = fused_matmul(%x, %w, %b) {activation="gelu_tanh", transpose_b=true} : f32[5,16]
      return out=%0
    })");
  CompileOptions o;
  o.opt_level = 0;
  o.kernels = &core;
  CompiledGraph cg = Session().compile(*fused, o);
  EXPECT_EQ(cg.report().count("fused_matmul", DispatchPath::decomposed), 1);
  test::expect_same_outputs(*fused, o, 11, 1e-6, 1e-6);

  auto plain = parse_graph(R"(
    graph main(%x: f32[5,8], %w: f32[8,16], %b: f32[16]) {
      %0 = matmul(%x, %w) : f32[5,16]
      %1 = add(%0, %b) : f32[5,16]
      return out=%1
    })");
  EXPECT_EQ(run_pass("matmul_fusion", *plain, {.kernels = &core}), nullptr);
  EXPECT_NE(run_pass("matmul_fusion", *plain, test::session_like({})), nullptr);
}

TEST(MatmulFusion, QuantMatmulTakesTheAddAsItsAddend) {
  // A residual add (either operand order) and a per-column bias join the product (float
  // weights in storage form here: the check runs both graphs on random values).
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[4,64], param %w: f32[32,64], param %v: f16[32,256], %r: f32[4,32],
               %h: f32[2,4,256], %b: f32[32]) {
      %0 = quant_matmul(%x, %w) : f32[4,32]
      %1 = add(%r, %0) : f32[4,32]
      %2 = quant_matmul(%h, %v) : f32[2,4,32]
      %3 = add(%2, %1) : f32[2,4,32]
      %4 = quant_matmul(%h, %v) : f32[2,4,32]
      %5 = add(%4, %b) : f32[2,4,32]
      return a=%3, b=%5
    })",
              R"(
    graph main(%x: f32[4,64], param %w: f32[32,64], param %v: f16[32,256], %r: f32[4,32],
               %h: f32[2,4,256], %b: f32[32]) {
      %0 = quant_matmul(%x, %w, %r) : f32[4,32]
      %1 = quant_matmul(%h, %v, %0) : f32[2,4,32]
      %2 = quant_matmul(%h, %v, %b) : f32[2,4,32]
      return a=%1, b=%2
    })");
  // An addend the kernels cannot repeat over the output ([4, 1]), one that grows the
  // product, and a product read twice stay adds.
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[4,64], param %w: bf16[32,64], %c: f32[4,1], %g: f32[3,4,32]) {
      %0 = quant_matmul(%x, %w) : f32[4,32]
      %1 = add(%0, %c) : f32[4,32]
      %2 = quant_matmul(%x, %w) : f32[4,32]
      %3 = add(%2, %g) : f32[3,4,32]
      %4 = quant_matmul(%x, %w) : f32[4,32]
      %5 = add(%4, %4) : f32[4,32]
      return a=%1, b=%3, c=%5
    })",
              "");
}

// An LLM block's feed-forward half, then the next block's q / k / v product.
const char* kLlmBlock = R"(
    graph main(%x: f32[1,64], param %g: f32[64], param %wu: bf16[32,64], param %wd: f16[64,16],
               param %wq: bf16[24,64]) {
      %0 = rms_norm(%x, %g) {epsilon=1e-05} : f32[1,64]
      %1 = quant_matmul(%0, %wu) : f32[1,32]
      %2 = swiglu(%1) : f32[1,16]
      %3 = quant_matmul(%2, %wd) : f32[1,64]
      %4 = add(%x, %3) : f32[1,64]
      %5 = rms_norm(%4, %g) {epsilon=1e-05} : f32[1,64]
      %6 = quant_matmul(%5, %wq) : f32[1,24]
      return y=%4, q=%6
    })";

TEST(MatmulFusion, QuantNormAndSwigluJoinTheProductOnTheCpu) {
  // The CPU's fused_quant_matmul takes f32 activations: the norms fold into the products
  // they feed, swiglu into the gate / up product, as on CUDA.
  expect_pass("matmul_fusion", kLlmBlock, R"(
    graph main(%x: f32[1,64], param %g: f32[64], param %wu: bf16[32,64], param %wd: f16[64,16],
               param %wq: bf16[24,64]) {
      %0 = fused_quant_matmul(%x, %g, %wu) {activation="swiglu", epsilon=1e-05, norm="rms_norm"} : f32[1,16]
      %1 = quant_matmul(%0, %wd, %x) : f32[1,64]
      %2 = fused_quant_matmul(%1, %g, %wq) {epsilon=1e-05, norm="rms_norm"} : f32[1,24]
      return y=%1, q=%2
    })");
  // f16 activations: no CPU kernel takes the fused op, so the parts stay.
  expect_pass("matmul_fusion", R"(
    graph main(%x: f16[1,64], param %g: f16[64], param %w: q8_0[24,64]) {
      %0 = rms_norm(%x, %g) {epsilon=1e-05} : f16[1,64]
      %1 = quant_matmul(%0, %w) : f16[1,24]
      return q=%1
    })",
              "");
}

#ifdef RLX_HAVE_CUDA
TEST(MatmulFusion, QuantNormAndSwigluJoinTheProductOnCuda) {
  KernelRegistry cuda;
  register_cuda_kernels(cuda);
  // The norms fold into the products they feed (the residual stream %3 is also an
  // output: the norm reads it, no one else reads the norm), swiglu into the gate / up
  // product; a norm read by two products stays.
  expect_pass("matmul_fusion", kLlmBlock, R"(
    graph main(%x: f32[1,64], param %g: f32[64], param %wu: bf16[32,64], param %wd: f16[64,16],
               param %wq: bf16[24,64]) {
      %0 = fused_quant_matmul(%x, %g, %wu) {activation="swiglu", epsilon=1e-05, norm="rms_norm"} : f32[1,16]
      %1 = quant_matmul(%0, %wd, %x) : f32[1,64]
      %2 = fused_quant_matmul(%1, %g, %wq) {epsilon=1e-05, norm="rms_norm"} : f32[1,24]
      return y=%1, q=%2
    })",
              test::on_device(Device::cuda(), cuda));
  expect_pass("matmul_fusion", R"(
    graph main(%x: f32[1,64], param %g: f32[64], param %w: bf16[24,64]) {
      %0 = rms_norm(%x, %g) {epsilon=1e-05} : f32[1,64]
      %1 = quant_matmul(%0, %w) : f32[1,24]
      %2 = quant_matmul(%0, %w) : f32[1,24]
      return a=%1, b=%2
    })",
              "", test::on_device(Device::cuda(), cuda));
  // Quantized weights: the swiglu joins; the norm too with settings().decode_fusions (it
  // runs in the activations' quantizer), for the 32-value types as for the K-quants.
  test::PassCheckOptions o = test::on_device(Device::cuda(), cuda);
  o.compare_outputs = false;  // (no random values for quantized params)
  const char* unfused = R"(
    graph main(%x: f32[1,256], param %g: f32[256], param %w: WT[32,256]) {
      %0 = rms_norm(%x, %g) {epsilon=1e-05} : f32[1,256]
      %1 = quant_matmul(%0, %w) : f32[1,32]
      %2 = swiglu(%1) : f32[1,16]
      return y=%2
    })";
  const char* norm_apart = R"(
    graph main(%x: f32[1,256], param %g: f32[256], param %w: WT[32,256]) {
      %0 = rms_norm(%x, %g) {epsilon=1e-05} : f32[1,256]
      %1 = fused_quant_matmul(%0, %w) {activation="swiglu"} : f32[1,16]
      return y=%1
    })";
  const char* norm_joined = R"(
    graph main(%x: f32[1,256], param %g: f32[256], param %w: WT[32,256]) {
      %0 = fused_quant_matmul(%x, %g, %w) {activation="swiglu", epsilon=1e-05, norm="rms_norm"} : f32[1,16]
      return y=%0
    })";
  auto typed = [](const char* text, const char* wt) {
    std::string s(text);
    s.replace(s.find("WT"), 2, wt);
    return s;
  };
  const bool before = settings().decode_fusions;
  for (bool fusions : {false, true})
    for (const char* wt : {"q8_0", "q4_k"}) {
      settings().decode_fusions = fusions;
      const bool joined = fusions;
      SCOPED_TRACE(str_cat(wt, fusions ? ", fusions" : ", no fusions"));
      expect_pass("matmul_fusion", typed(unfused, wt), typed(joined ? norm_joined : norm_apart, wt),
                  o);
    }
  settings().decode_fusions = before;
}
#endif

TEST(MatmulFusion, FusionPassesAreLinearOnLargeGraphs) {
  // 2,500 layers of transpose + matmul + bias + gelu: 10,000 nodes through every pass of
  // this family, each walking the graph once.
  Graph g;
  Value x = g.input("x", {DType::f32, {8, 16}});
  std::vector<Value> w, b;  // 50 layers' worth of params, reused (Graph::add_arg is O(args))
  for (int i = 0; i < 50; ++i) {
    std::string id = std::to_string(i);  // (not "w" + …: g++ 12 warns falsely there)
    w.push_back(g.param(std::string("w").append(id), {DType::f32, {16, 16}}));
    b.push_back(g.param(std::string("b").append(id), {DType::f32, {16}}));
  }
  for (size_t i = 0; i < 2500; ++i) x = gelu(matmul(x, transpose(w[i % 50], {1, 0})) + b[i % 50]);
  g.output(x, "y");
  ASSERT_EQ(g.nodes().size(), 10000u);
  std::vector<std::string> passes{"bn_folding", "layout_sinking", "attention_fusion",
                                  "matmul_fusion", "conv_fusion"};
  auto t0 = std::chrono::steady_clock::now();
  PipelineResult r = run_pipeline(g, passes, test::session_like({}));
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("pipeline_ms", std::to_string(ms));
  EXPECT_LT(ms, 1000) << r.str();
  EXPECT_EQ(r.graph->nodes().size(), 2500u) << r.str();  // one fused_matmul per layer
}

}  // namespace
}  // namespace rlx
