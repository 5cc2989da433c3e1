// attention_fusion: softmax(q k^T * scale [+ mask / bias]) v -> attention.
#include <gtest/gtest.h>

#include "op_tables/pass_check.h"
#include "rlx/rlx.h"
#include "rlx/text.h"

namespace rlx {
namespace {

using test::expect_pass;

// 0 where key j <= query i, `neg` elsewhere, as a [4, 4] tensor literal's elements.
std::string causal4(const char* neg) {
  std::string s;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) s += std::string(s.empty() ? "" : ", ") + (j <= i ? "0.0" : neg);
  return s;
}

std::string tril4() {
  std::string s;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      s += std::string(s.empty() ? "" : ", ") + (j <= i ? "true" : "false");
  return s;
}

TEST(AttentionFusion, ScaledCausalWithAnAddedMask) {
  expect_pass("attention_fusion",
              R"(
    graph main(%q: f32[2,4,8], %k: f32[2,4,8], %v: f32[2,4,6]) {
      %c = constant() {value=tensor<f32[]>[0.5]} : f32[]
      %m = constant() {value=tensor<f32[4,4]>[)" +
                  causal4("-inf") + R"(]} : f32[4,4]
      %0 = transpose(%k) {perm=[0, 2, 1]} : f32[2,8,4]
      %1 = matmul(%q, %0) : f32[2,4,4]
      %2 = mul(%1, %c) : f32[2,4,4]
      %3 = add(%2, %m) : f32[2,4,4]
      %4 = softmax(%3) : f32[2,4,4]
      %5 = matmul(%4, %v) : f32[2,4,6]
      return out=%5
    })",
              R"(
    graph main(%q: f32[2,4,8], %k: f32[2,4,8], %v: f32[2,4,6]) {
      %0 = attention(%q, %k, %v) {mask="causal", scale=0.5} : f32[2,4,6]
      return out=%0
    })");
}

TEST(AttentionFusion, FoldedTransposeDivAndBias) {
  // After layout_sinking: fused_matmul(q, k, transpose_b); a per-head bias input.
  expect_pass("attention_fusion", R"(
    graph main(%q: f32[2,3,4,8], %k: f32[2,3,4,8], %v: f32[2,3,4,8], %b: f32[3,4,4]) {
      %c = constant() {value=tensor<f32[]>[4.0]} : f32[]
      %0 = fused_matmul(%q, %k) {transpose_b=true} : f32[2,3,4,4]
      %1 = div(%0, %c) : f32[2,3,4,4]
      %2 = add(%b, %1) : f32[2,3,4,4]
      %3 = softmax(%2) {axis=3} : f32[2,3,4,4]
      %4 = matmul(%3, %v) : f32[2,3,4,8]
      return out=%4
    })",
              R"(
    graph main(%q: f32[2,3,4,8], %k: f32[2,3,4,8], %v: f32[2,3,4,8], %b: f32[3,4,4]) {
      %0 = attention(%q, %k, %v, %b) {scale=0.25} : f32[2,3,4,8]
      return out=%0
    })");
}

TEST(AttentionFusion, SelectMaskGpt2Style) {
  // GPT-2: where(tril, w, -1e4) over [1, 1, S, S]; either branch order.
  for (bool swapped : {false, true}) {
    SCOPED_TRACE(swapped);
    std::string cond = swapped ? "%nt" : "%t";
    std::string sel = swapped ? "select(%nt, %neg, %2)" : "select(%t, %2, %neg)";
    std::string tril = tril4(), ntril;
    for (size_t p = 0; p < tril.size();) {  // the negation, for the swapped form
      if (tril.compare(p, 4, "true") == 0) {
        ntril += "false";
        p += 4;
      } else if (tril.compare(p, 5, "false") == 0) {
        ntril += "true";
        p += 5;
      } else {
        ntril += tril[p++];
      }
    }
    expect_pass("attention_fusion",
                R"(
      graph main(%q: f32[1,2,4,8], %k: f32[1,2,4,8], %v: f32[1,2,4,8]) {
        %c = constant() {value=tensor<f32[]>[0.125]} : f32[]
        %neg = constant() {value=tensor<f32[]>[-10000.0]} : f32[]
        %t = constant() {value=tensor<bool[1,1,4,4]>[)" +
                    tril + R"(]} : bool[1,1,4,4]
        %nt = constant() {value=tensor<bool[1,1,4,4]>[)" +
                    ntril + R"(]} : bool[1,1,4,4]
        %0 = transpose(%k) {perm=[0, 1, 3, 2]} : f32[1,2,8,4]
        %1 = matmul(%q, %0) : f32[1,2,4,4]
        %2 = mul(%c, %1) : f32[1,2,4,4]
        %3 = )" + sel +
                    R"( : f32[1,2,4,4]
        %4 = softmax(%3) : f32[1,2,4,4]
        %5 = matmul(%4, %v) : f32[1,2,4,8]
        return out=%5, unused=)" +
                    (swapped ? "%t" : "%nt") + R"(
      })",
                R"(
      graph main(%q: f32[1,2,4,8], %k: f32[1,2,4,8], %v: f32[1,2,4,8]) {
        %t = constant() {value=tensor<bool[1,1,4,4]>[)" +
                    (swapped ? tril : ntril) +
                    R"(]} : bool[1,1,4,4]
        %0 = attention(%q, %k, %v) {mask="causal", scale=0.125} : f32[1,2,4,8]
        return out=%0, unused=%t
      })");
  }
}

TEST(AttentionFusion, DotGeneralUnscaledAndScaledQ) {
  // The einsum form "bqd,bkd->bqk" without a scale (1), and q * c before the product.
  expect_pass("attention_fusion", R"(
    graph main(%q: f64[2,3,5], %k: f64[2,4,5], %v: f64[2,4,2]) {
      %0 = dot_general(%q, %k) {lhs_batch=[0], lhs_contracting=[2], rhs_batch=[0], rhs_contracting=[2]} : f64[2,3,4]
      %1 = softmax(%0) : f64[2,3,4]
      %2 = matmul(%1, %v) : f64[2,3,2]
      return out=%2
    })",
              R"(
    graph main(%q: f64[2,3,5], %k: f64[2,4,5], %v: f64[2,4,2]) {
      %0 = attention(%q, %k, %v) {scale=1.0} : f64[2,3,2]
      return out=%0
    })");
  expect_pass("attention_fusion", R"(
    graph main(%q: f32[3,5], %kt: f32[5,4], %v: f32[4,2]) {
      %c = constant() {value=tensor<f32[]>[0.25]} : f32[]
      %0 = mul(%q, %c) : f32[3,5]
      %1 = matmul(%0, %kt) : f32[3,4]
      %2 = softmax(%1) : f32[3,4]
      %3 = matmul(%2, %v) : f32[3,2]
      return out=%3
    })",
              R"(
    graph main(%q: f32[3,5], %kt: f32[5,4], %v: f32[4,2]) {
      %0 = transpose(%kt) {perm=[1, 0]} : f32[4,5]
      %1 = attention(%q, %0, %v) {scale=0.25} : f32[3,2]
      return out=%1
    })");
}

TEST(AttentionFusion, MaskThatIsNotCausalBecomesTheBias) {
  // Key 1 is hidden from every query: no causal mask, so the bias input.
  std::string m =
      "0.0, -inf, 0.0, 0.0, 0.0, -inf, 0.0, 0.0, 0.0, -inf, 0.0, 0.0, 0.0, -inf, 0.0, 0.0";
  expect_pass("attention_fusion",
              R"(
    graph main(%q: f32[2,4,8], %k: f32[2,4,8], %v: f32[2,4,8]) {
      %m = constant() {value=tensor<f32[4,4]>[)" +
                  m + R"(]} : f32[4,4]
      %0 = transpose(%k) {perm=[0, 2, 1]} : f32[2,8,4]
      %1 = matmul(%q, %0) : f32[2,4,4]
      %2 = add(%1, %m) : f32[2,4,4]
      %3 = softmax(%2) : f32[2,4,4]
      %4 = matmul(%3, %v) : f32[2,4,8]
      return out=%4
    })",
              R"(
    graph main(%q: f32[2,4,8], %k: f32[2,4,8], %v: f32[2,4,8]) {
      %m = constant() {value=tensor<f32[4,4]>[)" +
                  m + R"(]} : f32[4,4]
      %0 = attention(%q, %k, %v, %m) {scale=1.0} : f32[2,4,8]
      return out=%0
    })");
}

TEST(AttentionFusion, CausalMaskAndBiasTogether) {
  // A bias and, above it, a large-negative causal mask: both taken.
  expect_pass("attention_fusion",
              R"(
    graph main(%q: f32[2,4,8], %k: f32[2,4,8], %v: f32[2,4,8], %b: f32[2,4,4]) {
      %c = constant() {value=tensor<f32[]>[0.5]} : f32[]
      %m = constant() {value=tensor<f32[1,4,4]>[)" +
                  causal4("-1e+09") + R"(]} : f32[1,4,4]
      %0 = fused_matmul(%q, %k) {transpose_b=true} : f32[2,4,4]
      %1 = mul(%0, %c) : f32[2,4,4]
      %2 = add(%1, %b) : f32[2,4,4]
      %3 = add(%m, %2) : f32[2,4,4]
      %4 = softmax(%3) : f32[2,4,4]
      %5 = matmul(%4, %v) : f32[2,4,8]
      return out=%5
    })",
              R"(
    graph main(%q: f32[2,4,8], %k: f32[2,4,8], %v: f32[2,4,8], %b: f32[2,4,4]) {
      %0 = attention(%q, %k, %v, %b) {mask="causal", scale=0.5} : f32[2,4,8]
      return out=%0
    })");
}

TEST(AttentionFusion, NegativeCases) {
  // Softmax over another axis; probabilities read elsewhere (training); a scale below a
  // bias add; a negative scale; integer-free but the causal mask of Sq > Sk.
  expect_pass("attention_fusion", R"(
    graph main(%q: f32[4,8], %k: f32[4,8], %v: f32[4,8], %b: f32[4,4], %q6: f32[6,8]) {
      %c = constant() {value=tensor<f32[]>[0.5]} : f32[]
      %n = constant() {value=tensor<f32[]>[-0.5]} : f32[]
      %0 = transpose(%k) {perm=[1, 0]} : f32[8,4]
      %1 = matmul(%q, %0) : f32[4,4]
      %2 = softmax(%1) {axis=0} : f32[4,4]
      %3 = matmul(%2, %v) : f32[4,8]
      %4 = matmul(%q, %0) : f32[4,4]
      %5 = softmax(%4) : f32[4,4]
      %6 = matmul(%5, %v) : f32[4,8]
      %7 = matmul(%q, %0) : f32[4,4]
      %8 = add(%7, %b) : f32[4,4]
      %9 = mul(%8, %c) : f32[4,4]
      %10 = softmax(%9) : f32[4,4]
      %11 = matmul(%10, %v) : f32[4,8]
      %12 = matmul(%q, %0) : f32[4,4]
      %13 = mul(%12, %n) : f32[4,4]
      %14 = softmax(%13) : f32[4,4]
      %15 = matmul(%14, %v) : f32[4,8]
      return o3=%3, o6=%6, p=%5, o11=%11, o15=%15
    })",
              "");
  // Six queries against four keys with a "causal" upper-triangle mask: the first rows
  // would see no key.
  std::string m;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j)
      m += std::string(m.empty() ? "" : ", ") + (j <= i - 2 ? "0.0" : "-inf");
  expect_pass("attention_fusion",
              R"(
    graph main(%q: f32[6,8], %k: f32[4,8], %v: f32[4,8]) {
      %m = constant() {value=tensor<f32[6,4]>[)" +
                  m + R"(]} : f32[6,4]
      %0 = fused_matmul(%q, %k) {transpose_b=true} : f32[6,4]
      %1 = add(%0, %m) : f32[6,4]
      %2 = softmax(%1) : f32[6,4]
      %3 = matmul(%2, %v) : f32[6,8]
      return out=%3
    })",
              "", {.compare_outputs = false});
}

TEST(AttentionFusion, SymbolicShapes) {
  expect_pass("attention_fusion", R"(
    graph main(%q: f32[b,h,s,64], %k: f32[b,h,s,64], %v: f32[b,h,s,64]) {
      %c = constant() {value=tensor<f32[]>[0.125]} : f32[]
      %0 = fused_matmul(%q, %k) {transpose_b=true} : f32[b,h,s,s]
      %1 = mul(%0, %c) : f32[b,h,s,s]
      %2 = softmax(%1) : f32[b,h,s,s]
      %3 = matmul(%2, %v) : f32[b,h,s,64]
      return out=%3
    })",
              R"(
    graph main(%q: f32[b,h,s,64], %k: f32[b,h,s,64], %v: f32[b,h,s,64]) {
      %0 = attention(%q, %k, %v) {scale=0.125} : f32[b,h,s,64]
      return out=%0
    })",
              {.compare_outputs = false});
}

TEST(AttentionFusion, PipelineOnMultiHeadAttention) {
  // Heads split by reshape / transpose, k transposed, scaled, causal: the default
  // pipeline turns it into one attention node and computes the same.
  auto g = parse_graph(R"(
    graph main(%x: f32[2,4,16], param %wq: f32[16,16], param %wk: f32[16,16],
               param %wv: f32[16,16]) {
      %c = constant() {value=tensor<f32[]>[0.5]} : f32[]
      %m = constant() {value=tensor<f32[4,4]>[)" +
                       causal4("-inf") + R"(]} : f32[4,4]
      %q0 = matmul(%x, %wq) : f32[2,4,16]
      %k0 = matmul(%x, %wk) : f32[2,4,16]
      %v0 = matmul(%x, %wv) : f32[2,4,16]
      %q1 = reshape(%q0) {shape=[2, 4, 4, 4]} : f32[2,4,4,4]
      %k1 = reshape(%k0) {shape=[2, 4, 4, 4]} : f32[2,4,4,4]
      %v1 = reshape(%v0) {shape=[2, 4, 4, 4]} : f32[2,4,4,4]
      %q = transpose(%q1) {perm=[0, 2, 1, 3]} : f32[2,4,4,4]
      %k = transpose(%k1) {perm=[0, 2, 3, 1]} : f32[2,4,4,4]
      %v = transpose(%v1) {perm=[0, 2, 1, 3]} : f32[2,4,4,4]
      %s = matmul(%q, %k) : f32[2,4,4,4]
      %s1 = mul(%s, %c) : f32[2,4,4,4]
      %s2 = add(%s1, %m) : f32[2,4,4,4]
      %p = softmax(%s2) : f32[2,4,4,4]
      %o = matmul(%p, %v) : f32[2,4,4,4]
      return out=%o
    })");
  CompileOptions o;
  test::expect_same_outputs(*g, o, 7, 1e-5, 1e-6);
  CompiledGraph cg = Session().compile(*g, o);
  int attention = 0, softmax = 0;
  for (const Node& n : cg.lowered().nodes()) {
    attention += n.op_name() == "attention";
    softmax += n.op_name() == "softmax";
  }
  EXPECT_EQ(attention, 1) << print_graph(cg.lowered());
  EXPECT_EQ(softmax, 0) << print_graph(cg.lowered());
}

}  // namespace
}  // namespace rlx
